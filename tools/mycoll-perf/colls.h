// One descriptor per benchmarked collective (as nccl-tests' per-collective
// test engines): which buffers it uses and how large, its bus-bandwidth
// factor, the mycoll call, exactly predictable inputs and expected outputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mycoll.h"

namespace mycoll_perf {

enum class CollId {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AllToAll,
  Scatter,
  Gather,
  SendRecv,
};

struct CollInfo {
  CollId id;
  const char* name;  // command-line name: "all_reduce", ...
  bool reduces;      // takes a reduction op
  bool rooted;       // takes a root
  // Count is per rank block: buffers hold nranks blocks of `count` elements,
  // and the size column / algbw use the whole nranks * count buffer.
  bool blocked;
  // An in-place variant exists (sendrecv has none: one buffer cannot be
  // sent from and received into at once).
  bool has_in_place;
  // busbw = algbw * factor, from nccl-tests' doc/PERFORMANCE.md.
  double busbw_factor(int nranks) const;
};

const std::vector<CollInfo>& all_colls();
// nullptr when name is unknown.
const CollInfo* find_coll(const std::string& name);

// Which elements one rank reads and writes for a given count, and where they
// sit in the single buffer of the in-place variant. All counts/offsets are
// in elements.
struct Layout {
  size_t total = 0;       // elements in the size column (nranks*count when blocked)
  size_t in_count = 0;    // elements of the send buffer this rank's call reads
  size_t out_count = 0;   // elements of the receive buffer the call writes
  bool has_input = true;  // false: the send buffer is not read here (non-root bcast/scatter)
  bool has_output = true; // false: nothing defined is written here (non-root reduce/gather)
  size_t ip_in_off = 0;   // in place: input starts here in the one buffer
  size_t ip_out_off = 0;  // in place: output starts here
};
Layout layout(const CollInfo& c, size_t count, int rank, int nranks, int root);

// Input element idx of `rank`: small integers, exactly representable in every
// type, chosen so every reduction over nranks <= 64 is exact in every type
// (integers may wrap; the expectation wraps the same way) and avg divides
// exactly.
int64_t input_value(const CollInfo& c, mycollRedOp_t op, int rank, int nranks, size_t idx);
// Expected output element idx on `rank` (only where layout().has_output).
int64_t expected_value(const CollInfo& c, mycollRedOp_t op, int rank, int nranks, int root,
                       size_t count, size_t idx);

// The mycoll call for this collective. send/recv as the collective defines
// them; sendrecv sends to rank+1 and receives from rank-1 (a ring), in a group.
mycollResult_t run_mycoll(const CollInfo& c, const void* send, void* recv, size_t count,
                          mycollDataType_t type, mycollRedOp_t op, int root, mycollComm_t comm,
                          mycollStream_t stream);

}  // namespace mycoll_perf
