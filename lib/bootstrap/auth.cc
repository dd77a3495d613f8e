// Mutual challenge-response authentication (wire format in socket_util.h).
#include <poll.h>

#include <cstring>

#include "bootstrap/socket_util.h"

namespace mycoll {
namespace net {
namespace {

constexpr uint32_t kHelloMagic = 0x4155594d;  // "MYUA"
constexpr uint32_t kProofMagic = 0x5055594d;  // "MYUP"
constexpr uint32_t kAuthVersion = 1;

using Mac = std::array<uint8_t, 32>;

// HMAC(secret, role '\0' label nonce_s nonce_c).
Mac proof_mac(const Secret& secret, const std::string& role, const char* label,
              const uint8_t* nonce_s, const uint8_t* nonce_c) {
  std::vector<uint8_t> msg(role.begin(), role.end());
  msg.push_back(0);
  msg.insert(msg.end(), label, label + std::strlen(label));
  msg.insert(msg.end(), nonce_s, nonce_s + 16);
  msg.insert(msg.end(), nonce_c, nonce_c + 16);
  return hmac_sha256(secret.data(), secret.size(), msg.data(), msg.size());
}

bool equal_const_time(const uint8_t* a, const uint8_t* b, size_t n) {
  uint8_t diff = 0;
  for (size_t i = 0; i < n; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace

bool parse_server_hello(const uint8_t* p, size_t len, const uint8_t** nonce_s) {
  if (len != kServerHelloBytes) return false;
  uint32_t magic = 0, version = 0;
  std::memcpy(&magic, p, 4);
  std::memcpy(&version, p + 4, 4);
  if (magic != kHelloMagic || version != kAuthVersion) return false;
  *nonce_s = p + 8;
  return true;
}

ProofCheck check_client_proof(const uint8_t* p, size_t len, const Secret& secret,
                              const std::string& role, const uint8_t* nonce_s) {
  uint32_t magic = 0;
  if (len != kClientProofBytes) return ProofCheck::kGarbage;
  std::memcpy(&magic, p, 4);
  if (magic != kProofMagic) return ProofCheck::kGarbage;
  Mac expect = proof_mac(secret, role, "client", nonce_s, p + 4);
  return equal_const_time(expect.data(), p + 20, 32) ? ProofCheck::kOk : ProofCheck::kWrongSecret;
}

ServerHandshake::ServerHandshake(Fd fd, SockAddr peer, const Secret& secret, std::string role,
                                 size_t announce_bytes, Deadline deadline)
    : fd_(std::move(fd)),
      peer_(peer),
      secret_(secret),
      role_(std::move(role)),
      deadline_(deadline),
      buf_(kClientProofBytes),
      announce_(announce_bytes) {}

ServerHandshake::State ServerHandshake::fail(std::string why, bool hostile) {
  failure_ = std::move(why);
  hostile_ = hostile;
  return State::kFailed;
}

ServerHandshake::State ServerHandshake::start() {
  uint8_t hello[kServerHelloBytes];
  random_bytes(nonce_s_, sizeof(nonce_s_));
  std::memcpy(hello, &kHelloMagic, 4);
  std::memcpy(hello + 4, &kAuthVersion, 4);
  std::memcpy(hello + 8, nonce_s_, 16);
  // A fresh socket's send buffer always takes 24 bytes; anything less means
  // the peer is already gone.
  ssize_t k = ::send(fd_.get(), hello, sizeof(hello), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (k != static_cast<ssize_t>(sizeof(hello)))
    return fail("closed before the challenge could be sent", false);
  return State::kRunning;
}

ServerHandshake::State ServerHandshake::on_readable() {
  for (;;) {
    std::vector<uint8_t>& target = authed_ ? announce_ : buf_;
    if (have_ == target.size()) break;
    ssize_t k = ::recv(fd_.get(), target.data() + have_, target.size() - have_, MSG_DONTWAIT);
    if (k == 0) {
      if (!authed_ && have_ == 0) return fail("connected and closed without a word", false);
      return fail(authed_ ? "closed before announcing itself" : "closed during authentication",
                  authed_ || have_ > 0);
    }
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return State::kRunning;
      return fail(std::string("socket error: ") + std::strerror(errno), false);
    }
    have_ += static_cast<size_t>(k);
    if (have_ < target.size()) continue;
    if (!authed_) {
      switch (check_client_proof(buf_.data(), buf_.size(), secret_, role_, nonce_s_)) {
        case ProofCheck::kGarbage:
          return fail("sent garbage instead of an authentication proof", true);
        case ProofCheck::kWrongSecret:
          return fail("failed authentication (wrong secret / unique id)", true);
        case ProofCheck::kOk: break;
      }
      const uint8_t* nonce_c = buf_.data() + 4;
      Mac mine = proof_mac(secret_, role_, "server", nonce_s_, nonce_c);
      ssize_t s = ::send(fd_.get(), mine.data(), mine.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (s != static_cast<ssize_t>(mine.size()))
        return fail("closed before the server proof could be sent", false);
      session_ = proof_mac(secret_, role_, "session", nonce_s_, nonce_c);
      authed_ = true;
      have_ = 0;
    }
    if (authed_ && have_ == announce_.size()) break;
  }
  return State::kDone;
}

bool authenticate_server(int fd, const Secret& secret, const char* role_tag, double timeout_s) {
  Deadline d = Deadline::after(timeout_s);
  // Borrow the fd: the state machine must not close the caller's socket.
  ServerHandshake hs(Fd(fd), SockAddr{}, secret, role_tag, 0, d);
  ServerHandshake::State st = ServerHandshake::State::kFailed;
  try {
    st = hs.start();
  } catch (...) {
    // no randomness: fail (the contract is "never throws")
  }
  while (st == ServerHandshake::State::kRunning) {
    int ms = d.poll_ms();
    if (ms == 0) break;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR) break;
    if (rc > 0) st = hs.on_readable();
  }
  hs.take_fd().release();
  return st == ServerHandshake::State::kDone;
}

bool authenticate_client(int fd, const Secret& secret, const char* role_tag, double timeout_s,
                         SessionKey* key) {
  try {
    Deadline d = Deadline::after(timeout_s);
    uint8_t hello[kServerHelloBytes];
    if (recv_all(fd, hello, sizeof(hello), d) != IoStatus::kOk) return false;
    const uint8_t* nonce_s = nullptr;
    if (!parse_server_hello(hello, sizeof(hello), &nonce_s)) return false;
    uint8_t nonce_c[16];
    random_bytes(nonce_c, sizeof(nonce_c));
    const std::string role(role_tag);
    Mac mine = proof_mac(secret, role, "client", nonce_s, nonce_c);
    uint8_t proof[kClientProofBytes];
    std::memcpy(proof, &kProofMagic, 4);
    std::memcpy(proof + 4, nonce_c, 16);
    std::memcpy(proof + 20, mine.data(), 32);
    if (send_all(fd, proof, sizeof(proof), d) != IoStatus::kOk) return false;
    uint8_t server_proof[kServerProofBytes];
    if (recv_all(fd, server_proof, sizeof(server_proof), d) != IoStatus::kOk) return false;
    Mac expect = proof_mac(secret, role, "server", nonce_s, nonce_c);
    if (!equal_const_time(expect.data(), server_proof, 32)) return false;
    if (key) *key = proof_mac(secret, role, "session", nonce_s, nonce_c);
    return true;
  } catch (...) {
    return false;  // e.g. no randomness: the contract is "never throws"
  }
}

}  // namespace net
}  // namespace mycoll
