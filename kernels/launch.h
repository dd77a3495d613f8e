// Host entry to the collective kernels (kernels/colls/: plan.cu, ring.cu,
// direct.cu, ll_coll.cu, p2p.cu), all built over the
// primitives of kernels/prims/. The device engine's selection table
// (lib/engine/device_select.h) decides which one serves a call.
// `sig` (KernelArgs::sig for the plan kernel) is the call's signature,
// which every collective kernel checks against its peers'
// (kernels/prims/call_check.cuh; 0 = unchecked).
#pragma once

#include <cuda_runtime.h>

#include "algorithms/plan.h"
#include "algorithms/schedule.h"
#include "kernels/device_plan.h"
#include "mycoll.h"

namespace mycoll {

// Launches the plan kernel: one block per channel, plus the call check's
// block when a.sig != 0 (kernels/prims/call_check.cuh). reduce=false runs the
// byte-moving instantiation (no RecvReduce/ScaleAvg ops allowed).
cudaError_t launch_plan(const KernelArgs& a, bool reduce, mycollDataType_t t, mycollRedOp_t op,
                        int nchannels, cudaStream_t stream);
int plan_kernel_max_step_ops();

// The LL kernel (kernels/colls/ll_coll.cu), every mailbox schedule in one
// kernel through the inboxes' mailbox: all-reduce in one shot or, with
// two_shot, as a reduce-scatter and an all-gather of parts (the same bits
// either way) / all-gather / reduce-scatter / broadcast / reduce /
// all-to-all. `bytes` is one block: all-reduce's, broadcast's and reduce's
// buffer, all-gather's input, reduce-scatter's output, all-to-all's count
// elements. Requires 0 < the collective's whole message (n x bytes;
// all-reduce, broadcast, reduce: bytes) <= geom.lc_bytes (all-reduce:
// geom.os_bytes, two-shot geom.ts_bytes), every peer mapped over CUDA IPC
// and every rank making the same sequence of LL-kernel calls. In place as
// the API defines it (all-gather: in = out + rank x bytes; reduce-scatter:
// out = in + rank x bytes; all-reduce, broadcast, reduce, all-to-all: in =
// out). Reduce writes out on the root only (other ranks may pass null).
// Every rank must pass the same max_blocks. pdl: a programmatic launch
// (launch_kernel, kernels/dispatch.cuh, says when); the kernel waits for its
// predecessor's grid and never triggers its successor early.
cudaError_t launch_ll_coll(Coll kind, bool two_shot, const void* in, void* out, uint64_t bytes,
                           mycollDataType_t t, mycollRedOp_t op, int root, const DevComm* comm,
                           int nranks, int max_blocks, uint64_t sig, bool pdl, cudaStream_t stream);
// Whether the kernels loaded on the current device were compiled for sm_90
// or later (asked of the LL kernel; one build compiles every kernel file
// alike): only then do the LL and ring kernels wait for their predecessor
// as a programmatic launch (their pdl) needs. Asked once per communicator.
bool kernels_pdl_ready();
// Thread blocks launch_ll_coll gives a block of `bytes` (two_shot: the
// message of a two-shot all-reduce) on nranks ranks, at most max_blocks.
int ll_coll_grid(bool two_shot, uint64_t bytes, int nranks, int max_blocks);

// Fused ring all-reduce / all-gather / reduce-scatter and chain broadcast /
// reduce (kernels/colls/ring.cu), one block per channel (plus the call
// check's block when sig != 0). `bytes` is all-reduce's, broadcast's
// and reduce's message, all-gather's input block or reduce-scatter's output
// block (> 0). Requires every peer mapped over CUDA IPC and nchannels <=
// geom.max_channels; interleaves with plan-kernel launches (same counters).
// In place as the API defines it; reduce writes out on the root only.
// defer_to >= 0: this rank only sends in the call (a chain's first rank;
// kernels/prims/call_check.cuh). pdl: as launch_ll_coll's.
cudaError_t launch_ring(Coll kind, const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                        mycollRedOp_t op, int root, const DevComm* comm, int nranks, int nchannels,
                        uint64_t sig, int defer_to, bool pdl, cudaStream_t stream);

// Direct all-to-all / scatter / gather (kernels/colls/direct.cu): one block
// per (stream, channel), a stream being one peer, then `copy_blocks` blocks
// copying this rank's own block (0 when it is already in place), plus the
// call check's. `bytes` is one block (> 0). Requires every peer
// mapped over CUDA IPC, nchannels <= geom.max_channels and alike on every
// rank, and the whole grid (direct_streams x nchannels + copy_blocks, plus
// the call check's block when sig != 0) resident on the GPU at once: a
// block waits on its peer's block.
inline int direct_streams(Coll kind, int nranks, int rank, int root) {
  const sched::DirectRank d = sched::direct_rank(kind, false, nranks, rank, root);
  return d.nsend > d.nrecv ? d.nsend : d.nrecv;
}
cudaError_t launch_direct(Coll kind, const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                          int root, const DevComm* comm, int nranks, int rank, int nchannels,
                          int copy_blocks, uint64_t sig, cudaStream_t stream);

// LL point-to-point kernel (kernels/colls/p2p.cu): one block of `threads`
// threads per key (c.nkeys of them, at most kP2pLlMaxKeys), key k moving its
// slices keys[k].first .. + keys[k].n of ptr/bytes (nslices in all, at most
// kP2pLlMaxSlices; msg: each slice's whole message bytes, which receivers
// check against their senders') in order through the ll rings,
// interoperating with the plan kernel's ll pass. The batch comes from layout_p2p_ll
// (lib/engine/device_plan_build.h); everything is passed by value.
cudaError_t launch_p2p_ll(const P2pLlCommon& c, const P2pLlKey* keys, const uint64_t* ptr,
                          const uint32_t* bytes, const uint32_t* msg, int nslices, int threads,
                          cudaStream_t stream);

// NCCL's PreMulSum pass (kernels/colls/premul.cu): dst[i] = src[i] * scalar
// for n elements of t, as the Prod reduction functor computes it, enqueued
// on stream; dst may equal src. The scalar is read by the kernel from
// scalar_dev (device-visible memory) when not null, else taken from the low
// bytes of scalar_bits (one element of t, little endian).
cudaError_t launch_premul(mycollDataType_t t, void* dst, const void* src, size_t n,
                          const void* scalar_dev, uint64_t scalar_bits, cudaStream_t stream);

// Loads every kernel of the library on the current device (idempotent). A
// lazy load at a first launch may synchronise the whole context, waiting
// for other ranks' kernels on the GPU that wait for this rank: the device
// engine preloads at init, then meets the other ranks in a barrier
// (lib/engine/device_comm_setup.cc).
cudaError_t preload_plan_kernels();
cudaError_t preload_ring_kernels();  // fused ring and chain kernels
cudaError_t preload_direct_kernels();
cudaError_t preload_ll_coll_kernels();
cudaError_t preload_p2p_kernels();
cudaError_t preload_premul_kernels();

}  // namespace mycoll
