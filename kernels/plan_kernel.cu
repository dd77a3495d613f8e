// The collective kernel: each thread block is one channel and executes that
// channel's ops step by step. Data moves through per-(peer, channel) FIFOs of
// slots in the receiver's memory: the sender stores slots over NVLink/PCIe
// and publishes a head counter; the receiver consumes them (copy or reduce)
// and publishes a tail counter back. Every wait polls the abort flag and
// gives up after the communicator's timeout, recording why.
#include <cuda_runtime.h>

#include "kernels/device_plan.h"
#include "kernels/launch.h"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace dev {

constexpr int kThreads = 512;
constexpr int kUnroll = 8;
constexpr int kMaxStepOps = 128;

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ uint64_t ld_vol(const char* p) {
  return *reinterpret_cast<const volatile uint64_t*>(p);
}
__device__ __forceinline__ void st_vol(char* p, uint64_t v) {
  *reinterpret_cast<volatile uint64_t*>(p) = v;
}

template <bool FromFifo, typename V>
__device__ __forceinline__ V load(const V* p) {
  if constexpr (FromFifo) return __ldcg(p);  // L2 only: the peer rewrites slots
  else return *p;
}

// dst[0:n) = src[0:n); the whole block participates.
template <bool FromFifo>
__device__ void copy_bytes(char* dst, const char* src, uint64_t n, int tid, int nt) {
  uint64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const uint64_t nv = n / 16;
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    for (uint64_t i = tid; i < nv; i += nt * kUnroll) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) v[u] = load<FromFifo>(s + i + u * nt);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) d[i + u * nt] = v[u];
    }
    done = nv * 16;
  } else if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 3) == 0) {
    const uint64_t nw = n / 4;
    const uint32_t* s = reinterpret_cast<const uint32_t*>(src);
    uint32_t* d = reinterpret_cast<uint32_t*>(dst);
    for (uint64_t i = tid; i < nw; i += nt) d[i] = load<FromFifo>(s + i);
    done = nw * 4;
  }
  for (uint64_t i = done + tid; i < n; i += nt) dst[i] = load<FromFifo>(src + i);
}

// dst[i] = a[i] <op> b[i] over n bytes (whole elements); b is the FIFO.
template <typename T, int OP>
__device__ void reduce_bytes(char* dst, const char* a, const char* b, uint64_t n, int tid, int nt) {
  uint64_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(a) |
        reinterpret_cast<uintptr_t>(b)) & 15) == 0) {
    const uint64_t nv = n / 16;
    const uint4* x = reinterpret_cast<const uint4*>(a);
    const uint4* y = reinterpret_cast<const uint4*>(b);
    uint4* z = reinterpret_cast<uint4*>(dst);
    for (uint64_t i = tid; i < nv; i += nt * kUnroll) {
      uint4 va[kUnroll], vb[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) {
          va[u] = x[i + u * nt];
          vb[u] = __ldcg(y + i + u * nt);
        }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (i + u * nt < nv) z[i + u * nt] = apply16<T, OP>(va[u], vb[u]);
    }
    done = nv * 16;
  }
  const uint64_t ne = n / sizeof(T);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  T* z = reinterpret_cast<T*>(dst);
  for (uint64_t i = done / sizeof(T) + tid; i < ne; i += nt) {
    T yv;
    // __ldcg has no overload for every T: read the element's bytes through L2.
    if constexpr (sizeof(T) == 1) {
      unsigned char c = __ldcg(reinterpret_cast<const unsigned char*>(y + i));
      yv = *reinterpret_cast<T*>(&c);
    } else if constexpr (sizeof(T) == 2) {
      unsigned short c = __ldcg(reinterpret_cast<const unsigned short*>(y + i));
      yv = *reinterpret_cast<T*>(&c);
    } else if constexpr (sizeof(T) == 4) {
      unsigned int c = __ldcg(reinterpret_cast<const unsigned int*>(y + i));
      yv = *reinterpret_cast<T*>(&c);
    } else {
      unsigned long long c = __ldcg(reinterpret_cast<const unsigned long long*>(y + i));
      yv = *reinterpret_cast<T*>(&c);
    }
    z[i] = Red<T, OP>::apply(x[i], yv);
  }
}

template <typename T>
__device__ void scale_bytes(char* dst, uint64_t n, int nranks) {
  T* z = reinterpret_cast<T*>(dst);
  for (uint64_t i = threadIdx.x; i < n / sizeof(T); i += blockDim.x) z[i] = div_avg<T>(z[i], nranks);
}

__device__ __forceinline__ char* resolve(const KernelArgs& a, uint8_t buf, uint64_t off) {
  return buf == 3 ? reinterpret_cast<char*>(off) : a.bufs[buf] + off;
}

__device__ __forceinline__ void group_bar(int group, int nt) {
  asm volatile("bar.sync %0, %1;" ::"r"(group + 1), "r"(nt) : "memory");
}

// The block is two warp groups: group 0 runs the step's sends, group 1 its
// receives, concurrently; each group syncs on its own named barrier and the
// whole block joins at step boundaries.
template <typename T, int OP, bool kReduce>
__global__ void __launch_bounds__(kThreads, 1) plan_kernel(KernelArgs a) {
  __shared__ uint64_t s_done[kMaxStepOps];  // slots done per op of the step
  __shared__ uint64_t s_n[2];
  __shared__ uint64_t s_base[2];
  __shared__ int s_stop;
  constexpr int NT = kThreads / 2;
  const int group = threadIdx.x / NT;  // 0: sends, 1: receives
  const int tid = threadIdx.x % NT;
  const int ch = blockIdx.x;
  const DevComm& cm = *a.comm;
  const FifoGeom g = cm.geom;
  const uint64_t SB = g.slot_bytes;
  if (threadIdx.x == 0) s_stop = 0;
  uint32_t i = a.chan_ops[ch];
  const uint32_t end = a.chan_ops[ch + 1];
  while (i < end) {
    const uint32_t s0 = i;
    while (i < end && !a.ops[i].step_end) ++i;
    const uint32_t s1 = ++i;
    // Local work first (the Step contract): copies, Avg scaling.
    for (uint32_t k = s0; k < s1; ++k) {
      const DevOp& op = a.ops[k];
      if (op.kind == kDevCopy) {
        char* d = resolve(a, op.dst_buf, op.dst_off);
        const char* src = resolve(a, op.src_buf, op.src_off);
        if (d != src) copy_bytes<false>(d, src, op.bytes, threadIdx.x, kThreads);
        __syncthreads();
      } else if (op.kind == kDevReduce) {
        if constexpr (kReduce) {
          char* d = resolve(a, op.dst_buf, op.dst_off);
          reduce_bytes<T, OP>(d, d, resolve(a, op.src_buf, op.src_off), op.bytes, threadIdx.x, kThreads);
        }
        __syncthreads();
      } else if (op.kind == kDevScaleAvg) {
        if constexpr (kReduce) scale_bytes<T>(resolve(a, op.dst_buf, op.dst_off), op.bytes, a.nranks);
        __syncthreads();
      }
    }
    for (uint32_t k = s0 + threadIdx.x; k < s1; k += kThreads) s_done[k - s0] = 0;
    __syncthreads();
    uint64_t last_progress = globaltimer();
    uint32_t idle_polls = 0;
    for (;;) {
      bool all_done = true, moved = false;
      for (uint32_t k = s0; k < s1; ++k) {
        const DevOp& op = a.ops[k];
        if (op.kind > kDevRecvReduce) continue;
        const bool is_send = op.kind == kDevSend;
        if (is_send != (group == 0)) continue;
        const uint64_t total = (op.bytes + SB - 1) / SB;
        const uint64_t done = s_done[k - s0];
        if (done >= total) continue;
        all_done = false;
        // Messages to/from one peer stream in order: wait for earlier ones.
        bool blocked = false;
        for (uint32_t q = s0; q < k && !blocked; ++q) {
          const DevOp& o = a.ops[q];
          if (o.kind > kDevRecvReduce || o.peer != op.peer || (o.kind == kDevSend) != is_send) continue;
          blocked = s_done[q - s0] < (o.bytes + SB - 1) / SB;
        }
        if (blocked) continue;
        char* st = cm.local + g.state_off(op.peer, ch);
        if (tid == 0) {
          uint64_t n;
          if (is_send) {
            uint64_t sent = *reinterpret_cast<uint64_t*>(st);
            uint64_t tail = ld_vol(cm.local + g.tail_off(op.peer, ch));
            n = g.nslots - (sent - tail);
            s_base[group] = sent;
          } else {
            uint64_t recvd = *reinterpret_cast<uint64_t*>(st + 8);
            uint64_t head = ld_vol(cm.local + g.head_off(op.peer, ch));
            n = head - recvd;
            s_base[group] = recvd;
          }
          // Hand over at most a quarter of the FIFO per batch so sender and
          // receiver overlap instead of taking turns on a full FIFO.
          const uint64_t cap = g.nslots >= 8 ? g.nslots / 4 : 1;
          if (n > cap) n = cap;
          s_n[group] = n < total - done ? n : total - done;
        }
        group_bar(group, NT);
        const uint64_t n = s_n[group], base = s_base[group];
        if (n > 0) {
          __threadfence();
          for (uint64_t j = 0; j < n; ++j) {
            const uint64_t off = (done + j) * SB;
            const uint64_t len = op.bytes - off < SB ? op.bytes - off : SB;
            const uint64_t slot = (base + j) % g.nslots;
            if (is_send) {
              char* ring = cm.remote[op.peer] + g.data_off(cm.rank, ch);
              copy_bytes<false>(ring + slot * SB, resolve(a, op.src_buf, op.src_off) + off, len, tid, NT);
            } else {
              const char* ring = cm.local + g.data_off(op.peer, ch);
              char* d = resolve(a, op.dst_buf, op.dst_off) + off;
              if constexpr (kReduce) {
                if (op.kind == kDevRecvReduce) {
                  reduce_bytes<T, OP>(d, resolve(a, op.src_buf, op.src_off) + off, ring + slot * SB,
                                      len, tid, NT);
                  continue;
                }
              }
              copy_bytes<true>(d, ring + slot * SB, len, tid, NT);
            }
          }
          group_bar(group, NT);
          if (tid == 0) {
            // The barrier orders the group's data stores before this thread's
            // system-scope fence, which orders them before the flag store.
            __threadfence_system();
            if (is_send) {
              *reinterpret_cast<uint64_t*>(st) = base + n;
              st_vol(cm.remote[op.peer] + g.head_off(cm.rank, ch), base + n);
            } else {
              *reinterpret_cast<uint64_t*>(st + 8) = base + n;
              st_vol(cm.remote[op.peer] + g.tail_off(cm.rank, ch), base + n);
            }
            s_done[k - s0] = done + n;
            last_progress = globaltimer();
          }
          moved = true;
        }
        group_bar(group, NT);
      }
      if (all_done) break;
      if (!moved) {
        if (tid == 0) {
          uint64_t now = globaltimer();
          int code = 0;
          // The abort flag lives in host memory: a PCIe read, so only now and then.
          if ((++idle_polls & 255) == 0 && *cm.abort) code = mycollRemoteError;
          else if (s_stop) code = -1;  // the other group gave up
          else if (now - last_progress > cm.timeout_ns) code = mycollTimeout;
          if (code > 0) {
            int peer = -1, kind = -1;
            for (uint32_t k = s0; k < s1; ++k) {
              const DevOp& op = a.ops[k];
              if (op.kind <= kDevRecvReduce && (op.kind == kDevSend) == (group == 0) &&
                  s_done[k - s0] < (op.bytes + SB - 1) / SB) {
                peer = op.peer;
                kind = op.kind;
                break;
              }
            }
            if (atomicCAS(&cm.error->code, 0, code) == 0) {
              cm.error->peer = peer;
              cm.error->rank = cm.rank;
              cm.error->kind = kind;
              __threadfence_system();
            }
          }
          if (code) s_stop = 1;
        }
        group_bar(group, NT);
        if (s_stop) break;
      }
    }
    __syncthreads();
    if (s_stop) return;
  }
}

template <typename T, int OP, bool kReduce>
cudaError_t launch_t(const KernelArgs& a, int nch, cudaStream_t s) {
  plan_kernel<T, OP, kReduce><<<nch, kThreads, 0, s>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_op(const KernelArgs& a, mycollRedOp_t op, int nch, cudaStream_t s) {
  switch (op) {
    case mycollSum:
    case mycollAvg: return launch_t<T, mycollSum, true>(a, nch, s);
    case mycollProd: return launch_t<T, mycollProd, true>(a, nch, s);
    case mycollMax: return launch_t<T, mycollMax, true>(a, nch, s);
    case mycollMin: return launch_t<T, mycollMin, true>(a, nch, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace dev

cudaError_t launch_plan(const KernelArgs& a, bool reduce, mycollDataType_t t, mycollRedOp_t op,
                        int nchannels, cudaStream_t stream) {
  using namespace dev;
  if (!reduce) return launch_t<uint8_t, mycollSum, false>(a, nchannels, stream);
  switch (t) {
    case mycollInt8: return launch_op<int8_t>(a, op, nchannels, stream);
    case mycollUint8: return launch_op<uint8_t>(a, op, nchannels, stream);
    case mycollInt32: return launch_op<int32_t>(a, op, nchannels, stream);
    case mycollUint32: return launch_op<uint32_t>(a, op, nchannels, stream);
    case mycollInt64: return launch_op<int64_t>(a, op, nchannels, stream);
    case mycollUint64: return launch_op<uint64_t>(a, op, nchannels, stream);
    case mycollFloat16: return launch_op<__half>(a, op, nchannels, stream);
    case mycollFloat32: return launch_op<float>(a, op, nchannels, stream);
    case mycollFloat64: return launch_op<double>(a, op, nchannels, stream);
    case mycollBfloat16: return launch_op<__nv_bfloat16>(a, op, nchannels, stream);
    default: return cudaErrorInvalidValue;
  }
}

int plan_kernel_threads() { return dev::kThreads; }
int plan_kernel_max_step_ops() { return dev::kMaxStepOps; }

}  // namespace mycoll
