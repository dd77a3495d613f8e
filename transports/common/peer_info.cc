// check_peer_info (transport.h): what a rank says about itself at init.
#include <cstring>
#include <string>

#include "transports/transport.h"

namespace mycoll {

bool check_peer_info(const PeerInfo& p, int rank, std::string* why) {
  const std::string who = "the peer info of rank " + std::to_string(rank);
  if (p.rank != rank) {
    *why = who + " names rank " + std::to_string(p.rank);
    return false;
  }
  if (p.cuda_device < -1) {
    *why = who + " has CUDA device " + std::to_string(p.cuda_device);
    return false;
  }
  if (p.pid < 0) {
    *why = who + " has pid " + std::to_string(p.pid);
    return false;
  }
  const struct {
    const char* s;
    size_t cap;
    const char* name;
  } strings[] = {{p.host_id, sizeof(p.host_id), "host id"},
                 {p.hostname, sizeof(p.hostname), "hostname"},
                 {p.ip, sizeof(p.ip), "address"}};
  for (const auto& f : strings)
    if (!std::memchr(f.s, 0, f.cap)) {
      *why = who + ": its " + f.name + " does not end within " + std::to_string(f.cap) + " bytes";
      return false;
    }
  return true;
}

}  // namespace mycoll
