// Exact input and expected-output images for -c 1, built fast enough for
// multi-GiB buffers: every value colls.cc defines is periodic in the element
// index (period kPeriod) within an input buffer and within each rank block
// of an output, so one period is computed element by element and the rest
// is copied. A few sampled elements of every image are re-checked against
// input_value()/expected_value() directly, so a change in colls.cc that
// breaks the periodicity fails loudly instead of checking the wrong thing.
#pragma once

#include <cstddef>
#include <string>

#include "colls.h"
#include "mycoll.h"

namespace mycoll_perf {

// lcm of the periods in colls.cc: 101 (data values) and 60 (reductions: 3, 4, 5).
constexpr size_t kPeriod = 6060;

// out[0..in_count) = input_value(c, op, rank, nranks, i) stored as t.
void fill_input_image(const CollInfo& c, mycollRedOp_t op, int rank, int nranks,
                      mycollDataType_t t, size_t in_count, char* out);

// out[0..out_count) = expected_value(c, op, rank, nranks, root, count, i) stored as t.
void fill_expected_image(const CollInfo& c, mycollRedOp_t op, int rank, int nranks, int root,
                         size_t count, mycollDataType_t t, size_t out_count, char* out);

// Number of elements of got[0..out_count) that do not match the expectation.
// Byte-equal to the expected image is a match; any other element is judged by
// matches() against expected_value() with rel_tol (the rounding allowed for
// avg). The first few mismatches are printed on stderr with `what`.
long long compare_image(const CollInfo& c, mycollRedOp_t op, int rank, int nranks, int root,
                        size_t count, mycollDataType_t t, size_t out_count, const char* got,
                        const char* want, double rel_tol, const std::string& what);

}  // namespace mycoll_perf
