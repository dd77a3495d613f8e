// Decoders of the ibverbs transport's connection info and run-time words
// (ib_wire.h).
#include "transports/ibverbs/ib_wire.h"

namespace mycoll {
namespace ibwire {
namespace {

mycollResult_t bad(std::string* why, int peer, const std::string& what) {
  *why = "ibverbs transport: rank " + std::to_string(peer) + " sent malformed connection info (" +
         what + ")";
  return mycollRemoteError;
}

bool overflows(uint64_t addr, uint64_t bytes) { return addr + bytes < addr; }

}  // namespace

mycollResult_t check_conn_info(const ConnInfo& w, int peer, int me, bool local_roce,
                               std::string* why) {
  if (w.failed > 1) return bad(why, peer, "failed flag " + std::to_string(w.failed));
  if (w.failed) {
    *why = "ibverbs transport: rank " + std::to_string(peer) +
           " failed to set up its RDMA device (see its error)";
    return mycollRemoteError;
  }
  if (w.valid > 1) return bad(why, peer, "valid flag " + std::to_string(w.valid));
  if (!w.valid) {
    *why = "ibverbs transport: rank " + std::to_string(me) + " lists rank " + std::to_string(peer) +
           " as a peer but that rank has no ib peers (asymmetric peer lists)";
    return mycollInvalidUsage;
  }
  // QP numbers and PSNs are 24 bits; QPs 0 and 1 are the special ones.
  if (w.qpn < 2 || w.qpn > 0xffffff) return bad(why, peer, "QP number " + std::to_string(w.qpn));
  if (w.psn > 0xffffff) return bad(why, peer, "PSN " + std::to_string(w.psn));
  if (w.mtu < 1 || w.mtu > 5) return bad(why, peer, "MTU code " + std::to_string(w.mtu));
  if (w.roce > 1) return bad(why, peer, "RoCE flag " + std::to_string(w.roce));
  if (static_cast<bool>(w.roce) != local_roce) {
    *why = "ibverbs transport: rank " + std::to_string(peer) + "'s port is " +
           (w.roce ? "RoCE" : "InfiniBand") + ", rank " + std::to_string(me) + "'s is " +
           (local_roce ? "RoCE" : "InfiniBand") + " (link layers differ; check MYCOLL_IB_HCA)";
    return mycollInvalidUsage;
  }
  // InfiniBand routes by LID: a unicast one (1..0xbfff).
  if (!w.roce && (w.lid == 0 || w.lid >= 0xc000))
    return bad(why, peer, "LID " + std::to_string(w.lid));
  if (w.ring_bytes < kMinRingBytes || w.ring_bytes > kMaxRingBytes || w.ring_bytes % 4096 != 0)
    return bad(why, peer, "ring of " + std::to_string(w.ring_bytes) + " bytes");
  if (w.ring_addr == 0 || overflows(w.ring_addr, w.ring_bytes))
    return bad(why, peer, "ring address " + std::to_string(w.ring_addr));
  if (w.ctrl_addr == 0 || overflows(w.ctrl_addr, kCtrlBytes))
    return bad(why, peer, "control block address " + std::to_string(w.ctrl_addr));
  if (w.pid < 0) return bad(why, peer, "pid " + std::to_string(w.pid));
  return mycollSuccess;
}

mycollResult_t check_arrival(uint64_t arrived, uint64_t consumed, uint64_t ring_bytes, uint32_t imm,
                             int peer, std::string* why) {
  const uint64_t held = arrived - consumed;  // <= ring_bytes: kept so by this check
  if (imm > kMaxWriteBytes || held > ring_bytes || imm > ring_bytes - held) {
    *why = "rank " + std::to_string(peer) + " wrote " + std::to_string(imm) +
           " bytes into a ring of " + std::to_string(ring_bytes) + " holding " +
           std::to_string(held) + " unread (beyond its credit: protocol violation)";
    return mycollRemoteError;
  }
  return mycollSuccess;
}

namespace {
// A bijective mix of 64 bits (xor-shift / odd-multiply rounds): every output
// byte depends on every input byte. The constant keeps a zeroed block (no
// credit written yet) from passing as a sealed count of 0.
uint64_t mix64(uint64_t x) {
  x ^= 0x6d79636f6c6c6962ull;  // "mycollib"
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}
}  // namespace

SealedCredit seal_credit(uint64_t count) { return SealedCredit{count, mix64(count)}; }

bool unseal_credit(uint64_t count, uint64_t seal) { return mix64(count) == seal; }

mycollResult_t check_credit(uint64_t seen, uint64_t now, uint64_t sent, int peer,
                            std::string* why) {
  (void)seen;  // a value below it is a stale read, not a violation (see the header)
  if (now > sent) {
    *why = "rank " + std::to_string(peer) + " reports " + std::to_string(now) +
           " bytes consumed, after " + std::to_string(seen) + ", of " + std::to_string(sent) +
           " sent (corrupt credit: protocol violation)";
    return mycollRemoteError;
  }
  return mycollSuccess;
}

}  // namespace ibwire
}  // namespace mycoll
