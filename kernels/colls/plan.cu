// The plan kernel: each thread block is one channel and executes that
// channel's ops step by step. Small messages travel in the LL ring (below),
// larger ones through the bandwidth FIFOs of kernels/prims/fifo.cuh, polled
// op by op without waiting on any one; every wait gives up as in
// kernels/prims/wait.cuh.
#include <cuda_runtime.h>

#include "kernels/device_plan.h"
#include "kernels/dispatch.cuh"
#include "kernels/launch.h"
#include "kernels/prims/call_check.cuh"
#include "kernels/prims/fifo.cuh"
#include "kernels/prims/ll.cuh"
#include "kernels/prims/ll_ring.cuh"
#include "kernels/prims/p2p_size.cuh"
#include "kernels/prims/vec.cuh"
#include "kernels/prims/wait.cuh"
#include "kernels/reduce_ops.cuh"

namespace mycoll {
namespace dev {

constexpr int kThreads = 512;
constexpr int kMaxStepOps = 256;  // <= threads per group (the ll pass gives each op a thread)

__device__ __forceinline__ char* resolve(const KernelArgs& a, uint8_t buf, uint64_t off) {
  return buf == 3 ? reinterpret_cast<char*>(off) : a.bufs[buf] + off;
}

// Named barrier of one warp group (ids 1 and 2; 0 is __syncthreads). The
// non-.aligned form: threads of a warp need not arrive converged.
__device__ __forceinline__ void group_bar(int group, int nt) {
  asm volatile("barrier.sync %0, %1;" ::"r"(group + 1), "r"(nt) : "memory");
}
// group_bar that also returns whether pred held in any thread of the group,
// so every thread takes the same branch on a flag another thread may be
// setting meanwhile (sh.stop).
__device__ __forceinline__ bool group_bar_any(int group, int nt, bool pred) {
  uint32_t r;
  asm volatile(
      "{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %1, 0;\n\t"
      "barrier.red.or.pred q, %2, %3, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
      : "=r"(r)
      : "r"(uint32_t(pred)), "r"(group + 1), "r"(nt)
      : "memory");
  return r != 0;
}

// Most reductions fused into one pass over a slice (vec_fold).
constexpr int kMaxFused = 64;

// Shared state of one block.
struct BlockState {
  DevOp ops[kMaxStepOps];              // the current step's ops
  uint64_t done[kMaxStepOps];          // slots done per op of the step
  uint64_t total[kMaxStepOps];         // slots of each transfer op (ll or bandwidth slots)
  uint8_t isll[kMaxStepOps];           // the op travels in the ll ring
  uint64_t llbase[kMaxStepOps];        // ll pass: first slot sequence number of the op
  uint32_t llbmod[kMaxStepOps];        // ll pass: its slot in the ring (Ring::start)
  OtherRingWatch seen[kMaxStepOps];    // point-to-point receive: sent_on_other_ring's state
  uint32_t llpre[2][kMaxStepOps + 1];  // ll pass, per group: prefix sum of lines moved
  const char* fused[kMaxFused];        // sources of a fused local reduction
  uint64_t n[2];
  uint64_t base[2];
  int stop;  // raise_stop / stop_raised after its zeroing
};

// Whether an earlier op of the step, in the same direction with the same
// peer, still has slots to move (messages to/from one peer stream in order).
__device__ __forceinline__ bool earlier_pending(const BlockState& sh, int k) {
  const DevOp& op = sh.ops[k];
  const bool is_send = op.kind == kDevSend;
  for (int q = 0; q < k; ++q) {
    const DevOp& o = sh.ops[q];
    if (o.kind <= kDevRecvReduce && o.peer == op.peer && (o.kind == kDevSend) == is_send &&
        sh.done[q] < sh.total[q])
      return true;
  }
  return false;
}

// The block is two warp groups: group 0 runs the step's sends, group 1 its
// receives, concurrently; each group syncs on its own named barrier and the
// whole block joins at step boundaries. Messages up to cm.ll_max_bytes travel
// in the ll ring (latency: all of a step's ready ll messages move in one
// pass of the group), larger ones in the data ring (bandwidth).
template <typename T, int OP, bool kReduce>
__global__ void __launch_bounds__(kThreads, 1) plan_kernel(KernelArgs a) {
  __shared__ BlockState sh;
  constexpr int NT = kThreads / 2;
  const int group = threadIdx.x / NT;  // 0: sends, 1: receives
  const int tid = threadIdx.x % NT;
  const DevComm& cm = *a.comm;
  // The call check runs in a block of its own (the grid's first), so no
  // channel waits for the peers' start.
  int b0 = 0;
  if (call_check_block(cm, a.sig, &b0, a.defer_to)) return;
  const int ch = int(blockIdx.x) - b0;
  const FifoGeom g = cm.geom;
  const ll::Ring llr(uint32_t(g.ll_slots), uint32_t(g.ll_slot_bytes));
  const uint64_t ll_max = cm.ll_max_bytes;  // at most the ring's slots' data: need <= slots
  if (threadIdx.x == 0) sh.stop = 0;
  const uint32_t end = a.chan_ops[ch + 1];
  uint32_t i = a.chan_ops[ch];
  while (i < end) {
    // The step's ops into shared memory, loaded by all threads at once (the
    // host guarantees a step has at most kMaxStepOps ops).
    const uint32_t s0 = i;
    const uint32_t avail = end - s0 < uint32_t(kMaxStepOps) ? end - s0 : uint32_t(kMaxStepOps);
    for (uint32_t k = threadIdx.x; k < avail; k += kThreads) sh.ops[k] = a.ops[s0 + k];
    __syncthreads();
    // Every thread finds the step's end itself (no shared count written by
    // one thread and read by the others: racecheck reported that pair).
    uint32_t last = 0;
    while (last + 1 < avail && !sh.ops[last].step_end) ++last;
    const int nops = int(last + 1);
    i = s0 + nops;
    for (int k = threadIdx.x; k < nops; k += kThreads) {
      const DevOp& op = sh.ops[k];
      sh.done[k] = 0;
      sh.isll[k] = 0;
      sh.total[k] = 0;
      sh.seen[k] = OtherRingWatch{0, 0};
      if (op.kind <= kDevRecvReduce) {
        const DevPeer& P = cm.peers[op.peer];
        sh.isll[k] = P.ll && op.bytes <= ll_max;
        sh.total[k] = sh.isll[k] ? llr.need(uint32_t(op.bytes))
                                 : (op.bytes + P.slot_bytes - 1) / P.slot_bytes;
      }
    }
    __syncthreads();
    // Local work first (the Step contract): copies, reductions, Avg scaling.
    // A copy or reduction followed by reductions into the same slice is one
    // pass over the data.
    for (int k = 0; k < nops; ++k) {
      const DevOp& op = sh.ops[k];
      if (op.kind == kDevCopy || op.kind == kDevReduce) {
        int j = k + 1;
        if constexpr (kReduce) {
          while (j < nops && j - k < kMaxFused && sh.ops[j].kind == kDevReduce &&
                 sh.ops[j].dst_buf == op.dst_buf && sh.ops[j].dst_off == op.dst_off &&
                 sh.ops[j].bytes == op.bytes)
            ++j;
        }
        char* d = resolve(a, op.dst_buf, op.dst_off);
        if (j == k + 1 && op.kind == kDevCopy) {
          const char* src = resolve(a, op.src_buf, op.src_off);
          if (d != src)
            vec_move<uint8_t, mycollSum, kL | kD>(nullptr, src, nullptr, d, op.bytes, 0,
                                                  threadIdx.x, kThreads);
        } else if constexpr (kReduce) {
          // Copy + reductions: first = the copy's source; reductions only:
          // first = dst and every op's source reduces into it.
          const int lead = op.kind == kDevCopy ? 1 : 0;
          const char* f = op.kind == kDevCopy ? resolve(a, op.src_buf, op.src_off) : d;
          for (int q = k + lead + threadIdx.x; q < j; q += kThreads)
            sh.fused[q - k - lead] = resolve(a, sh.ops[q].src_buf, sh.ops[q].src_off);
          __syncthreads();
          vec_fold<T, OP>(d, f, sh.fused, j - k - lead, op.bytes, threadIdx.x, kThreads);
        }
        __syncthreads();
        k = j - 1;
      } else if (op.kind == kDevScaleAvg) {
        if constexpr (kReduce)
          vec_scale_avg<T>(resolve(a, op.dst_buf, op.dst_off), op.bytes, a.nranks, threadIdx.x,
                           kThreads);
        __syncthreads();
      }
    }
    bool any_ll = false;
    for (int k = 0; k < nops; ++k) {
      const DevOp& op = sh.ops[k];
      if (op.kind <= kDevRecvReduce && (op.kind == kDevSend) == (group == 0) && sh.isll[k])
        any_ll = true;
    }
    __syncthreads();
    uint64_t last_progress = globaltimer();
    uint32_t idle_polls = 0;
    uint32_t* llpre = sh.llpre[group];
    for (;;) {
      bool all_done = true, moved = false;
      // ---- ll pass: every ready ll op of this group, all its slots at once ----
      if (any_ll) {
        if (tid < nops) {
          const int k = tid;
          const DevOp& op = sh.ops[k];
          uint32_t lines = 0;
          const bool is_send = op.kind == kDevSend;
          if (op.kind <= kDevRecvReduce && is_send == (group == 0) && sh.isll[k] &&
              sh.done[k] == 0) {
            if (!earlier_pending(sh, k)) {
              const uint64_t* st =
                  reinterpret_cast<const uint64_t*>(cm.local + g.state_off(op.peer, ch));
              const GiveUp gu = GiveUp::of(cm);
              const uint64_t mine = a.p2p ? p2p_msg_bytes(op) : 0;
              const uint64_t base = st[is_send ? 2 : 3];
              const uint32_t bmod = llr.start(base);
              Gate gate;
              if (is_send) {
                gate = ll::admit_send(
                    llr, gu, cm.local + g.ll_tail_off(op.peer, ch),
                    a.p2p ? cm.remote[op.peer] + g.ll_size_off(cm.rank, ch) : nullptr, base,
                    uint32_t(sh.total[k]), op.peer, mine);
              } else {
                // Taken once the first line carries its flag: the sender then
                // writes all the op's slots without waiting for anything.
                uint64_t v;
                const ll::Ring::Line first = llr.line(base, bmod, 0);
                gate = ll::load_line(cm.local + g.ll_off(op.peer, ch) + first.off, first.flag, &v)
                           ? kGo
                           : kWait;
                // Point-to-point: and once the sender's size line is there
                // and agrees; none yet: the sender's message may have taken
                // the bandwidth FIFO (its size above the ll limit).
                if (a.p2p) {
                  auto in_fifo = [&] {
                    return sent_on_other_ring(gu, op.peer, mine, &sh.seen[k], [&] {
                      const DevPeer& pr = cm.peers[op.peer];
                      return OtherRing{pr.recv_size + ch * pr.size_stride, uint64_t(pr.nslots),
                                       st[1], make_chan(cm, -1, op.peer, ch).recv_tail};
                    });
                  };
                  const Gate sized = check_size(
                      gu, op.peer, mine, cm.local + g.ll_size_off(op.peer, ch), g.ll_slots, base,
                      cm.remote[op.peer] + g.ll_tail_off(cm.rank, ch), in_fifo);
                  if (sized != kGo) gate = sized;
                }
              }
              if (gate == kRefused) raise_stop(&sh.stop);
              const bool ok = gate == kGo;
              sh.llbmod[k] = bmod;
              sh.llbase[k] = base;
              if (ok) lines = uint32_t((op.bytes + 7) / 8);
            }
          }
          llpre[k + 1] = lines;
        }
        group_bar(group, NT);
        if (tid == 0) {
          llpre[0] = 0;
          for (int k = 0; k < nops; ++k) llpre[k + 1] += llpre[k];
        }
        group_bar(group, NT);
        const uint32_t total_lines = llpre[nops];
        if (total_lines > 0) {
          constexpr int kL = 8;
          const ll::Spin spin{GiveUp::of(cm), globaltimer(), &sh.stop};
          int k = 0;  // op of the current line (lines ascend per thread)
          for (uint32_t l0 = tid; l0 < total_lines && !stop_raised(&sh.stop); l0 += NT * kL) {
            uint64_t v[kL];
            bool ok[kL];
            const char* ring[kL];
            char* out[kL];
            int valid[kL], kind[kL], peer[kL];
            uint32_t flag[kL];
            uint64_t mine[kL];  // sends: the data; receives: the local operand
#pragma unroll
            for (int u = 0; u < kL; ++u) {
              const uint32_t L = l0 + u * NT;
              ok[u] = true;
              valid[u] = 0;
              if (L >= total_lines) continue;
              while (llpre[k + 1] <= L) ++k;
              const DevOp& op = sh.ops[k];
              const uint32_t l = L - llpre[k];  // line within the op
              const ll::Ring::Line ln = llr.line(sh.llbase[k], sh.llbmod[k], l);
              valid[u] = ll::bytes_in_line(op.bytes, l);
              flag[u] = ln.flag;
              kind[u] = op.kind;
              peer[u] = op.peer;
              const uint64_t lofs = ln.off;
              // All loads of this round are issued before any store or poll.
              if (group == 0) {
                out[u] = cm.remote[op.peer] + g.ll_off(cm.rank, ch) + lofs;
                mine[u] = ll::load8(resolve(a, op.src_buf, op.src_off) + l * 8, valid[u]);
              } else {
                ring[u] = cm.local + g.ll_off(op.peer, ch) + lofs;
                out[u] = resolve(a, op.dst_buf, op.dst_off) + l * 8;
                mine[u] = 0;
                if (kReduce && op.kind == kDevRecvReduce)
                  mine[u] = ll::load8(resolve(a, op.src_buf, op.src_off) + l * 8, valid[u]);
              }
            }
            if (group == 0) {
#pragma unroll
              for (int u = 0; u < kL; ++u)
                if (valid[u]) ll::store_line(out[u], mine[u], flag[u]);
              continue;
            }
#pragma unroll
            for (int u = 0; u < kL; ++u)
              if (valid[u]) ok[u] = ll::load_line(ring[u], flag[u], &v[u]);
            bool quit = false;
#pragma unroll
            for (int u = 0; u < kL; ++u)
              if (!ok[u] && !quit) quit = !spin.wait(ring[u], flag[u], &v[u], peer[u], kind[u]);
            if (quit) break;
#pragma unroll
            for (int u = 0; u < kL; ++u) {
              if (valid[u] == 0) continue;
              uint64_t x = v[u];
              if constexpr (kReduce) {
                if (kind[u] == kDevRecvReduce) x = ll::reduce8<T, OP>(mine[u], x);
              }
              ll::store8(out[u], x, valid[u]);
            }
          }
          group_bar(group, NT);
          if (tid < nops && llpre[tid + 1] > llpre[tid] && !stop_raised(&sh.stop)) {
            const DevOp& op = sh.ops[tid];
            uint64_t* st = reinterpret_cast<uint64_t*>(cm.local + g.state_off(op.peer, ch));
            const uint64_t need = sh.total[tid];
            if (group == 0)
              st[2] = sh.llbase[tid] + need;
            else  // the lines are consumed (their loads returned)
              ll::release(&st[3], cm.remote[op.peer] + g.ll_tail_off(cm.rank, ch),
                          sh.llbase[tid] + need);
            sh.done[tid] = need;
          }
          if (tid == 0) last_progress = globaltimer();
          moved = true;
        }
        if (group_bar_any(group, NT, stop_raised(&sh.stop))) break;
      }
      // ---- bandwidth protocol: one op at a time, a batch of slots each ----
      for (int k = 0; k < nops; ++k) {
        const DevOp& op = sh.ops[k];
        if (op.kind > kDevRecvReduce) continue;
        const bool is_send = op.kind == kDevSend;
        if (is_send != (group == 0)) continue;
        const uint64_t total = sh.total[k];
        const uint64_t done = sh.done[k];
        if (done >= total) continue;
        all_done = false;
        if (sh.isll[k]) continue;  // moved by the ll pass
        if (earlier_pending(sh, k)) continue;
        const Chan c = make_chan(cm, is_send ? op.peer : -1, is_send ? -1 : op.peer, ch);
        uint64_t* st = reinterpret_cast<uint64_t*>(cm.local + g.state_off(op.peer, ch));
        if (tid == 0) {
          // Point-to-point: the size check's lines at the message's first
          // slot (a proxied peer's travel as the proxy's size frames).
          const bool sized = a.p2p && done == 0;
          const DevPeer& pr = cm.peers[op.peer];
          const uint64_t mine = a.p2p ? p2p_msg_bytes(op) : 0;
          const uint64_t base = st[is_send ? 0 : 1];  // slots sent / received so far
          uint64_t n;
          if (is_send) {
            bool refused;
            n = fifo_room(c, base, mine, &refused);
            if (refused)
              raise_stop(&sh.stop);
            else if (n > 0 && sized)
              post_size(pr.send_size + ch * pr.size_stride, c.ns, base, mine);
          } else {
            n = fifo_ready(c, base);
            if (sized) {
              // The sender's message may have taken the ll ring (its size
              // within the ll limit).
              auto in_ll = [&] {
                if (!pr.ll) return false;
                return sent_on_other_ring(GiveUp::of(cm), op.peer, mine, &sh.seen[k], [&] {
                  return OtherRing{cm.local + g.ll_size_off(op.peer, ch), uint64_t(g.ll_slots),
                                   st[3], cm.remote[op.peer] + g.ll_tail_off(cm.rank, ch)};
                });
              };
              const Gate gate =
                  check_size(GiveUp::of(cm), op.peer, mine, pr.recv_size + ch * pr.size_stride,
                             c.ns, base, c.recv_tail, in_ll);
              if (gate != kGo) n = 0;  // kWait: not yet, the next pass
              if (gate == kRefused) raise_stop(&sh.stop);
            }
          }
          if (n > c.batch_cap()) n = c.batch_cap();
          sh.base[group] = base;
          sh.n[group] = n < total - done ? n : total - done;
        }
        group_bar(group, NT);
        const uint64_t n = sh.n[group], base = sh.base[group];
        if (n > 0) {
          // Slots back to back in the FIFO move as one span.
          for (uint64_t j = 0; j < n;) {
            const uint64_t run = c.span(base + j, n - j);
            const uint64_t off = (done + j) * c.sb;
            const uint64_t len = op.bytes - off < run * c.sb ? op.bytes - off : run * c.sb;
            if (is_send) {
              vec_move<uint8_t, mycollSum, kL | kS>(
                  nullptr, resolve(a, op.src_buf, op.src_off) + off, c.send_slot(base + j), nullptr,
                  len, 0, tid, NT);
              if (c.send_len)
                for (uint64_t q = tid; q < run; q += NT) {
                  const uint64_t left = op.bytes - off - q * c.sb;
                  c.send_len[(base + j + q) % c.ns] = uint32_t(left < c.sb ? left : c.sb);
                }
            } else {
              char* d = resolve(a, op.dst_buf, op.dst_off) + off;
              if (kReduce && op.kind == kDevRecvReduce)
                vec_move<T, OP, kR | kL | kD>(c.recv_slot(base + j),
                                              resolve(a, op.src_buf, op.src_off) + off, nullptr, d,
                                              len, 0, tid, NT);
              else
                vec_move<uint8_t, mycollSum, kR | kD>(c.recv_slot(base + j), nullptr, nullptr, d,
                                                      len, 0, tid, NT);
            }
            j += run;
          }
          group_bar(group, NT);
          if (tid == 0) {
            fifo_publish(c, is_send, base + n, !is_send, base + n);
            st[is_send ? 0 : 1] = base + n;
            sh.done[k] = done + n;
            last_progress = globaltimer();
          }
          moved = true;
        }
        group_bar(group, NT);
      }
      if (group_bar_any(group, NT, stop_raised(&sh.stop))) break;
      if (all_done) break;
      if (!moved) {
        if (tid == 0) {
          // The abort flag lives in host memory: a PCIe read, so only now and then.
          const int code = stop_raised(&sh.stop)
                               ? -1  // the other group gave up
                               : GiveUp::of(cm).verdict(last_progress, (++idle_polls & 255) == 0);
          if (code > 0) {
            int peer = -1, kind = -1;
            for (int k = 0; k < nops; ++k) {
              const DevOp& op = sh.ops[k];
              if (op.kind <= kDevRecvReduce && (op.kind == kDevSend) == (group == 0) &&
                  sh.done[k] < sh.total[k]) {
                peer = op.peer;
                kind = op.kind;
                break;
              }
            }
            GiveUp::of(cm).record(code, peer, kind);
          }
          if (code) raise_stop(&sh.stop);
        }
        if (group_bar_any(group, NT, stop_raised(&sh.stop))) break;
      }
    }
    if (__syncthreads_or(stop_raised(&sh.stop))) return;
  }
}

MYCOLL_DEFINE_LAUNCH(LaunchReduce, KernelArgs, kThreads, plan_kernel<T, OP, true>)
MYCOLL_DEFINE_LAUNCH(LaunchCopy, KernelArgs, kThreads, plan_kernel<T, OP, false>)

}  // namespace dev

cudaError_t launch_plan(const KernelArgs& a, bool reduce, mycollDataType_t t, mycollRedOp_t op,
                        int nchannels, cudaStream_t stream) {
  using namespace dev;
  const int grid = nchannels + (a.sig != 0 ? 1 : 0);  // + the call check's block
  if (!reduce) return LaunchCopy<uint8_t, mycollSum>::run(a, grid, stream);
  return dispatch_dtype_op<LaunchReduce>(t, op, a, grid, stream);
}

cudaError_t preload_plan_kernels() {
  using namespace dev;
  return first_error({LaunchCopy<uint8_t, mycollSum>::preload(), preload_dtype_op<LaunchReduce>()});
}

int plan_kernel_max_step_ops() { return dev::kMaxStepOps; }

}  // namespace mycoll
