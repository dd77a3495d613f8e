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
#include "kernels/prims/wait.cuh"

namespace mycoll {
namespace dev {

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

// The sender's look at the credit it waits on: true when the receiver
// `peer` poisoned it, recorded as kDevSendSizeMismatch with this rank's
// message bytes `mine` (0 where the sender is not point-to-point: a ring
// the receiver shares with its sends) and the receiver's.
__device__ __forceinline__ bool send_refused(const GiveUp& g, uint64_t credit, int peer,
                                             uint64_t mine) {
  if (!poisoned(credit)) return false;
  g.record(mycollInvalidUsage, peer, kDevSendSizeMismatch, mine, credit & ~kCreditPoison);
  return true;
}

// The receiver's comparison of the sender's size line with its own
// message's bytes: on a difference, records kDevRecvSizeMismatch naming
// the sender `peer` and poisons the credit this rank returns to it; true
// then (the receive must not take a byte).
__device__ __forceinline__ bool size_differs(const GiveUp& g, int peer, uint64_t mine,
                                             uint64_t theirs, char* credit) {
  if (theirs == mine) return false;
  g.record(mycollInvalidUsage, peer, kDevRecvSizeMismatch, mine, theirs);
  poison(credit, mine);
  return true;
}

}  // namespace dev
}  // namespace mycoll
