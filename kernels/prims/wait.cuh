// The one way a GPU wait ends (every kernel's polls go through here): the
// awaited value arrives; the host raised the abort flag; another block or
// kernel of this rank already gave up (DevError set); or MYCOLL_TIMEOUT
// passed without progress. The first reason to stop is recorded in DevError
// with the rank, the peer waited on and the DevOpKind of the wait, which the
// host turns into an error message naming them (a peer that made another
// call is recorded the same way: kernels/prims/call_check.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_plan.h"
#include "mycoll.h"

namespace mycoll {
namespace dev {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// What a wait needs to decide to give up; built from a DevComm or from the
// point-to-point kernel's parameters.
struct GiveUp {
  volatile int32_t* abort;  // host-mapped: nonzero -> give up
  DevError* error;          // host-mapped: the first failure of this rank
  uint64_t timeout_ns;
  int32_t rank;

  __device__ static GiveUp of(const DevComm& cm) {
    return GiveUp{cm.abort, cm.error, cm.timeout_ns, cm.rank};
  }
  __device__ static GiveUp of(const P2pLlCommon& c) {
    return GiveUp{c.abort, c.error, c.timeout_ns, c.rank};
  }

  // Records why this rank's kernel gave up (the first reason wins).
  __device__ void record(int code, int peer, int kind, uint64_t mine = 0,
                         uint64_t theirs = 0) const {
    if (atomicCAS(&error->code, 0, code) == 0) {
      error->peer = peer;
      error->rank = rank;
      error->kind = kind;
      error->mine = mine;
      error->theirs = theirs;
      __threadfence_system();
      *reinterpret_cast<volatile int32_t*>(&error->ready) = 1;
      __threadfence_system();
    }
  }
  // The verdict on a wait that has seen no progress since `since`: 0 keep
  // waiting; mycollRemoteError (abort flag) or mycollTimeout, to record;
  // -1 when another block or kernel of this rank failed first, or a peer
  // made another call (recorded already). The flags live in host memory (a
  // PCIe read): only when check_host. No function calls here: the ABI's
  // saved registers spill the LL kernels' wait loops.
  __device__ int verdict(uint64_t since, bool check_host) const {
    if (check_host) {
      if (*abort) return mycollRemoteError;
      if (*reinterpret_cast<volatile int32_t*>(&error->code)) return -1;
    }
    return globaltimer() - since > timeout_ns ? mycollTimeout : 0;
  }
};

// One thread's wait: call tick() each time the polled value is not there
// yet. Every 256th poll reads the clock, every 16384th the host flags.
// Started at 0, the timeout counts from the first clock read (a wait that
// is usually satisfied at once never reads the clock).
// Returns 0 to keep polling, else the reason to stop (see GiveUp::verdict;
// a positive code is not recorded yet: the caller knows whom it waited on).
struct Waiter {
  uint64_t since;
  uint32_t spins = 0;

  __device__ explicit Waiter(uint64_t start) : since(start) {}
  __device__ int tick(const GiveUp& g) { return due() ? check(g) : 0; }
  // tick() in two halves, for callers that build the GiveUp only when due.
  __device__ bool due() { return (++spins & 255) == 0; }
  __device__ int check(const GiveUp& g) {
    if (since == 0) since = globaltimer();
    return g.verdict(since, (spins & 0x3fff) == 0);
  }
};

// A block's shared stop flag: one thread raises it, the others poll it
// between their own barriers (the plan kernel's two warp groups share one
// and never meet at a barrier while they move data). Every access after the
// flag's zeroing (a plain store, then a block barrier) is atomic, so a poll
// never races a raise (compute-sanitizer racecheck sees no hazard).
__device__ __forceinline__ void raise_stop(int* stop) { atomicExch(stop, 1); }
__device__ __forceinline__ bool stop_raised(int* stop) { return atomicOr(stop, 0) != 0; }

// tick() for waits of one thread among others of its block: a positive
// verdict is recorded against (peer, kind), and any verdict raises the
// block's shared `stop` flag; another thread's raised flag ends this wait
// too. True when the wait must end.
__device__ __forceinline__ bool tick_or_stop(Waiter& w, const GiveUp& g, int* stop, int peer,
                                             int kind) {
  const int code = w.tick(g);
  if (code > 0) g.record(code, peer, kind);
  if (code != 0 || ((w.spins & 255) == 0 && stop_raised(stop))) {
    raise_stop(stop);
    return true;
  }
  return false;
}

// What a sender's or receiver's look at a ring before a message says.
enum Gate { kWait = 0, kGo = 1, kRefused = 2 };

// One thread polls look() (returning a Gate) until it says kGo: true. False
// when it refuses or the wait gives up (a positive verdict recorded against
// (peer, kind)); the block's `stop` is raised then.
template <typename Look>
__device__ __forceinline__ bool wait_gate(const GiveUp& g, int* stop, int peer, int kind,
                                          Look look) {
  Waiter w(0);
  for (;;) {
    const Gate a = look();
    if (a == kGo) return true;
    if (a == kRefused || tick_or_stop(w, g, stop, peer, kind)) {
      raise_stop(stop);
      return false;
    }
  }
}

}  // namespace dev
}  // namespace mycoll
