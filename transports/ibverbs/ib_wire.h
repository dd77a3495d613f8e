// What the ibverbs transport receives from its peers, and its pure
// decoders (no verbs calls, no I/O; tests/fuzz runs them on arbitrary
// bytes):
//   - ConnInfo, one per ordered pair, through Bootstrap::allgather: the
//     peer's QP, address, receive ring and control block;
//   - at run time, the immediate of every RDMA WRITE_WITH_IMM (bytes that
//     landed in this rank's ring) and the consumed count the peer RDMA-writes
//     into this rank's control block (its credit). Both come straight from
//     the peer: they are checked against what the ring can hold and what
//     was sent before they move a counter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mycoll.h"

namespace mycoll {
namespace ibwire {

// What one rank tells another about their connection (allgathered).
struct ConnInfo {
  uint32_t valid;   // 1: this entry describes a QP for the receiving rank
  uint32_t failed;  // 1: this rank could not set up (see its own error)
  uint32_t qpn, psn;
  uint16_t lid;
  uint8_t roce, mtu;  // mtu: an ibv_mtu (1: 256 .. 5: 4096)
  uint8_t gid[16];
  uint64_t ring_addr, ring_bytes, ctrl_addr;
  uint32_t ring_rkey, ctrl_rkey;
  // Liveness shortcut for peers in this very OS instance: pid, pid
  // namespace and boot id (0 / empty when unknown; boot_id need not end
  // in a NUL).
  uint64_t pidns;
  int32_t pid;
  char boot_id[40];
};

// Largest RDMA write of data (so largest immediate), and the bounds of a
// receive ring (MYCOLL_IB_BUFFER_BYTES rounded to pages).
constexpr uint64_t kMaxWriteBytes = 256u << 10;
constexpr uint64_t kMinRingBytes = 4096;
constexpr uint64_t kMaxRingBytes = 1ull << 30;
// Bytes of the control block the peer writes into (the sealed credit and
// the closed flag).
constexpr uint64_t kCtrlBytes = 64;

// Checks peer `peer`'s entry for rank `me`, whose port is RoCE (local_roce)
// or InfiniBand. mycollRemoteError when the peer failed its own setup or
// the entry is malformed (a field out of its range), mycollInvalidUsage
// when it has no QP for `me` (asymmetric peer lists) or the link layers
// differ; *why names the field and value.
mycollResult_t check_conn_info(const ConnInfo& info, int peer, int me, bool local_roce,
                               std::string* why);

// A WRITE_WITH_IMM of `imm` bytes arrived from `peer` while `arrived` bytes
// had arrived and `consumed` been consumed of a ring of ring_bytes: fine if
// it fits (so arrived - consumed never exceeds the ring), else
// mycollRemoteError and *why.
mycollResult_t check_arrival(uint64_t arrived, uint64_t consumed, uint64_t ring_bytes, uint32_t imm,
                             int peer, std::string* why);

// The credit (bytes the receiver consumed) travels as two 8-byte words, the
// count and a seal of it, written by one 16-byte RDMA write into the
// sender's control block. The sender reads the words while the adapter may
// be writing them, and an adapter may land the bytes in any order and a few
// at a time (Soft-RoCE copies them with the CPU: a read caught halfway saw a
// smaller count in CI), so a read can see a mix of the old and the new
// credit. The seal is a bijective 64-bit mix of the count: a mix of two
// sealed credits that is neither of them fails unseal_credit (each of the
// seal's bytes depends on every byte of the count), and the sender then
// keeps the last credit it accepted. Without it, a mix larger than what the
// peer consumed would let the sender overwrite unread bytes.
struct SealedCredit {
  uint64_t count;
  uint64_t seal;
};
SealedCredit seal_credit(uint64_t count);
// True when `seal` is the seal of `count` (the two words were read whole).
bool unseal_credit(uint64_t count, uint64_t seal);

// The peer's credit read as `now` (unsealed), after `seen` before, with
// `sent` bytes written to it: beyond `sent` is mycollRemoteError and *why.
// Below `seen` is allowed and ignored (the caller keeps the largest credit
// seen, which only grows on the peer).
mycollResult_t check_credit(uint64_t seen, uint64_t now, uint64_t sent, int peer, std::string* why);

}  // namespace ibwire
}  // namespace mycoll
