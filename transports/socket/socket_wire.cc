// Decoders of the socket transport's connection messages (socket_wire.h).
#include "transports/socket/socket_wire.h"

#include <sys/socket.h>

#include <cstring>

#include "base/error.h"

namespace mycoll {
namespace sockwire {

Endpoint encode_endpoint(const net::SockAddr* addr) {
  Endpoint e;
  std::memset(&e, 0, sizeof(e));
  if (addr) {
    addr->to_bytes(e.addr);
    e.valid = 1;
  }
  return e;
}

Announce encode_announce(int rank) { return Announce{kAnnounceMagic, rank}; }

mycollResult_t decode_endpoint(const void* p, size_t n, int rank, bool* listens,
                               net::SockAddr* addr, std::string* why) {
  const std::string who = "socket transport: endpoint of rank " + std::to_string(rank);
  if (n != sizeof(Endpoint)) {
    *why = who + " has " + std::to_string(n) + " bytes, not " + std::to_string(sizeof(Endpoint));
    return mycollRemoteError;
  }
  Endpoint e;
  std::memcpy(&e, p, sizeof(e));
  if (e.valid > 1) {
    *why = who + ": bad 'valid' flag " + std::to_string(e.valid);
    return mycollRemoteError;
  }
  *listens = e.valid == 1;
  if (!*listens) return mycollSuccess;
  uint16_t family = 0;
  std::memcpy(&family, e.addr, sizeof(family));  // sa_family_t leads every sockaddr
  if (family != AF_INET && family != AF_INET6) {
    *why = who + ": address family " + std::to_string(family) + " is neither IPv4 nor IPv6";
    return mycollRemoteError;
  }
  const net::SockAddr a = net::SockAddr::from_bytes(e.addr);  // cannot throw: family checked
  if (a.port() == 0) {
    *why = who + ": address " + a.str() + " has port 0";
    return mycollRemoteError;
  }
  *addr = a;
  return mycollSuccess;
}

mycollResult_t decode_announce(const void* p, size_t n, int nranks, int self, int* rank,
                               std::string* why) {
  if (n != sizeof(Announce)) {
    *why = "socket transport: announcement of " + std::to_string(n) + " bytes, not " +
           std::to_string(sizeof(Announce));
    return mycollRemoteError;
  }
  Announce a;
  std::memcpy(&a, p, sizeof(a));
  if (a.magic != kAnnounceMagic) {
    *why = "socket transport: announcement with bad magic " + std::to_string(a.magic);
    return mycollRemoteError;
  }
  if (a.rank < 0 || a.rank >= nranks || a.rank == self) {
    *why = "socket transport: announcement claims rank " + std::to_string(a.rank) +
           (a.rank == self ? " (this rank's own)" : "") + " of " + std::to_string(nranks);
    return mycollRemoteError;
  }
  *rank = a.rank;
  return mycollSuccess;
}

}  // namespace sockwire
}  // namespace mycoll
