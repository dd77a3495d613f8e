#include "engine/device_plan_build.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/error.h"

namespace mycoll {
namespace {

// Appends one channel's plan (built for its column starting at element lo)
// to ops, with byte offsets; Scratch slices go to the channel's own region.
void flatten(const Plan& plan, size_t es, size_t lo, size_t scratch_base, bool avg,
             int max_step_ops, std::vector<DevOp>& ops) {
  auto conv = [&](const Slice& s, uint8_t* buf, uint64_t* off) {
    *buf = static_cast<uint8_t>(s.buf);
    *off = (s.offset + (s.buf == Buf::Scratch ? scratch_base : lo)) * es;
  };
  for (const Step& st : plan.steps) {
    size_t first = ops.size();
    for (const Op& op : st.ops) {
      DevOp d{};
      d.peer = op.peer;
      const bool has_src = op.kind != OpKind::Recv, has_dst = op.kind != OpKind::Send;
      switch (op.kind) {
        case OpKind::Send: d.kind = kDevSend; break;
        case OpKind::Recv: d.kind = kDevRecv; break;
        case OpKind::RecvReduce: d.kind = kDevRecvReduce; break;
        case OpKind::Reduce: d.kind = kDevReduce; break;
        case OpKind::Copy: d.kind = kDevCopy; break;
      }
      if (has_src) conv(op.src, &d.src_buf, &d.src_off);
      if (has_dst) conv(op.dst, &d.dst_buf, &d.dst_off);
      d.bytes = (has_dst ? op.dst.count : op.src.count) * es;
      if (d.bytes == 0) continue;
      ops.push_back(d);
    }
    if (ops.size() - first > static_cast<size_t>(max_step_ops))
      throw_error(mycollInvalidUsage, "a step has " + std::to_string(ops.size() - first) +
                                          " operations; the GPU engine handles at most " +
                                          std::to_string(max_step_ops));
    if (ops.size() > first) ops.back().step_end = 1;
  }
  if (avg && plan.result.count > 0) {
    DevOp d{};
    d.kind = kDevScaleAvg;
    d.peer = -1;
    conv(plan.result, &d.dst_buf, &d.dst_off);
    d.bytes = plan.result.count * es;
    d.step_end = 1;
    ops.push_back(d);
  }
}

}  // namespace

int device_channels(size_t bytes, size_t channel_bytes, int max_channels) {
  size_t n = bytes / std::max<size_t>(1, channel_bytes);
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(n, max_channels)));
}

int direct_kernel_channels(size_t block_bytes, size_t channel_bytes, int max_channels, int nranks,
                           int min_sms, int copy_blocks, int spare_sms) {
  if (nranks < 2) return 0;
  const int budget = (min_sms - spare_sms - copy_blocks) / (nranks - 1);
  if (budget < 1) return 0;
  return std::min(device_channels(block_bytes, channel_bytes, max_channels), budget);
}

// Chains and trees pipeline a channel's column in chunks. Every step costs
// a FIFO hand-over (several microseconds on NVLink), so chunks stay at
// 256 KiB or more: at most 16 per channel (4 with two ranks, where there is
// nothing to pipeline through).
size_t device_pipeline_chunk(size_t count, size_t es, size_t align, int nranks) {
  size_t nchunks =
      std::min<size_t>(nranks <= 2 ? 4 : 16, std::max<size_t>(1, count * es / (256 * 1024)));
  size_t chunk = (count + nchunks - 1) / nchunks;
  return std::max<size_t>(align, (chunk + align - 1) / align * align);
}

DevicePlan build_device_collective(const DeviceCollArgs& a,
                                   const std::function<Plan(const CollArgs&)>& build) {
  DevicePlan p;
  p.nch = a.nch;
  p.chan.assign(1, 0);
  const size_t align = std::max<size_t>(1, 16 / a.es);
  size_t scratch = 0;
  for (int ch = 0; ch < a.nch; ++ch) {
    size_t lo = a.count * ch / a.nch / align * align;
    size_t hi = ch + 1 == a.nch ? a.count : a.count * (ch + 1) / a.nch / align * align;
    CollArgs c;
    c.coll = a.coll;
    c.nranks = a.nranks;
    c.rank = a.rank;
    c.root = a.root;
    c.count = hi - lo;
    c.stride = coll_is_blocked(a.coll) ? a.count : 0;
    c.in_place = a.in_place;
    c.chunk = device_pipeline_chunk(hi - lo, a.es, align, a.nranks);
    Plan plan = build(c);
    flatten(plan, a.es, lo, scratch, a.avg, a.max_step_ops, p.ops);
    scratch += plan.scratch_count;
    p.chan.push_back(static_cast<uint32_t>(p.ops.size()));
  }
  p.scratch_bytes = scratch * a.es;
  for (const DevOp& op : p.ops) {
    if (op.kind == kDevRecv || op.kind == kDevRecvReduce) {
      p.sends_only_to = -1;
      break;
    }
    if (op.kind == kDevSend && p.sends_only_to < 0) p.sends_only_to = op.peer;
  }
  return p;
}

ByteRange p2p_slice(size_t bytes, int nch, int ch) {
  ByteRange r;
  r.lo = bytes * ch / nch / 16 * 16;
  r.hi = ch + 1 == nch ? bytes : bytes * (ch + 1) / nch / 16 * 16;
  return r;
}

DevicePlan build_device_p2p(const Plan& p2p, size_t channel_bytes, int max_channels,
                            int max_step_ops) {
  auto message_bytes = [](const Op& op) {
    return op.kind == OpKind::Send ? op.src.count : op.dst.count;
  };
  DevicePlan p;
  for (const Step& st : p2p.steps)
    for (const Op& op : st.ops)
      if (op.kind != OpKind::Copy)
        p.nch = std::max(p.nch, device_channels(message_bytes(op), channel_bytes, max_channels));
  p.chan.assign(1, 0);
  for (int ch = 0; ch < p.nch; ++ch) {
    for (const Step& st : p2p.steps) {
      size_t first = p.ops.size();
      for (const Op& op : st.ops) {
        const size_t bytes = message_bytes(op);
        int mine =
            op.kind == OpKind::Copy ? p.nch : device_channels(bytes, channel_bytes, max_channels);
        if (ch >= mine) continue;
        const auto [lo, hi] = p2p_slice(bytes, mine, ch);
        if (hi == lo) continue;
        DevOp d{};
        d.peer = op.peer;
        d.bytes = hi - lo;
        d.kind = op.kind == OpKind::Send ? kDevSend : op.kind == OpKind::Recv ? kDevRecv : kDevCopy;
        if (op.kind != OpKind::Recv) {
          d.src_buf = 3;
          d.src_off = op.src.offset + lo;
        }
        if (op.kind != OpKind::Send) {
          d.dst_buf = 3;
          d.dst_off = op.dst.offset + lo;
        }
        // The size check (p2p_msg_bytes): the offset a transfer leaves unused.
        if (op.kind == OpKind::Send) d.dst_off = bytes;
        if (op.kind == OpKind::Recv) d.src_off = bytes;
        p.ops.push_back(d);
      }
      if (p.ops.size() - first > static_cast<size_t>(max_step_ops))
        throw_error(mycollInvalidUsage,
                    "a group of point-to-point calls puts " + std::to_string(p.ops.size() - first) +
                        " messages on one GPU channel; the GPU engine handles at most " +
                        std::to_string(max_step_ops) + " (split the group)");
      if (p.ops.size() > first) p.ops.back().step_end = 1;
    }
    p.chan.push_back(static_cast<uint32_t>(p.ops.size()));
  }
  return p;
}

P2pCut cut_p2p(const Plan& p2p, const P2pLlContext& cx) {
  const FifoGeom& g = cx.geom;
  P2pCut c;
  P2pShape& sh = c.shape;
  sh.ll_peers = true;
  for (const Step& st : p2p.steps)
    for (const Op& op : st.ops) {
      if ((op.kind != OpKind::Send && op.kind != OpKind::Recv) || op.peer < 0 ||
          op.peer >= g.nranks || op.peer == cx.rank || size_t(op.peer) >= cx.ll.size() ||
          !cx.ll[op.peer]) {
        sh.ll_peers = false;
        return c;
      }
      const bool send = op.kind == OpKind::Send;
      const Slice& msg = send ? op.src : op.dst;
      const size_t bytes = msg.count;
      sh.max_msg = std::max<uint64_t>(sh.max_msg, bytes);
      const int nch = device_channels(bytes, cx.channel_bytes, cx.max_channels);
      for (int ch = 0; ch < nch; ++ch) {
        const auto [lo, hi] = p2p_slice(bytes, nch, ch);
        if (hi == lo) continue;
        const uint8_t kind = send ? kDevSend : kDevRecv;
        int k = 0;
        while (k < int(c.keys.size()) &&
               !(c.keys[k].peer == op.peer && c.keys[k].kind == kind && c.keys[k].first == ch))
          ++k;
        if (k == int(c.keys.size())) {
          P2pLlKey key{};
          key.peer = op.peer;
          key.kind = kind;
          key.first = uint16_t(ch);  // the channel, until the slices are laid out
          c.keys.push_back(key);
          c.nkey.push_back(0);
        }
        sh.max_key_slices = std::max(sh.max_key_slices, ++c.nkey[k]);
        sh.max_slice = std::max<uint64_t>(sh.max_slice, hi - lo);
        c.pieces.push_back(
            P2pPiece{k, uint64_t(msg.offset + lo), uint32_t(hi - lo), uint32_t(bytes)});
      }
    }
  sh.keys = int(c.keys.size());
  sh.slices = int(c.pieces.size());
  return c;
}

void p2p_ll_limits(const P2pLlContext& cx, DevLimits* l) {
  // The kernel takes a slice whole (like the plan kernel's ll pass): it must
  // fit the ring, and its byte count its 32-bit field.
  const uint64_t ll_data = cx.geom.ll_slot_bytes / 2;  // data bytes per ll slot
  l->p2p_ll_slice_bytes =
      std::min<uint64_t>({cx.ll_max, uint64_t(cx.geom.ll_slots) * ll_data, uint64_t(UINT32_MAX)});
  l->p2p_ll_keys = cx.max_keys;
  l->p2p_ll_slices = cx.max_slices;
}

bool build_p2p_ll(const Plan& p2p, const P2pLlContext& cx, P2pLlBatch* out) {
  DevLimits lim;
  p2p_ll_limits(cx, &lim);
  const P2pCut cut = cut_p2p(p2p, cx);
  if (!p2p_ll_takes(cut.shape, lim)) return false;
  layout_p2p_ll(cut, cx, out);
  return true;
}

void layout_p2p_ll(const P2pCut& cut, const P2pLlContext& cx, P2pLlBatch* out) {
  const FifoGeom& g = cx.geom;
  const std::vector<P2pPiece>& slices = cut.pieces;
  const std::vector<P2pLlKey>& keys = cut.keys;
  const std::vector<int>& nkey = cut.nkey;
  uint64_t max_lines = 0;
  for (const P2pPiece& s : slices) max_lines = std::max<uint64_t>(max_lines, (s.bytes + 7) / 8);
  out->keys.assign(keys.begin(), keys.end());
  out->ptr.assign(slices.size(), 0);
  out->bytes.assign(slices.size(), 0);
  out->msg.assign(slices.size(), 0);
  uint32_t next = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    P2pLlKey& key = out->keys[k];
    const int ch = key.first, peer = key.peer;
    char* state = cx.local + g.state_off(peer, ch);
    if (key.kind == kDevSend) {
      key.ring = cx.remote[peer] + g.ll_off(cx.rank, ch);
      key.credit = cx.local + g.ll_tail_off(peer, ch);
      key.count = reinterpret_cast<uint64_t*>(state) + 2;
      key.sizes = cx.remote[peer] + g.ll_size_off(cx.rank, ch);
    } else {
      key.ring = cx.local + g.ll_off(peer, ch);
      key.credit = cx.remote[peer] + g.ll_tail_off(cx.rank, ch);
      key.count = reinterpret_cast<uint64_t*>(state) + 3;
      key.sizes = cx.local + g.ll_size_off(peer, ch);
      key.fifo_sizes = cx.local + g.size_off(peer, ch);
      key.fifo_count = reinterpret_cast<uint64_t*>(state) + 1;
      key.fifo_credit = cx.remote[peer] + g.tail_off(cx.rank, ch);
    }
    key.first = uint16_t(next);
    key.n = 0;
    next += uint32_t(nkey[k]);
  }
  for (const P2pPiece& s : slices) {  // stable: each key's slices stay in batch order
    P2pLlKey& key = out->keys[s.key];
    const size_t i = size_t(key.first) + key.n++;
    out->ptr[i] = s.ptr;
    out->bytes[i] = s.bytes;
    out->msg[i] = s.msg;
  }
  // Enough threads for every line of the largest slice in one round of the
  // kernel's loop (kP2pLlUnroll lines in flight per thread), whole warps.
  const uint64_t want = (max_lines + kP2pLlUnroll - 1) / kP2pLlUnroll;
  out->threads =
      int(std::min<uint64_t>(kP2pLlMaxThreads, std::max<uint64_t>(32, (want + 31) / 32 * 32)));
}

}  // namespace mycoll
