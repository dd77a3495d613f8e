// From a validated API call to engine work: argument checks, algorithm
// choice, plan building, group batching, dispatch to the host or device engine.
#pragma once

#include "algorithms/plan.h"
#include "base/dtype.h"
#include "comm/registry.h"
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
  int root = 0;          // rooted collectives
  int peer = -1;         // Send/Recv
  bool is_send = false;  // SendRecv: send (true) or recv (false)
  mycollStream_t stream = nullptr;
};

// The first of a call's scalar arguments that is wrong for a communicator
// of nranks ranks (datatype, a reduction's op, a rooted call's root, a
// point-to-point peer, the byte size), or kNone; reads nothing else, so a
// call of count 0 is checked with this alone (the API entry). validate_call
// throws naming it.
enum class ArgFault { kNone, kDtype, kOp, kRoot, kPeer, kOverflow, kTooLarge };
inline ArgFault arg_fault(int nranks, const Call& call) {
  const auto n = static_cast<unsigned>(nranks);
  // Unsigned compares: a negative value is out of range too.
  if (static_cast<unsigned>(call.dtype) >= unsigned(mycollNumTypes)) return ArgFault::kDtype;
  if (coll_reduces(call.coll) && static_cast<unsigned>(call.op) >= unsigned(mycollNumOps))
    return ArgFault::kOp;
  if (coll_is_rooted(call.coll) && static_cast<unsigned>(call.root) >= n) return ArgFault::kRoot;
  if (call.coll == Coll::SendRecv && static_cast<unsigned>(call.peer) >= n) return ArgFault::kPeer;
  // Multiplications, not divisions: this runs on every call, and two 64-bit
  // divisions cost more cycles than the rest of the small-message path's
  // argument checks together.
  size_t whole = 0;  // bytes of the whole message
  if (__builtin_mul_overflow(
          call.count, dtype_size(call.dtype) * (coll_is_blocked(call.coll) ? n : 1u), &whole))
    return ArgFault::kOverflow;
  if (whole > (size_t(1) << 56)) return ArgFault::kTooLarge;
  return ArgFault::kNone;
}

// Throws InvalidArgument naming the bad argument; the communicator stays usable.
void validate_call(mycollComm* comm, const Call& call, const char* fn);
// Runs the call now, or queues it when a group is open.
void submit(mycollComm* comm, const Call& call);
void group_start();
void group_end();
// Drops the calling thread's open group (after an error inside it).
int group_depth();
// The calling thread's open group holds an exclusive pin on the first
// communicator one of its calls named, until the group ends: calls on it
// inside the group run without pinning again. group_pinned: that
// communicator when h is its handle (else null); group_hold: takes `pin`
// over for the open group when it holds none yet (else leaves it);
// group_drop: lets the group's pin on h go (destroy / abort of h from
// inside the group; its queued calls then fail at group end as on a
// destroyed communicator).
// open_group: the calling thread's group when one is open, else null (one
// thread-local access per API call: the group functions take it).
struct GroupState;
GroupState* open_group();
mycollComm* group_pinned(const GroupState* g, mycollComm_t h);
void group_hold(GroupState* g, CommPin& pin);
void group_drop(mycollComm_t h);
// A call of the open group g failed when queued (bad argument, broken or
// destroyed communicator): mycollGroupEnd returns the first such error and
// runs none of the group's calls, as NCCL's group does.
void group_call_failed(GroupState* g, mycollResult_t code, const std::string& why);
// Queues the call in the open group g (submit without looking g up again).
void group_queue(GroupState* g, mycollComm* comm, const Call& call);
// Runs the call now (no group open); validate_call has passed on it.
void submit_now(mycollComm* comm, const Call& call);
// Runs the call now when it repeats exactly the communicator's last host
// collective that took the small-message path (same buffers, count, type,
// op, root, stream; no GPU visible), skipping validate_call and the plan
// lookup, whose answers cannot have changed; the communicator must still be
// usable. Returns false, having done nothing, otherwise (then validate_call
// and submit_now). No group open.
bool submit_repeat(mycollComm* comm, const Call& call);

}  // namespace mycoll
