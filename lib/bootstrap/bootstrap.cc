// Bootstrap: rendezvous with the root, then authenticated peer links for
// ring allgather, barrier and point-to-point (wire format in wire.h).
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

using namespace bswire;
using net::Deadline;
using net::Fd;
using net::IoStatus;
using net::ServerHandshake;
using net::SockAddr;

namespace {

class BootstrapImpl final : public Bootstrap {
 public:
  BootstrapImpl(const UniqueIdData& id, int rank, int nranks, double timeout_s)
      : id_(id), rank_(rank), nranks_(nranks), timeout_s_(timeout_s) {
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

// ---------------------------------------------------------------- init ----

void BootstrapImpl::start(const std::string& ifname_spec) {
  const Deadline d = Deadline::after(timeout_s_);
  local_ip_ = net::pick_interface_ip(ifname_spec);
  SockAddr bound;
  listen_ = net::listen_on(local_ip_, 0, false, &bound);
  my_addr_ = bound;
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_.valid()) throw_system("bootstrap: eventfd");
  io_ = std::thread([this] { io_loop(); });

  join_root(d);

  if (nranks_ == 1) return;
  // Ring: open the link to rank+1 now and wait for rank-1's, so init fails
  // early (and clearly) when a peer is unreachable.
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  send_frame(next, kColl, nullptr, 0, d, "init (ring link)");
  recv_frame(prev, kColl, d, "init (ring link)");
  log_info(Subsys::Bootstrap, "rank {} of {}: ring ready (listener {}, tag {:016x})", rank_,
           nranks_, my_addr_.str(), tag_);
}

void BootstrapImpl::join_root(const Deadline& d) {
  const SockAddr root = SockAddr::from_bytes(id_.addr);
  const std::string me = "bootstrap rank " + std::to_string(rank_);
  Fd fd = net::connect_to(root, d, me + ": root", true, &aborted_);
  net::SessionKey key;
  if (!net::authenticate_client(fd.get(), id_.secret, kRoleRoot, d.seconds_left(), &key))
    throw_error(
        mycollInvalidUsage,
        me + ": authentication with root " + root.str() +
            " failed (unique id from another mycollGetUniqueId, different MYCOLL_SECRET, "
            "or the root's init already ended: finished, or timed out before it took this rank)");
  RankHello h;
  std::memset(&h, 0, sizeof(h));
  h.magic = kHelloMagic;
  h.version = kIdVersion;
  h.rank = rank_;
  h.nranks = nranks_;
  my_addr_.to_bytes(h.addr);
  FrameMac out(key, Dir::kFromClient), in(key, Dir::kFromServer);
  const std::vector<uint8_t> hello = seal_hello(out, h);
  int err = 0;
  IoStatus st = net::send_all(fd.get(), hello.data(), hello.size(), d, &err, &aborted_);
  if (st != IoStatus::kOk)
    throw_error(mycollRemoteError,
                me + ": cannot register with root " + root.str() + ": " + io_status_text(st, err));

  int arrived = 1, expected = nranks_;
  // The root gives up at the same MYCOLL_TIMEOUT and then reports which ranks
  // are missing; its clock may have started a little later than ours, so we
  // wait a short grace for that report rather than race it with a message
  // that cannot name them.
  Deadline dw = d;
  dw.at += std::chrono::milliseconds(1500);
  for (;;) {
    FrameHeader fh;
    st = net::recv_all(fd.get(), &fh, sizeof(fh), dw, &err, &aborted_);
    if (st == IoStatus::kTimeout)
      throw_error(mycollTimeout, fmt::format("bootstrap: rank {} timed out after {:.1f} s waiting "
                                             "at root {}: {} of {} ranks arrived",
                                             rank_, timeout_s_, root.str(), arrived, expected));
    if (st != IoStatus::kOk)
      throw_error(
          mycollRemoteError,
          me + ": lost root " + root.str() +
              " before the address table arrived (root process gone?): " + io_status_text(st, err));
    if (!frame_header_ok(fh, Link::kFromRoot, nranks_))
      throw_error(mycollRemoteError, me + ": root " + root.str() + " sent garbage (frame kind " +
                                         std::to_string(fh.kind) + ", " + std::to_string(fh.len) +
                                         " bytes)");
    std::vector<uint8_t> p(fh.len);
    Tag tag;
    st = net::recv_all(fd.get(), p.data(), p.size(), dw, &err, &aborted_);
    if (st == IoStatus::kOk)
      st = net::recv_all(fd.get(), tag.data(), tag.size(), dw, &err, &aborted_);
    if (st != IoStatus::kOk)
      throw_error(st == IoStatus::kTimeout ? mycollTimeout : mycollRemoteError,
                  me + ": reading from root " + root.str() + ": " + io_status_text(st, err));
    if (!in.check(tag.data(), &fh, sizeof(fh), p.data(), p.size()))
      throw_error(mycollRemoteError, me + ": a frame from root " + root.str() +
                                         " failed authentication (changed or injected on the way)");
    RootMessage m = parse_root_message(fh.kind, p.data(), p.size(), nranks_);
    switch (m.kind) {
      case RootMessage::Kind::kStatus:  // ranks that gave up count as arrived
        arrived = std::max(arrived, static_cast<int>(m.status.arrived));
        expected = m.status.nranks;
        continue;
      case RootMessage::Kind::kError:
        // The root ends right after reporting; if it runs in this process
        // it may still be telling the others.
        wait_for_local_root(id_.secret, 2.0);
        throw_error(m.code, m.text + " [rank " + std::to_string(rank_) + "]");
      case RootMessage::Kind::kTable:
        tag_ = m.tag;
        table_ = std::move(m.table);
        return;
      case RootMessage::Kind::kMalformed:
        throw_error(mycollRemoteError, me + ": root " + root.str() + " sent " + m.why);
    }
  }
}

// ----------------------------------------------------------- I/O thread ----

void BootstrapImpl::io_loop() {
  std::vector<std::unique_ptr<ServerHandshake>> pending;
  std::vector<std::unique_ptr<Incoming>> links;
  // back[p]: the way back of the outgoing link to p (reports of p's
  // failure when p has no link to this rank); null until p is linked.
  std::vector<std::unique_ptr<Incoming>> back(nranks_);
  net::RejectLog rejects("rank " + std::to_string(rank_) + " bootstrap listener");
  while (!stop_.load()) {
    // Reports for the ranks that send to this one (they may have no other
    // link to it): up their links, in the reverse direction.
    std::vector<std::vector<uint8_t>> tell;
    {
      std::lock_guard<std::mutex> lk(mu_);
      tell.swap(tell_back_);
    }
    for (const std::vector<uint8_t>& report : tell)
      for (auto& in : links) {
        const std::vector<uint8_t> frame =
            seal_frame(in->back_mac, kAbort, report.data(), report.size());
        (void)!::send(in->get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    if (!tell.empty()) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        tell_back_sent_ += tell.size();
      }
      cv_.notify_all();
    }
    for (int p = 0; p < nranks_; ++p) {
      int f = out_[p]->raw.load();
      if (f >= 0 && !back[p]) {
        // The way back carries the accepting side's messages; this side
        // sends nothing on it.
        back[p] = std::make_unique<Incoming>(Link::kWayBack, nranks_,
                                             FrameMac(out_[p]->key, Dir::kFromServer), FrameMac());
        back[p]->borrowed = f;
        back[p]->rank = p;
      }
    }
    std::vector<pollfd> fds;
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listen_.get(), POLLIN, 0});
    Deadline wake = Deadline::after(1.0);
    for (auto& hs : pending) {
      fds.push_back({hs->fd(), POLLIN, 0});
      wake.at = std::min(wake.at, hs->deadline().at);
    }
    for (auto& in : links) fds.push_back({in->ended ? -1 : in->get(), POLLIN, 0});
    std::vector<int> back_polled;
    for (int p = 0; p < nranks_; ++p)
      if (back[p] && back[p]->borrowed >= 0) {
        fds.push_back({back[p]->borrowed, POLLIN, 0});
        back_polled.push_back(p);
      }
    int rc = ::poll(fds.data(), fds.size(), wake.poll_ms());
    if (rc < 0 && errno != EINTR) {
      abort_internal(own_report("rank " + std::to_string(rank_) +
                                ": bootstrap I/O thread: poll: " + std::strerror(errno)),
                     Source::kLocal);
      break;
    }
    if (fds[0].revents) {
      uint64_t v;
      ssize_t ignored = ::read(wake_.get(), &v, sizeof(v));
      (void)ignored;
    }
    std::vector<std::unique_ptr<ServerHandshake>> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      auto& hs = pending[i];
      auto st = ServerHandshake::State::kRunning;
      if (fds[2 + i].revents) st = hs->on_readable();
      if (st == ServerHandshake::State::kDone) {
        io_admit(*hs, links);
      } else if (st == ServerHandshake::State::kFailed) {
        rejects.add(hs->peer(), hs->failure(), hs->hostile());
      } else if (hs->deadline().expired()) {
        rejects.add(hs->peer(), "no handshake in time", false);
      } else {
        still.push_back(std::move(hs));
      }
    }
    const size_t base = 2 + pending.size();
    const size_t nlinks_polled = fds.size() - base - back_polled.size();
    pending = std::move(still);
    for (size_t i = 0; i < nlinks_polled; ++i)
      if (!links[i]->ended && fds[base + i].revents && !io_read(*links[i])) links[i]->ended = true;
    links.erase(std::remove_if(links.begin(), links.end(),
                               [](const auto& l) { return l->rescue && l->ended; }),
                links.end());
    for (size_t i = 0; i < back_polled.size(); ++i) {
      Incoming& in = *back[back_polled[i]];
      if (fds[base + nlinks_polled + i].revents && !io_read(in)) in.borrowed = -1;  // ended
    }
    if (fds[1].revents & POLLIN) io_accept(pending, rejects);
    rejects.flush();
  }
  for (auto& in : links) ::shutdown(in->get(), SHUT_RDWR);
  listen_.reset();
}

std::string BootstrapImpl::remote_failure(double wait_s) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::duration<double>(wait_s), [&] { return !remote_.empty(); });
  return reports_locked();
}

Bootstrap::Cause BootstrapImpl::root_cause(const Waits& waits, double wait_s) {
  Cause c;
  const Report mine = own_report("", waits);
  if (mine.waits_for.empty()) {
    c.reports = remote_failure(wait_s);
    return c;
  }
  std::unique_lock<std::mutex> lk(mu_);
  Blame b;
  std::vector<std::string> gone;
  BlameView v;
  v.self = rank_;
  v.waits_for = mine.waits_for;
  v.also = mine.also;
  v.reports = &remote_;
  v.gone = &gone;
  cv_.wait_for(lk, std::chrono::duration<double>(wait_s), [&] {
    gone = gone_locked();
    b = find_root_cause(v);
    return b.settled;
  });
  c.root = b.text;
  for (const Report& r : remote_) {
    const bool used = std::find(b.roots.begin(), b.roots.end(), r.origin) != b.roots.end();
    if (!used) c.reports += (c.reports.empty() ? "" : "; ") + r.text;
  }
  return c;
}

Bootstrap::PeerTrouble BootstrapImpl::peer_trouble(double wait_s,
                                                   const std::vector<bool>& watched) {
  auto closed = [&]() -> int {
    for (int p = 0; p < nranks_ && p < static_cast<int>(watched.size()); ++p)
      if (watched[p] && !closed_[p].empty()) return p;
    return -1;
  };
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::duration<double>(wait_s),
               [&] { return !remote_.empty() || closed() >= 0; });
  PeerTrouble t;
  t.reports = reports_locked();
  t.closed = closed();
  if (t.closed >= 0) t.closed_why = closed_[t.closed];
  return t;
}

void BootstrapImpl::io_accept(std::vector<std::unique_ptr<ServerHandshake>>& pending,
                              net::RejectLog& rejects) {
  for (int i = 0; i < 64; ++i) {
    SockAddr peer;
    Fd fd = net::accept_nonblocking(listen_.get(), &peer);
    if (!fd.valid()) return;
    auto hs = std::make_unique<ServerHandshake>(std::move(fd), peer, id_.secret, kRolePeer,
                                                sizeof(PeerHello) + bswire::kTagBytes,
                                                Deadline::after(net::kPreAuthSeconds));
    if (hs->start() == ServerHandshake::State::kRunning)
      net::admit_pending(pending, std::move(hs), rejects);
  }
}

void BootstrapImpl::io_admit(ServerHandshake& hs, std::vector<std::unique_ptr<Incoming>>& links) {
  PeerHello h;
  std::string bad;
  FrameMac in(hs.session_key(), Dir::kFromClient);
  std::vector<uint8_t> hello;
  if (!open_hello(in, hs.announcement().data(), hs.announcement().size(), sizeof(PeerHello),
                  &hello))
    bad = "its hello failed authentication";
  else
    parse_peer_hello(hello.data(), hello.size(), nranks_, rank_, &h, &bad);
  std::lock_guard<std::mutex> lk(mu_);
  const bool rescue = bad.empty() && h.flags == kHelloRescue;
  if (rescue &&
      std::count_if(links.begin(), links.end(), [](const auto& l) { return l->rescue; }) >= nranks_)
    bad = "too many rescue links";
  if (bad.empty() && !rescue && incoming_present_[h.rank])
    bad = "second link from rank " + std::to_string(h.rank);
  if (!bad.empty()) {
    log_warn(Subsys::Bootstrap, "rank {}: rejected link from {}: {}", rank_, hs.peer().str(), bad);
    return;
  }
  auto link = std::make_unique<Incoming>(rescue ? Link::kRescue : Link::kPeer, nranks_, in,
                                         FrameMac(hs.session_key(), Dir::kFromServer));
  link->fd = hs.take_fd();
  link->rank = h.rank;
  link->rescue = rescue;
  if (!rescue) incoming_present_[h.rank] = true;
  links.push_back(std::move(link));
  log_trace(Subsys::Bootstrap, "rank {}: link from rank {} ({}) up", rank_, h.rank,
            hs.peer().str());
}

void BootstrapImpl::io_link_closed(int peer, const std::string& why, bool way_back) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    std::string& at = way_back ? back_gone_[peer] : closed_[peer];
    if (at.empty()) at = why;
  }
  cv_.notify_all();
}

bool BootstrapImpl::io_read(Incoming& in) {
  const bool way_back = !in.fd.valid();
  for (int iter = 0; iter < 256; ++iter) {
    size_t want = 0;
    uint8_t* dst = in.reader.buffer(&want);
    ssize_t k = ::recv(in.get(), dst, want, MSG_DONTWAIT);
    if (in.rescue && k <= 0 &&
        !(k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)))
      return false;  // a rescue link's end says nothing of its rank
    if (k == 0) {
      io_link_closed(in.rank,
                     in.reader.mid_frame() ? "closed in the middle of a message"
                                           : "closed (process exited or aborted?)",
                     way_back);
      return false;
    }
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      io_link_closed(in.rank, std::string("socket error: ") + std::strerror(errno), way_back);
      return false;
    }
    const FrameReader::Status st = in.reader.advance(static_cast<size_t>(k));
    if (st == FrameReader::Status::kMore) continue;
    if (st == FrameReader::Status::kCorrupt || st == FrameReader::Status::kForged) {
      const bool forged = st == FrameReader::Status::kForged;
      log_warn(Subsys::Bootstrap, "rank {}: {} from rank {}{}; dropping the link", rank_,
               forged ? "a frame that failed authentication (changed or injected on the way)"
                      : "a corrupt frame",
               in.rank, way_back ? " (way back)" : "");
      if (way_back || in.rescue) return false;
      io_link_closed(in.rank, forged ? "sent a frame that failed authentication (changed or "
                                       "injected on the way)"
                                     : "sent a corrupt frame");
      return false;
    }
    // A whole frame.
    const uint32_t kind = in.reader.header().kind;
    std::vector<uint8_t> payload = in.reader.take_payload();
    if (kind == kAbort) {
      Report r;
      std::string bad;
      if (!parse_report(payload.data(), payload.size(), nranks_, &r, &bad)) {
        r = Report{};
        r.origin = in.rank;
        r.text =
            "rank " + std::to_string(in.rank) + " sent a malformed failure report (" + bad + ")";
      }
      // (Its own report, passed back by a peer, is no news to this rank.)
      if (r.origin == in.rank)
        log_warn(Subsys::Bootstrap, "rank {}: rank {} failed: {}", rank_, r.origin, r.text);
      else if (r.origin != rank_)
        log_warn(Subsys::Bootstrap, "rank {}: rank {} failed (passed on by rank {}): {}", rank_,
                 r.origin, in.rank, r.text);
      {
        std::lock_guard<std::mutex> lk(mu_);
        const bool known = std::any_of(remote_.begin(), remote_.end(),
                                       [&](const Report& x) { return x.origin == r.origin; });
        if (r.origin != rank_ && !known && remote_.size() < 64) remote_.push_back(r);
      }
      abort_internal(r, Source::kRelay);
      continue;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      queues_[{in.rank, kind}].push_back(std::move(payload));
    }
    cv_.notify_all();
  }
  return true;
}

// ------------------------------------------------------------- failure ----

void BootstrapImpl::abort_internal(const Report& rep, Source src) noexcept {
  bool tell = false, shut = false;
  std::vector<uint8_t> payload;
  try {
    payload = encode_report(rep);
  } catch (...) {  // out of memory: mark failed, tell no one
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    const bool first = failed_.empty();
    if (first) failed_ = rep.text.empty() ? "aborted" : rep.text;
    switch (src) {
      case Source::kRelay:
        tell = rep.origin >= 0 && rep.origin < nranks_ && !told_[rep.origin];
        if (tell) told_[rep.origin] = true;
        break;
      case Source::kLocal: tell = first; break;
      case Source::kOwn:
        tell = !own_told_;
        own_told_ = true;
        break;
    }
    tell = tell && !payload.empty();
    if (src != Source::kRelay && !shut_) shut = shut_ = true;
    if (tell && tell_back_.size() < 64) {
      tell_back_.push_back(payload);
      ++tell_back_pushed_;
    }
  }
  cv_.notify_all();
  aborted_.store(true);
  if (tell) {
    // Best effort, never blocking: skip links a sender is using right now.
    for (auto& o : out_) {
      std::unique_lock<std::mutex> lk(o->mu, std::try_to_lock);
      if (lk.owns_lock() && o->fd.valid()) {
        const std::vector<uint8_t> frame =
            seal_frame(o->mac, kAbort, payload.data(), payload.size());
        (void)!::send(o->fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
  }
  if (shut) {
    // Write side only: the way back may still bring other ranks' reports.
    for (auto& o : out_) {
      int f = o->raw.load();
      if (f >= 0) ::shutdown(f, SHUT_WR);
    }
  }
  wake_io();
}

void BootstrapImpl::check_usable(const char* op) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!failed_.empty())
    throw_error(mycollRemoteError, "bootstrap " + std::string(op) + " on rank " +
                                       std::to_string(rank_) +
                                       ": bootstrap unusable after an earlier failure: " + failed_);
}

// ----------------------------------------------------------- transfers ----

void BootstrapImpl::send_frame(int peer, uint32_t kind, const void* data, size_t len,
                               const Deadline& d, const char* op) {
  if (peer == rank_) {
    std::vector<uint8_t> copy(static_cast<const uint8_t*>(data),
                              static_cast<const uint8_t*>(data) + len);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queues_[{peer, kind}].push_back(std::move(copy));
    }
    cv_.notify_all();
    return;
  }
  const std::string what = "bootstrap " + std::string(op) + ": rank " + std::to_string(rank_) +
                           " sending to " + peer_name(peer);
  mycollResult_t code = mycollSuccess;
  std::string err;
  {
    Outgoing& o = *out_[peer];
    std::lock_guard<std::mutex> lk(o.mu);
    try {
      if (!o.fd.valid()) {
        Fd fd = net::connect_to(table_[peer], d, what, false, &aborted_);
        net::SessionKey key;
        if (!net::authenticate_client(fd.get(), id_.secret, kRolePeer, d.seconds_left(), &key))
          throw_error(mycollRemoteError, what + ": peer rejected authentication or went away");
        o.mac = FrameMac(key, Dir::kFromClient);
        const std::vector<uint8_t> hello =
            seal_hello(o.mac, PeerHello{kPeerMagic, rank_, nranks_, 0});
        int e = 0;
        IoStatus st = net::send_all(fd.get(), hello.data(), hello.size(), d, &e, &aborted_);
        if (st != IoStatus::kOk)
          throw_error(mycollRemoteError, what + ": " + net::io_status_text(st, e));
        o.key = key;
        o.raw.store(fd.get());
        o.fd = std::move(fd);
        if (aborted_.load()) ::shutdown(o.fd.get(), SHUT_RDWR);
      }
      FrameHeader fh{kFrameMagic, kind, len};
      const Tag tag = o.mac.next(&fh, sizeof(fh), data, len);
      int e = 0;
      IoStatus st = net::send_all(o.fd.get(), &fh, sizeof(fh), d, &e, &aborted_);
      if (st == IoStatus::kOk && len > 0)
        st = net::send_all(o.fd.get(), data, len, d, &e, &aborted_);
      if (st == IoStatus::kOk)
        st = net::send_all(o.fd.get(), tag.data(), tag.size(), d, &e, &aborted_);
      if (st != IoStatus::kOk) {
        code = st == IoStatus::kTimeout ? mycollTimeout : mycollRemoteError;
        err = what + ": " +
              (st == IoStatus::kTimeout
                   ? fmt::format("timed out after {:.1f} s", timeout_s_)
                   : net::io_status_text(st, e) + " (peer process died or aborted?)");
      }
    } catch (const Error& e) {
      code = e.code();
      err = e.what();
    }
  }
  if (!err.empty()) {
    std::string why;
    {
      // A peer that failed first sends its reason back before closing:
      // give it a moment to arrive, so the report names the root cause
      // rather than the messenger.
      std::unique_lock<std::mutex> lk(mu_);
      if (code != mycollTimeout)
        cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return !failed_.empty(); });
      why = failed_;
    }
    if (!why.empty()) fail(mycollRemoteError, what + ": aborted: " + why);
    fail(code, err, peer);
  }
}

std::vector<uint8_t> BootstrapImpl::recv_frame(int peer, uint32_t kind, const Deadline& d,
                                               const char* op) {
  const std::string what = "bootstrap " + std::string(op) + ": rank " + std::to_string(rank_) +
                           " waiting for " + peer_name(peer);
  mycollResult_t code;
  std::string err;
  int waited = -1;  // the failure is the peer's (its link ended, or silence)
  {
    std::unique_lock<std::mutex> lk(mu_);
    auto& q = queues_[{peer, kind}];
    for (;;) {
      if (!q.empty()) {
        std::vector<uint8_t> v = std::move(q.front());
        q.pop_front();
        return v;
      }
      if (!failed_.empty()) {
        code = mycollRemoteError;
        err = what + ": aborted: " + failed_;
        break;
      }
      if (!closed_[peer].empty()) {
        code = mycollRemoteError;
        err = what + ": its link " + closed_[peer];
        waited = peer;
        break;
      }
      if (cv_.wait_until(lk, d.at) == std::cv_status::timeout && q.empty() && failed_.empty() &&
          closed_[peer].empty()) {
        code = mycollTimeout;
        err = what + fmt::format(": timed out after {:.1f} s", timeout_s_);
        waited = peer;
        break;
      }
    }
  }
  fail(code, err, waited);
}

void BootstrapImpl::allgather(void* data, size_t bytes) {
  check_usable("allgather");
  if (nranks_ == 1) return;
  const Deadline d = Deadline::after(timeout_s_);
  auto* base = static_cast<uint8_t*>(data);
  const int n = nranks_, next = (rank_ + 1) % n, prev = (rank_ + n - 1) % n;
  // Ring: at step s, forward the slot that originated s ranks back.
  for (int s = 0; s < n - 1; ++s) {
    const int send_slot = (rank_ - s + n) % n, recv_slot = (rank_ - s - 1 + n) % n;
    send_frame(next, kColl, base + send_slot * bytes, bytes, d, "allgather");
    std::vector<uint8_t> got = recv_frame(prev, kColl, d, "allgather");
    if (got.size() != bytes)
      fail(mycollInvalidUsage,
           fmt::format("bootstrap allgather: rank {} got {} bytes from rank {}, expected {} "
                       "(ranks called with different sizes or out of order)",
                       rank_, got.size(), prev, bytes));
    std::memcpy(base + recv_slot * bytes, got.data(), bytes);
  }
}

void BootstrapImpl::barrier() {
  std::vector<uint8_t> flags(nranks_, 1);
  allgather(flags.data(), 1);
}

void BootstrapImpl::send(int peer, const void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < nranks_, "bootstrap send: peer " + std::to_string(peer) +
                                             " out of range 0.." + std::to_string(nranks_ - 1));
  check_usable("send");
  send_frame(peer, kP2p, data, bytes, Deadline::after(timeout_s_), "send");
}

void BootstrapImpl::recv(int peer, void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < nranks_, "bootstrap recv: peer " + std::to_string(peer) +
                                             " out of range 0.." + std::to_string(nranks_ - 1));
  check_usable("recv");
  std::vector<uint8_t> got = recv_frame(peer, kP2p, Deadline::after(timeout_s_), "recv");
  if (got.size() != bytes)
    fail(mycollInvalidUsage, fmt::format("bootstrap recv: rank {} got {} bytes from rank {}, "
                                         "expected {} (mismatched send/recv sizes)",
                                         rank_, got.size(), peer, bytes));
  if (bytes) std::memcpy(data, got.data(), bytes);
}

// A link of its own for one frame, whatever this bootstrap's state: a
// failure shuts the peer links' write sides and makes send/recv refuse, but
// the listeners and the I/O threads run until destroy.
void BootstrapImpl::send_rescue(int peer, const void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < nranks_ && peer != rank_,
            "bootstrap rescue send: peer " + std::to_string(peer) + " is not another rank of 0.." +
                std::to_string(nranks_ - 1));
  check_arg(bytes <= kMaxRescueBytes, "bootstrap rescue send: " + std::to_string(bytes) +
                                          " bytes (at most " + std::to_string(kMaxRescueBytes) +
                                          ")");
  const Deadline d = Deadline::after(timeout_s_);
  const std::string what =
      "bootstrap rescue send: rank " + std::to_string(rank_) + " sending to " + peer_name(peer);
  const std::atomic<bool> never{false};
  Fd fd = net::connect_to(table_[peer], d, what, false, &never);
  net::SessionKey key;
  if (!net::authenticate_client(fd.get(), id_.secret, kRolePeer, d.seconds_left(), &key))
    throw_error(mycollRemoteError, what + ": peer rejected authentication or went away");
  FrameMac mac(key, Dir::kFromClient);
  std::vector<uint8_t> msg = seal_hello(mac, PeerHello{kPeerMagic, rank_, nranks_, kHelloRescue});
  const std::vector<uint8_t> frame = seal_frame(mac, kRescue, data, bytes);
  msg.insert(msg.end(), frame.begin(), frame.end());
  int e = 0;
  const IoStatus st = net::send_all(fd.get(), msg.data(), msg.size(), d, &e, &never);
  if (st != IoStatus::kOk)
    throw_error(st == IoStatus::kTimeout ? mycollTimeout : mycollRemoteError,
                what + ": " + net::io_status_text(st, e));
}

void BootstrapImpl::recv_rescue(int peer, void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < nranks_ && peer != rank_,
            "bootstrap rescue recv: peer " + std::to_string(peer) + " is not another rank of 0.." +
                std::to_string(nranks_ - 1));
  const Deadline d = Deadline::after(timeout_s_);
  std::vector<uint8_t> got;
  {
    std::unique_lock<std::mutex> lk(mu_);
    auto& q = queues_[{peer, kRescue}];
    if (!cv_.wait_until(lk, d.at, [&] { return !q.empty(); }))
      throw_error(mycollTimeout, fmt::format("bootstrap rescue recv: rank {} waiting for {}: "
                                             "timed out after {:.1f} s",
                                             rank_, peer_name(peer), timeout_s_));
    got = std::move(q.front());
    q.pop_front();
  }
  if (got.size() != bytes)
    throw_error(mycollInvalidUsage,
                fmt::format("bootstrap rescue recv: rank {} got {} bytes from rank {}, expected {}",
                            rank_, got.size(), peer, bytes));
  if (bytes) std::memcpy(data, got.data(), bytes);
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::init(const UniqueIdData& id, int rank, int nranks,
                                           double timeout_s, const std::string& ifname_spec) {
  check_arg(nranks >= 1 && nranks <= kMaxRanks,
            "bootstrap: nranks " + std::to_string(nranks) + " out of range");
  check_arg(rank >= 0 && rank < nranks, "bootstrap: rank " + std::to_string(rank) +
                                            " out of range 0.." + std::to_string(nranks - 1));
  check_arg(id.magic == kIdMagic && id.version == kIdVersion, "not a mycoll unique id");
  check_arg(timeout_s > 0, "bootstrap: timeout must be > 0");
  auto bs = std::make_unique<BootstrapImpl>(id, rank, nranks, timeout_s);
  bs->start(ifname_spec);
  return bs;
}

}  // namespace mycoll
