// The size check of point-to-point transfers: a receive whose sender sent another number of
// bytes is an error naming both sizes, never a silently wrong buffer. The sender of a slice
// whose first slot has sequence number q posts its message's bytes in size line q % slots
// beside that ring (FifoGeom::size_off, ll_size_off), flagged q + 1; the receiver compares
// before it takes the slice and, on a difference, poisons the credit it returns
// (kCreditPoison). What an edit must keep: a receiver reads the line before it hands slot q
// back (the ring's flow control guards the lines only then); a receive with no size line on
// its own ring also looks at the pair's other ring. docs/reliability.md, "Mismatches are
// errors, never wrong data".
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

// How long a size line must stand on the other ring, with none on this
// one, before it counts as the sender's message. The sender stores the
// lines of its consecutive messages from different threads with no fence
// between them, so the next message's line (on the other ring) may become
// visible here a moment before this message's: a late line is not a
// mismatch. A real one is reported this much later, not at MYCOLL_TIMEOUT.
constexpr uint64_t kOtherRingGraceNs = 1000000;

// The pair's other ring as a receive sees it: its size lines and slots,
// this rank's receive count on it, and the credit this rank returns on it.
struct OtherRing {
  const char* sizes;
  uint64_t slots;
  uint64_t pos;
  char* credit;
};

// A point-to-point receive's look at the other ring is one poll in
// kOtherRingEvery of its own ring: a message on the wrong ring is a rare
// error that waits out kOtherRingGraceNs anyway, while every poll of the
// common wait costs its loads (the other ring's count, then its line).
constexpr uint32_t kOtherRingEvery = 256;
static_assert((kOtherRingEvery & (kOtherRingEvery - 1)) == 0, "a power of two");

// sent_on_other_ring's per-receive state, zeroed before the receive's
// first poll.
struct OtherRingWatch {
  uint64_t since;  // when the other ring's line was first seen standing; 0: not seen
  uint32_t polls;
};

// For a point-to-point receive whose own ring has no size line yet: true
// when the sender put its message on the other ring, recorded as
// kDevRecvSizeMismatch with the sender's bytes, and refused there (the
// other ring's credit poisoned, so a sender waiting for room on it stops).
// other() builds the OtherRing; it is called only on the polls that look.
template <typename Other>
__device__ __forceinline__ bool sent_on_other_ring(const GiveUp& g, int peer, uint64_t mine,
                                                   OtherRingWatch* w, Other other) {
  if ((++w->polls & (kOtherRingEvery - 1)) != 0) return false;
  const OtherRing o = other();
  uint64_t theirs;
  if (!peek_size(o.sizes, o.slots, o.pos, &theirs)) {
    w->since = 0;
    return false;
  }
  const uint64_t now = globaltimer();
  if (w->since == 0) w->since = now;
  if (now - w->since < kOtherRingGraceNs) return false;
  g.record(mycollInvalidUsage, peer, kDevRecvSizeMismatch, mine, theirs);
  poison(o.credit, mine);
  return true;
}

// The receiver's size check of a point-to-point slice whose first slot has
// sequence number q on its ring (size lines `sizes`, `slots` of them):
// kGo once the sender's size line is there and equals `mine`; kRefused
// when it differs (recorded against `peer`, the credit this rank returns
// poisoned) or when elsewhere() finds the message on the pair's other ring
// (sent_on_other_ring, called only while this ring has no line); else
// kWait.
template <typename Elsewhere>
__device__ __forceinline__ Gate check_size(const GiveUp& g, int peer, uint64_t mine,
                                           const char* sizes, uint64_t slots, uint64_t q,
                                           char* credit, Elsewhere elsewhere) {
  uint64_t theirs;
  if (!peek_size(sizes, slots, q, &theirs)) return elsewhere() ? kRefused : kWait;
  return size_differs(g, peer, mine, theirs, credit) ? kRefused : kGo;
}

}  // namespace dev
}  // namespace mycoll
