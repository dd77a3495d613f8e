// The nccl.h this library is built against (the CUDA toolkit's when CMake
// found it, else lib/nccl/include/nccl.h) agrees with what lib/nccl assumes.
#include <nccl.h>

#include "nccl/layout_checks.h"
