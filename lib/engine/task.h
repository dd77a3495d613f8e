// A Task: one collective (or one group's point-to-point batch) of one
// communicator, ready for an engine: the plan plus where its buffers are.
#pragma once

#include <memory>
#include <string>

#include "algorithms/plan.h"
#include "mycoll.h"

namespace mycoll {

struct Task {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  mycollDataType_t dtype = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  const void* input = nullptr;
  void* output = nullptr;
  size_t count = 0;  // as in CollArgs::count (for logs)
  int root = 0;
  bool in_place = false;
  size_t chunk = 0;  // pipelining chunk in elements (tree/chain)
  uint64_t seq = 0;       // the communicator's operation number (logs, flight recorder)
  uint64_t coll_seq = 0;  // collectives only: the call number in host message headers (every
                          // rank makes the same collectives; p2p batches may group differently)
  // Built for host execution; GPU communicators build per-channel plans
  // from the fields above instead. Host collectives share a cached plan
  // (cached_plan, lib/engine/plan_cache.h) and leave `plan` empty.
  Plan plan;
  std::shared_ptr<const Plan> cached_plan;
  const Plan& host_plan() const { return cached_plan ? *cached_plan : plan; }

  // The plan arguments of this task on rank `rank` of `nranks`.
  CollArgs args(int nranks, int rank) const {
    CollArgs a;
    a.coll = coll;
    a.nranks = nranks;
    a.rank = rank;
    a.root = root;
    a.count = count;
    a.chunk = chunk;
    a.in_place = in_place;
    return a;
  }
};

}  // namespace mycoll
