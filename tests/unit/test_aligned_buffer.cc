// The host engine's scratch (lib/base/aligned_buffer.h): page-aligned at
// every size it grows to, contents kept across growth, never shrinking.
#include <gtest/gtest.h>

#include <cstdint>

#include "base/aligned_buffer.h"

namespace {

TEST(AlignedBuffer, PageAlignedAtEverySizeAndKeepsItsContents) {
  mycoll::AlignedBuffer b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  size_t filled = 0;
  // Sizes on both sides of malloc's mmap threshold (128 KiB by default),
  // where malloc's own blocks start 16 bytes past a page boundary.
  for (size_t bytes : {size_t(1), size_t(100), size_t(4097), size_t(65536 + 3), size_t(1) << 17,
                       (size_t(1) << 20) + 1, size_t(3) << 20}) {
    b.grow(bytes);
    ASSERT_GE(b.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % mycoll::AlignedBuffer::kAlign, 0u)
        << bytes << " bytes";
    for (size_t i = 0; i < filled; ++i)
      ASSERT_EQ(static_cast<unsigned char>(b.data()[i]), static_cast<unsigned char>(i * 7 + 1))
          << "byte " << i << " lost when growing to " << bytes;
    for (size_t i = filled; i < bytes; ++i) b.data()[i] = static_cast<char>(i * 7 + 1);
    filled = bytes;
  }
  char* before = b.data();
  const size_t size = b.size();
  b.grow(10);  // smaller: nothing moves
  EXPECT_EQ(b.data(), before);
  EXPECT_EQ(b.size(), size);
}

}  // namespace
