// Poll-bounded socket helpers (see socket_util.h).
#include "bootstrap/socket_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "base/error.h"
#include "base/log.h"

namespace mycoll {
namespace net {

Deadline Deadline::after(double seconds) {
  if (!(seconds > 0)) seconds = 0;
  // Cap far-future deadlines (a day) so arithmetic cannot overflow.
  seconds = std::min(seconds, 86400.0);
  return Deadline{Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(seconds))};
}

int Deadline::poll_ms(int cap_ms) const {
  auto left = at - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
  return static_cast<int>(std::min<long long>(ms, cap_ms));
}

double Deadline::seconds_left() const {
  return std::chrono::duration<double>(at - Clock::now()).count();
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SockAddr::set_port(int port) {
  if (family() == AF_INET)
    reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(static_cast<uint16_t>(port));
  else if (family() == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(static_cast<uint16_t>(port));
}

std::string SockAddr::ip() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (family() == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf, sizeof(buf));
  else if (family() == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof(buf));
  else
    return "<no address>";
  return buf;
}

std::string SockAddr::str() const {
  if (family() == AF_INET6) return "[" + ip() + "]:" + std::to_string(port());
  return ip() + ":" + std::to_string(port());
}

void SockAddr::to_bytes(uint8_t out[kAddrBytes]) const {
  std::memset(out, 0, kAddrBytes);
  std::memcpy(out, &storage, std::min<size_t>(len, kAddrBytes));
}

SockAddr SockAddr::from_bytes(const uint8_t in[kAddrBytes]) {
  SockAddr a;
  std::memcpy(&a.storage, in, kAddrBytes);
  if (a.family() == AF_INET)
    a.len = sizeof(sockaddr_in);
  else if (a.family() == AF_INET6)
    a.len = sizeof(sockaddr_in6);
  else
    throw_error(mycollInvalidArgument,
                "address family " + std::to_string(a.family()) + " is neither IPv4 nor IPv6");
  return a;
}

SockAddr SockAddr::from_ip(const std::string& ip, int port) {
  SockAddr a;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    a.len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    a.len = sizeof(sockaddr_in6);
  } else {
    throw_error(mycollInvalidArgument, "'" + ip + "' is not a numeric IPv4/IPv6 address");
  }
  a.set_port(port);
  return a;
}

SockAddr SockAddr::resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    throw_error(mycollInvalidArgument, "cannot resolve host '" + host + "': " + gai_strerror(rc));
  const addrinfo* pick = nullptr;
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) {
      pick = r;
      break;
    }
  if (!pick)
    for (const addrinfo* r = res; r; r = r->ai_next)
      if (r->ai_family == AF_INET6) {
        pick = r;
        break;
      }
  SockAddr a;
  if (pick) {
    std::memcpy(&a.storage, pick->ai_addr, pick->ai_addrlen);
    a.len = pick->ai_addrlen;
  }
  freeaddrinfo(res);
  if (!pick) throw_error(mycollInvalidArgument, "host '" + host + "' has no IPv4/IPv6 address");
  a.set_port(port);
  return a;
}

SockAddr SockAddr::local_of(int fd) {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (getsockname(fd, a.sa(), &a.len) != 0) a.len = 0;
  return a;
}

SockAddr SockAddr::peer_of(int fd) {
  SockAddr a;
  a.len = sizeof(a.storage);
  if (getpeername(fd, a.sa(), &a.len) != 0) a.len = 0;
  return a;
}

std::string io_status_text(IoStatus s, int err) {
  switch (s) {
    case IoStatus::kOk:
      return "ok";
    case IoStatus::kTimeout:
      return "timed out";
    case IoStatus::kClosed:
      return "connection closed by peer";
    case IoStatus::kCancelled:
      return "aborted";
    case IoStatus::kError:
      return std::strerror(err);
  }
  return "?";
}

namespace {

// Waits for `events` on fd until the deadline (in slices of 100 ms when a
// cancel flag is given). Returns kOk when ready (incl. error/hangup events,
// which the following I/O call reports).
IoStatus wait_fd(int fd, short events, const Deadline& d, int* err,
                 const std::atomic<bool>* cancel) {
  for (;;) {
    if (cancel && cancel->load(std::memory_order_acquire)) return IoStatus::kCancelled;
    int ms = d.poll_ms(cancel ? 100 : (1 << 30));
    if (ms == 0 && d.expired()) return IoStatus::kTimeout;
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc > 0) return IoStatus::kOk;
    if (rc < 0 && errno != EINTR) {
      if (err) *err = errno;
      return IoStatus::kError;
    }
  }
}

}  // namespace

IoStatus send_all(int fd, const void* data, size_t n, const Deadline& d, int* err,
                  const std::atomic<bool>* cancel) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (cancel && cancel->load(std::memory_order_acquire)) return IoStatus::kCancelled;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoStatus s = wait_fd(fd, POLLOUT, d, err, cancel);
      if (s != IoStatus::kOk) return s;
      continue;
    }
    if (err) *err = (k < 0) ? errno : EPIPE;
    return (k < 0 && (errno == EPIPE || errno == ECONNRESET)) ? IoStatus::kClosed
                                                              : IoStatus::kError;
  }
  return IoStatus::kOk;
}

IoStatus recv_all(int fd, void* data, size_t n, const Deadline& d, int* err,
                  const std::atomic<bool>* cancel) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (cancel && cancel->load(std::memory_order_acquire)) return IoStatus::kCancelled;
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoStatus s = wait_fd(fd, POLLIN, d, err, cancel);
      if (s != IoStatus::kOk) return s;
      continue;
    }
    if (err) *err = errno;
    return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
  }
  return IoStatus::kOk;
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

void set_buffer_sizes(int fd, size_t bytes) {
  if (bytes == 0) return;
  int v = static_cast<int>(std::min<size_t>(bytes, 1u << 30));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

Fd listen_on(const std::string& ip, int port, bool reuse_addr, SockAddr* bound,
             size_t buffer_bytes) {
  SockAddr addr;
  bool dual_stack = false;
  if (ip.empty()) {
    // Every interface: prefer an IPv6 dual-stack socket, fall back to IPv4.
    Fd probe(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe.valid()) {
      auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr.storage);
      v6->sin6_family = AF_INET6;
      v6->sin6_addr = in6addr_any;
      addr.len = sizeof(sockaddr_in6);
      dual_stack = true;
    } else {
      auto* v4 = reinterpret_cast<sockaddr_in*>(&addr.storage);
      v4->sin_family = AF_INET;
      v4->sin_addr.s_addr = htonl(INADDR_ANY);
      addr.len = sizeof(sockaddr_in);
    }
    addr.set_port(port);
  } else {
    addr = SockAddr::from_ip(ip, port);
  }
  const std::string where = ip.empty() ? ("*:" + std::to_string(port)) : addr.str();
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) throw_system("socket() for listener on " + where);
  int one = 1, zero = 0;
  if (reuse_addr) setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (dual_stack) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  set_buffer_sizes(fd.get(), buffer_bytes);
  if (::bind(fd.get(), addr.sa(), addr.len) != 0) throw_system("cannot bind listener to " + where);
  if (::listen(fd.get(), SOMAXCONN) != 0) throw_system("cannot listen on " + where);
  if (bound) *bound = SockAddr::local_of(fd.get());
  return fd;
}

Fd accept_nonblocking(int listen_fd, SockAddr* peer) {
  SockAddr a;
  a.len = sizeof(a.storage);
  for (;;) {
    int fd = ::accept4(listen_fd, a.sa(), &a.len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      if (peer) *peer = a;
      return Fd(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    return Fd();  // EAGAIN, or a transient error (EMFILE...): try again later
  }
}

// A rank retrying a peer that does not answer (the rendezvous root not up
// yet, a wrong address) says so after this long, then this often.
constexpr double kStillWaitingFirstS = 2.0;
constexpr double kStillWaitingEveryS = 5.0;

Fd connect_to(const SockAddr& addr, const Deadline& d, const std::string& what, bool retry,
              const std::atomic<bool>* cancel, size_t buffer_bytes) {
  int last_err = 0;
  int backoff_ms = 10;
  const Clock::time_point start = Clock::now();
  double next_report_s = kStillWaitingFirstS;  // "still waiting" while a retried peer is silent
  for (;;) {
    if (cancel && cancel->load(std::memory_order_acquire))
      throw_error(mycollRemoteError, what + ": aborted while connecting to " + addr.str());
    Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) throw_system(what + ": socket() to connect to " + addr.str());
    set_buffer_sizes(fd.get(), buffer_bytes);
    // Lets a listener with SO_REUSEADDR bind over this socket's TIME_WAIT.
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc = ::connect(fd.get(), addr.sa(), addr.len);
    int e = (rc == 0) ? 0 : errno;
    if (rc != 0 && e == EINPROGRESS) {
      int werr = 0;
      IoStatus s = wait_fd(fd.get(), POLLOUT, d, &werr, cancel);
      if (s == IoStatus::kCancelled)
        throw_error(mycollRemoteError, what + ": aborted while connecting to " + addr.str());
      if (s == IoStatus::kTimeout) {
        e = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(e);
        if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
      }
    }
    if (e == 0) {
      // Linux can connect a socket to itself when the target is a local port
      // in the ephemeral range with no listener yet (TCP simultaneous open):
      // that is no peer, and it would keep the real listener from binding.
      if (SockAddr::local_of(fd.get()).str() != SockAddr::peer_of(fd.get()).str()) return fd;
      // Reset instead of a normal close: no TIME_WAIT left on that port.
      linger hard{1, 0};
      setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
      e = ECONNREFUSED;
    }
    last_err = e;
    const bool transient = e == ECONNREFUSED || e == ETIMEDOUT || e == EHOSTUNREACH ||
                           e == ENETUNREACH || e == ECONNRESET || e == EAGAIN || e == EINTR ||
                           e == ECONNABORTED || e == EADDRNOTAVAIL;
    if (!transient) break;
    if (!retry && e != ETIMEDOUT && e != EINTR && e != EAGAIN)
      throw_error(mycollRemoteError,
                  what + ": cannot connect to " + addr.str() + ": " + std::strerror(e));
    if (d.expired()) break;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (retry && waited >= next_report_s) {
      next_report_s = waited + kStillWaitingEveryS;
      log_warn(Subsys::Bootstrap, "{} at {}: no answer yet ({}); still waiting ({:.0f} s so far, "
               "{:.0f} s left of MYCOLL_TIMEOUT)", what, addr.str(), std::strerror(e), waited,
               d.seconds_left());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, d.poll_ms())));
    backoff_ms = std::min(backoff_ms * 2, 200);
    if (d.expired()) break;
  }
  throw_error(d.expired() ? mycollTimeout : mycollSystemError,
              what + ": cannot connect to " + addr.str() + ": " + std::strerror(last_err));
}

void random_bytes(void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    ssize_t k = getrandom(p, n, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      throw_system("getrandom");
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
}

uint64_t random_u64() {
  uint64_t v = 0;
  random_bytes(&v, sizeof(v));
  return v;
}

}  // namespace net
}  // namespace mycoll
