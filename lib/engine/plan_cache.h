// Plans of recent host collectives, so a call repeated with the same
// arguments (the common case: a training loop, a benchmark) builds and
// chooses nothing. The algorithm, the chunk and the plan depend only on the
// key (the communicator's rank, size, host layout, MYCOLL_ALGO and chunk
// setting are fixed for its life), so a hit is exactly what a fresh build
// would give. Plans are shared (a group may hold one while a later call
// evicts it). Not thread-safe: one per communicator, used by the calling
// thread under the communicator's exclusive pin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "algorithms/plan.h"
#include "mycoll.h"

namespace mycoll {

struct FastPlan;  // host_fast.h

// A collective call's arguments that its plan depends on.
struct PlanKey {
  Coll coll = Coll::AllReduce;
  mycollDataType_t dtype = mycollFloat32;
  bool in_place = false;
  int root = 0;
  size_t count = 0;

  bool operator==(const PlanKey& o) const {
    return coll == o.coll && dtype == o.dtype && in_place == o.in_place && root == o.root &&
           count == o.count;
  }
};

struct CachedPlan {
  Algo algo = Algo::Ring;
  size_t chunk = 0;  // elements
  std::shared_ptr<const Plan> plan;
  // The plan compiled for the small-message path (host_fast.h), made at
  // the first call that may use it; null when the plan does not qualify.
  std::shared_ptr<const FastPlan> fast;
  bool fast_tried = false;
};

// The last call on the communicator that ran a cached plan's small-message
// path, with every argument its checks saw: the same call again (a training
// loop's or a benchmark's next iteration) runs that plan without checking
// its arguments or looking the plan up again (lib/comm/enqueue.cc,
// submit_repeat). entry is null when there is none; PlanCache clears it
// whenever it builds an entry, since a build may replace entry's plan.
struct RepeatCall {
  CachedPlan* entry = nullptr;
  PlanKey key;  // its in-place flag follows from the buffers below
  const void* send = nullptr;
  const void* recv = nullptr;
  const void* stream = nullptr;
  mycollRedOp_t op = mycollSum;
};

class PlanCache {
 public:
  RepeatCall repeat;

  // The cached entry for key, or the one `build()` returns (then cached,
  // replacing the least recently used entry). The reference stays valid
  // until the next get().
  template <typename Build>
  CachedPlan& get(const PlanKey& key, Build&& build) {
    if (entries_[last_].used && entries_[last_].key == key) {
      entries_[last_].used = ++tick_;
      return entries_[last_].value;
    }
    unsigned victim = 0;
    for (unsigned i = 0; i < kEntries; ++i) {
      Entry& e = entries_[i];
      if (e.used && e.key == key) {
        e.used = ++tick_;
        last_ = i;
        return e.value;
      }
      if (e.used < entries_[victim].used) victim = i;
    }
    Entry& e = entries_[victim];
    repeat.entry = nullptr;  // it may be this one
    e.used = 0;              // empty while building (build may throw)
    e.value = build();
    e.key = key;
    e.used = ++tick_;
    last_ = victim;
    return e.value;
  }

 private:
  static constexpr unsigned kEntries = 16;
  struct Entry {
    PlanKey key;
    CachedPlan value;
    uint64_t used = 0;  // tick of the last hit (0: empty)
  };
  Entry entries_[kEntries];
  unsigned last_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace mycoll
