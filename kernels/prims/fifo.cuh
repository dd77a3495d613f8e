// The bandwidth FIFO protocol, as the fused kernels use it: for every
// (sender, receiver, channel) a ring of slots in the receiver's inbox and two
// counters, `head` (slots published, written by the sender after a
// system-scope fence) and `tail` (slots consumed, written by the receiver).
// The running counts live in each rank's state lines (kernels/device_plan.h)
// so the plan kernel and the fused kernels interleave on one communicator.
// A block moves slots in batches of up to a quarter FIFO: thread 0 waits for
// data and room, the block moves the batch, thread 0 fences and publishes.
// The look at room and data (fifo_room, fifo_ready), the batch cap and the
// publication (fifo_publish) are shared with the plan kernel, whose two
// warp groups poll several ops' FIFOs without waiting on any one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_plan.h"
#include "kernels/prims/ll.cuh"
#include "kernels/prims/p2p_size.cuh"
#include "kernels/prims/wait.cuh"

namespace mycoll {
namespace dev {

// A counter read that orders this thread's later loads after it; the block
// barrier that follows extends that to every thread (cumulativity).
__device__ __forceinline__ uint64_t ld_acquire(const char* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
// Orders every store the block made before the barrier preceding it (by
// cumulativity) before the counter store that follows.
__device__ __forceinline__ void fence_release() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

// One block's shared state on its channel.
struct FifoShared {
  uint64_t sent;   // slots sent to `next` on this channel (every kernel, ever)
  uint64_t recvd;  // slots received from `prev`
  uint64_t ns;     // the current batch: slots to send
  uint64_t nr;     // slots to receive
  int stop;
};

// One channel's view of its two FIFOs: sending to `next`, receiving from
// `prev` (either may be -1: unused).
struct Chan {
  const DevComm* cm;  // the give-up context, read only when a wait checks (few registers)
  char* send_data;
  char* send_head;
  const char* send_tail;
  const char* recv_data;
  const char* recv_head;
  char* recv_tail;
  uint64_t sb;  // slot bytes
  uint64_t ns;  // slots per FIFO
  int next, prev;

  uint32_t* send_len;  // host-transport peers: bytes of each slot sent (the proxy reads them)

  // The slot of running sequence number q.
  __device__ char* send_slot(uint64_t q) const { return send_data + (q % ns) * sb; }
  __device__ const char* recv_slot(uint64_t q) const { return recv_data + (q % ns) * sb; }
  __device__ const char* in_slot(const FifoShared& sh, uint64_t j) const {
    return recv_slot(sh.recvd + j);
  }
  __device__ char* out_slot(const FifoShared& sh, uint64_t j) const {
    return send_slot(sh.sent + j);
  }
  // Of `left` slots from sequence number q, how many lie back to back
  // before the FIFO wraps.
  __device__ uint64_t span(uint64_t q, uint64_t left) const {
    return ns - q % ns < left ? ns - q % ns : left;
  }
  // Of a batch's slots j..n-1, how many from j lie back to back in the
  // FIFOs a primitive reads (recv) and writes (send): all of them unless a
  // FIFO wraps first. Consecutive slots carry consecutive bytes of the
  // message, so those slots move as one span (long loops, one call).
  __device__ uint64_t back_to_back(const FifoShared& sh, uint64_t j, uint64_t n, bool recv,
                                   bool send) const {
    uint64_t run = n - j;
    if (recv) run = span(sh.recvd + j, run);
    if (send) run = span(sh.sent + j, run);
    return run;
  }
  // Most slots one batch hands over: a quarter FIFO, so sender and receiver
  // overlap instead of taking turns on a full FIFO.
  __device__ uint64_t batch_cap() const { return ns >= 8 ? ns / 4 : 1; }
};

__device__ __forceinline__ Chan make_chan(const DevComm& cm, int to, int from, int ch) {
  Chan c{};
  c.cm = &cm;
  c.next = to;
  c.prev = from;
  const DevPeer& pr = cm.peers[to >= 0 ? to : from];
  c.sb = pr.slot_bytes;
  c.ns = uint64_t(pr.nslots);
  if (to >= 0) {
    const DevPeer& p = cm.peers[to];
    c.send_data = p.send_data + uint64_t(ch) * c.ns * c.sb;
    c.send_head = p.send_head + uint64_t(ch) * 384;
    c.send_tail = p.send_tail + uint64_t(ch) * 384;
    if (p.send_len) c.send_len = p.send_len + uint64_t(ch) * c.ns;
  }
  if (from >= 0) {
    const DevPeer& p = cm.peers[from];
    c.recv_data = p.recv_data + uint64_t(ch) * c.ns * c.sb;
    c.recv_head = p.recv_head + uint64_t(ch) * 384;
    c.recv_tail = p.recv_tail + uint64_t(ch) * 384;
  }
  return c;
}

// One thread: the slots free at `next` for this channel's sends, `sent`
// slots sent so far; 0 and *refused when the receiver poisoned the credit
// (a point-to-point size mismatch: recorded with this rank's message bytes
// `p2p_bytes`, 0 outside point-to-point). The acquire orders the batch's
// slot stores after the receiver's loads of the slots it handed back.
__device__ __forceinline__ uint64_t fifo_room(const Chan& c, uint64_t sent, uint64_t p2p_bytes,
                                              bool* refused) {
  const uint64_t tail = ld_acquire(c.send_tail);
  *refused = send_refused(GiveUp::of(*c.cm), tail, c.next, p2p_bytes);
  return *refused ? 0 : c.ns - (sent - tail);
}
// One thread: the slots `prev` published past `recvd` on this channel; the
// acquire orders the batch's slot loads after them.
__device__ __forceinline__ uint64_t fifo_ready(const Chan& c, uint64_t recvd) {
  return ld_acquire(c.recv_head) - recvd;
}
// One thread, after the barrier that follows the batch's data moves: the
// fence orders the block's slot stores before the new head. send / recv:
// which to publish. A receive alone needs no fence: every value loaded from
// the slots it hands back fed a store before the barrier
// (docs/architecture.md; docs/performance.md, "Session 41").
__device__ __forceinline__ void fifo_publish(const Chan& c, bool send, uint64_t sent, bool recv,
                                             uint64_t recvd) {
  if (send) {
    fence_release();
    ll::st_vol(c.send_head, sent);
  }
  if (recv) ll::st_vol(c.recv_tail, recvd);
}

// Every thread of the block: the next batch, at most want_s slots to send
// (room at next) and want_r to receive (published by prev), each at most a
// quarter FIFO. lockstep: the same slots go on (a received slot is
// forwarded), so both counts are equal and nonzero together; else either
// may be 0 but not both. Thread 0 waits; the result is in sh.ns / sh.nr
// after the barrier. False when the block gave up: the reason is recorded
// against the peer it waited on (the receive when one was pending with
// nothing new published, else the send).
__device__ __forceinline__ bool batch_begin(const Chan& c, FifoShared& sh, uint64_t want_s,
                                            uint64_t want_r, bool lockstep) {
  if (threadIdx.x == 0) {
    const uint64_t cap = c.batch_cap();
    Waiter w(globaltimer());
    uint64_t ns = 0, nr = 0;
    for (;;) {
      ns = want_s < cap ? want_s : cap;
      nr = want_r < cap ? want_r : cap;
      if (ns > 0) {
        bool refused;  // a p2p size mismatch at next
        const uint64_t room = fifo_room(c, sh.sent, 0, &refused);
        if (refused) {
          sh.stop = 1;
          ns = nr = 0;
          break;
        }
        if (room < ns) ns = room;
      }
      if (nr > 0) {
        const uint64_t ready = fifo_ready(c, sh.recvd);
        if (ready < nr) nr = ready;
      }
      if (lockstep) {
        const uint64_t m = want_s == 0 ? nr : want_r == 0 ? ns : (ns < nr ? ns : nr);
        if (want_s) ns = m;
        if (want_r) nr = m;
      }
      if (ns > 0 || nr > 0) break;
      if (!w.due()) continue;
      if (const int code = w.check(GiveUp::of(*c.cm))) {
        const bool on_recv = want_r > 0 && ll::ld_vol(c.recv_head) == sh.recvd;
        if (code > 0)
          GiveUp::of(*c.cm).record(code, on_recv ? c.prev : c.next, on_recv ? kDevRecv : kDevSend);
        sh.stop = 1;
        break;
      }
    }
    sh.ns = ns;
    sh.nr = nr;
  }
  __syncthreads();
  return !sh.stop;
}

// Every thread, after moving the batch: the barrier orders the block's
// stores (and its loads of the slots consumed) before thread 0's fence, the
// fence before the counters. Other threads read sh.sent / sh.recvd again
// only after the next batch's barrier.
__device__ __forceinline__ void batch_end(const Chan& c, FifoShared& sh, uint64_t ns, uint64_t nr) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  sh.sent += ns;
  sh.recvd += nr;
  fifo_publish(c, ns != 0, sh.sent, nr != 0, sh.recvd);
}

}  // namespace dev
}  // namespace mycoll
