#include "engine/host_engine.h"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <algorithm>
#include <exception>
#include <utility>

#include "core/comm.h"
#include "core/error.h"
#include "core/flight_recorder.h"
#include "core/log.h"
#include "engine/reduce.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;

// Every message starts with this header: the call it belongs to travels
// with the data and is checked on arrival, so a peer that made a different
// call (collective, count, type, op, root) or is a call ahead or behind
// (sequence) is an InvalidUsage error naming it, never silent corruption.
// Fields that do not apply to a call are sent as kNone / -1.
struct MsgHeader {
  uint32_t magic;
  uint8_t coll;
  uint8_t dtype;
  uint8_t op;  // reducing collectives; else kNone
  uint8_t pad;
  int32_t root;    // rooted collectives; else -1
  uint32_t pad2;
  uint64_t count;  // the call's count (point-to-point: this message's bytes)
  uint64_t bytes;  // payload of this message
  // Collectives: the call's number on the communicator. Point-to-point: the
  // message's number from sender to receiver.
  uint64_t seq;
};
static_assert(sizeof(MsgHeader) == 40, "header layout");
constexpr uint32_t kMsgMagic = 0x324d434dU;  // "MCM2"
constexpr uint8_t kNone = 0xff;

bool is_reducing(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
bool is_rooted(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Scatter || c == Coll::Gather;
}

struct OpState {
  const Op* op = nullptr;
  char* dst = nullptr;
  const char* src = nullptr;
  size_t bytes = 0;
  MsgHeader hdr{};  // what this op sends, or expects to receive
  MsgHeader got{};  // what arrived (receives)
  size_t hdr_done = 0;
  size_t done = 0;
  bool complete = false;
  unsigned char carry[16];
  size_t carry_n = 0;
};

class Exec {
 public:
  Exec(mycollComm* comm, std::vector<Task>* tasks) : comm_(comm), tasks_(tasks) {
    busy_send_.assign(comm->nranks, 0);
    busy_recv_.assign(comm->nranks, 0);
    last_progress_ = Clock::now();
  }

  bool finished() const { return failed_ || task_ >= tasks_->size(); }
  bool failed() const { return failed_; }

  // One pass over the current step. Returns true if any byte moved.
  bool advance() {
    bool moved = false;
    while (!finished()) {
      if (!started_) start_step();
      bool step_moved = false;
      bool all_done = true;
      for (auto& s : ops_) {
        if (s.complete) continue;
        int peer = s.op->peer;
        auto& busy = s.op->kind == OpKind::Send ? busy_send_ : busy_recv_;
        if (busy[peer] != pass_) {
          busy[peer] = pass_;  // first incomplete op in this direction to peer: it may move
          step_moved |= s.op->kind == OpKind::Send ? do_send(s) : do_recv(s);
        }
        if (!s.complete) all_done = false;
      }
      ++pass_;
      moved |= step_moved;
      if (!all_done) break;
      finish_step();
    }
    if (moved) last_progress_ = Clock::now();
    return moved;
  }

  // Called when a whole pass moved nothing.
  void idle_check(Clock::time_point now) {
    if (comm_->aborted.load()) throw_error(mycollRemoteError, where() + ": communicator aborted");
    double idle = std::chrono::duration<double>(now - last_progress_).count();
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && idle >= next_wait_report_) {
      next_wait_report_ = idle + 1.0;  // at most one line a second per communicator
      trace("{}: waiting {:.0f} ms {}", where(), idle * 1e3, waiting_on());
    }
    if (idle > 0.005) {
      for (auto& s : ops_)
        if (!s.complete) comm_->conns[s.op->peer]->check_alive();
      if (comm_->flight) record_waiting();
    }
    if (idle > comm_->cfg.timeout_s)
      throw_error(mycollTimeout, where() + ": no progress for " +
                                     std::to_string(static_cast<int>(idle)) + " s (MYCOLL_TIMEOUT) " +
                                     waiting_on());
  }

  // Marks the communicator failed and returns the error to report: for a
  // lost or silent peer, with the root cause other ranks reported (a rank
  // that failed first says why before closing its connections, so the
  // messenger is not blamed).
  Error fail(const Error& e) {
    failed_ = true;
    if (comm_->flight && task_ < tasks_->size()) {
      record_waiting();
      comm_->flight->failed((*tasks_)[task_].seq);
    }
    comm_->fail(e.code(), e.what());
    if (e.code() != mycollRemoteError && e.code() != mycollTimeout) return e;
    // A peer that timed out at about the same time may report a moment
    // later; a closed connection's report is already on its way.
    double wait = e.code() == mycollTimeout ? std::min(3.0, 0.5 + comm_->cfg.timeout_s / 4) : 1.0;
    return Error(e.code(), comm_->with_remote_cause(e.what(), wait));
  }

  std::string where() const {
    if (task_ >= tasks_->size()) return "idle";
    const Task& t = (*tasks_)[task_];
    return std::string(coll_name(t.coll)) + " (" + algo_name(t.algo) + ", " +
           std::to_string(t.count) + " x " + dtype_name(t.dtype) + ", step " +
           std::to_string(step_ + 1) + "/" + std::to_string(t.plan.steps.size()) + ") on rank " +
           std::to_string(comm_->rank);
  }

 private:
  std::string waiting_on() const {
    std::string w;
    for (auto& s : ops_) {
      if (s.complete) continue;
      const char* dir = s.op->kind == OpKind::Send ? "sending to" : "receiving from";
      w += std::string(w.empty() ? "" : ", ") + dir + " rank " + std::to_string(s.op->peer) + " (" +
           comm_->conns[s.op->peer]->describe() + ", " + std::to_string(s.done) + "/" +
           std::to_string(s.bytes) + " bytes)";
    }
    return w.empty() ? "" : "while " + w;
  }

  char* resolve(const Slice& sl, size_t es) {
    const Task& t = (*tasks_)[task_];
    char* base = nullptr;
    switch (sl.buf) {
      case Buf::Input: base = const_cast<char*>(static_cast<const char*>(t.input)); break;
      case Buf::Output: base = static_cast<char*>(t.output); break;
      case Buf::Scratch: base = comm_->scratch.data(); break;
    }
    return base + sl.offset * es;
  }

  void start_task() {
    Task& t = (*tasks_)[task_];
    if (comm_->flight) comm_->flight->started(t.seq);
    size_t need = t.plan.scratch_count * dtype_size(t.dtype);
    if (comm_->scratch.size() < need) comm_->scratch.resize(need);
  }

  void start_step() {
    if (step_ == 0) start_task();
    Task& t = (*tasks_)[task_];
    size_t es = dtype_size(t.dtype);
    ops_.clear();
    if (step_ < t.plan.steps.size()) {
      for (const Op& op : t.plan.steps[step_].ops) {
        if (op.kind == OpKind::Copy) {
          char* d = resolve(op.dst, es);
          char* s = resolve(op.src, es);
          if (d != s && op.src.count) std::memmove(d, s, op.src.count * es);
          continue;
        }
        if (op.kind == OpKind::Reduce) {
          char* d = resolve(op.dst, es);
          reduce_host(t.dtype, t.op, d, d, resolve(op.src, es), op.dst.count);
          continue;
        }
        OpState st;
        st.op = &op;
        if (op.kind == OpKind::Send) {
          st.src = resolve(op.src, es);
          st.bytes = op.src.count * es;
        } else {
          st.dst = resolve(op.dst, es);
          if (op.kind == OpKind::RecvReduce) st.src = resolve(op.src, es);
          st.bytes = op.dst.count * es;
        }
        st.hdr = header_for(t, op, st.bytes);
        ops_.push_back(st);
      }
    }
    started_ = true;
    step_t0_ = Clock::now();
    next_wait_report_ = 1.0;
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && step_ < t.plan.steps.size()) trace_step_start();
  }

  MsgHeader header_for(const Task& t, const Op& op, size_t bytes) {
    MsgHeader h{};
    h.magic = kMsgMagic;
    h.coll = static_cast<uint8_t>(t.coll);
    h.dtype = static_cast<uint8_t>(t.dtype);
    h.op = is_reducing(t.coll) ? static_cast<uint8_t>(t.op) : kNone;
    h.root = is_rooted(t.coll) ? t.root : -1;
    h.bytes = bytes;
    if (t.coll == Coll::SendRecv) {
      h.count = bytes;
      auto& n = op.kind == OpKind::Send ? comm_->p2p_sent : comm_->p2p_recvd;
      h.seq = n[op.peer]++;
    } else {
      h.count = t.count;
      h.seq = t.coll_seq;
    }
    return h;
  }

  void finish_step() {
    Task& t = (*tasks_)[task_];
    if (log_enabled(LogLevel::Trace, Subsys::Coll) && step_ < t.plan.steps.size())
      trace("{} step {}/{} done in {:.1f} us", coll_name(t.coll), step_ + 1, t.plan.steps.size(),
            std::chrono::duration<double, std::micro>(Clock::now() - step_t0_).count());
    started_ = false;
    ops_.clear();
    if (++step_ < t.plan.steps.size()) return;
    if (t.op == mycollAvg && t.plan.result.count > 0)
      scale_avg_host(t.dtype, resolve(t.plan.result, dtype_size(t.dtype)), t.plan.result.count,
                     comm_->nranks);
    if (comm_->flight) comm_->flight->done(t.seq);
    step_ = 0;
    ++task_;
  }

  // Flight recorder: the first peer the current step still waits on.
  void record_waiting() {
    for (const OpState& s : ops_) {
      if (s.complete) continue;
      comm_->flight->waiting((*tasks_)[task_].seq, s.op->peer, s.op->kind == OpKind::Send,
                             s.done, s.bytes);
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
    for (const OpState& st : ops_) {
      const char* what = st.op->kind == OpKind::Send ? "send to" : st.op->kind == OpKind::Recv
                                                                      ? "recv from"
                                                                      : "recv+reduce from";
      ops += fmt::format("{}{} rank {} {} B", ops.empty() ? "" : ", ", what, st.op->peer, st.bytes);
    }
    trace("{} {} step {}/{}: {}", coll_name(t.coll), algo_name(t.algo), step_ + 1,
          t.plan.steps.size(), ops.empty() ? "local work only" : ops);
  }

  bool do_send(OpState& s) {
    Connection& c = *comm_->conns[s.op->peer];
    bool moved = false;
    while (s.hdr_done < sizeof(MsgHeader)) {
      size_t n = c.send_some(reinterpret_cast<const char*>(&s.hdr) + s.hdr_done,
                             sizeof(MsgHeader) - s.hdr_done);
      if (n == 0) return moved;
      s.hdr_done += n;
      moved = true;
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
    const MsgHeader& h = s.got;
    const MsgHeader& e = s.hdr;
    const std::string from = "rank " + std::to_string(s.op->peer);
    if (h.magic != kMsgMagic)
      throw_error(mycollRemoteError, where() + ": garbage from " + from + " (bad message magic)");
    if (h.coll == e.coll && h.dtype == e.dtype && h.op == e.op && h.root == e.root &&
        h.count == e.count && h.seq == e.seq && h.bytes == e.bytes)
      return;
    auto coll = [](unsigned v) { return v < kNumColls ? coll_name(static_cast<Coll>(v)) : "?"; };
    auto dtype = [](unsigned v) {
      return v < mycollNumTypes ? dtype_name(static_cast<mycollDataType_t>(v)) : "?";
    };
    auto op = [](unsigned v) {
      return v == kNone ? "none" : v < mycollNumOps ? redop_name(static_cast<mycollRedOp_t>(v)) : "?";
    };
    std::string diff;
    auto add = [&](const std::string& what, const std::string& theirs, const std::string& mine) {
      diff += (diff.empty() ? "" : ", ") + what + " " + theirs + " (this rank: " + mine + ")";
    };
    const bool p2p = e.coll == static_cast<uint8_t>(Coll::SendRecv);
    if (h.coll != e.coll) add("collective", coll(h.coll), coll(e.coll));
    if (h.seq != e.seq)
      add(p2p ? "message number" : "call number", std::to_string(h.seq), std::to_string(e.seq));
    if (!p2p && h.count != e.count) add("count", std::to_string(h.count), std::to_string(e.count));
    if (h.dtype != e.dtype) add("datatype", dtype(h.dtype), dtype(e.dtype));
    if (h.op != e.op) add("op", op(h.op), op(e.op));
    if (h.root != e.root) add("root", std::to_string(h.root), std::to_string(e.root));
    if (h.bytes != e.bytes) add("message bytes", std::to_string(h.bytes), std::to_string(e.bytes));
    const char* hint = h.seq != e.seq && !p2p
                           ? ": a rank skipped or added a call (all ranks must make the same "
                             "calls in the same order)"
                       : p2p ? ": sends and receives between this pair do not match"
                             : ": ranks must make the same calls with the same arguments";
    throw_error(mycollInvalidUsage,
                where() + ": mismatch with " + from + ", which sent " + diff + hint);
  }

  bool do_recv(OpState& s) {
    Connection& c = *comm_->conns[s.op->peer];
    bool moved = false;
    while (s.hdr_done < sizeof(MsgHeader)) {
      size_t n = c.recv_some(reinterpret_cast<char*>(&s.got) + s.hdr_done,
                             sizeof(MsgHeader) - s.hdr_done);
      if (n == 0) return moved;
      s.hdr_done += n;
      moved = true;
      if (s.hdr_done == sizeof(MsgHeader)) check_header(s);
    }
    if (s.op->kind == OpKind::Recv) {
      while (s.done < s.bytes) {
        size_t n = c.recv_some(s.dst + s.done, s.bytes - s.done);
        if (n == 0) break;
        s.done += n;
        moved = true;
      }
    } else {
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
  std::vector<Task>* tasks_;
  size_t task_ = 0;
  size_t step_ = 0;
  bool started_ = false;
  bool failed_ = false;
  std::vector<OpState> ops_;
  std::vector<uint64_t> busy_send_, busy_recv_;
  uint64_t pass_ = 1;
  Clock::time_point last_progress_;
  Clock::time_point step_t0_;
  double next_wait_report_ = 1.0;  // TRACE: idle seconds of the next "waiting" line
};

void backoff(unsigned idle_passes) {
  if (idle_passes < 64) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else if (idle_passes < 20000) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, nullptr);
  }
}

}  // namespace

void run_host(std::vector<HostWork>& work) {
  std::vector<Exec> execs;
  execs.reserve(work.size());
  for (auto& w : work) execs.emplace_back(w.comm, &w.tasks);
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
    if ((idle & 255) == 0 || idle > 20000) {
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
    backoff(idle);
  }
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace mycoll
