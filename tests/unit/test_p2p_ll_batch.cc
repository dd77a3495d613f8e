// The LL point-to-point kernel's host side (build_p2p_ll): its slices must be
// exactly the ones the plan kernel's batches carry (build_device_p2p), per
// (peer, channel, direction) and in the same order, since a rank running
// one kernel exchanges slices with a peer running the other; its keys must
// point at the inbox words the plan kernel's ll pass uses; and it must
// refuse every batch it cannot serve (copies to self, peers without an ll
// ring, slices over the ll limit, more keys or slices than the kernel holds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "engine/device_plan_build.h"

using namespace mycoll;

namespace {

// (peer, channel, kind) -> [(address, bytes, whole message bytes)] in order.
using Streams =
    std::map<std::tuple<int, int, int>, std::vector<std::tuple<uint64_t, uint64_t, uint64_t>>>;

FifoGeom test_geom(int nranks, int max_channels) {
  FifoGeom g{};
  g.nranks = nranks;
  g.max_channels = max_channels;
  g.nslots = 4;
  g.slot_bytes = 4096;
  g.ll_slots = 8;
  g.ll_slot_bytes = 16384;
  return g;
}

// Fake inbox addresses: rank r's inbox at (r + 1) << 40, never dereferenced.
P2pLlContext test_context(int nranks, int rank, int max_channels, size_t channel_bytes,
                          uint64_t ll_max) {
  P2pLlContext cx;
  cx.geom = test_geom(nranks, max_channels);
  cx.rank = rank;
  for (int r = 0; r < nranks; ++r)
    cx.remote.push_back(reinterpret_cast<char*>(uintptr_t(r + 1) << 40));
  cx.local = cx.remote[rank];
  cx.ll.assign(nranks, true);
  cx.ll[rank] = false;
  cx.ll_max = ll_max;
  cx.channel_bytes = channel_bytes;
  cx.max_channels = max_channels;
  return cx;
}

Streams plan_streams(const DevicePlan& p) {
  Streams s;
  for (int c = 0; c < p.nch; ++c)
    for (uint32_t i = p.chan[c]; i < p.chan[c + 1]; ++i) {
      const DevOp& op = p.ops[i];
      if (op.kind != kDevSend && op.kind != kDevRecv) continue;
      s[{op.peer, c, op.kind}].push_back(
          {op.kind == kDevSend ? op.src_off : op.dst_off, op.bytes, p2p_msg_bytes(op)});
    }
  return s;
}

// The batch's slices per key, the key's channel recovered from its ring
// pointer; every pointer of the key checked against the plan kernel's.
Streams batch_streams(const P2pLlBatch& b, const P2pLlContext& cx, std::string* err) {
  Streams s;
  const FifoGeom& g = cx.geom;
  size_t next = 0;
  for (const P2pLlKey& k : b.keys) {
    int ch = -1;
    for (int c = 0; c < g.max_channels; ++c) {
      const char* ring = k.kind == kDevSend ? cx.remote[k.peer] + g.ll_off(cx.rank, c)
                                            : cx.local + g.ll_off(k.peer, c);
      if (ring == k.ring) ch = c;
    }
    if (ch < 0) {
      *err = "key of peer " + std::to_string(k.peer) + ": ring pointer matches no channel";
      return s;
    }
    const char* credit = k.kind == kDevSend ? cx.local + g.ll_tail_off(k.peer, ch)
                                            : cx.remote[k.peer] + g.ll_tail_off(cx.rank, ch);
    const uint64_t* count = reinterpret_cast<const uint64_t*>(cx.local + g.state_off(k.peer, ch)) +
                            (k.kind == kDevSend ? 2 : 3);
    const char* sizes = k.kind == kDevSend ? cx.remote[k.peer] + g.ll_size_off(cx.rank, ch)
                                           : cx.local + g.ll_size_off(k.peer, ch);
    if (credit != k.credit || count != k.count || sizes != k.sizes) {
      *err = "key of peer " + std::to_string(k.peer) + " channel " + std::to_string(ch) +
             ": credit, counter or size-line pointer differs from the plan kernel's";
      return s;
    }
    // A receive also watches the pair's bandwidth FIFO (a sender above the
    // ll limit): the plan kernel's size lines, count and credit there.
    const bool recv = k.kind == kDevRecv;
    const char* fifo_sizes = recv ? cx.local + g.size_off(k.peer, ch) : nullptr;
    const uint64_t* fifo_count =
        recv ? reinterpret_cast<const uint64_t*>(cx.local + g.state_off(k.peer, ch)) + 1 : nullptr;
    const char* fifo_credit = recv ? cx.remote[k.peer] + g.tail_off(cx.rank, ch) : nullptr;
    if (fifo_sizes != k.fifo_sizes || fifo_count != k.fifo_count || fifo_credit != k.fifo_credit) {
      *err = "key of peer " + std::to_string(k.peer) + " channel " + std::to_string(ch) +
             ": bandwidth FIFO pointers differ from the plan kernel's";
      return s;
    }
    if (k.first != next) {
      *err = "keys' slices are not laid out one after the other";
      return s;
    }
    next += k.n;
    auto& v = s[{k.peer, ch, k.kind}];
    if (!v.empty()) {
      *err = "two keys for one (peer, channel, direction)";
      return s;
    }
    for (int i = k.first; i < k.first + k.n; ++i) v.push_back({b.ptr[i], b.bytes[i], b.msg[i]});
  }
  if (next != b.ptr.size() || b.ptr.size() != b.bytes.size() || b.ptr.size() != b.msg.size())
    *err = "slices left over";
  return s;
}

Op send_op(int peer, uint64_t addr, size_t bytes) {
  Op op;
  op.kind = OpKind::Send;
  op.peer = peer;
  op.src = Slice{Buf::Input, addr, bytes};
  return op;
}
Op recv_op(int peer, uint64_t addr, size_t bytes) {
  Op op;
  op.kind = OpKind::Recv;
  op.peer = peer;
  op.dst = Slice{Buf::Output, addr, bytes};
  return op;
}

Plan one_step(std::vector<Op> ops) {
  Plan p;
  Step st;
  st.ops = std::move(ops);
  p.steps.push_back(st);
  return p;
}

TEST(P2pLlBatch, SliceRuleIsTheDevicePlanSplit) {
  // Channel i of nch: [bytes * i / nch / 16 * 16, ...), the last one to the end.
  EXPECT_EQ(p2p_slice(100, 1, 0).lo, 0u);
  EXPECT_EQ(p2p_slice(100, 1, 0).hi, 100u);
  EXPECT_EQ(p2p_slice(100, 3, 1).lo, 32u);
  EXPECT_EQ(p2p_slice(100, 3, 1).hi, 64u);
  EXPECT_EQ(p2p_slice(100, 3, 2).hi, 100u);
  EXPECT_EQ(p2p_slice(20, 20, 5).lo, p2p_slice(20, 20, 5).hi);  // empty slice
}

// Many batches of odd sizes, 0 bytes and sizes around multiples of
// channel_bytes: every slice the LL batch carries is the plan kernel's, in
// the same order per key, with the same pointers.
TEST(P2pLlBatch, SlicesMatchThePlanKernelBatch) {
  int cases = 0, served = 0;
  for (size_t cb : {size_t(1), size_t(100), size_t(8192)})
    for (int maxch : {1, 3, 8, 32}) {
      const int n = 4, rank = 1;
      std::vector<size_t> sizes = {
          0,    1,     7,     15,    16,           17,           1001,      8191,   8192,
          8193, 16383, 16384, 16385, 3 * 8192 - 1, 3 * 8192 + 5, 65536 + 3, 262144, 300001};
      if (cb < 64) sizes = {0, 1, 7, 15, 16, 17, 31, 33, 63, 100, 1001};
      for (size_t i = 0; i < sizes.size(); ++i) {
        // Several messages per peer and direction (ordering) and peers in mixed order.
        std::vector<Op> ops;
        uint64_t addr = 0x1000;
        for (int j = 0; j < 5; ++j) {
          const size_t b = sizes[(i + j * 7) % sizes.size()];
          const int peer = (rank + 1 + j % (n - 1)) % n;
          ops.push_back(j % 2 ? recv_op(peer, addr, b) : send_op(peer, addr, b));
          addr += b + 3;  // odd addresses too
          ops.push_back(j % 2 ? send_op(peer, addr, sizes[i]) : recv_op(peer, addr, sizes[i]));
          addr += sizes[i] + 16;
        }
        Plan plan = one_step(ops);
        P2pLlContext cx = test_context(n, rank, maxch, cb, 1 << 30);
        cx.max_keys = 1 << 15;
        cx.max_slices = 1 << 15;
        P2pLlBatch b;
        const bool ok = build_p2p_ll(plan, cx, &b);
        ++cases;
        // Served exactly when there is a slice and each fits the ll ring (64 KiB here).
        Streams want = plan_streams(build_device_p2p(plan, cb, maxch));
        bool fits = !want.empty();
        for (const auto& [key, v] : want)
          for (const auto& sl : v) fits &= std::get<1>(sl) <= 65536;
        ASSERT_EQ(ok, fits) << "channel_bytes " << cb << " max_channels " << maxch << " case " << i;
        // The shape the selection table reads, against the plan kernel's cut.
        const P2pShape sh = cut_p2p(plan, cx).shape;
        size_t nslices = 0;
        uint64_t biggest = 0;
        for (const auto& [key, v] : want) {
          nslices += v.size();
          for (const auto& sl : v) biggest = std::max<uint64_t>(biggest, std::get<1>(sl));
        }
        ASSERT_TRUE(sh.ll_peers);
        ASSERT_EQ(size_t(sh.keys), want.size());
        ASSERT_EQ(size_t(sh.slices), nslices);
        ASSERT_EQ(sh.max_slice, biggest);
        if (!ok) continue;
        ++served;
        std::string err;
        Streams got = batch_streams(b, cx, &err);
        ASSERT_EQ(err, "");
        ASSERT_EQ(got, want) << "channel_bytes " << cb << " max_channels " << maxch << " case "
                             << i;
        ASSERT_GE(b.threads, 32);
        ASSERT_LE(b.threads, kP2pLlMaxThreads);
        ASSERT_EQ(b.threads % 32, 0);
      }
    }
  EXPECT_GT(served, 50);
  EXPECT_EQ(cases, 2 * 4 * 18 + 4 * 11);
}

// The largest slice decides: at ll_max served, one byte more not; a limit
// above the ll ring counts as the ring.
TEST(P2pLlBatch, LlLimitBoundary) {
  const size_t cb = 8192;
  for (int maxch : {1, 4, 32})
    for (uint64_t ll_max : {uint64_t(1), uint64_t(1000), uint64_t(16384), uint64_t(65536)}) {
      P2pLlContext cx = test_context(2, 0, maxch, cb, ll_max);
      // The largest message whose largest slice is <= ll_max.
      auto largest_slice = [&](size_t bytes) {
        const int nch = device_channels(bytes, cb, maxch);
        size_t m = 0;
        for (int c = 0; c < nch; ++c)
          m = std::max(m, p2p_slice(bytes, nch, c).hi - p2p_slice(bytes, nch, c).lo);
        return m;
      };
      size_t best = size_t(ll_max) * size_t(maxch) + 64;
      while (best > 0 && largest_slice(best) > ll_max) --best;
      ASSERT_GT(best, 0u);
      P2pLlBatch out;
      EXPECT_TRUE(build_p2p_ll(one_step({send_op(1, 0x100, best)}), cx, &out)) << best;
      EXPECT_TRUE(build_p2p_ll(one_step({recv_op(1, 0x100, best)}), cx, &out)) << best;
      ASSERT_GT(largest_slice(best + 1), ll_max);
      EXPECT_FALSE(build_p2p_ll(one_step({send_op(1, 0x100, best + 1)}), cx, &out)) << best + 1;
      EXPECT_FALSE(
          build_p2p_ll(one_step({send_op(1, 0x100, 8), recv_op(1, 0x200, best + 1)}), cx, &out));
    }
  // The ring holds ll_slots * ll_slot_bytes / 2 = 64 KiB: a larger limit is cut there.
  P2pLlContext cx = test_context(2, 0, 1, 1 << 30, 1 << 20);
  P2pLlBatch out;
  EXPECT_TRUE(build_p2p_ll(one_step({send_op(1, 0x100, 65536)}), cx, &out));
  EXPECT_FALSE(build_p2p_ll(one_step({send_op(1, 0x100, 65537)}), cx, &out));
  // ll disabled (MYCOLL_GPU_LL_BYTES=0): nothing is served.
  cx = test_context(2, 0, 1, 8192, 0);
  EXPECT_FALSE(build_p2p_ll(one_step({send_op(1, 0x100, 1)}), cx, &out));
}

TEST(P2pLlBatch, RefusesWhatItCannotServe) {
  P2pLlContext cx = test_context(4, 0, 32, 8192, 16384);
  P2pLlBatch out;
  // A copy to self.
  Op copy;
  copy.kind = OpKind::Copy;
  copy.src = Slice{Buf::Input, 0x100, 8};
  copy.dst = Slice{Buf::Output, 0x200, 8};
  EXPECT_FALSE(build_p2p_ll(one_step({copy, send_op(1, 0x300, 8)}), cx, &out));
  // A peer without an ll ring (behind the GPU proxy).
  cx.ll[2] = false;
  EXPECT_FALSE(build_p2p_ll(one_step({send_op(1, 0x300, 8), recv_op(2, 0x400, 8)}), cx, &out));
  EXPECT_TRUE(build_p2p_ll(one_step({send_op(1, 0x300, 8), recv_op(3, 0x400, 8)}), cx, &out));
  cx.ll[2] = true;
  // Nothing to move.
  EXPECT_FALSE(build_p2p_ll(Plan{}, cx, &out));
  EXPECT_FALSE(build_p2p_ll(one_step({send_op(1, 0x300, 0)}), cx, &out));
  // Keys: 256 KiB to one peer is 32 channels = 32 keys per (peer, direction).
  std::vector<Op> ops;
  for (int k = 0; k < kP2pLlMaxKeys / 32; ++k)
    ops.push_back(k % 2 ? recv_op(1 + k / 2, 0x1000 + 0x100000 * k, 262144)
                        : send_op(1 + k / 2, 0x1000 + 0x100000 * k, 262144));
  EXPECT_TRUE(build_p2p_ll(one_step(ops), cx, &out));
  EXPECT_EQ(out.keys.size(), size_t(kP2pLlMaxKeys));
  ops.push_back(send_op(3, 0x9000000, 8));  // one key more
  EXPECT_FALSE(build_p2p_ll(one_step(ops), cx, &out));
  // Slices: many messages on few keys.
  ops.clear();
  for (int i = 0; i < kP2pLlMaxSlices; ++i) ops.push_back(send_op(1 + i % 3, 0x1000 + 64 * i, 8));
  EXPECT_TRUE(build_p2p_ll(one_step(ops), cx, &out));
  EXPECT_EQ(out.keys.size(), 3u);
  EXPECT_EQ(out.ptr.size(), size_t(kP2pLlMaxSlices));
  ops.push_back(send_op(1, 0x9000, 8));
  EXPECT_FALSE(build_p2p_ll(one_step(ops), cx, &out));
}

// Keys in order of first appearance, slices of a key in batch order, the
// block size covering the largest slice in one round.
TEST(P2pLlBatch, KeyOrderAndThreads) {
  P2pLlContext cx = test_context(3, 0, 32, 8192, 16384);
  P2pLlBatch out;
  ASSERT_TRUE(build_p2p_ll(one_step({send_op(2, 0x100, 5), recv_op(1, 0x200, 9),
                                     send_op(1, 0x300, 1), send_op(2, 0x400, 2000)}),
                           cx, &out));
  ASSERT_EQ(out.keys.size(), 3u);
  EXPECT_EQ(out.keys[0].peer, 2);
  EXPECT_EQ(out.keys[0].kind, kDevSend);
  EXPECT_EQ(out.keys[0].n, 2);
  EXPECT_EQ(out.ptr[out.keys[0].first], 0x100u);
  EXPECT_EQ(out.ptr[out.keys[0].first + 1], 0x400u);
  EXPECT_EQ(out.bytes[out.keys[0].first + 1], 2000u);
  EXPECT_EQ(out.msg[out.keys[0].first], 5u);  // every slice carries its whole message's size
  EXPECT_EQ(out.msg[out.keys[0].first + 1], 2000u);
  EXPECT_EQ(out.keys[1].peer, 1);
  EXPECT_EQ(out.keys[1].kind, kDevRecv);
  EXPECT_EQ(out.keys[2].peer, 1);
  EXPECT_EQ(out.keys[2].kind, kDevSend);
  EXPECT_EQ(out.threads, 32);  // 250 lines: 32 threads x 8
  ASSERT_TRUE(build_p2p_ll(one_step({send_op(1, 0x100, 16383)}), cx, &out));
  EXPECT_EQ(out.threads, 256);  // one channel, 2048 lines
  ASSERT_TRUE(build_p2p_ll(one_step({send_op(1, 0x100, 2049 * 8)}), cx, &out));
  EXPECT_EQ(out.threads, 160);  // two channels, 8192 + 8200 bytes: 1025 lines -> 129 threads
  ASSERT_EQ(out.msg.size(), 2u);
  EXPECT_EQ(out.bytes[0] + out.bytes[1], 2049u * 8);
  EXPECT_EQ(out.msg[0], 2049u * 8);  // both slices: the whole message
  EXPECT_EQ(out.msg[1], 2049u * 8);
}

}  // namespace
