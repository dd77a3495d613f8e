#include "engine/host_fast.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"
#include "engine/host_engine.h"
#include "engine/reduce.h"
#include "transports/transport.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;

// Transfers one step may hold (the done flags live on the stack).
constexpr size_t kMaxStepXfers = 256;

// Which transfers of a step are done: kMaxStepXfers bits.
struct Done {
  uint64_t w[kMaxStepXfers / 64] = {};
  bool has(uint32_t i) const { return (w[i >> 6] >> (i & 63)) & 1; }
  void set(uint32_t i) { w[i >> 6] |= uint64_t(1) << (i & 63); }
};

class FastRun {
 public:
  FastRun(mycollComm* comm, const FastPlan& p, const FastCall& call)
      : comm_(comm), p_(p), call_(call) {
    base_[static_cast<int>(Buf::Input)] = const_cast<char*>(static_cast<const char*>(call.input));
    base_[static_cast<int>(Buf::Output)] = static_cast<char*>(call.output);
    comm->scratch.grow(p.scratch_bytes);
    base_[static_cast<int>(Buf::Scratch)] = comm->scratch.data();
    hdr_ = p.hdr;
    if (coll_reduces(p.coll)) hdr_.op = static_cast<uint8_t>(call.op);
    hdr_.seq = call.coll_seq;
  }

  void run() {
    for (step_ = 0; step_ < p_.steps.size(); ++step_) {
      const FastPlan::Step& st = p_.steps[step_];
      for (uint32_t i = st.local_begin; i < st.local_end; ++i) local(p_.locals[i]);
      transfer(st);
    }
    if (call_.op == mycollAvg && p_.result.count > 0)
      scale_avg_host(p_.dtype, at(p_.result.buf, p_.result.offset * p_.es), p_.result.count,
                     comm_->nranks);
  }

  // After a throw: the peers the failed wait was for (the transfer that
  // failed, the other unfinished ones apart; for a timeout, every
  // unfinished one).
  const Waits& waits() const { return waits_; }

  std::string where() const {
    return std::string(coll_name(p_.coll)) + " (" + algo_name(p_.algo) + ", " +
           std::to_string(p_.count) + " x " + dtype_name(p_.dtype) + ", step " +
           std::to_string(step_ + 1) + "/" + std::to_string(p_.steps.size()) + ") on rank " +
           std::to_string(comm_->rank);
  }

 private:
  char* at(Buf b, size_t off) const {
    return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(base_[static_cast<int>(b)]) + off);
  }

  // The header of transfer x's message.
  MsgHeader header(const FastPlan::Xfer& x) const {
    MsgHeader h = hdr_;
    h.bytes = x.bytes;
    if (p_.coll == Coll::SendRecv) {
      h.count = x.bytes;
      h.seq = x.seq;
    }
    return h;
  }

  void local(const FastPlan::Local& l) {
    char* d = at(l.dst_buf, l.dst_off);
    const char* s = at(l.src_buf, l.src_off);
    if (l.kind == OpKind::Copy) {
      if (d != s) std::memmove(d, s, l.bytes);
    } else {
      reduce_host(p_.dtype, call_.op, d, d, s, l.bytes / p_.es);
    }
  }

  // Moves every transfer of the step; returns when all are done.
  void transfer(const FastPlan::Step& st) {
    const uint32_t n = st.xfer_end - st.xfer_begin;
    if (n == 0) return;
    if (st.prefetch)
      for (uint32_t i = st.xfer_begin; i < st.xfer_end; ++i)
        if (p_.xfers[i].kind != OpKind::Send) p_.xfers[i].conn->prefetch_record();
    Done done;
    uint32_t left = n;
    unsigned idle = 0;
    for (;;) {
      bool moved = false;
      for (uint32_t i = 0; i < n; ++i) {
        if (done.has(i)) continue;
        const FastPlan::Xfer& x = p_.xfers[st.xfer_begin + i];
        if (x.prev >= 0 && !done.has(x.prev)) continue;  // its pair's earlier message first
        bool ok;
        try {
          ok = x.kind == OpKind::Send ? send(x) : recv(x);
        } catch (const Error&) {
          blame(st, done, i);
          throw;
        }
        if (ok) {
          done.set(i);
          moved = true;
          --left;
        }
      }
      if (left == 0) return;
      if (moved) {
        idle = 0;
        idle_valid_ = false;
        continue;
      }
      ++idle;
      if (idle_check_due(idle)) idle_check(st, done);
      backoff(idle, p_.crowded);
    }
  }

  bool send(const FastPlan::Xfer& x) {
    const MsgHeader h = header(x);
    return x.conn->send_record(&h, sizeof(h), at(x.buf, x.off), x.bytes);
  }

  bool recv(const FastPlan::Xfer& x) {
    const void* p = nullptr;
    const size_t len = x.conn->peek_record(&p);
    if (len == 0) return false;
    const MsgHeader want = header(x);
    MsgRecord r;
    RecordError e = parse_msg_record(p, len, want, false, &r);
    // The sender streams only what does not fit a record: never here.
    if (e == RecordError::kNone && r.payload != MsgRecord::Payload::kInline)
      e = RecordError::kPayloadBytes;
    if (e != RecordError::kNone) throw_record_error(e, r, len, want, x.peer, where());
    const char* data = r.data;
    char* dst = at(x.buf, x.off);
    if (x.kind == OpKind::Recv)
      std::memcpy(dst, data, x.bytes);
    else
      reduce_host(p_.dtype, call_.op, dst, at(x.local_buf, x.local_off), data, x.bytes / p_.es);
    x.conn->consume_record();
    return true;
  }

  // Transfer i of the step failed (its connection ended, it sent garbage):
  // its peer, and apart the peers of the step's other unfinished transfers.
  void blame(const FastPlan::Step& st, const Done& done, uint32_t i) {
    waits_.on.assign(1, p_.xfers[st.xfer_begin + i].peer);
    waits_.also.clear();
    for (uint32_t k = 0; k < st.xfer_end - st.xfer_begin; ++k)
      if (k != i && !done.has(k)) waits_.also.push_back(p_.xfers[st.xfer_begin + k].peer);
  }

  // As the general loop's: abort, then (from 5 ms without progress) the
  // peers' liveness, then MYCOLL_TIMEOUT, idle time counted from the first
  // check after the last progress.
  void idle_check(const FastPlan::Step& st, const Done& done) {
    if (comm_->aborted.load()) throw_error(mycollRemoteError, where() + ": communicator aborted");
    const auto now = Clock::now();
    if (!idle_valid_) {
      idle_since_ = now;
      idle_valid_ = true;
    }
    const double idle = std::chrono::duration<double>(now - idle_since_).count();
    if (idle > kCheckAliveAfterS)
      for (uint32_t i = st.xfer_begin; i < st.xfer_end; ++i)
        if (!done.has(i - st.xfer_begin)) {
          try {
            p_.xfers[i].conn->check_alive();
          } catch (const Error&) {
            blame(st, done, i - st.xfer_begin);
            throw;
          }
        }
    if (idle > comm_->cfg.timeout_s) {
      waits_.on.clear();
      waits_.also.clear();
      std::string w;
      for (uint32_t i = st.xfer_begin; i < st.xfer_end; ++i) {
        if (done.has(i - st.xfer_begin)) continue;
        const FastPlan::Xfer& x = p_.xfers[i];
        waits_.on.push_back(x.peer);
        w += std::string(w.empty() ? "while " : ", ") +
             (x.kind == OpKind::Send ? "sending to" : "receiving from") + " rank " +
             std::to_string(x.peer) + " (" + x.conn->describe() + ", 0/" + std::to_string(x.bytes) +
             " bytes)";
      }
      throw_error(mycollTimeout, where() + ": no progress for " +
                                     std::to_string(static_cast<int>(idle)) +
                                     " s (MYCOLL_TIMEOUT) " + w);
    }
  }

  mycollComm* comm_;
  const FastPlan& p_;
  const FastCall& call_;
  char* base_[3] = {};
  MsgHeader hdr_{};  // this call's header, bytes set per message
  size_t step_ = 0;
  bool idle_valid_ = false;
  Clock::time_point idle_since_;
  Waits waits_;
};

// Sets each transfer's prev: the last earlier transfer of the step in the
// same direction with the same peer.
void link_pairs(FastPlan::Xfer* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    x[i].prev = -1;
    const bool send = x[i].kind == OpKind::Send;
    for (size_t j = i; j-- > 0;)
      if (x[j].peer == x[i].peer && (x[j].kind == OpKind::Send) == send) {
        x[i].prev = static_cast<int32_t>(j);
        break;
      }
  }
}

// Whether a step of these transfers prefetches its records: two or more
// receives and no send. A root taking its children's records (gather,
// reduce) finds them written already, as its peers run ahead, and waits
// for their lines at once. Where the step also sends, its peers are
// writing those records while it starts, and fetching their lines early
// only moved them back and forth: on 16 cores at 8 ranks all-gather of 256
// B-4 KiB took 1.11-1.16x the time (docs/performance.md, "Session 61").
bool prefetches(const FastPlan::Xfer* x, size_t n) {
  size_t recvs = 0;
  for (size_t i = 0; i < n; ++i) {
    if (x[i].kind == OpKind::Send) return false;
    ++recvs;
  }
  return recvs >= 2;
}

// Memory a transfer touches, for the step-fusion hazard check. Space: 0
// Input, 1 Output (0 too when the call is in place: they may alias), 2
// Scratch.
struct Touch {
  int space;
  size_t lo, hi;
  bool write;
};

int space_of(Buf b, bool in_place) {
  return b == Buf::Scratch ? 2 : (b == Buf::Output && !in_place) ? 1 : 0;
}

void touches(const FastPlan::Xfer& x, bool in_place, Touch out[2], int* n) {
  *n = 0;
  const bool writes = x.kind != OpKind::Send;
  out[(*n)++] = {space_of(x.buf, in_place), x.off, x.off + x.bytes, writes};
  if (x.kind == OpKind::RecvReduce)
    out[(*n)++] = {space_of(x.local_buf, in_place), x.local_off, x.local_off + x.bytes, false};
}

// Whether transfers a and b may run at once: neither writes what the other
// reads or writes.
bool independent(const FastPlan::Xfer& a, const FastPlan::Xfer& b, bool in_place) {
  Touch ta[2], tb[2];
  int na = 0, nb = 0;
  touches(a, in_place, ta, &na);
  touches(b, in_place, tb, &nb);
  for (int i = 0; i < na; ++i)
    for (int j = 0; j < nb; ++j)
      if (ta[i].space == tb[j].space && ta[i].lo < tb[j].hi && tb[j].lo < ta[i].hi &&
          (ta[i].write || tb[j].write))
        return false;
  return true;
}

}  // namespace

std::shared_ptr<const FastPlan> compile_fast(mycollComm* comm, const Plan& plan, Coll coll,
                                             Algo algo, mycollDataType_t dtype, size_t count,
                                             int root, bool in_place) {
  auto fp = std::make_shared<FastPlan>();
  fp->coll = coll;
  fp->algo = algo;
  fp->dtype = dtype;
  fp->es = dtype_size(dtype);
  fp->count = count;
  fp->root = root;
  fp->scratch_bytes = plan.scratch_count * fp->es;
  fp->result = plan.result;
  fp->hdr = collective_header(coll, dtype, mycollSum, root, count, 0, 0);
  const size_t es = fp->es;
  for (size_t si = 0; si < plan.steps.size(); ++si) {
    FastPlan::Step st{};
    st.local_begin = static_cast<uint32_t>(fp->locals.size());
    st.xfer_begin = static_cast<uint32_t>(fp->xfers.size());
    for (const Op& op : plan.steps[si].ops) {
      if (op.kind == OpKind::Copy || op.kind == OpKind::Reduce) {
        // As the general loop: a copy moves src.count elements, a
        // reduction dst.count.
        const size_t n = op.kind == OpKind::Copy ? op.src.count : op.dst.count;
        if (n == 0) continue;
        fp->locals.push_back(
            {op.kind, op.dst.buf, op.src.buf, op.dst.offset * es, op.src.offset * es, n * es});
        continue;
      }
      if (op.peer < 0 || op.peer >= comm->nranks || op.peer == comm->rank) return nullptr;
      Connection* conn = comm->conns[op.peer].get();
      if (!conn) return nullptr;
      const bool send = op.kind == OpKind::Send;
      const Slice& data = send ? op.src : op.dst;
      FastPlan::Xfer x{};
      x.kind = op.kind;
      x.peer = op.peer;
      x.conn = conn;
      x.buf = data.buf;
      x.off = data.offset * es;
      x.bytes = data.count * es;
      if (op.kind == OpKind::RecvReduce) {
        x.local_buf = op.src.buf;
        x.local_off = op.src.offset * es;
      }
      if (sizeof(MsgHeader) + x.bytes > conn->record_max()) return nullptr;
      fp->xfers.push_back(x);
    }
    st.local_end = static_cast<uint32_t>(fp->locals.size());
    st.xfer_end = static_cast<uint32_t>(fp->xfers.size());
    // Step fusion: a step with no local work whose transfers touch nothing
    // the previous step's transfers write (nor write what they read) joins
    // that step, so its messages are in flight at once instead of one round
    // trip later (all-to-all's pairwise steps become one). Messages with one
    // peer still match in plan order (prev), so each rank may fuse or not on
    // its own.
    bool fuse = !fp->steps.empty() && st.local_begin == st.local_end && st.xfer_end > st.xfer_begin;
    if (fuse) {
      const FastPlan::Step& prev = fp->steps.back();
      fuse = prev.xfer_end > prev.xfer_begin && st.xfer_end - prev.xfer_begin <= kMaxStepXfers;
      for (uint32_t i = st.xfer_begin; fuse && i < st.xfer_end; ++i)
        for (uint32_t j = prev.xfer_begin; fuse && j < prev.xfer_end; ++j)
          fuse = independent(fp->xfers[i], fp->xfers[j], in_place);
    }
    if (fuse) {
      fp->steps.back().xfer_end = st.xfer_end;
      continue;
    }
    if (st.xfer_end - st.xfer_begin > kMaxStepXfers) return nullptr;
    fp->steps.push_back(st);
  }
  for (FastPlan::Step& st : fp->steps) {
    link_pairs(fp->xfers.data() + st.xfer_begin, st.xfer_end - st.xfer_begin);
    fp->max_step_xfers = std::max<size_t>(fp->max_step_xfers, st.xfer_end - st.xfer_begin);
    st.prefetch = prefetches(fp->xfers.data() + st.xfer_begin, st.xfer_end - st.xfer_begin);
  }
  fp->crowded = comm->host_oversubscribed;
  return fp;
}

void run_fast(mycollComm* comm, const FastPlan& plan, const FastCall& call) {
  FastRun run(comm, plan, call);
  try {
    run.run();
  } catch (const Error& e) {
    throw host_fail(comm, e, run.waits());
  }
}

}  // namespace mycoll

namespace mycoll {

namespace {

// Whether the batch's non-empty messages, in order, are the transfers of p
// (the last batch built here): same peers, directions and sizes. Such a
// batch was eligible and reuses p; only addresses and message numbers
// change. The addresses are renewed on the way (one pass): a batch that
// turns out different rebuilds p or leaves it to the next batch's renewal.
bool same_batch_renew(FastPlan& p, const P2pMsg* msgs, size_t n) {
  size_t j = 0;
  for (size_t i = 0; i < n; ++i) {
    const P2pMsg& m = msgs[i];
    if (m.bytes == 0) continue;
    if (j == p.xfers.size()) return false;
    FastPlan::Xfer& x = p.xfers[j++];
    if (x.peer != m.peer || x.bytes != m.bytes || (x.kind == OpKind::Send) != m.is_send)
      return false;
    x.off = reinterpret_cast<uintptr_t>(m.buf);
  }
  return j > 0 && j == p.xfers.size();
}

// Every non-empty message fits a record of its peer's connection, none is
// with this rank.
bool eligible(mycollComm* comm, const P2pMsg* msgs, size_t n) {
  if (n > kMaxStepXfers) return false;
  for (size_t i = 0; i < n; ++i) {
    const P2pMsg& m = msgs[i];
    if (m.bytes == 0) continue;
    if (m.peer < 0 || m.peer >= comm->nranks || m.peer == comm->rank) return false;
    const Connection* conn = comm->conns[m.peer].get();
    if (!conn || sizeof(MsgHeader) + m.bytes > conn->record_max()) return false;
  }
  return true;
}

// Builds p for a batch unlike the last (see prepare_fast_p2p), or returns
// null, having changed nothing but p, when it does not qualify.
[[gnu::noinline]] const FastPlan* rebuild_p2p_plan(mycollComm* comm, FastPlan& p,
                                                   const P2pMsg* msgs, size_t n) {
  if (!eligible(comm, msgs, n)) return nullptr;
  p.coll = Coll::SendRecv;
  p.algo = Algo::Direct;
  p.dtype = mycollUint8;
  p.es = 1;
  p.count = 0;
  p.root = -1;
  p.scratch_bytes = 0;
  p.result = Slice{Buf::Output, 0, 0};
  p.crowded = comm->host_oversubscribed;  // fixed per communicator
  p.steps.clear();
  p.locals.clear();
  p.xfers.clear();
  for (size_t i = 0; i < n; ++i) {
    const P2pMsg& m = msgs[i];
    if (m.bytes == 0) continue;
    FastPlan::Xfer x{};
    x.kind = m.is_send ? OpKind::Send : OpKind::Recv;
    x.peer = m.peer;
    x.conn = comm->conns[m.peer].get();
    x.buf = m.is_send ? Buf::Input : Buf::Output;
    x.off = reinterpret_cast<uintptr_t>(m.buf);
    x.bytes = m.bytes;
    x.seq = (m.is_send ? comm->p2p_sent : comm->p2p_recvd)[m.peer]++;
    p.count += m.bytes;
    p.xfers.push_back(x);
  }
  link_pairs(p.xfers.data(), p.xfers.size());
  p.hdr = collective_header(p.coll, p.dtype, mycollSum, p.root, p.count, 0, 0);
  if (!p.xfers.empty())
    p.steps.push_back({0, 0, 0, static_cast<uint32_t>(p.xfers.size()),
                       prefetches(p.xfers.data(), p.xfers.size())});
  return &p;
}

}  // namespace

const FastPlan* prepare_fast_p2p(mycollComm* comm, const P2pMsg* msgs, size_t n) {
  // One step of transfers addressed absolutely (as the general loop's p2p
  // task: dtype uint8, null bases, offsets = addresses). Kept with the
  // communicator, so a warm batch allocates nothing, and a batch like the
  // last one (training repeats its batches) only renews addresses and
  // message numbers.
  FastPlan& p = host_p2p_plan(comm);
  if (!same_batch_renew(p, msgs, n)) return rebuild_p2p_plan(comm, p, msgs, n);
  for (FastPlan::Xfer& x : p.xfers)
    x.seq = (x.kind == OpKind::Send ? comm->p2p_sent : comm->p2p_recvd)[x.peer]++;
  return &p;
}

void run_fast_p2p(mycollComm* comm, const FastPlan& p) {
  if (p.xfers.empty()) return;  // only empty messages
  FastCall call;                // null bases
  call.op = mycollSum;
  run_fast(comm, p, call);
}

}  // namespace mycoll
