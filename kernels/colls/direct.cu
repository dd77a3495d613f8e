// Direct kernel for all-to-all, scatter and gather on GPU communicators whose peers are all
// mapped over CUDA IPC, for messages large enough that bandwidth decides: one block per (peer,
// channel) sends its range of the peer's block from the input and receives the same range of
// the peer's block into the output (scatter and gather move one direction), through the plan
// kernel's bandwidth FIFOs and counters (kernels/prims/fifo.cuh); a few more blocks copy this
// rank's own block. Every block's progress depends on one block of one peer, so the whole grid
// must be resident (the host sizes it so). docs/algorithms.md, "GPU direct kernel".
#include <cuda_runtime.h>

#include <cstdint>

#include "algorithms/schedule.h"
#include "engine/reduce.h"
#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/call_check.cuh"
#include "kernels/prims/fifo.cuh"
#include "kernels/prims/vec.cuh"

namespace mycoll {
namespace {

using namespace dev;

constexpr int kThreads = 512;

// One (peer, channel): send `sbytes` from src to the peer and receive
// `rbytes` from it into dst, slot by slot as room and data allow, both in
// each batch. In place (dst == src, all-to-all) a slot is received only
// once the slot at the same offset was sent in an earlier batch (the
// doc's "In place"). Returns false when the block gave up.
template <typename U>
__device__ bool exchange(const Chan& c, FifoShared& sh, const char* src, uint64_t sbytes, char* dst,
                         uint64_t rbytes, bool inplace) {
  const uint64_t st = (sbytes + c.sb - 1) / c.sb, rt = (rbytes + c.sb - 1) / c.sb;
  const int tid = threadIdx.x, nt = blockDim.x;
  uint64_t sd = 0, rd = 0;  // slots of this range sent / received
  while (sd < st || rd < rt) {
    uint64_t want_r = rt - rd;
    if (inplace && sd - rd < want_r) want_r = sd - rd;
    if (!batch_begin(c, sh, st - sd, want_r, false)) return false;
    const uint64_t ns = sh.ns, nr = sh.nr;
    for (uint64_t j = 0; j < ns; ++j) {
      const uint64_t off = (sd + j) * c.sb;
      const uint64_t len = sbytes - off < c.sb ? sbytes - off : c.sb;
      vec_move<U, mycollSum, kL | kS>(nullptr, src + off, c.out_slot(sh, j), nullptr, len, 0, tid,
                                      nt);
    }
    for (uint64_t j = 0; j < nr; ++j) {
      const uint64_t off = (rd + j) * c.sb;
      const uint64_t len = rbytes - off < c.sb ? rbytes - off : c.sb;
      vec_move<U, mycollSum, kR | kD>(c.in_slot(sh, j), nullptr, nullptr, dst + off, len, 0, tid,
                                      nt);
    }
    batch_end(c, sh, ns, nr);
    sd += ns;
    rd += nr;
  }
  return true;
}

// Stream i of this rank: its peer, and whether it sends and receives there,
// from the direct schedule (lib/algorithms/schedule.h; where a rank both
// sends and receives, both runs start at r+1).
struct Stream {
  int peer;
  bool send, recv;
};

__device__ __forceinline__ Stream direct_stream(const sched::DirectRank& d, int n, int i) {
  const int first = d.nsend ? d.send_first : d.recv_first;
  return Stream{first + i < n ? first + i : first + i - n, i < d.nsend, i < d.nrecv};
}

template <typename U>
__global__ void __launch_bounds__(kThreads, 1) direct_kernel(CollKArgs a) {
  __shared__ FifoShared sh;
  const DevComm& cm = *a.comm;
  int b0;  // the first stream's block (after the call check's)
  if (call_check_block(cm, a.sig, &b0)) return;
  const int n = cm.nranks, r = cm.rank;
  const int b = int(blockIdx.x) - b0, nb = int(gridDim.x) - b0, body = a.nstreams * a.nch;
  const uint64_t B = a.bytes;
  const sched::DirectRank d = sched::direct_rank(a.kind, false, n, r, a.root);
  if (b >= body) {
    // This rank's own block (the host launches these blocks only where it
    // is not already in place): all-to-all and a scatter root copy input
    // block r, a gather root copies its input to output block r.
    const char* src = a.in + d.send_off(r, B);
    char* dst = a.out + d.recv_off(r, B);
    vec_move<U, mycollSum, kL | kD>(nullptr, src, nullptr, dst, B, 0,
                                    (b - body) * int(blockDim.x) + int(threadIdx.x),
                                    (nb - body) * int(blockDim.x));
    return;
  }
  const int ch = b % a.nch;
  const Stream s = direct_stream(d, n, b / a.nch);
  const Chan c = make_chan(cm, s.send ? s.peer : -1, s.recv ? s.peer : -1, ch);
  uint64_t* state = reinterpret_cast<uint64_t*>(cm.local + cm.geom.state_off(s.peer, ch));
  if (threadIdx.x == 0) {
    sh.sent = state[0];
    sh.recvd = state[1];
    sh.stop = 0;
  }
  __syncthreads();
  // This channel's range [c0, c1) of the block; the block is the peer's in
  // the blocked buffer (at the root) or the whole buffer.
  uint64_t c0, c1;
  sched::channel_range(B, ch, a.nch, &c0, &c1);
  const char* src = s.send ? a.in + d.send_off(s.peer, B) + c0 : nullptr;
  char* dst = s.recv ? a.out + d.recv_off(s.peer, B) + c0 : nullptr;
  if (c1 > c0)
    exchange<U>(c, sh, src, s.send ? c1 - c0 : 0, dst, s.recv ? c1 - c0 : 0,
                s.send && s.recv && a.in == a.out);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (s.send) state[0] = sh.sent;
    if (s.recv) state[1] = sh.recvd;
  }
}

MYCOLL_DEFINE_LAUNCH(Launch, CollKArgs, kThreads, direct_kernel<T>)

}  // namespace

cudaError_t preload_direct_kernels() { return preload_sizes<Launch>(); }

cudaError_t launch_direct(Coll kind, const void* in, void* out, uint64_t bytes, mycollDataType_t t,
                          int root, const DevComm* comm, int nranks, int rank, int nchannels,
                          int copy_blocks, uint64_t sig, cudaStream_t stream) {
  CollKArgs a = coll_kargs(kind, in, out, bytes, comm, root, false, nranks, sig);
  a.nch = nchannels;
  a.nstreams = direct_streams(kind, nranks, rank, root);
  const int body = a.nstreams * nchannels + copy_blocks;
  if (body == 0) return cudaSuccess;
  const int grid = body + (sig != 0 ? 1 : 0);  // + the call check's block
  return dispatch_size<Launch>(t, a, grid, stream);
}

}  // namespace mycoll
