// Private socket helpers shared by the bootstrap and the socket transport:
// deadlines, an owning fd, addresses of either family, poll-bounded I/O,
// listen/connect, randomness, and the server side of the authentication
// handshake as a non-blocking state machine.
//
// Every socket made here is non-blocking; the *_all helpers wait with poll()
// and never past their deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace mycoll {
namespace net {

using Clock = std::chrono::steady_clock;

struct Deadline {
  Clock::time_point at;
  static Deadline after(double seconds);
  bool expired() const { return Clock::now() >= at; }
  // Milliseconds left for poll(), rounded up, >= 0, capped at `cap_ms`.
  int poll_ms(int cap_ms = 1 << 30) const;
  double seconds_left() const;
};

// Owns a file descriptor (closes it on destruction). Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Wire size of an address: a sockaddr_in or sockaddr_in6 in 28 bytes.
constexpr size_t kAddrBytes = 28;

// A socket address of family AF_INET or AF_INET6.
struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;

  const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
  int port() const;
  void set_port(int port);
  std::string ip() const;   // "10.1.2.3" / "fd00::2"
  std::string str() const;  // "10.1.2.3:45" / "[fd00::2]:45"

  // Serialization for ids and tables (zero-padded to kAddrBytes).
  void to_bytes(uint8_t out[kAddrBytes]) const;
  // Throws InvalidArgument when the bytes are not an AF_INET/AF_INET6 address.
  static SockAddr from_bytes(const uint8_t in[kAddrBytes]);
  // Numeric IP text (v4 or v6) + port. Throws InvalidArgument.
  static SockAddr from_ip(const std::string& ip, int port);
  // Resolves a host name or numeric address (IPv4 preferred). Throws
  // InvalidArgument naming the host when it does not resolve.
  static SockAddr resolve(const std::string& host, int port);
  // Local / remote address of a socket.
  static SockAddr local_of(int fd);
  static SockAddr peer_of(int fd);
};

enum class IoStatus { kOk, kTimeout, kClosed, kError, kCancelled };
// "timed out", "connection closed by peer", strerror(err), ...
std::string io_status_text(IoStatus s, int err);

// Sends/receives exactly n bytes before the deadline (poll + MSG_DONTWAIT, so
// the fd may be blocking or not). On kError, *err holds errno. `cancel`, when
// given, is checked every 100 ms and ends the wait with kCancelled.
IoStatus send_all(int fd, const void* data, size_t n, const Deadline& d, int* err = nullptr,
                  const std::atomic<bool>* cancel = nullptr);
IoStatus recv_all(int fd, void* data, size_t n, const Deadline& d, int* err = nullptr,
                  const std::atomic<bool>* cancel = nullptr);

void set_nonblocking(int fd);
void set_nodelay(int fd);
void set_buffer_sizes(int fd, size_t bytes);  // 0 = leave the OS default

// Non-blocking listening socket bound to ip:port. ip "" = every interface
// (IPv6 dual-stack where the kernel has IPv6, else IPv4). Throws
// Error(SystemError) naming the address when socket/bind/listen fail.
// buffer_bytes > 0 sets SO_SNDBUF/SO_RCVBUF (inherited by accepted sockets).
Fd listen_on(const std::string& ip, int port, bool reuse_addr, SockAddr* bound,
             size_t buffer_bytes = 0);

// Non-blocking accept; returns an invalid Fd when nothing is pending.
// The accepted socket is non-blocking.
Fd accept_nonblocking(int listen_fd, SockAddr* peer);

// Connects to addr (non-blocking socket, result non-blocking). With
// `retry`, refused/unreachable/reset are retried with backoff until the
// deadline (for a listener that may not be up yet); without, the first such
// failure throws Error(RemoteError) (for a listener known to be up: the peer
// is gone). Throws Error(Timeout) "<what>: cannot connect to <addr>: <errno>"
// at the deadline, Error(RemoteError) when cancelled. buffer_bytes > 0 sets
// SO_SNDBUF/SO_RCVBUF before connecting (so the window scale fits).
Fd connect_to(const SockAddr& addr, const Deadline& d, const std::string& what, bool retry,
              const std::atomic<bool>* cancel = nullptr, size_t buffer_bytes = 0);

// Cryptographic randomness (getrandom). Throws SystemError if unavailable.
void random_bytes(void* data, size_t n);
uint64_t random_u64();

// Authentication wire format (both directions, fixed sizes):
//   server -> client  ServerHello {magic, version, nonce_s[16]}
//   client -> server  ClientProof {magic, nonce_c[16], HMAC(secret, role|"client"|nonce_s|nonce_c)}
//   server -> client  ServerProof {HMAC(secret, role|"server"|nonce_s|nonce_c)}
// The secret never travels; each side proves knowledge of it over the other's
// fresh nonce, and the direction label stops reflection. Both sides then hold
// the session key HMAC(secret, role|"session"|nonce_s|nonce_c), fresh per
// connection and never sent.
constexpr size_t kServerHelloBytes = 24;
constexpr size_t kClientProofBytes = 52;
constexpr size_t kServerProofBytes = 32;

// Decoders of the handshake's messages (pure; tests/fuzz runs them on
// arbitrary bytes). A ServerHello of the right magic and version: true, with
// *nonce_s pointing at its nonce inside p.
bool parse_server_hello(const uint8_t* p, size_t len, const uint8_t** nonce_s);
// A ClientProof answering this server's nonce_s[16] for `role`.
enum class ProofCheck { kOk, kGarbage, kWrongSecret };
ProofCheck check_client_proof(const uint8_t* p, size_t len, const Secret& secret,
                              const std::string& role, const uint8_t* nonce_s);

// Server side of the handshake plus a fixed-size announcement from the client
// (e.g. its rank), as a non-blocking state machine so one thread can serve
// many half-open connections without a slow or hostile client stalling the
// others. Usage: start() once; then on_readable() whenever poll() reports the
// fd readable, until it returns kDone or kFailed; give up at deadline().
class ServerHandshake {
 public:
  enum class State { kRunning, kDone, kFailed };
  ServerHandshake(Fd fd, SockAddr peer, const Secret& secret, std::string role,
                  size_t announce_bytes, Deadline deadline);

  State start();
  State on_readable();

  int fd() const { return fd_.get(); }
  Fd take_fd() { return std::move(fd_); }
  const SockAddr& peer() const { return peer_; }
  const Deadline& deadline() const { return deadline_; }
  // The client's announcement (valid in kDone).
  const std::vector<uint8_t>& announcement() const { return announce_; }
  // The connection's session key (valid in kDone).
  const SessionKey& session_key() const { return session_; }
  // Why it failed; `hostile` is true for protocol/auth violations (log at
  // WARN) and false for a plain close (port scanners; log at INFO).
  const std::string& failure() const { return failure_; }
  bool hostile() const { return hostile_; }

 private:
  State fail(std::string why, bool hostile);

  Fd fd_;
  SockAddr peer_;
  Secret secret_;
  std::string role_;
  Deadline deadline_;
  uint8_t nonce_s_[16];
  std::vector<uint8_t> buf_;
  size_t have_ = 0;
  bool authed_ = false;
  SessionKey session_{};
  std::vector<uint8_t> announce_;
  std::string failure_;
  bool hostile_ = false;
};

}  // namespace net
}  // namespace mycoll
