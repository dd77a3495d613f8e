// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), used to authenticate
// bootstrap and socket-transport connections. Not performance critical: it
// runs a handful of times per connection on a few dozen bytes.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.h"

namespace mycoll {
namespace net {
namespace {

constexpr uint32_t kRoundConstants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// Incremental hasher: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256() {
    static constexpr uint32_t kInit[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                          0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, kInit, sizeof(h_));
  }

  void update(const uint8_t* p, size_t n) {
    total_bytes_ += n;
    while (n > 0) {
      size_t take = std::min(n, sizeof(block_) - used_);
      std::memcpy(block_ + used_, p, take);
      used_ += take;
      p += take;
      n -= take;
      if (used_ == sizeof(block_)) {
        compress(block_);
        used_ = 0;
      }
    }
  }

  std::array<uint8_t, 32> finish() {
    const uint64_t bit_len = total_bytes_ * 8;
    const uint8_t pad_start = 0x80;
    update(&pad_start, 1);
    const uint8_t zero = 0;
    while (used_ != 56) update(&zero, 1);
    uint8_t len_be[8];
    for (int i = 0; i < 8; ++i) len_be[i] = static_cast<uint8_t>(bit_len >> (56 - 8 * i));
    update(len_be, 8);
    std::array<uint8_t, 32> out{};
    for (int i = 0; i < 8; ++i)
      for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
    return out;
  }

 private:
  void compress(const uint8_t* block) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = (uint32_t(block[4 * i]) << 24) | (uint32_t(block[4 * i + 1]) << 16) |
             (uint32_t(block[4 * i + 2]) << 8) | uint32_t(block[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3];
    uint32_t e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t big_s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t choose = (e & f) ^ (~e & g);
      uint32_t t1 = h + big_s1 + choose + kRoundConstants[i] + w[i];
      uint32_t big_s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = big_s0 + majority;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  uint32_t h_[8];
  uint8_t block_[64];
  size_t used_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace

std::array<uint8_t, 32> sha256(const uint8_t* msg, size_t len) {
  Sha256 s;
  s.update(msg, len);
  return s.finish();
}

std::array<uint8_t, 32> hmac_sha256(const uint8_t* key, size_t key_len, const uint8_t* msg,
                                    size_t msg_len) {
  const ByteSpan one{msg, msg_len};
  return hmac_sha256_parts(key, key_len, &one, 1);
}

std::array<uint8_t, 32> hmac_sha256_parts(const uint8_t* key, size_t key_len, const ByteSpan* parts,
                                          size_t nparts) {
  constexpr size_t kBlock = 64;
  uint8_t k0[kBlock] = {};
  if (key_len > kBlock) {
    auto hk = sha256(key, key_len);
    std::memcpy(k0, hk.data(), hk.size());
  } else if (key_len > 0) {
    std::memcpy(k0, key, key_len);
  }
  uint8_t ipad[kBlock], opad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = k0[i] ^ 0x36;
    opad[i] = k0[i] ^ 0x5c;
  }
  Sha256 inner;
  inner.update(ipad, kBlock);
  for (size_t i = 0; i < nparts; ++i)
    if (parts[i].len > 0) inner.update(static_cast<const uint8_t*>(parts[i].data), parts[i].len);
  auto inner_hash = inner.finish();
  Sha256 outer;
  outer.update(opad, kBlock);
  outer.update(inner_hash.data(), inner_hash.size());
  return outer.finish();
}

}  // namespace net
}  // namespace mycoll
