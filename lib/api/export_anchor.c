/* The shared library's code comes whole from mycoll_internal; this file only
 * gives the target a source. The version script keeps mycoll* public. */
#include "mycoll.h"
