// The GPU engine's host-side plan construction (channel split, DevOp
// flattening, point-to-point split), checked on the CPU: a small interpreter
// runs every rank's DevOp lists with the plan kernel's semantics (per channel,
// step by step, local ops first, messages in order per (sender, receiver,
// channel), sizes must match) and every output element is compared with the
// expected result. CI has no GPU; this is how it tests what the GPU runs.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/device_plan_build.h"

using namespace mycoll;

namespace {

struct RankBufs {
  char* bufs[3] = {nullptr, nullptr, nullptr};  // input, output, scratch
};

// Runs all ranks' plans. Reductions are int32 sums; ScaleAvg divides int32.
// Returns "" on success, else what went wrong.
std::string interpret(const std::vector<DevicePlan>& plans, std::vector<RankBufs>& mem,
                      int nranks) {
  struct Cursor {
    uint32_t step_begin = 0, step_end = 0;
    bool started = false;
    std::vector<bool> done;
  };
  const int n = static_cast<int>(plans.size());
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> fifo;
  std::vector<std::vector<Cursor>> cur(n);
  for (int r = 0; r < n; ++r) {
    cur[r].resize(plans[r].nch);
    for (int c = 0; c < plans[r].nch; ++c)
      cur[r][c].step_begin = cur[r][c].step_end = plans[r].chan[c];
  }
  auto ptr = [&](int r, uint8_t buf, uint64_t off) {
    return buf == 3 ? reinterpret_cast<char*>(off) : mem[r].bufs[buf] + off;
  };
  for (;;) {
    bool progress = false, all_done = true;
    for (int r = 0; r < n; ++r) {
      const DevicePlan& p = plans[r];
      for (int c = 0; c < p.nch; ++c) {
        Cursor& k = cur[r][c];
        const uint32_t end = p.chan[c + 1];
        if (!k.started) {
          if (k.step_end >= end) continue;
          k.step_begin = k.step_end;
          uint32_t e = k.step_begin;
          while (e < end && !p.ops[e].step_end) ++e;
          if (e == end) return "channel ops do not end with step_end";
          k.step_end = e + 1;
          k.started = true;
          k.done.assign(k.step_end - k.step_begin, false);
          for (uint32_t i = k.step_begin; i < k.step_end; ++i) {  // local ops first
            const DevOp& op = p.ops[i];
            if (op.kind == kDevCopy) {
              std::memmove(ptr(r, op.dst_buf, op.dst_off), ptr(r, op.src_buf, op.src_off),
                           op.bytes);
            } else if (op.kind == kDevReduce) {
              int32_t* d = reinterpret_cast<int32_t*>(ptr(r, op.dst_buf, op.dst_off));
              const int32_t* s = reinterpret_cast<const int32_t*>(ptr(r, op.src_buf, op.src_off));
              for (size_t j = 0; j < op.bytes / 4; ++j) d[j] += s[j];
            } else if (op.kind == kDevScaleAvg) {
              int32_t* d = reinterpret_cast<int32_t*>(ptr(r, op.dst_buf, op.dst_off));
              for (size_t j = 0; j < op.bytes / 4; ++j) d[j] /= nranks;
            } else {
              continue;
            }
            k.done[i - k.step_begin] = true;
          }
          progress = true;
        }
        all_done = false;
        bool step_done = true;
        std::vector<int> busy_recv;  // peers with an earlier incomplete receive
        for (uint32_t i = k.step_begin; i < k.step_end; ++i) {
          if (k.done[i - k.step_begin]) continue;
          const DevOp& op = p.ops[i];
          if (op.kind == kDevSend) {
            const char* s = ptr(r, op.src_buf, op.src_off);
            fifo[{r, op.peer, c}].emplace_back(s, s + op.bytes);
            k.done[i - k.step_begin] = true;
            progress = true;
            continue;
          }
          bool blocked = false;
          for (int b : busy_recv) blocked |= b == op.peer;
          auto& q = fifo[{op.peer, r, c}];
          if (blocked || q.empty()) {
            busy_recv.push_back(op.peer);
            step_done = false;
            continue;
          }
          std::vector<char> msg = std::move(q.front());
          q.pop_front();
          if (msg.size() != op.bytes)
            return "rank " + std::to_string(r) + " channel " + std::to_string(c) + " expected " +
                   std::to_string(op.bytes) + " bytes from rank " + std::to_string(op.peer) +
                   ", got " + std::to_string(msg.size());
          char* d = ptr(r, op.dst_buf, op.dst_off);
          if (op.kind == kDevRecv) {
            std::memcpy(d, msg.data(), op.bytes);
          } else {
            const int32_t* a = reinterpret_cast<const int32_t*>(ptr(r, op.src_buf, op.src_off));
            const int32_t* b = reinterpret_cast<const int32_t*>(msg.data());
            int32_t* z = reinterpret_cast<int32_t*>(d);
            for (size_t j = 0; j < op.bytes / 4; ++j) z[j] = a[j] + b[j];
          }
          k.done[i - k.step_begin] = true;
          progress = true;
        }
        if (step_done) {
          for (bool x : k.done) step_done &= x;
          if (step_done) k.started = false;
        }
      }
    }
    if (all_done) break;
    if (!progress) return "no progress: deadlock or unmatched message";
  }
  for (auto& [key, q] : fifo)
    if (!q.empty()) return "unconsumed message left in a FIFO";
  return "";
}

int32_t value(int r, size_t i) { return static_cast<int32_t>(r * 1000 + i % 977) - 300; }

bool blocked(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll ||
         c == Coll::Scatter || c == Coll::Gather;
}

// Expected element i of rank r's output (int32), or false when r has no output.
bool expected(Coll c, int n, int r, int root, size_t count, size_t i, bool avg, int32_t* out) {
  auto sum = [&](size_t idx) {
    int32_t s = 0;
    for (int q = 0; q < n; ++q) s += value(q, idx);
    return avg ? s / n : s;
  };
  switch (c) {
    case Coll::AllReduce: *out = sum(i); return true;
    case Coll::Reduce: *out = sum(i); return r == root;
    case Coll::Broadcast: *out = value(root, i); return true;
    case Coll::AllGather: *out = value(static_cast<int>(i / count), i % count); return true;
    case Coll::Gather: *out = value(static_cast<int>(i / count), i % count); return r == root;
    case Coll::ReduceScatter: *out = sum(r * count + i); return true;
    case Coll::AllToAll:
      *out = value(static_cast<int>(i / count), r * count + i % count);
      return true;
    case Coll::Scatter: *out = value(root, r * count + i); return true;
    default: return false;
  }
}

std::string run_case(Coll coll, Algo algo, int n, size_t count, int root, bool in_place, int nch,
                     bool avg) {
  std::vector<DevicePlan> plans(n);
  std::vector<std::vector<int32_t>> arena(n), scratch(n);
  std::vector<RankBufs> mem(n);
  const size_t blocks = blocked(coll) ? n : 1;
  for (int r = 0; r < n; ++r) {
    DeviceCollArgs a;
    a.coll = coll;
    a.algo = algo;
    a.es = 4;
    a.avg = avg;
    a.count = count;
    a.root = root;
    a.in_place = in_place;
    a.nranks = n;
    a.rank = r;
    a.nch = nch;
    // Two hosts (first half, second half): hier and rhd all-reduce use the
    // layout, the other builders ignore it.
    std::vector<int> hosts(n);
    for (int q = 0; q < n; ++q) hosts[q] = q < (n + 1) / 2 ? 0 : 1;
    plans[r] = build_device_collective(a, [&](const CollArgs& c) {
      CollArgs with_hosts = c;
      with_hosts.host_of = hosts.data();
      return build_plan(algo, with_hosts);
    });
    scratch[r].assign(plans[r].scratch_bytes / 4 + 1, 0x5a5a5a5a);
    // Input (what this rank sends) and output sizes in elements.
    size_t in_n = count, out_n = count;
    if (coll == Coll::AllGather || coll == Coll::Gather) out_n = count * n;
    if (coll == Coll::ReduceScatter || coll == Coll::Scatter) in_n = count * n;
    if (coll == Coll::AllToAll) in_n = out_n = count * n;
    (void)blocks;
    arena[r].assign(in_n + out_n + 8, 0x7b7b7b7b);
    int32_t* base = arena[r].data();
    int32_t* in = base;
    int32_t* out = base + in_n + 4;
    if (in_place) {
      bool alias = !((coll == Coll::Scatter || coll == Coll::Gather) && r != root);
      if (alias) {
        size_t soff = 0, roff = 0;
        if (coll == Coll::AllGather) soff = r * count;
        if (coll == Coll::Gather) soff = root * count;
        if (coll == Coll::ReduceScatter) roff = r * count;
        if (coll == Coll::Scatter) roff = root * count;
        in = base + soff;
        out = base + roff;
      }
    }
    for (size_t i = 0; i < in_n; ++i) in[i] = value(r, i);
    mem[r].bufs[0] = reinterpret_cast<char*>(in);
    mem[r].bufs[1] = reinterpret_cast<char*>(out);
    mem[r].bufs[2] = reinterpret_cast<char*>(scratch[r].data());
  }
  // The call check's deferral (kernels/prims/call_check.cuh): a rank that
  // names a peer receives nothing and sends to it, and that peer receives
  // from it, so it does not defer and compares every line itself.
  auto receives_from = [&](int q, int from) {
    for (const DevOp& op : plans[q].ops)
      if ((op.kind == kDevRecv || op.kind == kDevRecvReduce) && (from < 0 || op.peer == from))
        return true;
    return false;
  };
  for (int r = 0; r < n; ++r) {
    bool sends = false;
    for (const DevOp& op : plans[r].ops) sends = sends || op.kind == kDevSend;
    const int p = plans[r].sends_only_to;
    const std::string who = "rank " + std::to_string(r) + " sends_only_to " + std::to_string(p);
    if (receives_from(r, -1) || !sends) {
      if (p != -1) return who + ": it receives or sends nothing";
      continue;
    }
    if (p < 0 || p >= n || p == r) return who + ": it only sends";
    if (!receives_from(p, r) || plans[p].sends_only_to != -1)
      return who + ": that peer does not receive from it";
  }
  std::string err = interpret(plans, mem, n);
  if (!err.empty()) return err;
  for (int r = 0; r < n; ++r) {
    const int32_t* out = reinterpret_cast<const int32_t*>(mem[r].bufs[1]);
    size_t out_n = (coll == Coll::AllGather || coll == Coll::Gather || coll == Coll::AllToAll)
                       ? count * n
                       : count;
    for (size_t i = 0; i < out_n; ++i) {
      int32_t want;
      if (!expected(coll, n, r, root, count, i, avg, &want)) break;
      if (out[i] != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": got " +
               std::to_string(out[i]) + " want " + std::to_string(want);
    }
  }
  return "";
}

TEST(DevicePlans, EveryCollectiveAlgorithmChannelSplitMatchesReference) {
  const Coll colls[] = {Coll::AllReduce,     Coll::Broadcast, Coll::Reduce,  Coll::AllGather,
                        Coll::ReduceScatter, Coll::AllToAll,  Coll::Scatter, Coll::Gather};
  const Algo algos[] = {Algo::Ring, Algo::Tree, Algo::Rhd, Algo::Direct, Algo::Hier, Algo::TwoShot};
  int cases = 0;
  for (Coll coll : colls)
    for (Algo algo : algos) {
      if (!algo_supports(algo, coll)) continue;
      for (int n : {1, 2, 3, 5, 8})
        for (size_t count : {size_t(1), size_t(7), size_t(1001), size_t(40003)})
          for (int nch : {1, 3, 8})
            for (bool in_place : {false, true})
              for (int root : {0, n - 1}) {
                bool rooted = coll == Coll::Broadcast || coll == Coll::Reduce ||
                              coll == Coll::Scatter || coll == Coll::Gather;
                if (!rooted && root != 0) continue;
                for (bool avg : {false, true}) {
                  if (avg && coll != Coll::AllReduce && coll != Coll::ReduceScatter) continue;
                  std::string err = run_case(coll, algo, n, count, root, in_place, nch, avg);
                  ASSERT_EQ(err, "")
                      << coll_name(coll) << " " << algo_name(algo) << " n=" << n
                      << " count=" << count << " nch=" << nch << (in_place ? " in-place" : "")
                      << " root=" << root << (avg ? " avg" : "");
                  ++cases;
                }
              }
    }
  EXPECT_GT(cases, 1000);
}

// Which ranks only send, and so may defer their call check: the broadcast
// root, a gather's other ranks; nobody in an all-reduce or at the root of
// a reduce or gather. (Every case of the test above checks the rule's
// argument; this one that the rule fires where it should.)
TEST(DevicePlans, RanksThatOnlySendNameAPeerTheySendTo) {
  auto only_to = [](Coll coll, Algo algo, int n, int r, int root) {
    DeviceCollArgs a;
    a.coll = coll;
    a.algo = algo;
    a.count = 40003;
    a.root = root;
    a.nranks = n;
    a.rank = r;
    a.nch = 3;
    return build_device_collective(a, [&](const CollArgs& c) { return build_plan(algo, c); })
        .sends_only_to;
  };
  for (Algo algo : {Algo::Ring, Algo::Tree})
    for (int n : {2, 3, 4, 8})
      for (int r = 0; r < n; ++r) {
        const int root = n - 1;
        const int b = only_to(Coll::Broadcast, algo, n, r, root);
        if (r == root)
          EXPECT_TRUE(b >= 0 && b < n && b != r) << algo_name(algo) << " n=" << n << " got " << b;
        else
          EXPECT_EQ(b, -1) << algo_name(algo) << " broadcast n=" << n << " rank " << r;
        EXPECT_EQ(only_to(Coll::AllReduce, algo, n, r, 0), -1);
        if (r == root) EXPECT_EQ(only_to(Coll::Reduce, algo, n, r, root), -1);
      }
  for (int n : {2, 5})
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(only_to(Coll::Gather, Algo::Direct, n, r, 1), r == 1 ? -1 : 1) << "rank " << r;
      if (r == 1) EXPECT_GE(only_to(Coll::Scatter, Algo::Direct, n, r, 1), 0);
    }
}

// Point-to-point batches: every rank sends a differently sized message to
// every other rank (and to itself); split over channels by message size.
TEST(DevicePlans, PointToPointSplitMatchesOnBothSides) {
  for (int n : {2, 3, 5}) {
    auto size_of = [](int from, int to) { return size_t(3 + 70001 * from + 977 * to); };
    std::vector<std::vector<std::vector<char>>> out(n), in(n);
    std::vector<DevicePlan> plans(n);
    for (int r = 0; r < n; ++r) {
      out[r].resize(n);
      in[r].resize(n);
      Plan p;
      Step st;
      std::vector<Op> copies;
      for (int q = 0; q < n; ++q) {
        out[r][q].resize(size_of(r, q));
        for (size_t i = 0; i < out[r][q].size(); ++i)
          out[r][q][i] = static_cast<char>(r * 31 + q * 7 + i);
        in[r][q].assign(size_of(q, r), 0);
        Op s, v;
        s.kind = q == r ? OpKind::Copy : OpKind::Send;
        s.peer = q == r ? -1 : q;
        s.src = Slice{Buf::Input, reinterpret_cast<uintptr_t>(out[r][q].data()), out[r][q].size()};
        if (q == r) {
          s.dst = Slice{Buf::Output, reinterpret_cast<uintptr_t>(in[r][r].data()), in[r][r].size()};
          copies.push_back(s);
          continue;
        }
        v.kind = OpKind::Recv;
        v.peer = q;
        v.dst = Slice{Buf::Output, reinterpret_cast<uintptr_t>(in[r][q].data()), in[r][q].size()};
        st.ops.push_back(s);
        st.ops.push_back(v);
      }
      st.ops.insert(st.ops.begin(), copies.begin(), copies.end());
      p.steps.push_back(st);
      plans[r] = build_device_p2p(p, 65536, 8);
    }
    std::vector<RankBufs> mem(n);
    ASSERT_EQ(interpret(plans, mem, n), "") << n << " ranks";
    for (int r = 0; r < n; ++r)
      for (int q = 0; q < n; ++q) ASSERT_EQ(in[r][q], out[q][r]) << "rank " << r << " from " << q;
  }
}

// The direct kernel's channels per peer: the measured layouts on H200s
// (132 SMs, 8 copy blocks, 4 spare), one channel per channel_bytes for small
// blocks, and for every rank count and GPU size the largest grid of any
// rank ((n - 1) peers x channels + copy blocks) fits the SMs left to it, or
// the kernel is refused (0) rather than launched with blocks that could not
// all be resident at once.
TEST(DevicePlans, DirectKernelGridStaysResident) {
  const size_t big = size_t(256) << 20;
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 2, 132, 8, 4), 64);
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 4, 132, 8, 4), 40);
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 8, 132, 8, 4), 17);
  EXPECT_EQ(direct_kernel_channels(3 * 8192 + 5, 8192, 64, 2, 132, 8, 4), 3);
  EXPECT_EQ(direct_kernel_channels(1, 8192, 64, 8, 132, 8, 4), 1);
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 1, 132, 8, 4), 0);
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 122, 132, 8, 4), 0);
  EXPECT_EQ(direct_kernel_channels(big, 8192, 64, 121, 132, 8, 4), 1);
  for (int sms : {8, 16, 78, 108, 132, 144})
    for (int n = 2; n <= 160; ++n)
      for (size_t bytes : {size_t(1), size_t(65536), size_t(3) << 20, big}) {
        const int ch = direct_kernel_channels(bytes, 8192, 64, n, sms, 8, 4);
        SCOPED_TRACE(std::to_string(sms) + " SMs, " + std::to_string(n) + " ranks, " +
                     std::to_string(bytes) + " bytes");
        EXPECT_GE(ch, 0);
        EXPECT_LE(ch, 64);
        if (ch > 0) {
          EXPECT_LE((n - 1) * ch + 8, sms - 4);
        } else {
          EXPECT_GT(n - 1 + 8, sms - 4);  // refused only when one channel per peer does not fit
        }
      }
}

}  // namespace
