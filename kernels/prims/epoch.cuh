// The launch epoch of the LL kernel's mailbox (kernels/colls/ll_coll.cu): one control line in
// this rank's inbox (FifoGeom::ctl_off), [0] the epoch (u64: launches completed), [8] blocks
// done (u32, the launch in flight). Epoch e's lines carry the flag e mod (2^32 - 1) + 1 in the
// mailbox slots of parity e & 1. No host state: CUDA graph replays advance it like eager calls.
// What an edit must keep: every rank runs the same sequence of these launches; two parities
// suffice only while every launch waits for a line that every peer writes in it and two
// launches of one communicator never run concurrently (docs/algorithms.md, "GPU one-shot
// all-reduce (the LL kernel)", "Why two buffers suffice").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mycoll {
namespace dev {

struct Epoch {
  uint64_t e;
  uint32_t flag;  // never 0: inboxes start zeroed
  int parity;
};

// The current epoch, read once per block (all threads of the block call
// it: it contains a __syncthreads). slot: a __shared__ word.
__device__ __forceinline__ Epoch epoch_begin(const char* ctl, uint64_t* slot) {
  if (threadIdx.x == 0) *slot = *reinterpret_cast<const volatile uint64_t*>(ctl);
  __syncthreads();
  const uint64_t e = *slot;
  return Epoch{e, uint32_t(e % 0xffffffffull) + 1, int(e & 1)};
}

// End of a launch, by every thread of each block: the last block to count
// itself resets the counter and moves the epoch on. Every block read the
// epoch before counting itself (fence), and the next launch is
// stream-ordered after this one, so no block ever reads a moved epoch.
__device__ __forceinline__ void epoch_end(char* ctl, const Epoch& ep) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  unsigned int* done = reinterpret_cast<unsigned int*>(ctl + 8);
  __threadfence();  // this block's read of the epoch before its count
  if (atomicAdd(done, 1u) == gridDim.x - 1) {
    __threadfence();
    *reinterpret_cast<volatile unsigned int*>(done) = 0;
    *reinterpret_cast<volatile uint64_t*>(ctl) = ep.e + 1;
  }
}

}  // namespace dev
}  // namespace mycoll
