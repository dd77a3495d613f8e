// Bootstrap, internal to lib/bootstrap: rendezvous with the root, then
// authenticated peer links for ring allgather, barrier and point-to-point
// (wire format in wire.h).
//
// Links are one-directional: a rank sends to peer p over the link it opened
// to p (lazily, on first use; the ring link to rank+1 at init) and receives
// from p over the link p opened to it. A per-rank I/O thread accepts links
// on the rank's single listener, authenticates them without blocking, and
// reads every incoming frame eagerly into per-(peer, kind) queues; recv()
// waits on those queues. Because the receiver always drains, two ranks that
// send to each other at the same time never deadlock.
//
// Failure model: an operation that cannot complete (peer link closed, send
// error, timeout) marks this bootstrap failed, sends a best-effort kAbort
// frame (a failure report: its origin, whom it waited for, the reason) over
// every link and shuts the write side of its outgoing links, then throws;
// so does a communicator's own failure (fail_with). A rank receiving a
// report marks itself failed and passes the report on (once per origin)
// but keeps its links open, so that its own report, when its own wait
// fails a moment later, still goes out: a dead rank turns into a
// RemoteError naming it on every rank instead of a hang, and root_cause
// follows the reports' waits to it (bootstrap/blame.h).
//
// Files: this header (the implementation class), bootstrap.cc (joining the
// root, the I/O thread: accepting, authenticating and reading links) and
// bootstrap_links.cc (failure marking and reports going out, sending and
// receiving frames, the collectives, rescue links).
#pragma once

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/admission.h"
#include "bootstrap/blame.h"
#include "bootstrap/wire.h"

namespace mycoll {
namespace bsimpl {

using namespace bswire;
using net::Deadline;
using net::Fd;
using net::IoStatus;
using net::ServerHandshake;
using net::SockAddr;

class BootstrapImpl final : public Bootstrap {
 public:
  BootstrapImpl(const UniqueIdData& id, int rank, int nranks, double timeout_s, CancelFlag cancel)
      : id_(id), rank_(rank), nranks_(nranks), timeout_s_(timeout_s), cancel_(std::move(cancel)) {
    closed_.resize(nranks);
    back_gone_.resize(nranks);
    told_.resize(nranks, false);
    incoming_present_.resize(nranks, false);
    for (int i = 0; i < nranks; ++i) out_.push_back(std::make_unique<Outgoing>());
  }

  ~BootstrapImpl() override {
    stop_.store(true);
    wake_io();
    if (io_.joinable()) io_.join();
  }

  void start(const std::string& ifname_spec);

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const Secret& secret() const override { return id_.secret; }
  uint64_t tag() const override { return tag_; }
  std::string local_ip() const override { return local_ip_; }

  void allgather(void* data, size_t bytes) override;
  void barrier() override;
  void send(int peer, const void* data, size_t bytes) override;
  void recv(int peer, void* data, size_t bytes) override;
  void send_rescue(int peer, const void* data, size_t bytes) override;
  void recv_rescue(int peer, void* data, size_t bytes) override;
  void abort() override {
    abort_internal(own_report("rank " + std::to_string(rank_) + " aborted"), Source::kLocal);
  }
  void fail_with(const std::string& reason, const Waits& waits) override {
    abort_internal(own_report(reason, waits), Source::kOwn);
    // The ranks that only link to this one reach it through the I/O
    // thread: give it a moment to send, so a process that ends right after
    // its failure (as launchers make it) still tells them why.
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(200),
                 [&] { return tell_back_sent_ >= tell_back_pushed_ || stop_.load(); });
  }
  std::string remote_failure(double wait_s) override;
  std::vector<int> report_origins() override {
    std::lock_guard<std::mutex> g(mu_);
    std::vector<int> o;
    for (const Report& r : remote_) o.push_back(r.origin);
    return o;
  }
  Cause root_cause(const Waits& waits, double wait_s) override;
  PeerTrouble peer_trouble(double wait_s, const std::vector<bool>& watched) override;

 private:
  struct Outgoing {
    std::mutex mu;             // serializes connect and whole frames
    Fd fd;                     // guarded by mu
    bswire::FrameMac mac;      // this direction's tags; guarded by mu
    net::SessionKey key{};     // written once, before raw (the way back's reader)
    std::atomic<int> raw{-1};  // fd for shutdown() from abort without mu
  };
  // A link being read by the I/O thread: an incoming link (owned), or the
  // way back of an outgoing one (borrowed fd; only kAbort travels there).
  struct Incoming {
    // in: the tags of what arrives (its count past the hello); back: of
    // what this side sends the other way (kAbort reports).
    Incoming(Link link, int nranks, FrameMac in, FrameMac back)
        : reader(link, nranks, in), back_mac(back) {}
    Fd fd;
    int borrowed = -1;
    int get() const { return fd.valid() ? fd.get() : borrowed; }
    int rank = -1;
    bool ended = false;   // read side over; kept to send reports back
    bool rescue = false;  // a rescue link: one kRescue frame, its end no news
    FrameReader reader;
    FrameMac back_mac;  // used by the I/O thread only
  };

  void join_root(const Deadline& d);
  void io_loop();
  void io_accept(std::vector<std::unique_ptr<ServerHandshake>>& pending, net::RejectLog& rejects);
  void io_admit(ServerHandshake& hs, std::vector<std::unique_ptr<Incoming>>& links);
  bool io_read(Incoming& in);  // false: link ended
  // way_back: the way back of the outgoing link to peer ended (the peer
  // closed its end: its process or bootstrap ended); noted for blame only.
  void io_link_closed(int peer, const std::string& why, bool way_back = false);
  // The failure reports received ("; "-joined, first first); mu_ held.
  std::string reports_locked() const {
    std::string all;
    for (const Report& r : remote_) all += (all.empty() ? "" : "; ") + r.text;
    return all;
  }
  // Per rank, why its link ended ("" open): the incoming link, else the way
  // back of the outgoing one; mu_ held.
  std::vector<std::string> gone_locked() const {
    std::vector<std::string> g(nranks_);
    for (int p = 0; p < nranks_; ++p) g[p] = closed_[p].empty() ? back_gone_[p] : closed_[p];
    return g;
  }
  // This rank's report: the waits cleaned to distinct other ranks (also:
  // none of waits.on).
  Report own_report(const std::string& text, const Waits& waits = {}) const {
    Report r;
    r.origin = rank_;
    r.text = text.empty() ? "rank " + std::to_string(rank_) + " aborted" : text;
    auto add = [&](std::vector<int>& to, int w) {
      if (w >= 0 && w < nranks_ && w != rank_ && to.size() < kMaxReportWaits &&
          std::find(r.waits_for.begin(), r.waits_for.end(), w) == r.waits_for.end() &&
          std::find(r.also.begin(), r.also.end(), w) == r.also.end())
        to.push_back(w);
    };
    for (int w : waits.on) add(r.waits_for, w);
    for (int w : waits.also) add(r.also, w);
    return r;
  }
  void wake_io() {
    if (wake_.valid()) {
      uint64_t one = 1;
      ssize_t ignored = ::write(wake_.get(), &one, sizeof(one));
      (void)ignored;
    }
  }

  Fd dial(int peer, const Deadline& d, const std::string& what, const std::atomic<bool>* cancel,
          net::SessionKey* key);
  void send_frame(int peer, uint32_t kind, const void* data, size_t len, const Deadline& d,
                  const char* op);
  std::vector<uint8_t> recv_frame(int peer, uint32_t kind, const Deadline& d, const char* op);
  void check_usable(const char* op);
  std::string peer_name(int peer) const {
    return "rank " + std::to_string(peer) +
           (peer < static_cast<int>(table_.size()) ? " (" + table_[peer].str() + ")" : "");
  }
  // Where a report comes from: a peer's, passed on (kRelay); this rank's
  // bootstrap failing or being aborted (kLocal); the communicator's own
  // failure (kOwn).
  enum class Source { kRelay, kLocal, kOwn };
  // Marks the bootstrap failed (first reason wins) and tells the peers: a
  // relay once per origin, kLocal when it is the first failure, kOwn once
  // (also after a relay). kLocal and kOwn then shut the write side of every
  // outgoing link. Never throws.
  void abort_internal(const Report& rep, Source src) noexcept;
  // waiting_for: the peer the failed operation waited for (-1 none).
  [[noreturn]] void fail(mycollResult_t code, const std::string& msg, int waiting_for = -1) {
    abort_internal(own_report(msg, Waits{{waiting_for}, {}}), Source::kLocal);
    throw Error(code, msg);
  }

  const UniqueIdData id_;
  const int rank_;
  const int nranks_;
  const double timeout_s_;
  // Watched by the I/O thread (every 0.1 s while set): true fails the
  // bootstrap as abort() does, which ends every wait, the rendezvous's too.
  const CancelFlag cancel_;
  uint64_t tag_ = 0;
  std::string local_ip_;
  SockAddr my_addr_;             // this rank's peer listener
  std::vector<SockAddr> table_;  // peer listener per rank (immutable after start)

  Fd listen_;
  Fd wake_;
  std::thread io_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> aborted_{false};

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<uint8_t>>> queues_;
  std::vector<std::string> closed_;     // why peer's incoming link ended ("" = not ended)
  std::vector<std::string> back_gone_;  // why the way back of the link to peer ended
  std::vector<bool> incoming_present_;
  std::string failed_;                           // non-empty: unusable, with the root cause
  std::vector<Report> remote_;                   // reports received, first per origin, first first
  std::vector<std::vector<uint8_t>> tell_back_;  // reports the I/O thread sends up incoming links
  uint64_t tell_back_pushed_ = 0, tell_back_sent_ = 0;  // ... how many so far, and sent
  std::vector<bool> told_;                              // per origin: its report was passed on
  bool own_told_ = false;                               // this rank's own (kOwn) report went out
  bool shut_ = false;                                   // outgoing links' write sides shut

  std::vector<std::unique_ptr<Outgoing>> out_;
};

}  // namespace bsimpl
}  // namespace mycoll
