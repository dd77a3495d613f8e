// Runs one collective call on every rank with predictable inputs and checks
// every output element against the reference (tests/common/reference.h).
// Works for host buffers and, through MemOps, for device buffers.
#pragma once

#include <functional>
#include <string>

#include "mycoll.h"

namespace mycoll_test {

enum class CollKind {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Scatter,
  Gather,
  SendRecvRing
};
const char* kind_str(CollKind k);
bool kind_reduces(CollKind k);
bool kind_rooted(CollKind k);

struct CheckCase {
  CollKind kind = CollKind::AllReduce;
  mycollDataType_t dtype = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  size_t count = 0;  // as the API's count argument
  int root = 0;
  bool in_place = false;
  int seed = 0;
};
std::string describe(const CheckCase& c);

// Every dtype, op and collective kind, for test matrices.
extern const mycollDataType_t kAllTypes[10];
extern const mycollRedOp_t kAllOps[5];
extern const CollKind kAllKinds[9];
// Whether MYCOLL_ALGO=algo ("auto", "ring", "tree", "rhd", "direct", "hier", "twoshot",
// "doubling") applies
// to collective k (elsewhere the automatic rule is used, tested by "auto").
bool algo_serves(const std::string& algo, CollKind k);

// Where buffers live. Default: host memory.
struct MemOps {
  std::function<void*(size_t)> alloc;
  std::function<void(void*)> release;
  std::function<void(void* dst, const void* host_src, size_t)> upload;
  std::function<void(void* host_dst, const void* src, size_t)> download;
  std::function<void()> sync;  // wait for the stream
  mycollStream_t stream = nullptr;
};
MemOps host_mem();

// Returns true when the call succeeded and every element matched; else
// fills *err with the first problems.
bool run_and_check(mycollComm_t comm, const CheckCase& c, const MemOps& mem, std::string* err);

}  // namespace mycoll_test
