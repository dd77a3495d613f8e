// One-shot all-reduce for small messages on GPU communicators whose peers are
// all mapped over CUDA IPC: the whole collective is one kernel and about one
// NVLink round trip, instead of the plan kernel's FIFO steps.
//
// Protocol of launch number e (the epoch, kept in my inbox's os control line;
// every rank runs the same sequence of one-shot and two-shot launches, so
// epochs agree):
//   flag = e mod (2^32 - 1) + 1 (never 0: the inbox starts zeroed), parity
//   b = e & 1. Every rank r writes its whole input as LL lines into every
//   peer p's inbox at os(sender r, parity b), then polls its own inbox's
//   os(s, b) for every peer s and reduces in rank order 0..n-1 (its own input
//   at position r), so every rank computes bit-identical results. Output may
//   alias input: a thread reads its own lines of input before writing them.
//
// Why two buffers (parities) suffice: rank r writes epoch e+2 into p's parity
// b buffer only after its epoch-(e+1) kernel finished (stream order); that
// kernel needed p's epoch-(e+1) lines, which p writes only in its epoch-(e+1)
// kernel, stream-ordered after p's epoch-e kernel, the one reading the buffer
// r is about to overwrite. Lines left in a buffer from epoch e-2 carry
// another flag, so they are never taken for epoch e's. (Two one-shot
// all-reduces of one communicator must not run concurrently, e.g. on two
// streams or in parallel graph branches: like every collective of a
// communicator they have to be ordered.)
//
// Epoch update: each block reads the epoch when it starts; the last block of
// the launch to finish (a done counter in the control line) resets the
// counter and increments the epoch. Blocks that have not counted themselves
// have read the epoch already (fence before the count), and the next launch
// is stream-ordered after this one, so no block reads a moved epoch. No host
// state is involved: CUDA graph replays advance the epoch like eager calls.
// The epoch and control line are shared with the two-shot kernel
// (kernels/twoshot_kernel.cu: why two parities still suffice when both
// kernels interleave is argued there).
//
// Every wait gives up like the plan kernel: the host-mapped abort flag (read
// every 64K spins) and MYCOLL_TIMEOUT, recorded in DevError (kind kDevRecv).
// A kernel that gave up leaves the epochs of the ranks inconsistent; the host
// then fails the communicator.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/ll.cuh"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 32;
constexpr uint64_t kBlockLines = 256;  // another block per this many lines
constexpr int kU = 2;                  // lines per thread and round of polls
constexpr int kSrc = 8;                // sources polled at once

struct OneShotArgs {
  const char* in;
  char* out;
  uint64_t bytes;
  const DevComm* comm;  // device memory
  int32_t avg_n;        // Avg: divide the sum by this; 0 = no division
};

template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) oneshot_kernel(OneShotArgs a) {
  __shared__ uint64_t s_epoch;
  __shared__ volatile int s_stop;
  const DevComm& cm = *a.comm;
  // In registers: the LL asm's memory clobbers would reload them from cm.
  const int n = cm.nranks, me = cm.rank;
  const uint64_t os_base = cm.geom.os_base(), line_bytes = cm.geom.os_line_bytes();
  const char* const local = cm.local;
  char* const ctl = cm.local + cm.geom.ctl_off();
  const ll::Spin spin{a.comm, ll::globaltimer(), cm.timeout_ns, &s_stop};
  if (threadIdx.x == 0) {
    s_epoch = *reinterpret_cast<volatile uint64_t*>(ctl);
    s_stop = 0;
  }
  __syncthreads();
  const uint64_t e = s_epoch;
  const uint32_t flag = ll::epoch_flag(e);
  const int parity = int(e & 1);
  const uint64_t lines = (a.bytes + 7) / 8;
  const uint64_t per = (lines + gridDim.x - 1) / gridDim.x;
  const uint64_t lbeg = uint64_t(blockIdx.x) * per;
  const uint64_t lend = lbeg + per < lines ? lbeg + per : lines;
  const uint64_t nt = blockDim.x;
  auto valid_of = [&](uint64_t l) { return a.bytes - l * 8 < 8 ? int(a.bytes - l * 8) : 8; };

  // 1. My lines of input to every peer (all input loads of a round first).
  const uint64_t send_off = os_base + (uint64_t(me) * 2 + parity) * line_bytes;
  auto inbox_line = [&](int s, uint64_t l) {
    return local + os_base + (uint64_t(s) * 2 + parity) * line_bytes + l * 16;
  };
  for (uint64_t l0 = lbeg + threadIdx.x; l0 < lend; l0 += nt * 4) {
    uint64_t v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const uint64_t l = l0 + u * nt;
      if (l < lend) v[u] = ll::load8(a.in + l * 8, valid_of(l));
    }
    for (int k = 1; k < n; ++k) {
      const int p = me + k < n ? me + k : me + k - n;
      char* dst = cm.remote[p] + send_off;
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const uint64_t l = l0 + u * nt;
        if (l < lend) ll::store_line(dst + l * 16, v[u], flag);
      }
    }
  }

  // 2. Everyone's lines, reduced in rank order, into my output.
  for (uint64_t l0 = lbeg + threadIdx.x; l0 < lend && !s_stop; l0 += nt * kU) {
    uint64_t acc[kU], mine[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint64_t l = l0 + u * nt;
      acc[u] = 0;
      mine[u] = l < lend ? ll::load8(a.in + l * 8, valid_of(l)) : 0;
    }
    bool quit = false;
    for (int s0 = 0; s0 < n && !quit; s0 += kSrc) {
      uint64_t v[kU][kSrc];
      bool ok[kU][kSrc];
      // Issue every load of the round before waiting on any.
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const uint64_t l = l0 + u * nt;
#pragma unroll
        for (int j = 0; j < kSrc; ++j) {
          const int s = s0 + j;
          ok[u][j] = true;
          v[u][j] = mine[u];
          if (l < lend && s < n && s != me)
            ok[u][j] = ll::load_line(inbox_line(s, l), flag, &v[u][j]);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const uint64_t l = l0 + u * nt;
#pragma unroll
        for (int j = 0; j < kSrc; ++j)
          if (!ok[u][j] && !quit && !spin.wait(inbox_line(s0 + j, l), flag, &v[u][j], s0 + j))
            quit = true;
      }
      if (quit) break;
      // Fold in rank order: source 0 starts the accumulator.
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int j = 0; j < kSrc; ++j) {
          const int s = s0 + j;
          if (s == 0) acc[u] = v[u][j];
          else if (s < n) acc[u] = ll::reduce8<T, OP>(acc[u], v[u][j]);
        }
    }
    if (quit) break;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const uint64_t l = l0 + u * nt;
      if (l >= lend) continue;
      uint64_t r = acc[u];
      if (a.avg_n) r = ll::div_avg8<T>(r, a.avg_n);
      ll::store8(a.out + l * 8, r, valid_of(l));
    }
  }

  // 3. The last block done moves the epoch on (see the top of the file).
  __syncthreads();
  if (threadIdx.x == 0) ll::epoch_block_done(ctl, e);
}

template <typename T, int OP>
struct Launch {
  static cudaError_t run(const OneShotArgs& a, int nblocks, cudaStream_t s) {
    oneshot_kernel<T, OP><<<nblocks, kThreads, 0, s>>>(a);
    return cudaGetLastError();
  }
  static cudaError_t preload() { return preload_kernel(oneshot_kernel<T, OP>); }
};

}  // namespace

cudaError_t preload_oneshot_kernels() { return preload_dtype_op<Launch>(); }

int oneshot_blocks(uint64_t bytes) {
  const uint64_t lines = (bytes + 7) / 8;
  const uint64_t b = (lines + kBlockLines - 1) / kBlockLines;
  return b < 1 ? 1 : b > uint64_t(kMaxBlocks) ? kMaxBlocks : int(b);
}

cudaError_t launch_oneshot(const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                           mycollRedOp_t op, const DevComm* comm, int nranks, int max_blocks,
                           cudaStream_t stream) {
  OneShotArgs a;
  a.in = static_cast<const char*>(in);
  a.out = static_cast<char*>(out);
  a.bytes = bytes;
  a.comm = comm;
  a.avg_n = op == mycollAvg ? nranks : 0;
  const int nb = std::max(1, std::min(oneshot_blocks(bytes), max_blocks));
  return dispatch_dtype_op<Launch>(t, op, a, nb, stream);
}

}  // namespace mycoll
