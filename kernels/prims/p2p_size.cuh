// The size check of point-to-point transfers: a receive whose sender sent
// another number of bytes is an error naming both sizes, never a silently
// wrong buffer (the ring counters of the pair would otherwise drift apart,
// and a later receive would take the rest of this send as its data).
//
// Sizes travel beside the data (FifoGeom::size_off, ll_size_off): the
// sender of a slice whose first slot has sequence number q writes its whole
// message's bytes into line q % slots of the size lines beside that ring,
// flagged q + 1; the receiver of the slice reads that line before it takes
// the slice and compares it with its own message's bytes. The size lines
// are reused at the pace of the ring's slots, so the ring's flow control
// covers them: the sender reaches line q % slots again only for a slice
// starting at q + slots or later, which needs slot q handed back, which the
// receiver does after it read the line.
//
// A receiver that finds a mismatch records it (kDevRecvSizeMismatch) and
// poisons the credit it returns to the sender (the top bit set, its own
// bytes below), so a sender waiting for room, now or at its next transfer
// on that ring, stops with kDevSendSizeMismatch instead of waiting for
// MYCOLL_TIMEOUT. A size that crosses the ll limit on one side only (the
// two sides use different rings) is not seen here: the receive waits on its
// ring and times out naming the peer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_plan.h"
#include "kernels/prims/ll.cuh"

namespace mycoll {
namespace dev {

constexpr uint64_t kCreditPoison = uint64_t(1) << 63;

// The size line of the slice starting at slot sequence q of a ring of
// `slots` slots; `lines` = the size lines beside that ring.
__device__ __forceinline__ void post_size(char* lines, uint64_t slots, uint64_t q, uint64_t bytes) {
  ll::store_line(lines + (q % slots) * 16, bytes, uint32_t(q + 1));
}
__device__ __forceinline__ bool peek_size(const char* lines, uint64_t slots, uint64_t q,
                                          uint64_t* bytes) {
  return ll::load_line(lines + (q % slots) * 16, uint32_t(q + 1), bytes);
}

// A credit (tail) value the receiver poisoned: it found a size mismatch.
__device__ __forceinline__ bool poisoned(uint64_t credit) { return (credit & kCreditPoison) != 0; }
// By the receiver that found the mismatch: its bytes, for the sender's
// message.
__device__ __forceinline__ void poison(char* credit, uint64_t mine) {
  ll::st_vol(credit, kCreditPoison | (mine & ~kCreditPoison));
}

}  // namespace dev
}  // namespace mycoll
