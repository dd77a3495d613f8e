// What the NCCL shim uses of the C API beyond mycoll.h.
#pragma once

#include "bootstrap/bootstrap.h"
#include "mycoll.h"

namespace mycoll {

// mycollCommInitRank that another thread can cancel (ncclCommAbort of a
// non-blocking init sets `cancel`): the same checks, device choice and
// errors; cancelled, it returns an error within about 0.1 s of the flag.
mycollResult_t comm_init_rank_cancellable(mycollComm_t* comm, int nranks, mycollUniqueId id,
                                          int rank, CancelFlag cancel);

}  // namespace mycoll
