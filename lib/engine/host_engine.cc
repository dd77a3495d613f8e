// Host engine (see host_engine.h and docs/architecture.md).
//
// The per-call path is kept free of allocation, syscalls, locks and clock
// reads: plans come from the communicator's PlanCache, the op states and
// per-peer marks live in its HostState (reused), and time is read only
// once a pass has moved nothing 256 times in a row. On connections with
// records (shm) a message's header travels as a record, with the payload
// inside it when it fits (one cache line for an 8-byte all-reduce); the
// receiver checks the header and copies or reduces straight out of the
// record.
#include "engine/host_engine.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"
#include "comm/flight_recorder.h"
#include "engine/host_wire.h"
#include "engine/reduce.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;

struct OpState {
  const Op* op = nullptr;
  Connection* conn = nullptr;
  char* dst = nullptr;
  const char* src = nullptr;
  size_t bytes = 0;
  MsgHeader hdr{};  // what this op sends, or expects to receive
  MsgHeader got{};  // what arrived (receives)
  size_t hdr_done = 0;
  size_t done = 0;
  bool complete = false;
  bool records = false;      // the header travels as a record (conn->record_max() > 0)
  bool remote = false;       // the payload is read from the sender's memory (kPayloadRemote)
  uint64_t remote_addr = 0;  // receiver: where, in the sender
  uint64_t ticket = 0;       // sender: Connection::expose() ticket
  unsigned char carry[16];
  size_t carry_n = 0;
};

}  // namespace

struct HostState {
  PlanCache plans;
  std::vector<OpState> ops;  // the current step's transfers (capacity kept)
  // busy_*[peer] == pass: an earlier op of this pass already moves data in
  // that direction with that peer (messages of a pair match in order).
  std::vector<uint64_t> busy_send, busy_recv;
  uint64_t pass = 1;  // never reset, so stale marks never match
  // record_max() of each peer's connection (0: none, or self).
  std::vector<size_t> rec_max;
  // The small-message point-to-point path's batch and plan (host_fast.h).
  std::vector<P2pMsg> p2p_msgs;
  FastPlan p2p_plan;
};

void destroy_host_state(HostState* s) { delete s; }

namespace {

// Made at the communicator's first host call; out of line, so that every
// later host_state() is a load and a test.
[[gnu::noinline]] HostState& make_host_state(mycollComm* comm) {
  auto* s = new HostState;
  comm->host_state.reset(s);
  const size_t n = static_cast<size_t>(comm->nranks);
  s->busy_send.assign(n, 0);
  s->busy_recv.assign(n, 0);
  s->rec_max.assign(n, 0);
  for (size_t r = 0; r < n && r < comm->conns.size(); ++r)
    if (comm->conns[r]) s->rec_max[r] = comm->conns[r]->record_max();
  return *s;
}

HostState& host_state(mycollComm* comm) {
  if (HostState* s = comm->host_state.get()) return *s;
  return make_host_state(comm);
}

class Exec {
 public:
  Exec(mycollComm* comm, std::vector<Task>* tasks)
      : comm_(comm), st_(&host_state(comm)), tasks_(tasks) {
    st_->ops.clear();
  }

  bool finished() const { return failed_ || task_ >= tasks_->size(); }
  bool failed() const { return failed_; }

  // One pass over the current step. Returns true if any byte moved.
  bool advance() {
    cur_ = nullptr;
    bool moved = false;
    std::vector<OpState>& ops = st_->ops;
    while (!finished()) {
      if (!started_) start_step();
      bool step_moved = false;
      bool all_done = true;
      const uint64_t pass = st_->pass;
      for (OpState& s : ops) {
        if (s.complete) continue;
        const int peer = s.op->peer;
        const bool send = s.op->kind == OpKind::Send;
        uint64_t& busy = send ? st_->busy_send[peer] : st_->busy_recv[peer];
        if (busy != pass) {
          busy = pass;  // first incomplete op in this direction to peer: it may move
          step_moved |= send ? do_send(s) : do_recv(s);
        }
        if (!s.complete) all_done = false;
      }
      ++st_->pass;
      moved |= step_moved;
      if (!all_done) break;
      finish_step();
    }
    if (moved) idle_since_valid_ = false;
    return moved;
  }

  // Called when passes keep moving nothing (every 256th idle pass, or
  // every pass once backing off). The idle time counts from the first
  // such call after the last progress.
  void idle_check(Clock::time_point now) {
    cur_ = nullptr;
    if (comm_->aborted.load()) throw_error(mycollRemoteError, where() + ": communicator aborted");
    if (!idle_since_valid_) {
      idle_since_ = now;
      idle_since_valid_ = true;
      next_wait_report_ = 1.0;
    }
    double idle = std::chrono::duration<double>(now - idle_since_).count();
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && idle >= next_wait_report_) {
      next_wait_report_ = idle + 1.0;  // at most one line a second per communicator
      trace("{}: waiting {:.0f} ms {}", where(), idle * 1e3, waiting_on());
    }
    if (idle > kCheckAliveAfterS) {
      for (auto& s : st_->ops)
        if (!s.complete) {
          cur_ = &s;
          s.conn->check_alive();
        }
      cur_ = nullptr;
      if (comm_->flight) record_waiting();
    }
    if (idle > comm_->cfg.timeout_s)
      throw_error(mycollTimeout, where() + ": no progress for " +
                                     std::to_string(static_cast<int>(idle)) +
                                     " s (MYCOLL_TIMEOUT) " + waiting_on());
  }

  // Marks the communicator failed and returns the error to report
  // (host_fail), after noting the failure in the flight recorder.
  Error fail(const Error& e) {
    failed_ = true;
    if (comm_->flight && task_ < tasks_->size()) {
      record_waiting();
      comm_->flight->failed((*tasks_)[task_].seq);
    }
    // Whom the failed wait was for: the peer of the operation that failed
    // (its connection ended, it sent garbage) and, apart, the peers of the
    // other unfinished operations; for a timeout, the peers of every
    // unfinished operation.
    Waits waits;
    if (cur_) {
      waits.on.push_back(cur_->op->peer);
      for (const OpState& s : st_->ops)
        if (!s.complete && &s != cur_) waits.also.push_back(s.op->peer);
    } else if (e.code() == mycollTimeout) {
      for (const OpState& s : st_->ops)
        if (!s.complete) waits.on.push_back(s.op->peer);
    }
    return host_fail(comm_, e, waits);
  }

  std::string where() const {
    if (task_ >= tasks_->size()) return "idle";
    const Task& t = (*tasks_)[task_];
    return std::string(coll_name(t.coll)) + " (" + algo_name(t.algo) + ", " +
           std::to_string(t.count) + " x " + dtype_name(t.dtype) + ", step " +
           std::to_string(step_ + 1) + "/" + std::to_string(t.host_plan().steps.size()) +
           ") on rank " + std::to_string(comm_->rank);
  }

 private:
  std::string waiting_on() const {
    std::string w;
    for (auto& s : st_->ops) {
      if (s.complete) continue;
      const char* dir = s.op->kind == OpKind::Send ? "sending to" : "receiving from";
      w += std::string(w.empty() ? "" : ", ") + dir + " rank " + std::to_string(s.op->peer) + " (" +
           s.conn->describe() + ", " + std::to_string(s.done) + "/" + std::to_string(s.bytes) +
           " bytes)";
    }
    return w.empty() ? "" : "while " + w;
  }

  char* resolve(const Task& t, const Slice& sl, size_t es) {
    char* base = nullptr;
    switch (sl.buf) {
      case Buf::Input: base = const_cast<char*>(static_cast<const char*>(t.input)); break;
      case Buf::Output: base = static_cast<char*>(t.output); break;
      case Buf::Scratch: base = comm_->scratch.data(); break;
    }
    // Integer arithmetic: point-to-point slices carry absolute addresses on
    // null bases (enqueue.cc), and null + offset is undefined.
    return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(base) + sl.offset * es);
  }

  void start_task(const Task& t) {
    if (comm_->flight) comm_->flight->started(t.seq);
    size_t need = t.host_plan().scratch_count * dtype_size(t.dtype);
    comm_->scratch.grow(need);
  }

  // Starts the current step. The contract (plan.h) runs the step's local
  // ops before its transfers; a send whose source no local op of the step
  // writes is posted first, though (its header record, a remote-read
  // announcement, the first bytes on the stream), so the peer starts on it
  // while this rank copies: one rank's local copy and its peer's read of
  // this rank's buffer overlap instead of following each other.
  void start_step() {
    const Task& t = (*tasks_)[task_];
    if (step_ == 0) start_task(t);
    const Plan& plan = t.host_plan();
    const size_t es = dtype_size(t.dtype);
    std::vector<OpState>& ops = st_->ops;
    ops.clear();
    if (step_ < plan.steps.size()) {
      const std::vector<Op>& step_ops = plan.steps[step_].ops;
      bool any_local = false;
      for (const Op& op : step_ops) {
        if (op.kind == OpKind::Copy || op.kind == OpKind::Reduce) {
          any_local = true;
          continue;
        }
        ops.emplace_back();
        OpState& st = ops.back();
        st.op = &op;
        st.conn = comm_->conns[op.peer].get();
        st.records = st_->rec_max[op.peer] > 0;
        if (op.kind == OpKind::Send) {
          st.src = resolve(t, op.src, es);
          st.bytes = op.src.count * es;
        } else {
          st.dst = resolve(t, op.dst, es);
          if (op.kind == OpKind::RecvReduce) st.src = resolve(t, op.src, es);
          st.bytes = op.dst.count * es;
        }
        header_for(t, op, st.bytes, &st.hdr);
      }
      if (any_local) {
        post_early_sends(t, step_ops, es);
        // A non-reducing collective's large copies stream past the cache:
        // they fill its output, which nothing of the call reads again
        // (MYCOLL_HOST_NT_COPY_BYTES in docs/environment.md).
        const size_t stream_min = coll_reduces(t.coll) ? 0 : comm_->cfg.host_nt_copy_bytes;
        for (const Op& op : step_ops) {
          if (op.kind == OpKind::Copy) {
            char* d = resolve(t, op.dst, es);
            char* s = resolve(t, op.src, es);
            copy_host(d, s, op.src.count * es, stream_min);
          } else if (op.kind == OpKind::Reduce) {
            char* d = resolve(t, op.dst, es);
            reduce_host(t.dtype, t.op, d, d, resolve(t, op.src, es), op.dst.count);
          }
        }
      }
    }
    started_ = true;
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && step_ < plan.steps.size()) {
      step_t0_ = Clock::now();
      trace_step_start();
    }
  }

  // The early posting of start_step: the first send to each peer moves
  // once before the local ops run when no local op of the step writes its
  // source (by address, so in-place aliasing counts). A source written only
  // by one plain copy is sent from that copy's source instead (the same
  // bytes; ring all-gather sends the block it copies into the output), as
  // long as nothing in the step writes that source.
  void post_early_sends(const Task& t, const std::vector<Op>& step_ops, size_t es) {
    const uint64_t pass = st_->pass++;
    auto overlaps = [](const char* a, size_t an, const char* b, size_t bn) {
      return a < b + bn && b < a + an;
    };
    for (OpState& s : st_->ops) {
      if (s.op->kind != OpKind::Send || s.bytes == 0) continue;
      uint64_t& busy = st_->busy_send[s.op->peer];
      if (busy == pass) continue;  // not the first send to this peer
      busy = pass;
      int writers = 0;
      const Op* copy = nullptr;
      for (const Op& op : step_ops) {
        if (op.kind != OpKind::Copy && op.kind != OpKind::Reduce) continue;
        const char* d = resolve(t, op.dst, es);
        const size_t n = (op.kind == OpKind::Copy ? op.src.count : op.dst.count) * es;
        if (!overlaps(d, n, s.src, s.bytes)) continue;
        ++writers;
        if (op.kind == OpKind::Copy && d <= s.src && s.src + s.bytes <= d + n) copy = &op;
      }
      if (writers == 0) {
        do_send(s);
        continue;
      }
      if (writers > 1 || !copy) continue;
      const char* from = resolve(t, copy->src, es) + (s.src - resolve(t, copy->dst, es));
      bool stable = true;  // nothing of the step writes the copy's source
      for (const Op& op : step_ops) {
        if (op.kind == OpKind::Send) continue;
        const bool transfer = op.kind == OpKind::Recv || op.kind == OpKind::RecvReduce;
        const char* d = resolve(t, op.dst, es);
        const size_t n = (op.kind == OpKind::Copy ? op.src.count : op.dst.count) * es;
        if (overlaps(d, transfer ? op.dst.count * es : n, from, s.bytes)) stable = false;
      }
      if (!stable) continue;
      s.src = from;
      do_send(s);
    }
  }

  void header_for(const Task& t, const Op& op, size_t bytes, MsgHeader* h) {
    if (t.coll != Coll::SendRecv) {
      *h = collective_header(t.coll, t.dtype, t.op, t.root, t.count, bytes, t.coll_seq);
      return;
    }
    *h = MsgHeader{};
    h->magic = kMsgMagic;
    h->coll = static_cast<uint8_t>(Coll::SendRecv);
    h->dtype = static_cast<uint8_t>(t.dtype);
    h->op = kNone;
    h->root = -1;
    h->count = bytes;
    h->bytes = bytes;
    auto& n = op.kind == OpKind::Send ? comm_->p2p_sent : comm_->p2p_recvd;
    h->seq = n[op.peer]++;
  }

  void finish_step() {
    const Task& t = (*tasks_)[task_];
    const Plan& plan = t.host_plan();
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && step_ < plan.steps.size())
      trace("{} step {}/{} done in {:.1f} us", coll_name(t.coll), step_ + 1, plan.steps.size(),
            std::chrono::duration<double, std::micro>(Clock::now() - step_t0_).count());
    started_ = false;
    st_->ops.clear();
    if (++step_ < plan.steps.size()) return;
    if (t.op == mycollAvg && plan.result.count > 0)
      scale_avg_host(t.dtype, resolve(t, plan.result, dtype_size(t.dtype)), plan.result.count,
                     comm_->nranks);
    if (comm_->flight) comm_->flight->done(t.seq);
    step_ = 0;
    ++task_;
  }

  // Flight recorder: the first peer the current step still waits on.
  void record_waiting() {
    for (const OpState& s : st_->ops) {
      if (s.complete) continue;
      comm_->flight->waiting((*tasks_)[task_].seq, s.op->peer, s.op->kind == OpKind::Send, s.done,
                             s.bytes);
      return;
    }
  }

  // TRACE lines of this communicator (this thread may drive several).
  template <typename... Args>
  void trace(fmt::format_string<Args...> f, Args&&... args) {
    LogScope scope(&comm_->log_tag);
    log_trace(Subsys::Coll, f, std::forward<Args>(args)...);
  }

  void trace_step_start() {
    const Task& t = (*tasks_)[task_];
    std::string ops;
    for (const OpState& st : st_->ops) {
      const char* what = st.op->kind == OpKind::Send   ? "send to"
                         : st.op->kind == OpKind::Recv ? "recv from"
                                                       : "recv+reduce from";
      ops += fmt::format("{}{} rank {} {} B", ops.empty() ? "" : ", ", what, st.op->peer, st.bytes);
    }
    trace("{} {} step {}/{}: {}", coll_name(t.coll), algo_name(t.algo), step_ + 1,
          t.host_plan().steps.size(), ops.empty() ? "local work only" : ops);
  }

  bool do_send(OpState& s) {
    cur_ = &s;
    Connection& c = *s.conn;
    bool moved = false;
    if (s.records) {
      // The header as a record, the payload inside it when it fits.
      if (s.hdr_done == 0) {
        const bool inline_payload = sizeof(MsgHeader) + s.bytes <= st_->rec_max[s.op->peer];
        const size_t read_min = single_copy_min_bytes(comm_->cfg, s.hdr.coll);
        if (!inline_payload && read_min > 0 && s.bytes >= read_min && c.remote_read_ok()) {
          MsgHeader h = s.hdr;
          h.pad = kPayloadRemote;
          const uint64_t addr = reinterpret_cast<uintptr_t>(s.src);
          if (!c.send_record(&h, sizeof(h), &addr, sizeof(addr))) return false;
          s.ticket = c.expose();
          s.remote = true;
          s.hdr_done = sizeof(MsgHeader);
          moved = true;
        } else {
          if (!c.send_record(&s.hdr, sizeof(MsgHeader), s.src, inline_payload ? s.bytes : 0))
            return false;
          s.hdr_done = sizeof(MsgHeader);
          moved = true;
          if (inline_payload) s.done = s.bytes;
        }
      }
      if (s.remote) {  // complete once the receiver has read the buffer
        if (c.exposed_done(s.ticket)) {
          s.done = s.bytes;
          moved = true;
        }
        s.complete = s.done == s.bytes;
        return moved;
      }
    } else {
      // A small payload goes in one write with its header; a large one
      // after it, so that it starts a segment of its own.
      const size_t with_hdr = s.bytes <= kStreamPeekBytes ? s.bytes : 0;
      while (s.hdr_done < sizeof(MsgHeader)) {
        const size_t hn = sizeof(MsgHeader) - s.hdr_done;
        size_t n =
            c.send_some2(reinterpret_cast<const char*>(&s.hdr) + s.hdr_done, hn, s.src, with_hdr);
        if (n == 0) return moved;
        const size_t h = std::min(n, hn);
        s.hdr_done += h;
        s.done += n - h;
        moved = true;
      }
    }
    while (s.done < s.bytes) {
      size_t n = c.send_some(s.src + s.done, s.bytes - s.done);
      if (n == 0) break;
      s.done += n;
      moved = true;
    }
    s.complete = s.done == s.bytes;
    return moved;
  }

  void check_header(const OpState& s) const {
    if (!header_matches(s.got, s.hdr)) throw_header_mismatch(s.got, s.hdr, s.op->peer, where());
  }

  // Records: takes the header record; a payload inside it is copied or
  // reduced in place. Returns false when no record has arrived.
  bool recv_header_record(OpState& s) {
    Connection& c = *s.conn;
    const void* p = nullptr;
    const size_t len = c.peek_record(&p);
    if (len == 0) return false;
    MsgRecord r;
    const RecordError e = parse_msg_record(p, len, s.hdr, s.op->kind == OpKind::Recv, &r);
    if (e != RecordError::kNone) throw_record_error(e, r, len, s.hdr, s.op->peer, where());
    s.got = r.hdr;
    s.hdr_done = sizeof(MsgHeader);
    if (r.payload == MsgRecord::Payload::kRemote) {
      s.remote_addr = r.remote_addr;
      s.remote = true;
      if (log_enabled(LogLevel::Trace, Subsys::Coll))
        trace("{}: {} B from rank {} read single copy", where(), s.bytes, s.op->peer);
    } else if (r.payload == MsgRecord::Payload::kInline) {
      if (s.bytes > 0) {
        if (s.op->kind == OpKind::Recv) {
          std::memcpy(s.dst, r.data, s.bytes);
        } else {
          const Task& t = (*tasks_)[task_];
          reduce_host(t.dtype, t.op, s.dst, s.src, r.data, s.bytes / dtype_size(t.dtype));
        }
      }
      s.done = s.bytes;
    }
    c.consume_record();
    return true;
  }

  bool do_recv(OpState& s) {
    cur_ = &s;
    Connection& c = *s.conn;
    bool moved = false;
    if (s.records) {
      if (s.hdr_done == 0) {
        if (!recv_header_record(s)) return false;
        moved = true;
      }
    } else {
      // A message whose payload lands in a staging buffer anyway (reduced
      // from it, or small) has its header taken through peek (the base
      // Connection::recv_some): on sockets one recv then fills the buffer
      // with header and payload. A large received payload goes straight
      // into dst after a header read alone (the transport's recv_some).
      const bool via_peek = s.op->kind != OpKind::Recv || s.bytes <= kStreamPeekBytes;
      while (s.hdr_done < sizeof(MsgHeader)) {
        char* to = reinterpret_cast<char*>(&s.got) + s.hdr_done;
        const size_t want = sizeof(MsgHeader) - s.hdr_done;
        const size_t n = via_peek ? c.Connection::recv_some(to, want) : c.recv_some(to, want);
        if (n == 0) return moved;
        s.hdr_done += n;
        moved = true;
        if (s.hdr_done == sizeof(MsgHeader)) check_header(s);
      }
    }
    if (s.remote) {  // one copy straight out of the sender's buffer
      while (s.done < s.bytes) {
        const size_t want = std::min(s.bytes - s.done, kRemoteReadChunkBytes);
        const size_t n = c.read_remote(s.dst + s.done, s.remote_addr + s.done, want);
        if (n == 0)
          throw_error(mycollInternalError,
                      where() + ": remote read announced on a connection without them");
        s.done += n;
        moved = true;
      }
      c.release_remote();
    } else if (s.op->kind == OpKind::Recv) {
      while (s.done < s.bytes) {
        size_t n = c.recv_some(s.dst + s.done, s.bytes - s.done);
        if (n == 0) break;
        s.done += n;
        moved = true;
      }
    } else if (s.done < s.bytes) {
      moved |= recv_reduce(c, s);
    }
    s.complete = s.done == s.bytes;
    return moved;
  }

  bool recv_reduce(Connection& c, OpState& s) {
    const Task& t = (*tasks_)[task_];
    const size_t es = dtype_size(t.dtype);
    bool moved = false;
    while (s.done < s.bytes) {
      if (s.carry_n > 0) {  // finish an element split across the channel's wrap
        size_t n = c.recv_some(s.carry + s.carry_n, es - s.carry_n);
        if (n == 0) break;
        s.carry_n += n;
        moved = true;
        if (s.carry_n < es) continue;
        reduce_host(t.dtype, t.op, s.dst + s.done, s.src + s.done, s.carry, 1);
        s.done += es;
        s.carry_n = 0;
        continue;
      }
      const void* p = nullptr;
      size_t n = c.peek(&p, s.bytes - s.done);
      if (n == 0) break;
      size_t whole = n / es * es;
      if (whole == 0) {
        s.carry_n = c.recv_some(s.carry, n);
        moved = true;
        continue;
      }
      reduce_host(t.dtype, t.op, s.dst + s.done, s.src + s.done, p, whole / es);
      c.consume(whole);
      s.done += whole;
      moved = true;
    }
    return moved;
  }

  mycollComm* comm_;
  HostState* st_;
  std::vector<Task>* tasks_;
  size_t task_ = 0;
  size_t step_ = 0;
  bool started_ = false;
  bool failed_ = false;
  bool idle_since_valid_ = false;
  Clock::time_point idle_since_;
  Clock::time_point step_t0_;
  double next_wait_report_ = 1.0;  // TRACE: idle seconds of the next "waiting" line
  const OpState* cur_ = nullptr;   // the operation being moved or checked (whom a throw blames)
};

// The progress loop over every communicator's Exec (see run_host).
template <typename Execs>
void progress_all(Execs& execs, bool crowded) {
  std::exception_ptr first_error;
  unsigned idle = 0;
  for (;;) {
    bool all_done = true, moved = false;
    for (auto& e : execs) {
      if (e.finished()) continue;
      try {
        moved |= e.advance();
      } catch (const Error& err) {
        Error reported = e.fail(err);
        if (!first_error) first_error = std::make_exception_ptr(reported);
      }
      if (!e.finished()) all_done = false;
    }
    if (all_done) break;
    if (moved) {
      idle = 0;
      continue;
    }
    ++idle;
    if (idle_check_due(idle)) {
      auto now = Clock::now();
      for (auto& e : execs) {
        if (e.finished()) continue;
        try {
          e.idle_check(now);
        } catch (const Error& err) {
          Error reported = e.fail(err);
          if (!first_error) first_error = std::make_exception_ptr(reported);
        }
      }
    }
    backoff(idle, crowded);
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace

PlanCache& host_plan_cache(mycollComm* comm) { return host_state(comm).plans; }
std::vector<P2pMsg>& host_p2p_msgs(mycollComm* comm) { return host_state(comm).p2p_msgs; }
FastPlan& host_p2p_plan(mycollComm* comm) { return host_state(comm).p2p_plan; }

void run_host(std::vector<HostWork>& work) {
  if (work.size() == 1) {  // one communicator: no list of Execs to allocate
    Exec one[1] = {Exec(work[0].comm, &work[0].tasks)};
    progress_all(one, work[0].comm->host_oversubscribed);
    return;
  }
  std::vector<Exec> execs;
  execs.reserve(work.size());
  bool crowded = false;
  for (auto& w : work) {
    execs.emplace_back(w.comm, &w.tasks);
    crowded |= w.comm->host_oversubscribed;
  }
  progress_all(execs, crowded);
}

}  // namespace mycoll
