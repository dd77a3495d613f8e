// Bootstrap: joining the root's rendezvous, and the I/O thread that accepts,
// authenticates and reads every link (the model: bootstrap_impl.h).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"

namespace mycoll {
namespace bsimpl {

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
    if (st == IoStatus::kCancelled) {  // failed meanwhile: cancelled, or a peer's report
      std::lock_guard<std::mutex> lk(mu_);
      throw_error(mycollRemoteError, me + ": " + (failed_.empty() ? "aborted" : failed_));
    }
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
    if (cancel_ && cancel_->load() && !aborted_.load())
      abort_internal(own_report("rank " + std::to_string(rank_) +
                                ": init cancelled (the communicator was aborted while it was "
                                "being created)"),
                     Source::kLocal);
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
    Deadline wake = Deadline::after(cancel_ ? 0.1 : 1.0);
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
      bool known;
      {
        std::lock_guard<std::mutex> lk(mu_);
        known = std::any_of(remote_.begin(), remote_.end(),
                            [&](const Report& x) { return x.origin == r.origin; });
        if (r.origin != rank_ && !known && remote_.size() < 64) remote_.push_back(r);
      }
      // Logged once per origin (a report may come over both links of a peer);
      // its own report, passed back by a peer, is no news to this rank.
      if (!known && r.origin == in.rank)
        log_warn(Subsys::Bootstrap, "rank {}: rank {} failed: {}", rank_, r.origin, r.text);
      else if (!known && r.origin != rank_)
        log_warn(Subsys::Bootstrap, "rank {}: rank {} failed (passed on by rank {}): {}", rank_,
                 r.origin, in.rank, r.text);
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

}  // namespace bsimpl

std::unique_ptr<Bootstrap> Bootstrap::init(const UniqueIdData& id, int rank, int nranks,
                                           double timeout_s, const std::string& ifname_spec,
                                           CancelFlag cancel) {
  using namespace bswire;
  check_arg(nranks >= 1 && nranks <= kMaxRanks,
            "bootstrap: nranks " + std::to_string(nranks) + " out of range");
  check_arg(rank >= 0 && rank < nranks, "bootstrap: rank " + std::to_string(rank) +
                                            " out of range 0.." + std::to_string(nranks - 1));
  check_arg(id.magic == kIdMagic && id.version == kIdVersion, "not a mycoll unique id");
  check_arg(timeout_s > 0, "bootstrap: timeout must be > 0");
  auto bs = std::make_unique<bsimpl::BootstrapImpl>(id, rank, nranks, timeout_s, std::move(cancel));
  bs->start(ifname_spec);
  return bs;
}

}  // namespace mycoll
