// What the NCCL shim uses of the C API beyond mycoll.h.
#pragma once

#include "bootstrap/bootstrap.h"
#include "comm/comm.h"
#include "mycoll.h"

namespace mycoll {

// mycollCommInitRank that another thread can cancel (ncclCommAbort of a
// non-blocking init sets `cancel`): the same checks, device choice and
// errors; cancelled, it returns an error within about 0.1 s of the flag.
// opts: what ncclConfig_t asks beyond the environment.
mycollResult_t comm_init_rank_cancellable(mycollComm_t* comm, int nranks, mycollUniqueId id,
                                          int rank, CancelFlag cancel,
                                          const CommOptions& opts = {});

// mycollCommSplit whose child gets opts (null: the parent's).
mycollResult_t comm_split(mycollComm_t comm, int color, int key, mycollComm_t* newcomm,
                          const CommOptions* opts);

// mycollCommInitAll whose communicators get opts.
mycollResult_t comm_init_all(mycollComm_t* comms, int ndev, const int* devlist,
                             const CommOptions& opts);

}  // namespace mycoll
