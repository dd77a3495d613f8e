// What the host hands a collective kernel: plans flattened into DevOps (one
// list per channel), the buffers, and the communicator's FIFO mesh.
// Plain structs shared by host code and CUDA code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MYCOLL_HD __host__ __device__
#else
#define MYCOLL_HD
#endif

namespace mycoll {

enum DevOpKind : uint8_t {
  kDevSend = 0,        // src -> peer
  kDevRecv = 1,        // peer -> dst
  kDevRecvReduce = 2,  // dst = src <op> (from peer)
  kDevCopy = 3,        // dst = src
  kDevScaleAvg = 4,    // dst /= nranks (Avg), after the last step
  kDevReduce = 5,      // dst = dst <op> src, local
  // Not an op: DevError::kind of a peer that made another call
  // (kernels/prims/call_check.cuh).
  kDevMismatch = 6,
  // Not ops: DevError::kind of a point-to-point receive whose sender sent
  // another number of bytes, and of a send whose receiver reported that
  // (kernels/prims/p2p_size.cuh); mine / theirs: this rank's message bytes
  // and the peer's (a send seen from a collective kernel: mine 0).
  kDevRecvSizeMismatch = 7,
  kDevSendSizeMismatch = 8,
  // Not an op: like kDevMismatch, for the call before this one, whose check
  // this rank deferred (it only sent in it: kernels/prims/call_check.cuh).
  kDevMismatchPrev = 9,
};

// Call-check line slots per sender (docs/reliability.md says why four
// suffice); also the GPU proxy's, lib/engine/gpu_proxy.h.
constexpr int kCallLines = 4;

// One operation of one channel. Offsets and sizes in bytes. buf: 0 input,
// 1 output, 2 scratch, 3 absolute (offset is an address: point-to-point).
// Point-to-point plans (KernelArgs::p2p) put the whole message's bytes
// (every channel's slice together) in the offset a transfer does not use:
// a send's dst_off, a receive's src_off (p2p_msg_bytes).
struct alignas(16) DevOp {
  uint8_t kind;
  uint8_t dst_buf;
  uint8_t src_buf;
  uint8_t step_end;  // 1 on the last op of a step
  int32_t peer;
  uint64_t dst_off;
  uint64_t src_off;
  uint64_t bytes;
};
static_assert(sizeof(DevOp) == 32, "DevOp layout");

// The message bytes of a point-to-point plan's send or receive (see DevOp).
MYCOLL_HD inline uint64_t p2p_msg_bytes(const DevOp& op) {
  return op.kind == kDevSend ? op.dst_off : op.src_off;
}

// FIFO geometry, identical on every rank of a communicator: rank r's inbox, one cudaMalloc,
// its regions in this order: data, ll, flags, state, mb (only with an LL-kernel limit above
// 0), call, size. Every region's words and owners: docs/algorithms.md, "GPU inbox layout".
struct FifoGeom {
  int32_t nranks;
  int32_t max_channels;
  int32_t nslots;
  int32_t ll_slots;
  uint64_t slot_bytes;
  uint64_t ll_slot_bytes;
  int32_t os_bytes;  // one-shot all-reduce: most data bytes per rank (0 = off)
  int32_t ts_bytes;  // two-shot all-reduce: most data bytes per rank (0 = off)

  // The LL lines of `bytes` data bytes (0 = off), and x rounded up to 256.
  MYCOLL_HD static uint64_t lines_bytes(int32_t bytes) {
    return bytes > 0 ? (uint64_t(bytes) + 7) / 8 * 16 : 0;
  }
  MYCOLL_HD static uint64_t up256(uint64_t x) { return (x + 255) / 256 * 256; }
  MYCOLL_HD uint64_t ring_bytes() const { return uint64_t(nslots) * slot_bytes; }
  MYCOLL_HD uint64_t ll_ring_bytes() const { return uint64_t(ll_slots) * ll_slot_bytes; }
  MYCOLL_HD uint64_t pairs() const { return uint64_t(nranks) * max_channels; }
  MYCOLL_HD uint64_t pair(int peer, int ch) const { return uint64_t(peer) * max_channels + ch; }
  MYCOLL_HD uint64_t data_off(int peer, int ch) const { return pair(peer, ch) * ring_bytes(); }
  MYCOLL_HD uint64_t ll_off(int peer, int ch) const {
    return pairs() * ring_bytes() + pair(peer, ch) * ll_ring_bytes();
  }
  MYCOLL_HD uint64_t flags_base() const { return pairs() * (ring_bytes() + ll_ring_bytes()); }
  MYCOLL_HD uint64_t head_off(int peer, int ch) const {
    return flags_base() + pair(peer, ch) * 384;
  }
  MYCOLL_HD uint64_t tail_off(int peer, int ch) const { return head_off(peer, ch) + 128; }
  MYCOLL_HD uint64_t ll_tail_off(int peer, int ch) const { return head_off(peer, ch) + 256; }
  MYCOLL_HD uint64_t state_base() const { return flags_base() + pairs() * 384; }
  // [0] data sent, [1] data received, [2] ll sent, [3] ll received
  MYCOLL_HD uint64_t state_off(int peer, int ch) const {
    return state_base() + pair(peer, ch) * 32;
  }
  // One-shot: a sender's whole input, a 16-byte LL line per 8 data bytes.
  MYCOLL_HD uint64_t os_line_bytes() const { return lines_bytes(os_bytes); }
  // Two-shot all-reduce of `bytes`: its L lines, at least n counted, cut
  // into n parts of ceil(L / n) lines (the last ones may reach past the
  // message); a slot holds a sender's part, then its reduced part.
  MYCOLL_HD static uint64_t ts_part_lines_of(uint64_t bytes, int n) {
    const uint64_t lines = (bytes + 7) / 8 < uint64_t(n) ? uint64_t(n) : (bytes + 7) / 8;
    return (lines + n - 1) / n;
  }
  // The largest part of the largest message, in LL lines.
  MYCOLL_HD uint64_t ts_part_lines() const {
    return ts_bytes > 0 ? ts_part_lines_of(uint64_t(ts_bytes), nranks) : 0;
  }
  MYCOLL_HD uint64_t ts_part_bytes() const { return ts_part_lines() * 16; }

  // LL collectives (all-gather, reduce-scatter, broadcast, reduce, all-to-all).
  int32_t lc_bytes;  // largest message of the LL collectives (0 = off)
  int32_t lc_pad;

  MYCOLL_HD uint64_t lc_line_bytes() const { return lines_bytes(lc_bytes); }

  // The mailbox: a slot per (sender, parity) as the largest schedule needs.
  MYCOLL_HD uint64_t mb_slot_bytes() const {
    uint64_t m = os_line_bytes();
    if (2 * ts_part_bytes() > m) m = 2 * ts_part_bytes();
    if (lc_line_bytes() > m) m = lc_line_bytes();
    return m;
  }
  MYCOLL_HD uint64_t mb_base() const { return up256(state_base() + pairs() * 32); }
  MYCOLL_HD uint64_t mb_off(int sender, int parity) const {
    return mb_base() + (uint64_t(sender) * 2 + parity) * mb_slot_bytes();
  }
  MYCOLL_HD uint64_t ctl_off() const { return mb_base() + uint64_t(nranks) * 2 * mb_slot_bytes(); }
  MYCOLL_HD uint64_t mb_region_bytes() const {
    return mb_slot_bytes() > 0 ? uint64_t(nranks) * 2 * mb_slot_bytes() + 128 : 0;
  }

  // Call check (kernels/prims/call_check.cuh): kCallLines lines per sender,
  // then r's own control line.
  MYCOLL_HD uint64_t call_base() const { return up256(mb_base() + mb_region_bytes()); }
  MYCOLL_HD uint64_t call_hdr_off(int sender, int slot) const {
    return call_base() + (uint64_t(sender) * kCallLines + slot) * 16;
  }
  MYCOLL_HD uint64_t call_ctl_off() const {
    return call_base() + (uint64_t(nranks) * kCallLines * 16 + 127) / 128 * 128;
  }
  MYCOLL_HD uint64_t call_region_bytes() const { return call_ctl_off() + 128 - call_base(); }

  // Point-to-point size lines, 256-byte aligned after the call region.
  MYCOLL_HD uint64_t size_base() const { return up256(call_base() + call_region_bytes()); }
  MYCOLL_HD uint64_t size_pair_bytes() const { return (uint64_t(nslots) + ll_slots) * 16; }
  // Beside sender s's data ring of channel c, and beside its ll ring.
  MYCOLL_HD uint64_t size_off(int sender, int ch) const {
    return size_base() + pair(sender, ch) * size_pair_bytes();
  }
  MYCOLL_HD uint64_t ll_size_off(int sender, int ch) const {
    return size_off(sender, ch) + uint64_t(nslots) * 16;
  }
  MYCOLL_HD uint64_t size_region_bytes() const { return pairs() * size_pair_bytes(); }
  MYCOLL_HD uint64_t total_bytes() const { return size_base() + size_region_bytes(); }
};

// Written by a kernel that gives up (host-mapped memory): the first failure
// of this rank wins the compare-and-swap on `code`, writes the rest, fences,
// then sets `ready` (the host reads the fields only once it is set).
struct DevError {
  int32_t code;  // 0 none, mycollTimeout, mycollRemoteError (abort), mycollInvalidUsage (mismatch)
  int32_t peer;
  int32_t rank;
  int32_t kind;     // DevOpKind it was waiting in, or kDevMismatch / kDevMismatchPrev
  uint64_t mine;    // kDevMismatch: this rank's call signature
  uint64_t theirs;  // kDevMismatch: the peer's
  int32_t ready;
  int32_t pad;
};
static_assert(sizeof(DevError) == 40,
              "DevError layout (host-mapped, 64 bytes with the abort flag)");

// The top bit of a FIFO credit (tail): the receiver refused a point-to-point
// message of another size, its own bytes below the bit
// (kernels/prims/p2p_size.cuh); the GPU proxy forwards it as such
// (lib/engine/proxy_wire.h).
constexpr uint64_t kCreditPoison = uint64_t(1) << 63;

// Where this rank's bandwidth FIFOs with one peer live: channel c's ring c * nslots *
// slot_bytes past a data pointer, its counters c * 384 bytes past a counter pointer. A CUDA IPC
// peer: the ring I fill in its inbox, the ring I drain in mine (FifoGeom offsets), ll = 1. A
// peer behind a host transport: both rings in pinned host memory that the GPU proxy thread
// moves over the network (lib/engine/gpu_proxy.h), each slot's byte count recorded too; ll = 0
// (every message takes the bandwidth protocol).
struct DevPeer {
  char* send_data;
  char* send_head;        // I publish slots written
  const char* send_tail;  // slots I may reuse come back here
  const char* recv_data;
  const char* recv_head;  // slots ready for me
  char* recv_tail;        // I publish slots consumed
  uint32_t* send_len;     // host-transport peers: bytes in each slot; else null
  // The checks' lines with this peer (null for this rank itself): the size
  // lines beside my data rings to the peer and beside its rings to me
  // (kernels/prims/p2p_size.cuh; channel c at + c * size_stride), my call
  // lines to the peer and its call lines to me (kernels/prims/call_check.cuh;
  // call k's line at + 16 (k % kCallLines)). CUDA IPC: in the inboxes (FifoGeom::size_off,
  // call_hdr_off); host transport: in the proxy region, which the proxy
  // forwards as size and call frames (lib/engine/gpu_proxy.h).
  char* send_size;
  const char* recv_size;
  char* send_call;
  const char* recv_call;
  uint64_t size_stride;
  uint64_t slot_bytes;
  int32_t nslots;
  int32_t ll;  // the ll ring (remote[peer]) may be used
};

struct DevComm {
  FifoGeom geom;
  int32_t rank;
  int32_t nranks;
  uint64_t timeout_ns;
  uint64_t ll_max_bytes;    // messages (DevOps) up to this size use the ll ring
  char* local;              // my inbox
  char* const* remote;      // remote[r] = rank r's inbox mapped here (device array)
  const DevPeer* peers;     // per peer (device array)
  volatile int32_t* abort;  // host-mapped: nonzero -> give up
  DevError* error;          // host-mapped
  // Computed once on the host from geom (set_offsets): the kernels' first
  // instructions would otherwise redo geom's arithmetic, 64-bit divisions by
  // nranks included, at every launch.
  uint64_t mb_base;  // geom.mb_base(): the mailbox in every inbox
  uint64_t mb_slot;  // geom.mb_slot_bytes(): one (sender, parity) slot
  char* mb_ctl;      // local + geom.ctl_off(): my mailbox epoch line
  char* call_ctl;    // local + geom.call_ctl_off(): my call-check control line

  void set_offsets() {
    mb_base = geom.mb_base();
    mb_slot = geom.mb_slot_bytes();
    mb_ctl = local + geom.ctl_off();
    call_ctl = local + geom.call_ctl_off();
  }
};

// The low-latency point-to-point kernel (kernels/colls/p2p.cu): one thread
// block per key (peer, channel, direction) of a batch whose every slice
// travels in the ll ring, moving the key's slices in batch order with the
// plan kernel's ll line layout, flags and counters. Everything the kernel
// needs is in its parameters (no device-memory plan, no DevComm read).
struct P2pLlKey {
  char* ring;       // send: my ll ring in the peer's inbox, remote[peer] + ll_off(rank, ch);
                    // recv: the peer's ll ring in mine, local + ll_off(peer, ch)
  char* credit;     // send: the ll_tail the peer returns, local + ll_tail_off(peer, ch);
                    // recv: where I return it, remote[peer] + ll_tail_off(rank, ch)
  uint64_t* count;  // my counter at local + state_off(peer, ch): [2] ll slots sent to
                    // the peer (send), [3] received from it (recv)
  char* sizes;      // the size lines beside the ring (kernels/prims/p2p_size.cuh):
                    // send: remote[peer] + ll_size_off(rank, ch); recv: local +
                    // ll_size_off(peer, ch)
  // recv: the pair's bandwidth FIFO, where a sender whose message is above
  // the ll limit puts it (p2p_size.cuh, sent_on_other_ring): its size lines
  // local + size_off(peer, ch), my count of its slots (state[1]), the credit
  // I return on it remote[peer] + tail_off(rank, ch). Send: null.
  const char* fifo_sizes;
  const uint64_t* fifo_count;
  char* fifo_credit;
  int32_t peer;
  uint16_t first;  // the key's slices: [first, first + n) of the launch
  uint8_t n;
  uint8_t kind;  // kDevSend or kDevRecv
};
static_assert(sizeof(P2pLlKey) == 64, "P2pLlKey layout");

// Capacity of one launch: keys (thread blocks), slices; threads per block
// at most; lines in flight per thread. 128 keys: a 2-rank exchange of 512
// KiB-1 MiB cut over 64 channels each way (docs/performance.md, "Session 39").
constexpr int kP2pLlMaxKeys = 128;
constexpr int kP2pLlMaxSlices = 256;
constexpr int kP2pLlMaxThreads = 256;
constexpr int kP2pLlUnroll = 8;

struct P2pLlCommon {
  volatile int32_t* abort;  // DevComm::abort
  DevError* error;          // DevComm::error
  uint64_t timeout_ns;
  uint32_t ll_slots;       // FifoGeom::ll_slots
  uint32_t ll_slot_bytes;  // FifoGeom::ll_slot_bytes (16-byte lines, 8 data bytes each)
  uint32_t fifo_slots;     // FifoGeom::nslots (a bandwidth FIFO's slots)
  int32_t rank;
  int32_t nkeys;
};

struct KernelArgs {
  const DevOp* ops;          // all channels' ops
  const uint32_t* chan_ops;  // channel c's ops are [chan_ops[c], chan_ops[c+1])
  char* bufs[3];             // input, output, scratch
  const DevComm* comm;       // device memory
  uint64_t sig;    // the call's signature (call_check.cuh); 0: not checked (point-to-point)
  int32_t nranks;  // divisor for Avg
  int32_t p2p;     // a point-to-point plan: sends and receives check message sizes
  // The one peer whose call line the check compares within the call, the
  // others' waiting for the next collective kernel (a plan in which this
  // rank only sends: kernels/prims/call_check.cuh); -1: every peer's.
  int32_t defer_to;
};

}  // namespace mycoll
