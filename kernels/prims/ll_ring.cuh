// The LL ring: the ring-with-credits addressing of LL lines (kernels/prims/ll.cuh), one ring
// per (sender, receiver, channel) in the receiver's inbox (FifoGeom::ll_off), where the plan
// kernel's ll pass (kernels/colls/plan.cu) and the LL point-to-point kernel
// (kernels/colls/p2p.cu) both move a pair's small messages. What an edit must keep: the layout,
// flags and counters (state [2] slots sent, [3] received, the receiver's [3] also the sender's
// credit at ll_tail_off) stay the same for both kernels; a sender starts a message only once
// all of it fits (admit_send; the host caps ll messages at slots * lsb / 2); a receiver hands
// slots back only once every load of them returned (release). docs/algorithms.md, "GPU LL
// point-to-point kernel".
#pragma once

#include <cstdint>

#include "kernels/prims/ll.cuh"
#include "kernels/prims/p2p_size.cuh"
#include "kernels/prims/wait.cuh"

namespace mycoll {
namespace ll {

// One ring's shape, and where a message's lines lie in it.
struct Ring {
  uint32_t slots;  // slots in the ring
  uint32_t lsb;    // bytes of a slot
  uint32_t lps;    // LL lines in a slot

  __device__ Ring(uint32_t nslots, uint32_t slot_bytes)
      : slots(nslots), lsb(slot_bytes), lps(slot_bytes / 16) {}

  // Slots a message of `bytes` takes (bytes within the ll limit).
  __device__ uint32_t need(uint32_t bytes) const { return (bytes + lps * 8 - 1) / (lps * 8); }
  // Where a message starting at slot sequence `base` begins (0 .. slots-1).
  __device__ uint32_t start(uint64_t base) const { return uint32_t(base % slots); }

  // Line l of a message starting at slot sequence `base`, bmod =
  // start(base): its offset in the ring and its flag.
  struct Line {
    uint64_t off;
    uint32_t flag;
  };
  __device__ Line line(uint64_t base, uint32_t bmod, uint32_t l) const {
    const uint32_t s = l / lps;  // < need <= slots, so bmod + s < 2 * slots
    uint32_t idx = bmod + s;
    if (idx >= slots) idx -= slots;
    return Line{uint64_t(idx) * lsb + uint64_t(l - s * lps) * 16, uint32_t(base) + s + 1};
  }
};

// The sender's look at its credit before a message of `need` slots at
// `base`: kGo when the whole message fits (and then, for a point-to-point
// message, its size line `msg` is posted in `sizes`); kWait when not yet;
// kRefused when the receiver poisoned the credit (it found a size
// mismatch: recorded against `peer` with this rank's bytes `msg`, 0 outside
// point-to-point). The credit is read every time, so a refusal is seen at
// the next message, not only when the ring is full.
__device__ __forceinline__ dev::Gate admit_send(const Ring& r, const dev::GiveUp& g,
                                                const char* credit, char* sizes, uint64_t base,
                                                uint32_t need, int peer, uint64_t msg) {
  const uint64_t tail = ld_vol(credit);
  if (dev::send_refused(g, tail, peer, msg)) return dev::kRefused;
  if (base + need - tail > r.slots) return dev::kWait;
  if (sizes) dev::post_size(sizes, r.slots, base, msg);
  return dev::kGo;
}

// The receiver's hand-back once every load of a message has returned (its
// data is stored): its count and the sender's credit, both `upto`. No data
// of ours travels with this store.
__device__ __forceinline__ void release(uint64_t* count, char* credit, uint64_t upto) {
  *count = upto;
  st_vol(credit, upto);
}

}  // namespace ll
}  // namespace mycoll
