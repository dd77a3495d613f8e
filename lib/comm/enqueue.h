// From a validated API call to engine work: argument checks, algorithm
// choice, plan building, group batching, dispatch to the host or device engine.
#pragma once

#include "algorithms/plan.h"
#include "mycoll.h"

struct mycollComm;

namespace mycoll {

struct Call {
  Coll coll = Coll::AllReduce;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  mycollDataType_t dtype = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  int root = 0;        // rooted collectives
  int peer = -1;       // Send/Recv
  bool is_send = false;  // SendRecv: send (true) or recv (false)
  mycollStream_t stream = nullptr;
};

// Throws InvalidArgument naming the bad argument; the communicator stays usable.
void validate_call(mycollComm* comm, const Call& call, const char* fn);
// Runs the call now, or queues it when a group is open.
void submit(mycollComm* comm, const Call& call);
void group_start();
void group_end();
// Drops the calling thread's open group (after an error inside it).
int group_depth();

}  // namespace mycoll
