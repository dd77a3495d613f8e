#include "check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "datatypes.h"

namespace mycoll_perf {
namespace {

constexpr int kMaxMismatchesShown = 3;  // per rank and checked run
constexpr size_t kSamples = 61;         // sampled elements re-checked per image segment

// seg[0..len) holds its first min(len, kPeriod) elements: repeat them to the end.
void replicate(char* seg, size_t len, size_t es) {
  size_t have = std::min(len, kPeriod);
  while (have < len) {
    const size_t m = std::min(have, len - have);
    std::memcpy(seg + have * es, seg, m * es);
    have += m;
  }
}

// The elements a periodic image is re-checked at: the first after the
// computed period, the last, and kSamples spread in between.
template <class F>
void for_samples(size_t len, F f) {
  if (len <= kPeriod) return;  // every element was computed directly
  f(kPeriod);
  f(len - 1);
  for (size_t k = 1; k <= kSamples; ++k) f(kPeriod + (len - kPeriod) / (kSamples + 1) * k);
}

[[noreturn]] void broken(const char* what, size_t i) {
  throw std::logic_error(std::string("mycoll-perf internal error: the ") + what +
                         " values are not periodic with period " + std::to_string(kPeriod) +
                         " (element " + std::to_string(i) +
                         "); update kPeriod in check.h to match colls.cc");
}

// Output segments: rank blocks when the output holds one block per rank
// (all_gather, gather, alltoall), else the whole output.
size_t segment_length(const CollInfo& c, size_t count, int n, size_t out_count) {
  const bool per_rank = c.blocked && count > 0 && out_count == count * static_cast<size_t>(n) &&
                        (c.id == CollId::AllGather || c.id == CollId::Gather ||
                         c.id == CollId::AllToAll);
  return per_rank ? count : out_count;
}

}  // namespace

void fill_input_image(const CollInfo& c, mycollRedOp_t op, int rank, int n, mycollDataType_t t,
                      size_t in_count, char* out) {
  const size_t es = dtype_size(t);
  for (size_t i = 0; i < std::min(in_count, kPeriod); ++i)
    store(t, out, i, input_value(c, op, rank, n, i));
  replicate(out, in_count, es);
  for_samples(in_count, [&](size_t i) {
    if (!matches(t, out, i, input_value(c, op, rank, n, i), 0)) broken("input", i);
  });
}

void fill_expected_image(const CollInfo& c, mycollRedOp_t op, int rank, int n, int root,
                         size_t count, mycollDataType_t t, size_t out_count, char* out) {
  const size_t es = dtype_size(t);
  const size_t seg = segment_length(c, count, n, out_count);
  for (size_t base = 0; base < out_count; base += seg) {
    const size_t len = std::min(seg, out_count - base);
    char* p = out + base * es;
    for (size_t i = 0; i < std::min(len, kPeriod); ++i)
      store(t, p, i, expected_value(c, op, rank, n, root, count, base + i));
    replicate(p, len, es);
    for_samples(len, [&](size_t i) {
      if (!matches(t, p, i, expected_value(c, op, rank, n, root, count, base + i), 0))
        broken("expected", base + i);
    });
  }
}

long long compare_image(const CollInfo& c, mycollRedOp_t op, int rank, int n, int root,
                        size_t count, mycollDataType_t t, size_t out_count, const char* got,
                        const char* want, double rel_tol, const std::string& what) {
  const size_t es = dtype_size(t);
  constexpr size_t kChunk = 16384;  // elements per memcmp
  long long wrong = 0;
  for (size_t base = 0; base < out_count; base += kChunk) {
    const size_t len = std::min(kChunk, out_count - base);
    if (std::memcmp(got + base * es, want + base * es, len * es) == 0) continue;
    for (size_t i = base; i < base + len; ++i) {
      if (std::memcmp(got + i * es, want + i * es, es) == 0) continue;
      const int64_t w = expected_value(c, op, rank, n, root, count, i);
      if (matches(t, got, i, w, rel_tol)) continue;  // e.g. avg within its rounding
      if (wrong < kMaxMismatchesShown)
        std::fprintf(stderr, "rank %d: %s: element %zu is %g, expected %lld\n", rank,
                     what.c_str(), i, load_as_double(t, got, i), static_cast<long long>(w));
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace mycoll_perf
