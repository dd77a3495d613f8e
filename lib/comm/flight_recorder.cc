#include "comm/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <thread>

#include "comm/comm.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/log.h"

namespace mycoll {
namespace {

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* state_name(FrState s) {
  switch (s) {
    case FrState::Enqueued: return "enqueued";
    case FrState::Started: return "started";
    case FrState::Done: return "done";
    case FrState::Failed: return "failed";
  }
  return "?";
}

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += static_cast<char>(ch);
    else if (ch < 0x20) o += fmt::format("\\u{:04x}", ch);
    else o += static_cast<char>(ch);
  }
  return o + "\"";
}

std::string us_or_null(int64_t us) { return us ? std::to_string(us) : "null"; }

std::string entry_json(const FrEntry& e) {
  std::string waiting = "null";
  if (e.waiting_peer >= 0)
    waiting = fmt::format("{{\"peer\": {}, \"dir\": \"{}\", \"done\": {}, \"bytes\": {}}}",
                          e.waiting_peer, e.waiting_send ? "send" : "recv", e.waiting_done,
                          e.waiting_bytes);
  return fmt::format(
      "{{\"seq\": {}, \"coll\": \"{}\", \"count\": {}, \"dtype\": \"{}\", \"op\": \"{}\", "
      "\"root\": {}, \"algo\": \"{}\", \"engine\": \"{}\", \"state\": \"{}\", "
      "\"enqueued_us\": {}, \"started_us\": {}, \"done_us\": {}, \"waiting_on\": {}}}",
      e.seq, coll_name(e.coll), e.count, dtype_name(e.dtype), redop_name(e.op), e.root,
      algo_name(e.algo), e.device ? "device" : "host", state_name(e.state),
      us_or_null(e.enqueued_us), us_or_null(e.started_us), us_or_null(e.done_us), waiting);
}

// --- the opt-in signal: the handler writes a byte to a pipe; a thread
// reads it and dumps every registered communicator (no work in the handler).
std::mutex g_mu;
std::set<mycollComm*>* g_comms = new std::set<mycollComm*>;  // never destroyed
int g_pipe[2] = {-1, -1};

void on_signal(int) {
  int saved = errno;
  char b = 1;
  if (g_pipe[1] >= 0) (void)!write(g_pipe[1], &b, 1);
  errno = saved;
}

void dump_thread() {
  char b;
  for (;;) {
    ssize_t n = read(g_pipe[0], &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    std::lock_guard<std::mutex> g(g_mu);
    for (mycollComm* c : *g_comms) {
      try {
        LogScope scope(&c->log_tag);
        log_warn(Subsys::Init, "flight recorder written to {} (signal)", flight_dump(*c, "signal"));
      } catch (const std::exception& e) {
        log_warn(Subsys::Init, "flight recorder: {}", e.what());
      }
    }
  }
}

void install_signal_once(int sig) {
  static std::once_flag once;
  std::call_once(once, [sig] {
    if (pipe2(g_pipe, O_CLOEXEC) != 0) {
      log_warn(Subsys::Init, "MYCOLL_FLIGHT_RECORDER_SIGNAL: pipe: {}", std::strerror(errno));
      return;
    }
    std::thread(dump_thread).detach();
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, nullptr);
    log_info(Subsys::Init, "flight recorder: signal {} dumps every communicator", sig);
  });
}

}  // namespace

FrEntry* FlightRecorder::find(uint64_t seq) {
  if (ring_.empty() || count_ == 0) return nullptr;
  // Entries are recorded in seq order: look back from the newest.
  const size_t n = std::min<uint64_t>(count_, ring_.size());
  for (size_t i = 0; i < n; ++i) {
    FrEntry& e = ring_[(count_ - 1 - i) % ring_.size()];
    if (e.seq == seq) return &e;
  }
  return nullptr;
}

void FlightRecorder::enqueued(const Task& t, uint64_t seq, bool device) {
  std::lock_guard<std::mutex> g(mu_);
  FrEntry& e = ring_[count_++ % ring_.size()];
  e = FrEntry{};
  e.seq = seq;
  e.coll = t.coll;
  e.dtype = t.dtype;
  e.op = t.op;
  e.count = t.count;
  e.root = t.root;
  e.algo = t.algo;
  e.device = device;
  e.enqueued_us = now_us();
}

void FlightRecorder::started(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (FrEntry* e = find(seq)) {
    e->state = FrState::Started;
    e->started_us = now_us();
  }
}

void FlightRecorder::done(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (FrEntry* e = find(seq)) {
    e->state = FrState::Done;
    e->done_us = now_us();
    e->waiting_peer = -1;
  }
}

void FlightRecorder::waiting(uint64_t seq, int peer, bool send, size_t done, size_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  if (FrEntry* e = find(seq)) {
    e->waiting_peer = peer;
    e->waiting_send = send;
    e->waiting_done = done;
    e->waiting_bytes = bytes;
  }
}

void FlightRecorder::failed(uint64_t seq) {
  std::lock_guard<std::mutex> g(mu_);
  if (FrEntry* e = find(seq)) {
    e->state = FrState::Failed;
    e->done_us = now_us();
  }
}

uint64_t FlightRecorder::recorded() const {
  std::lock_guard<std::mutex> g(mu_);
  return count_;
}

std::vector<FrEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<FrEntry> out;
  const uint64_t n = std::min<uint64_t>(count_, ring_.size());
  for (uint64_t i = count_ - n; i < count_; ++i) out.push_back(ring_[i % ring_.size()]);
  return out;
}

std::string flight_json(const mycollComm& c, const std::string& why) {
  std::string o = fmt::format(
      "{{\"mycoll_flight_recorder\": 1, \"comm\": \"{}\", \"parent\": {}, \"rank\": {}, "
      "\"nranks\": {}, \"host\": {}, \"pid\": {}, \"device\": {}, \"reason\": {}, "
      "\"time_us\": {}, \"ops_issued\": {}, \"capacity\": {}, \"ops\": [",
      comm_id_text(c.id), c.parent_id ? quote(comm_id_text(c.parent_id)) : "null", c.rank,
      c.nranks, quote(c.peers.empty() ? "" : c.peers[c.rank].hostname), getpid(), c.cuda_device,
      quote(why), now_us(), c.flight ? c.flight->recorded() : c.op_seq,
      c.flight ? c.flight->capacity() : 0);
  if (c.flight) {
    bool first = true;
    for (const FrEntry& e : c.flight->snapshot()) {
      o += (first ? "\n  " : ",\n  ") + entry_json(e);
      first = false;
    }
  }
  return o + "\n]}\n";
}

std::string flight_dump(const mycollComm& c, const std::string& why, const std::string& pattern) {
  std::string p = pattern.empty() ? c.cfg.flight_file : pattern;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string path;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] != '%' || i + 1 == p.size()) {
      path += p[i];
      continue;
    }
    char k = p[++i];
    if (k == 'h') path += host;
    else if (k == 'p') path += std::to_string(getpid());
    else if (k == 'r') path += std::to_string(c.rank);
    else if (k == 'c') path += comm_id_text(c.id);
    else if (k == '%') path += '%';
    else path += std::string("%") + k;
  }
  const std::string doc = flight_json(c, why);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw_error(mycollSystemError, "flight recorder: cannot write " + tmp + ": " +
                                             std::strerror(errno));
  const bool ok = std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw_error(mycollSystemError, "flight recorder: cannot write " + path);
  }
  return path;
}

void flight_register(mycollComm* c) {
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_comms->insert(c);
  }
  if (c->cfg.flight_signal > 0) install_signal_once(c->cfg.flight_signal);
}

void flight_unregister(mycollComm* c) {
  std::lock_guard<std::mutex> g(g_mu);
  g_comms->erase(c);
}

}  // namespace mycoll
