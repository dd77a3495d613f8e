// The call check of the collective kernels: a mismatched call is an error, never a silently
// wrong buffer (the GPU side of the host engine's message header, lib/engine/host_wire.h).
// Call k (k counts this rank's earlier collective launches, in its inbox's call control line)
// posts its signature to every peer in call line slot k % kCallLines (post_call) and compares
// every peer's line of k (finish_call); a difference is recorded (kDevMismatch) and stops the
// kernel's other waits. A rank that only sends in a call defers: it compares one peer's line
// within the call and the rest in its next collective kernel (kDevMismatchPrev).
// What an edit must keep: the checker never delays a line a peer waits for (latency kernels:
// the last warp of block 0, after its sends; bandwidth kernels and the plan kernel: a block of
// its own); every call settles the previous call's deferred check before it ends (four slots
// suffice only then); signature 0 (point-to-point) checks nothing and leaves the count and a
// deferred check alone. The protocol, why deferral loses no mismatch and why four slots
// suffice: docs/reliability.md, "Mismatches are errors, never wrong data".
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

// The checker warp's first half: counts the call and writes its lines into
// the peers' inboxes; returns the call's number k.
__device__ __forceinline__ uint64_t post_call(const DevComm& cm, uint64_t sig) {
  char* const ctl = cm.call_ctl;  // [0] launches started, [1] a deferred signature
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
    if (ok && theirs != sig) g.record(mycollInvalidUsage, s, kind, sig, theirs);
  }
}

// The checker warp's second half, after post_call returned k: settles a
// deferred check of call k - 1, then compares every peer's line of call k,
// or (defer_to >= 0) only that peer's, leaving the rest to the next
// collective kernel.
__device__ __forceinline__ void finish_call(const DevComm& cm, uint64_t sig, uint64_t k,
                                            int defer_to) {
  char* const pending = cm.call_ctl + 8;
  const int lane = int(threadIdx.x & 31);
  const uint64_t prev = __shfl_sync(0xffffffffu, lane == 0 ? ll::ld_vol(pending) : 0, 0);
  if (prev != 0) compare_call(cm, prev, k - 1, -1, kDevMismatchPrev);
  compare_call(cm, sig, k, defer_to, kDevMismatch);
  if (lane == 0 && (prev != 0 || defer_to >= 0)) ll::st_vol(pending, defer_to >= 0 ? sig : 0);
}

// Latency kernels (the LL kernel), whose blocks depend on every peer anyway:
// the checker warp, in two calls. call_begin, by every thread before the
// kernel's first barrier: posts the call's lines (the next launch,
// stream-ordered after this one, reads the moved count); returns its number.
__device__ __forceinline__ uint64_t call_begin(const DevComm& cm, uint64_t sig) {
  if (sig == 0 || !call_checker()) return 0;
  return post_call(cm, sig);
}

// By every thread, after the kernel's first barrier and its sends, before
// it reads anything a peer wrote: finish_call.
__device__ __forceinline__ void call_check(const DevComm& cm, uint64_t sig, uint64_t k) {
  if (sig == 0 || !call_checker()) return;
  finish_call(cm, sig, k, -1);
}

// Bandwidth kernels (ring and chains, direct) and the plan kernel, whose
// data paths depend on a few peers only: the grid's first block runs the
// check and nothing else, so no data waits for the peers' start; a mismatch
// that stalls the data blocks is recorded here and they stop on it. The
// host counts this block in the grid's residency budget. True in the check
// block's threads, which must return; *first_data is the first data block.
__device__ __forceinline__ bool call_check_block(const DevComm& cm, uint64_t sig, int* first_data,
                                                 int defer_to = -1) {
  *first_data = sig != 0 ? 1 : 0;
  if (sig == 0 || blockIdx.x != 0) return false;
  if (threadIdx.x < 32) finish_call(cm, sig, post_call(cm, sig), defer_to);
  return true;
}

}  // namespace dev
}  // namespace mycoll
