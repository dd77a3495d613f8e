// Bootstrap: a failure marked and reported, frames sent and received over
// the peer links, the collectives on them, and rescue links (the model:
// bootstrap_impl.h).
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/log.h"
#include "bootstrap/bootstrap_impl.h"

namespace mycoll {
namespace bsimpl {

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

// A connection to peer's listener, authenticated (both ways) with the secret.
Fd BootstrapImpl::dial(int peer, const Deadline& d, const std::string& what,
                       const std::atomic<bool>* cancel, net::SessionKey* key) {
  Fd fd = net::connect_to(table_[peer], d, what, false, cancel);
  if (!net::authenticate_client(fd.get(), id_.secret, kRolePeer, d.seconds_left(), key))
    throw_error(mycollRemoteError, what + ": peer rejected authentication or went away");
  return fd;
}

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
        net::SessionKey key;
        Fd fd = dial(peer, d, what, &aborted_, &key);
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
  net::SessionKey key;
  Fd fd = dial(peer, d, what, &never, &key);
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

}  // namespace bsimpl
}  // namespace mycoll
