// mycoll's own nccl.h (used where no toolkit nccl.h exists) agrees with the
// same assumptions, hence with the toolkit's (checked by check_layout.cc).
#include "include/nccl.h"

#include "nccl/layout_checks.h"
