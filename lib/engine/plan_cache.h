// Plans of recent host collectives, so a call repeated with the same
// arguments (the common case: a training loop, a benchmark) builds nothing.
// A plan depends only on its key (the communicator's rank, size and host
// layout are fixed for its life), so a hit is exactly the plan a fresh build
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

struct PlanKey {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  bool in_place = false;
  int root = 0;
  size_t count = 0;
  size_t chunk = 0;  // elements (depends on the element size)

  bool operator==(const PlanKey& o) const {
    return coll == o.coll && algo == o.algo && in_place == o.in_place && root == o.root &&
           count == o.count && chunk == o.chunk;
  }
};

class PlanCache {
 public:
  // The cached plan for key, or the one `build()` returns (then cached,
  // replacing the least recently used entry).
  template <typename Build>
  std::shared_ptr<const Plan> get(const PlanKey& key, Build&& build) {
    if (entries_[last_].plan && entries_[last_].key == key) {
      entries_[last_].used = ++tick_;
      return entries_[last_].plan;
    }
    unsigned victim = 0;
    for (unsigned i = 0; i < kEntries; ++i) {
      Entry& e = entries_[i];
      if (e.plan && e.key == key) {
        e.used = ++tick_;
        last_ = i;
        return e.plan;
      }
      if (e.used < entries_[victim].used) victim = i;
    }
    Entry& e = entries_[victim];
    e.plan = std::make_shared<const Plan>(build());
    e.key = key;
    e.used = ++tick_;
    last_ = victim;
    return e.plan;
  }

 private:
  static constexpr unsigned kEntries = 16;
  struct Entry {
    PlanKey key;
    std::shared_ptr<const Plan> plan;
    uint64_t used = 0;  // tick of the last hit (0: empty)
  };
  Entry entries_[kEntries];
  unsigned last_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace mycoll
