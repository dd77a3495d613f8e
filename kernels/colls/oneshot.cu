// One-shot all-reduce for small messages on GPU communicators whose peers are
// all mapped over CUDA IPC: the whole collective is one kernel and about one
// NVLink round trip, instead of the plan kernel's FIFO steps.
//
// Protocol of launch number e (the epoch and mailbox shared with the
// two-shot and LL-collective kernels, kernels/prims/epoch.cuh: flag
// f(e), parity b = e & 1): every rank r writes its whole input as LL lines
// into every peer p's inbox at its mailbox slot (sender r, parity b), then
// polls its own inbox's slots (s, b) for every peer s and reduces in rank
// order 0..n-1 (its own input at position r), so every rank computes
// bit-identical results. Output may alias input: a thread reads its own
// lines of input before writing them. Why two parities suffice, and how the
// last block moves the epoch on: epoch.cuh.
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
#include "kernels/prims/call_check.cuh"
#include "kernels/prims/epoch.cuh"
#include "kernels/prims/ll.cuh"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace {

constexpr int kThreads = 512;
constexpr int kMaxBlocks = 32;
constexpr uint64_t kBlockLines = 256;  // another block per this many lines
constexpr int kU = 2;                  // lines per thread and round of polls
constexpr int kSrc = 8;                // sources polled at once

template <typename T, int OP>
__global__ void __launch_bounds__(kThreads) oneshot_kernel(CollKArgs a) {
  __shared__ uint64_t s_epoch;
  __shared__ int s_stop;
  const DevComm& cm = *a.comm;
  // In registers: the LL asm's memory clobbers would reload them from cm.
  const int n = cm.nranks, me = cm.rank;
  const uint64_t mb_base = cm.mb_base, slot_bytes = cm.mb_slot;
  const char* const local = cm.local;
  char* const ctl = cm.mb_ctl;
  const ll::Spin spin{dev::GiveUp::of(cm), dev::globaltimer(), &s_stop};
  const uint64_t call = dev::call_begin(cm, a.sig);
  if (threadIdx.x == 0) s_stop = 0;
  const dev::Epoch ep = dev::epoch_begin(ctl, &s_epoch);
  const uint32_t flag = ep.flag;
  const int parity = ep.parity;
  const uint64_t lines = (a.bytes + 7) / 8;
  const uint64_t per = (lines + gridDim.x - 1) / gridDim.x;
  const uint64_t lbeg = uint64_t(blockIdx.x) * per;
  const uint64_t lend = lbeg + per < lines ? lbeg + per : lines;
  const uint64_t nt = blockDim.x;
  auto valid_of = [&](uint64_t l) { return a.bytes - l * 8 < 8 ? int(a.bytes - l * 8) : 8; };

  // 1. My lines of input to every peer (all input loads of a round first).
  const uint64_t send_off = mb_base + (uint64_t(me) * 2 + parity) * slot_bytes;
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

  // The call check (kernels/prims/call_check.cuh) after this warp's sends.
  dev::call_check(cm, a.sig, call);

  // 2. Everyone's lines, reduced in rank order, into my output.
  ll::fold_range<T, OP, kU, kSrc>(
      n, me, uint32_t(lbeg), uint32_t(lend), a.bytes, a.in, a.out,
      [&](int s) { return local + mb_base + (uint64_t(s) * 2 + parity) * slot_bytes; }, a.avg_n,
      flag, spin);

  // 3. The last block done moves the epoch on (see the top of the file).
  dev::epoch_end(ctl, ep);
}

MYCOLL_DEFINE_LAUNCH(Launch, CollKArgs, kThreads, oneshot_kernel<T, OP>)

}  // namespace

cudaError_t preload_oneshot_kernels() { return preload_dtype_op<Launch>(); }

int oneshot_blocks(uint64_t bytes) {
  return blocks_for_lines((bytes + 7) / 8, kBlockLines, kMaxBlocks);
}

cudaError_t launch_oneshot(const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                           mycollRedOp_t op, const DevComm* comm, int nranks, int max_blocks,
                           uint64_t sig, cudaStream_t stream) {
  const CollKArgs a =
      coll_kargs(Coll::AllReduce, in, out, bytes, comm, 0, op == mycollAvg, nranks, sig);
  const int nb = std::max(1, std::min(oneshot_blocks(bytes), max_blocks));
  return dispatch_dtype_op<Launch>(t, op, a, nb, stream);
}

}  // namespace mycoll
