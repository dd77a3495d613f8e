// What the socket transport receives from its peers while connecting, and
// its pure decoders (no I/O; tests/fuzz runs them on arbitrary bytes):
//   - the endpoint every rank publishes through Bootstrap::allgather (its
//     listener's address, or none);
//   - the announcement a connector sends once authenticated (its rank).
// After that the connection carries the engine's byte stream: the socket
// transport frames nothing itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "bootstrap/socket_util.h"
#include "mycoll.h"

namespace mycoll {
namespace sockwire {

constexpr uint32_t kAnnounceMagic = 0x4b53594d;  // "MYSK"

struct Endpoint {  // allgathered per rank
  uint8_t addr[net::kAddrBytes];
  uint32_t valid;  // 1: this rank listens; 0: it has no peers on this transport
};

struct Announce {  // connector -> acceptor after authentication
  uint32_t magic;
  int32_t rank;
};

// The endpoint of a rank listening on `addr` (or of one with no peers).
Endpoint encode_endpoint(const net::SockAddr* addr);
Announce encode_announce(int rank);

// Decodes rank `rank`'s endpoint (n bytes at p). On success *listens says
// whether it has peers on this transport and, if so, *addr is its
// listener's address (IPv4 or IPv6, port not 0). Otherwise returns
// mycollRemoteError with *why naming what is wrong.
mycollResult_t decode_endpoint(const void* p, size_t n, int rank, bool* listens,
                               net::SockAddr* addr, std::string* why);

// Decodes an announcement (n bytes at p) received by rank `self` of nranks:
// the right size and magic, a rank of [0, nranks) other than self. On
// success *rank holds it; otherwise mycollRemoteError and *why.
mycollResult_t decode_announce(const void* p, size_t n, int nranks, int self, int* rank,
                               std::string* why);

}  // namespace sockwire
}  // namespace mycoll
