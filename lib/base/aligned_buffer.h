// Host memory that grows on demand and starts on a page boundary.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"

namespace mycoll {

// The host engine's scratch is one: blocks received into it are copied
// there with memcpy, whose x86 `rep movsb` ran several times slower into
// memory 16 bytes past a page boundary (where malloc puts large blocks)
// than into page-aligned memory (docs/performance.md, "Session 51").
class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 4096;

  AlignedBuffer() = default;
  ~AlignedBuffer() { std::free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  char* data() const { return p_; }
  size_t size() const { return n_; }
  // At least `bytes` from now on, the contents kept. Throws mycollSystemError
  // when the memory cannot be had.
  void grow(size_t bytes) {
    if (bytes <= n_) return;
    void* q = nullptr;
    if (posix_memalign(&q, kAlign, bytes) != 0 || !q)
      throw_error(mycollSystemError,
                  "host scratch: cannot allocate " + std::to_string(bytes) + " bytes");
    if (n_) std::memcpy(q, p_, n_);
    std::free(p_);
    p_ = static_cast<char*>(q);
    n_ = bytes;
  }

 private:
  char* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace mycoll
