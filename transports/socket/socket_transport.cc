// TCP socket transport: one authenticated TCP connection per peer pair.
//
// connect() is collective: every rank with peers listens on the bootstrap
// interface, the {ip, port} of every rank goes round Bootstrap::allgather,
// then for each pair the lower rank connects and the higher accepts. Accepts
// run in a helper thread through the non-blocking server handshake (so a
// stray client cannot stall init) while this thread connects.
//
// A connection is a non-blocking socket. Sends go straight to the kernel.
// Received bytes land in an internal linear buffer (peek/consume); recv_some
// reads straight into the caller's memory when that buffer is empty, so
// large messages cost one copy (the kernel's) and big syscalls.
// send_some2 puts a header and its payload on the wire in one sendmsg; the
// receiver takes a small message's header through peek, which fills the
// buffer with header and payload in one recv.
//
// Threading: the send side and the receive side of a connection may be
// driven by two different threads; each side by one thread at a time.
// check_alive() and progress() belong to the receive side.
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "bootstrap/socket_util.h"
#include "transports/socket/socket_wire.h"
#include "transports/transport.h"

namespace mycoll {
namespace {

using net::Deadline;
using net::Fd;
using net::ServerHandshake;
using net::SockAddr;

using sockwire::Announce;
using sockwire::Endpoint;

constexpr const char* kRoleSocket = "mycoll-socket";
constexpr size_t kRecvBufferBytes = 4u << 20;

class SocketConnection final : public Connection {
 public:
  SocketConnection(Fd fd, int peer, SockAddr addr) : fd_(std::move(fd)), peer_(peer), addr_(addr) {}

  size_t send_some(const void* data, size_t n) override { return send_some2(data, n, nullptr, 0); }

  size_t send_some2(const void* a, size_t an, const void* b, size_t bn) override {
    if (an + bn == 0) return 0;
    if (shut_.load(std::memory_order_relaxed)) throw_broken();
    iovec iov[2] = {{const_cast<void*>(a), an}, {const_cast<void*>(b), bn}};
    msghdr m{};
    m.msg_iov = an ? iov : iov + 1;
    m.msg_iovlen = (an ? 1 : 0) + (bn ? 1 : 0);
    for (;;) {
      ssize_t k = ::sendmsg(fd_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k >= 0) return static_cast<size_t>(k);
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      send_err_.store(errno);
      throw_broken();
    }
  }

  size_t peek(const void** data, size_t max) override {
    if (tail_ - head_ < max && (!buf_ || tail_ < kRecvBufferBytes)) fill();
    *data = buf_ ? buf_.get() + head_ : nullptr;
    return std::min(tail_ - head_, max);
  }

  void consume(size_t n) override {
    if (n > tail_ - head_)
      throw_error(mycollInternalError, describe() + ": consume(" + std::to_string(n) +
                                           ") beyond the " + std::to_string(tail_ - head_) +
                                           " bytes peeked");
    head_ += n;
    if (head_ == tail_) {
      head_ = tail_ = 0;
    } else if (head_ >= kRecvBufferBytes / 2) {
      // Amortized: at most half the buffer moves after half of it was consumed.
      std::memmove(buf_.get(), buf_.get() + head_, tail_ - head_);
      tail_ -= head_;
      head_ = 0;
    }
  }

  size_t recv_some(void* dst, size_t n) override {
    auto* out = static_cast<uint8_t*>(dst);
    size_t copied = std::min(tail_ - head_, n);
    if (copied) {
      std::memcpy(out, buf_.get() + head_, copied);
      consume(copied);
    }
    if (copied == n || head_ != tail_) return copied;
    // Buffer empty: read straight into the caller's memory.
    for (;;) {
      ssize_t k = ::recv(fd_.get(), out + copied, n - copied, MSG_DONTWAIT);
      if (k > 0) return copied + static_cast<size_t>(k);
      if (k == 0) {
        eof_.store(true);
        return copied;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) recv_err_.store(errno);
      return copied;
    }
  }

  bool progress() override {
    if (buf_ && tail_ == kRecvBufferBytes) return false;
    return fill();
  }

  void check_alive() override {
    if (shut_.load() || eof_.load() || recv_err_.load() || send_err_.load()) throw_broken();
    pollfd p{fd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return;
    if (p.revents & POLLERR) {
      int e = 0;
      socklen_t len = sizeof(e);
      getsockopt(fd_.get(), SOL_SOCKET, SO_ERROR, &e, &len);
      recv_err_.store(e ? e : EIO);
      throw_broken();
    }
    // Readable: pull what is there (EOF shows only once the data is read;
    // with a full buffer the peer still has data for us, so it counts as
    // alive until the engine consumes).
    if (!buf_ || tail_ < kRecvBufferBytes) fill();
    if (eof_.load() || recv_err_.load()) throw_broken();
  }

  void shutdown() noexcept override {
    if (!shut_.exchange(true)) ::shutdown(fd_.get(), SHUT_RDWR);
  }

  std::string describe() const override { return "socket " + addr_.str(); }

 private:
  // Appends what the kernel has to the buffer; true if bytes arrived.
  bool fill() {
    if (!buf_) buf_.reset(new uint8_t[kRecvBufferBytes]);
    for (;;) {
      ssize_t k = ::recv(fd_.get(), buf_.get() + tail_, kRecvBufferBytes - tail_, MSG_DONTWAIT);
      if (k > 0) {
        tail_ += static_cast<size_t>(k);
        return true;
      }
      if (k == 0) {
        eof_.store(true);
        return false;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) recv_err_.store(errno);
      return false;
    }
  }

  [[noreturn]] void throw_broken() const {
    std::string who = "socket to rank " + std::to_string(peer_) + " (" + addr_.str() + ")";
    if (int e = send_err_.load() ? send_err_.load() : recv_err_.load())
      throw_error(mycollRemoteError, who + ": " + std::strerror(e) + " (peer died or aborted?)");
    if (eof_.load()) throw_error(mycollRemoteError, who + " closed by peer");
    throw_error(mycollRemoteError, who + " shut down (communicator aborted)");
  }

  Fd fd_;
  int peer_;
  SockAddr addr_;
  std::unique_ptr<uint8_t[]> buf_;  // allocated on first receive
  size_t head_ = 0, tail_ = 0;
  std::atomic<bool> shut_{false};
  std::atomic<bool> eof_{false};
  std::atomic<int> recv_err_{0};
  std::atomic<int> send_err_{0};
};

// Accepts `expected` authenticated connections on listen_fd until the
// deadline; results by announced rank. Runs in a helper thread.
class Acceptor {
 public:
  Acceptor(int listen_fd, const Secret& secret, int nranks, int self, std::set<int> expected,
           Deadline d, size_t buffer_bytes)
      : listen_fd_(listen_fd),
        nranks_(nranks),
        self_(self),
        secret_(secret),
        expected_(std::move(expected)),
        deadline_(d),
        buffer_bytes_(buffer_bytes) {}

  void run() {
    try {
      loop();
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  void cancel() { cancel_.store(true); }
  const std::string& error() const { return error_; }
  std::map<int, Fd>& accepted() { return accepted_; }
  const std::set<int>& expected() const { return expected_; }

 private:
  void loop() {
    std::vector<std::unique_ptr<ServerHandshake>> pending;
    while (accepted_.size() < expected_.size() && !cancel_.load()) {
      if (deadline_.expired()) return;
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      Deadline wake = Deadline::after(0.1);
      for (auto& hs : pending) {
        fds.push_back({hs->fd(), POLLIN, 0});
        wake.at = std::min(wake.at, hs->deadline().at);
      }
      int rc = ::poll(fds.data(), fds.size(), wake.poll_ms());
      if (rc < 0 && errno != EINTR) throw_system("socket transport: poll");
      std::vector<std::unique_ptr<ServerHandshake>> still;
      for (size_t i = 0; i < pending.size(); ++i) {
        auto& hs = pending[i];
        auto st = ServerHandshake::State::kRunning;
        if (fds[1 + i].revents) st = hs->on_readable();
        if (st == ServerHandshake::State::kDone) {
          admit(*hs);
        } else if (st == ServerHandshake::State::kFailed) {
          if (hs->hostile())
            log_warn(Subsys::Transport, "socket: dropped connection from {}: {}", hs->peer().str(),
                     hs->failure());
          else
            log_info(Subsys::Transport, "socket: dropped connection from {}: {}", hs->peer().str(),
                     hs->failure());
        } else if (!hs->deadline().expired()) {
          still.push_back(std::move(hs));
        }
      }
      pending = std::move(still);
      if (fds[0].revents & POLLIN) {
        for (int k = 0; k < 64; ++k) {
          SockAddr peer;
          Fd fd = net::accept_nonblocking(listen_fd_, &peer);
          if (!fd.valid()) break;
          net::set_buffer_sizes(fd.get(), buffer_bytes_);
          auto hs = std::make_unique<ServerHandshake>(
              std::move(fd), peer, secret_, kRoleSocket, sizeof(Announce),
              Deadline::after(std::min(15.0, std::max(0.0, deadline_.seconds_left()))));
          if (hs->start() == ServerHandshake::State::kRunning) pending.push_back(std::move(hs));
        }
      }
    }
  }

  void admit(ServerHandshake& hs) {
    int rank = -1;
    std::string why;
    const auto& a = hs.announcement();
    if (sockwire::decode_announce(a.data(), a.size(), nranks_, self_, &rank, &why) !=
        mycollSuccess) {
      log_warn(Subsys::Transport, "socket: rejected connection from {}: {}", hs.peer().str(), why);
      return;
    }
    if (!expected_.count(rank) || accepted_.count(rank)) {
      log_warn(Subsys::Transport, "socket: rejected connection from {} claiming rank {} ({})",
               hs.peer().str(), rank,
               accepted_.count(rank) ? "already connected" : "not a lower peer of this rank");
      return;
    }
    accepted_[rank] = hs.take_fd();
  }

  int listen_fd_;
  int nranks_, self_;
  Secret secret_;
  std::set<int> expected_;
  Deadline deadline_;
  size_t buffer_bytes_;
  std::atomic<bool> cancel_{false};
  std::map<int, Fd> accepted_;
  std::string error_;
};

class SocketTransport final : public Transport {
 public:
  const char* name() const override { return "socket"; }
  bool can_connect(const PeerInfo&, const PeerInfo&) const override { return true; }

  std::vector<std::unique_ptr<Connection>> connect(Bootstrap& bs,
                                                   const std::vector<PeerInfo>& /*all*/,
                                                   const std::vector<int>& peers,
                                                   const Config& cfg) override {
    const int me = bs.rank(), n = bs.nranks();
    const Deadline d = Deadline::after(cfg.timeout_s);
    check_peer_list("socket", me, n, peers);

    Fd listener;
    std::vector<Endpoint> eps(n, sockwire::encode_endpoint(nullptr));
    if (!peers.empty()) {
      SockAddr bound;
      listener = net::listen_on(bs.local_ip(), 0, false, &bound, cfg.socket_buffer_bytes);
      eps[me] = sockwire::encode_endpoint(&bound);
    }
    bs.allgather(eps.data(), sizeof(Endpoint));
    if (peers.empty()) return {};

    std::vector<SockAddr> addr(n);
    std::set<int> lower;
    for (int p : peers) {
      bool listens = false;
      std::string why;
      const mycollResult_t rc =
          sockwire::decode_endpoint(&eps[p], sizeof(Endpoint), p, &listens, &addr[p], &why);
      if (rc != mycollSuccess) throw_error(rc, why + " (on rank " + std::to_string(me) + ")");
      if (!listens)
        throw_error(mycollInvalidUsage, "socket transport: rank " + std::to_string(me) +
                                            " lists rank " + std::to_string(p) +
                                            " as a peer but that rank has no socket peers "
                                            "(asymmetric peer lists)");
      if (p < me) lower.insert(p);
    }

    Acceptor acceptor(listener.get(), bs.secret(), n, me, lower, d, cfg.socket_buffer_bytes);
    std::thread accept_thread([&] { acceptor.run(); });
    std::map<int, Fd> connected;
    std::string error;
    mycollResult_t code = mycollRemoteError;
    try {
      for (int p : peers) {
        if (p < me) continue;
        const std::string what = "socket transport: rank " + std::to_string(me) +
                                 " connecting to rank " + std::to_string(p);
        Fd fd = net::connect_to(addr[p], d, what, false, nullptr, cfg.socket_buffer_bytes);
        if (!net::authenticate_client(fd.get(), bs.secret(), kRoleSocket, d.seconds_left()))
          throw_error(mycollRemoteError,
                      what + " (" + addr[p].str() + "): authentication failed or peer went away");
        const Announce a = sockwire::encode_announce(me);
        int e = 0;
        auto st = net::send_all(fd.get(), &a, sizeof(a), d, &e);
        if (st != net::IoStatus::kOk)
          throw_error(mycollRemoteError, what + ": " + net::io_status_text(st, e));
        connected[p] = std::move(fd);
      }
    } catch (const Error& e) {
      error = e.what();
      code = e.code();
      acceptor.cancel();
    }
    accept_thread.join();
    if (error.empty() && !acceptor.error().empty()) error = acceptor.error();
    if (error.empty() && acceptor.accepted().size() < lower.size()) {
      std::string missing;
      for (int p : lower)
        if (!acceptor.accepted().count(p))
          missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      code = mycollTimeout;
      error = "socket transport: rank " + std::to_string(me) + " timed out after " +
              std::to_string(cfg.timeout_s) + " s waiting for connections from rank(s) " + missing;
    }
    if (!error.empty()) throw_error(code, error);

    std::vector<std::unique_ptr<Connection>> out;
    for (int p : peers) {
      Fd fd = p < me ? std::move(acceptor.accepted()[p]) : std::move(connected[p]);
      net::set_nonblocking(fd.get());
      net::set_nodelay(fd.get());
      out.push_back(std::make_unique<SocketConnection>(std::move(fd), p, addr[p]));
    }
    log_info(Subsys::Transport, "socket: rank {} connected to {} peer(s)", me, peers.size());
    return out;
  }
};

}  // namespace

std::unique_ptr<Transport> make_socket_transport() { return std::make_unique<SocketTransport>(); }

}  // namespace mycoll
