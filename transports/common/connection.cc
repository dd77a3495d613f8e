// Default implementations of the Connection interface (transport.h).
#include <cstring>
#include <set>
#include <string>

#include "base/error.h"
#include "transports/transport.h"

namespace mycoll {

size_t Connection::recv_some(void* dst, size_t n) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t copied = 0;
  // peek exposes contiguous runs; a wrapped buffer needs a second round.
  while (copied < n) {
    const void* src = nullptr;
    size_t k = peek(&src, n - copied);
    if (k == 0) break;
    std::memcpy(out + copied, src, k);
    consume(k);
    copied += k;
  }
  return copied;
}

size_t Connection::send_some2(const void* a, size_t an, const void* b, size_t bn) {
  const size_t k = an ? send_some(a, an) : 0;
  if (k < an || bn == 0) return k;
  return an + send_some(b, bn);
}

void check_peer_list(const char* transport, int me, int nranks, const std::vector<int>& peers) {
  std::set<int> seen;
  for (int p : peers)
    check_arg(p >= 0 && p < nranks && p != me && seen.insert(p).second, [&] {
      return std::string(transport) + " transport: bad peer list on rank " + std::to_string(me) +
             " (peer " + std::to_string(p) + ")";
    });
}

}  // namespace mycoll
