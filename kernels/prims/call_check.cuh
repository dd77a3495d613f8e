// The call check of the collective kernels: mismatched calls are an error,
// never a silently wrong buffer (the GPU side of the host engine's message
// header, lib/engine/host_wire.h).
//
// Every collective kernel launch on a communicator is call k, k counting the
// collective launches this rank started before it (in its inbox's call
// control line, FifoGeom::call_ctl_off; no host state, so CUDA graph replays
// count like eager calls). One warp (the checker) does the check:
// - post_call: writes the call's signature (collective, datatype, op, root,
//   count: gpu_call_sig in lib/engine/host_wire.h) to every peer, one LL
//   line per sender in slot k mod kCallLines, flagged with k
//   (DevPeer::send_call): into a CUDA IPC peer's inbox, or into the GPU
//   proxy's region for a peer behind a host transport, which the proxy
//   forwards as a call frame and the peer's proxy writes into its region
//   (lib/engine/gpu_proxy.h);
// - finish_call: waits for the peers' lines of call k and compares. A peer
//   whose line differs made another call: recorded as a mismatch (DevError
//   kind kDevMismatch with both signatures), which the host reports as
//   InvalidUsage naming the peer and what differs. The kernel's other waits
//   see the recorded error at their next look at the host flags and stop,
//   so a mismatch that would keep them waiting forever (other counts,
//   roots, another kernel) is reported within milliseconds, not as a
//   timeout.
//
// A rank that only sends in its call (a ring chain's first rank: the
// broadcast root, the rank after the reduce root; in the plan kernel a
// tree broadcast's root, a reduce's leaves, a gather's other ranks; the
// host decides, lib/engine/device_comm_launch.cc) receives nothing a
// mismatched peer could spoil, yet waiting for every peer's line would
// hold it until the last rank has started the call, which for a chain is
// one whole chain behind (docs/performance.md, "Session 22"). Such a rank *defers*: in call
// k it compares only the line of k of one peer it sends to, and leaves the
// signature of k in its control line; the next collective kernel of this
// rank, of whatever kind, first compares every peer's line of k against
// it (kDevMismatchPrev) and only then its own call. Why no mismatch goes
// unreported or turns into silent data:
// - Someone finds it within call k. The peer a deferring rank checks
//   either made another call (found now) or made the same one, in which it
//   receives from this rank, so it does not defer and compares every line
//   itself (if every rank defers, each believes it is the root, so each
//   one's peer names another root than it: each finds it). The rank that
//   finds it tells every rank through its peer watch within milliseconds.
// - Data a mismatched peer put into this rank's FIFOs during call k is
//   read only by a later kernel: a collective one settles call k before
//   it ends and fails with the mismatch (its buffer may be wrong, the
//   call returns the error); a point-to-point receive waits for a size line that no
//   collective writes (kernels/prims/p2p_size.cuh) until the report of the
//   rank that found the mismatch stops it.
//
// Where the checker runs: in latency kernels the last warp of block 0
// (call_begin before the first barrier; call_check after that warp's share
// of the sends and before its receives in the LL kernel, so its wait delays
// no line a peer waits for; docs/performance.md, "Session 17"); in the
// bandwidth kernels and the plan kernel a block of its own
// (call_check_block), so the data path never waits for the peers' start
// (docs/performance.md, "Session 12", "Session 13").
//
// Four line slots suffice: when a rank writes line k (slot k mod 4) every
// peer has read its line k - 4. Its call k - 1 ended, so it had settled
// call k - 2 and read every peer's line of k - 2; a peer writes that line
// as its call k - 2 starts, after its call k - 3 ended, by which time it
// had settled k - 4 and read this rank's line of it. (Without deferral a
// rank would be at most one call ahead and two slots would do.) Through
// the proxy too: it forwards a rank's lines in order, and a line reaches
// the peer before the peer can have read it.
//
// Signature 0: no check (point-to-point batches, whose peers differ per
// rank, check message sizes instead: kernels/prims/p2p_size.cuh; the call
// count does not move and a deferred check stays for the next collective).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/device_plan.h"
#include "kernels/prims/ll.cuh"
#include "kernels/prims/wait.cuh"

namespace mycoll {
namespace dev {

// The flag of call k's lines: never 0 once a line was written (slots are
// rewritten every kCallLines calls; inboxes start zeroed).
__device__ __forceinline__ uint32_t call_flag(uint64_t k) { return uint32_t(k + 1); }

// The latency kernels' checker: the last warp of block 0 (every kernel runs
// whole warps).
__device__ __forceinline__ bool call_checker() {
  return blockIdx.x == 0 && threadIdx.x >= blockDim.x - 32;
}

// The control line: [0] the collective launches this rank started, [1] the
// signature of the last one when its check was deferred, else 0.
__device__ __forceinline__ char* call_ctl(const DevComm& cm) { return cm.call_ctl; }

// The checker warp's first half: counts the call and writes its lines into
// the peers' inboxes; returns the call's number k.
__device__ __forceinline__ uint64_t post_call(const DevComm& cm, uint64_t sig) {
  char* const ctl = call_ctl(cm);
  const int lane = int(threadIdx.x & 31);
  const uint64_t k = __shfl_sync(0xffffffffu, lane == 0 ? ll::ld_vol(ctl) : 0, 0);
  if (lane == 0) ll::st_vol(ctl, k + 1);
  const uint32_t f = call_flag(k);
  for (int s = lane; s < cm.nranks; s += 32)
    if (char* line = cm.peers[s].send_call) ll::store_line(line + 16 * (k % kCallLines), sig, f);
  return k;
}

// Waits for the lines of call k (of every mapped peer, or of peer `only`
// alone when >= 0) and compares them with `sig`; a difference is recorded
// as `kind`.
__device__ __forceinline__ void compare_call(const DevComm& cm, uint64_t sig, uint64_t k, int only,
                                             int kind) {
  const uint32_t f = call_flag(k);
  const GiveUp g = GiveUp::of(cm);
  for (int s = int(threadIdx.x & 31); s < cm.nranks; s += 32) {
    const char* line = cm.peers[s].recv_call;
    if (line == nullptr || (only >= 0 && s != only)) continue;  // this rank, or not asked
    line += 16 * (k % kCallLines);
    Waiter w(0);
    uint64_t theirs = 0;
    bool ok = true;
    while (!ll::load_line(line, f, &theirs)) {
      if (const int code = w.tick(g)) {
        if (code > 0) g.record(code, s, kDevRecv);
        ok = false;
        break;
      }
    }
    if (ok && theirs != sig) g.record_mismatch(s, theirs, sig, kind);
  }
}

// The checker warp's second half, after post_call returned k: settles a
// deferred check of call k - 1, then compares every peer's line of call k,
// or (defer_to >= 0) only that peer's, leaving the rest to the next
// collective kernel.
__device__ __forceinline__ void finish_call(const DevComm& cm, uint64_t sig, uint64_t k,
                                            int defer_to) {
  char* const pending = call_ctl(cm) + 8;
  const int lane = int(threadIdx.x & 31);
  const uint64_t prev = __shfl_sync(0xffffffffu, lane == 0 ? ll::ld_vol(pending) : 0, 0);
  if (prev != 0) compare_call(cm, prev, k - 1, -1, kDevMismatchPrev);
  compare_call(cm, sig, k, defer_to, kDevMismatch);
  if (lane == 0 && (prev != 0 || defer_to >= 0)) ll::st_vol(pending, defer_to >= 0 ? sig : 0);
}

// Latency kernels (one-shot, two-shot, LL collectives), whose blocks
// depend on every peer anyway: the last warp of block 0 checks, in two
// calls. call_begin, by every thread of every block before the kernel's
// first barrier: posts the call's lines (the next launch is stream-ordered
// after this one, so it reads the moved count). Returns the call's number,
// for call_check.
__device__ __forceinline__ uint64_t call_begin(const DevComm& cm, uint64_t sig) {
  if (sig == 0 || !call_checker()) return 0;
  return post_call(cm, sig);
}

// By every thread of every block, after the kernel's first barrier and
// before it reads anything a peer wrote (after its sends in the one-shot
// and LL kernels): the checker settles a deferred check, then waits for
// the peers' lines and compares.
__device__ __forceinline__ void call_check(const DevComm& cm, uint64_t sig, uint64_t k) {
  if (sig == 0 || !call_checker()) return;
  finish_call(cm, sig, k, -1);
}

// Bandwidth kernels (ring and chains, direct) and the plan kernel, where a
// rank's data path depends on a few peers only (a chain's root on nobody,
// a plan's step on its step's peers): one block of its
// own, the grid's first (dispatched first, so a started kernel's lines go
// out at once), runs the check and nothing else, so no data waits for the
// peers' start; the kernel ends once the check is done. A mismatch that
// stalls the data blocks is recorded here, and they stop on it. The host
// counts this block in the grid's residency budget. defer_to >= 0: this
// rank only sends in the call, and checks only that peer's line now (see
// the top of the file). True in the check block's threads, which must
// return; *first_data is the grid's first data block.
__device__ __forceinline__ bool call_check_block(const DevComm& cm, uint64_t sig, int* first_data,
                                                 int defer_to = -1) {
  *first_data = sig != 0 ? 1 : 0;
  if (sig == 0 || blockIdx.x != 0) return false;
  if (threadIdx.x < 32) finish_call(cm, sig, post_call(cm, sig), defer_to);
  return true;
}

}  // namespace dev
}  // namespace mycoll
