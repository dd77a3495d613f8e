// Inputs and the element-by-element check shared by ring_allreduce (host
// buffers) and ring_allreduce_cuda (device buffers, copied back to the host).
#pragma once

#include <cstddef>
#include <vector>

namespace ring_example {

// Input element i of `rank`: a small integer, so every partial sum is exact
// in float32 (nranks * 24 < 2^24) and any summation order gives the exact
// result; it differs per rank and position, so a chunk landing in the wrong
// place or a missed reduction shows.
float input_value(int rank, size_t i);

// The exact all-reduce result at element i.
float exact_sum(int nranks, size_t i);

// Checks one rank's results, every element: the ring out of place
// (ring_out), in place (in_place), mycollAllReduce (lib_out) against the
// exact sum, the ring against mycollAllReduce, and that the send buffer
// (send_after, read back after all runs) still holds the inputs. Prints the
// first mismatches of each comparison on stderr; returns their total.
size_t verify(int rank, int nranks, const std::vector<float>& send_after,
              const std::vector<float>& ring_out, const std::vector<float>& in_place,
              const std::vector<float>& lib_out);

// Parses a decimal integer >= min from a command-line argument.
bool parse_size(const char* s, long long min, long long* out);

}  // namespace ring_example
