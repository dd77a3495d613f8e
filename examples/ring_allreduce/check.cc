#include <cerrno>
#include <cstdlib>
#include "check.h"

#include <cstdio>

namespace ring_example {
namespace {

constexpr size_t kShown = 5;  // mismatches printed per comparison

// Compares got with want; prints the first few mismatches. Returns their count.
size_t compare(const char* what, int rank, const std::vector<float>& got,
               const std::vector<float>& want) {
  size_t wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (wrong < kShown)
      std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                   static_cast<double>(got[i]), static_cast<double>(want[i]));
    ++wrong;
  }
  if (wrong > kShown)
    std::fprintf(stderr, "rank %d: %s: ... %zu mismatches in all\n", rank, what, wrong);
  return wrong;
}

}  // namespace

float input_value(int rank, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 5) % 25) - 12);
}

float exact_sum(int nranks, size_t i) {
  long s = 0;
  for (int r = 0; r < nranks; ++r) s += static_cast<long>(input_value(r, i));
  return static_cast<float>(s);
}

size_t verify(int rank, int nranks, const std::vector<float>& send_after,
              const std::vector<float>& ring_out, const std::vector<float>& in_place,
              const std::vector<float>& lib_out) {
  const size_t count = ring_out.size();
  std::vector<float> expected(count), input(count);
  for (size_t i = 0; i < count; ++i) {
    expected[i] = exact_sum(nranks, i);
    input[i] = input_value(rank, i);
  }
  size_t wrong = 0;
  wrong += compare("ring vs exact reference", rank, ring_out, expected);
  wrong += compare("ring in place vs exact reference", rank, in_place, expected);
  wrong += compare("mycollAllReduce vs exact reference", rank, lib_out, expected);
  wrong += compare("ring vs mycollAllReduce", rank, ring_out, lib_out);
  wrong += compare("sendbuff after the runs vs the input (modified?)", rank, send_after, input);
  return wrong;
}

bool parse_size(const char* s, long long min, long long* out) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

}  // namespace ring_example
