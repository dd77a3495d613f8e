// Inputs whose collective results are exactly predictable for every dtype and
// op (small integers: sums and products stay exact in fp16/bf16), and an
// independent reference for each output element.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mycoll.h"

namespace mycoll_test {

size_t elem_size(mycollDataType_t t);
const char* type_str(mycollDataType_t t);
const char* op_str(mycollRedOp_t op);

// Value of element i of rank r's send buffer. `reducing` selects the small
// value range used for reductions (op decides it: Prod uses {1,2}).
double input_value(mycollDataType_t t, mycollRedOp_t op, bool reducing, int rank, size_t i,
                   int seed);

// Stores v (exact integer, or an already-rounded avg) as dtype t at element i
// (integers wrap modulo 2^bits like the library's arithmetic).
void store(mycollDataType_t t, void* buf, size_t i, double v);
// Reads element i as double (fp16/bf16 converted exactly).
double load(mycollDataType_t t, const void* buf, size_t i);

// The reduction of input_value over ranks 0..n-1 at index i, as the library
// must produce it (Avg: exact sum, then one division with truncation for
// integers, fp32 division rounded to the type for floats). Written into one
// element at out.
void reference_reduce(mycollDataType_t t, mycollRedOp_t op, int nranks, size_t i, int seed,
                      void* out);

// Fill with a poison byte pattern / check poison.
void poison(void* buf, size_t bytes);
bool is_poison(const void* buf, size_t bytes);

// "elem 17: got 3 expected 5" style description of a mismatch.
std::string describe_elem(mycollDataType_t t, const void* got, const void* expected, size_t i);

}  // namespace mycoll_test
