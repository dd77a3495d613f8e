// Plan simulator: runs the plans of all ranks of one collective in one
// process, on in-memory buffers of uint64 elements, with exactly the Step
// contract of lib/algorithms/plan.h:
//  - a step's Copy ops run first, in order (a Copy whose src and dst are the
//    same memory is skipped, as engines do);
//  - then all its Send/Recv/RecvReduce ops are in flight together; the step
//    ends when all of them completed;
//  - a Send completes only together with the matching receive on the peer,
//    and only while that receive's step is the peer's current step
//    (rendezvous, no buffering); the k-th Send a->b matches the k-th
//    Recv/RecvReduce on b from a, with the same element count;
//  - the reduction is wrapping uint64 addition (values are random, so a
//    missing or duplicated contribution shows in the result).
// It reports, instead of executing on: deadlock (no progress possible),
// unmatched messages, count mismatches, ops of count 0, empty steps, bad
// peers, slices out of buffer_counts()/scratch_count bounds, partially
// overlapping Copy/RecvReduce operands, and intra-step hazards (a transfer
// writing memory another transfer of the same step reads or writes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"

namespace mycoll {
namespace sim {

// Memory of one rank. Input and Output live in one arena so that in-place
// aliasing is real aliasing; Scratch is separate (sized by the plan).
struct RankMemory {
  std::vector<uint64_t> arena;
  size_t input_base = 0;   // element offset of Input in arena
  size_t output_base = 0;  // element offset of Output in arena
  BufferCounts counts;     // addressable elements of Input / Output
  std::vector<uint64_t> scratch;
};

// Executes plans[r] for every rank r on mem[r] (Scratch is (re)allocated and
// filled with a poison pattern). Returns "" on success, else a description
// of the first violation (rank, step, op).
std::string execute(const std::vector<Plan>& plans, std::vector<RankMemory>& mem);

// One collective: the arguments all ranks share (args.rank is ignored;
// args.host_of, when set, must point at nranks host ids that outlive the run).
struct Case {
  Algo algo = Algo::Ring;
  CollArgs args;
  std::string describe() const;
};

// Builds every rank's plan with build_plan(), lays out memory (in place as
// NCCL aliases: allgather input = output + rank*stride; reducescatter output
// = input + rank*stride; gather root input = output + root*stride; scatter
// root output = input + root*stride; otherwise the same pointer), fills
// inputs with random values and everything else (guards around the buffers,
// stride padding, Output, Scratch) with poison, executes, and checks every
// arena element: outputs against a reference computed directly from the
// inputs, everything else unchanged. Also checks Plan::result and that a
// count-0 collective has an empty plan. Returns "" or the first failure,
// prefixed with describe().
std::string run_case(const Case& c);

}  // namespace sim
}  // namespace mycoll
