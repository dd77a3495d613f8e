// Default implementations of the Connection interface (transport.h).
#include <cstring>

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

}  // namespace mycoll
