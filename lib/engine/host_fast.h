// The host engine's small-message path. A cached plan whose every message
// fits in one record of its peer's connection (shm) is compiled once into
// flat arrays (byte offsets, connections, header templates), and a call then
// runs it straight: local copies and reductions, one send_record per send,
// one peek_record per receive with the header checked and the payload
// copied or reduced in place. No allocation, no lock, no syscall, no clock
// read while messages move; the same messages on the wire as the general
// loop (host_engine.cc), so a rank on either path talks to a rank on the
// other. Waiting, timeouts, abort and failure reporting are the general
// loop's (host_wire.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/plan.h"
#include "engine/host_wire.h"
#include "mycoll.h"

struct mycollComm;

namespace mycoll {

class Connection;

struct FastPlan {
  struct Local {  // a Copy or Reduce op, in bytes
    OpKind kind;
    Buf dst_buf, src_buf;
    size_t dst_off, src_off, bytes;
  };
  struct Xfer {  // a Send, Recv or RecvReduce op
    OpKind kind;
    int peer;
    Connection* conn;
    Buf buf;                // Send: the source; Recv/RecvReduce: the destination
    Buf local_buf;          // RecvReduce: the local operand
    size_t off, local_off;  // bytes (point-to-point: addresses, bases null)
    size_t bytes;
    int32_t prev;  // an earlier transfer of the step in the same direction with
                   // the same peer (messages of a pair match in order), or -1
    uint64_t seq;  // point-to-point: the message's number on the pair
  };
  struct Step {
    uint32_t local_begin, local_end, xfer_begin, xfer_end;
    // Two or more receives and no send: their records' first lines are
    // fetched together before the step polls them one by one
    // (Connection::prefetch_record).
    bool prefetch = false;
  };
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  mycollDataType_t dtype = mycollFloat32;
  size_t es = 1;  // element size
  size_t count = 0;
  int root = 0;
  size_t scratch_bytes = 0;
  Slice result;  // as Plan::result (elements)
  // The call's message header less what changes per call (op, call number)
  // and per message (bytes; point-to-point: count and number).
  MsgHeader hdr{};
  std::vector<Step> steps;
  std::vector<Local> locals;
  std::vector<Xfer> xfers;
  size_t max_step_xfers = 0;
  bool crowded = false;  // mycollComm::host_oversubscribed: yield early when idle
};

// The plan compiled for comm, or null when it does not qualify: a message
// to a peer whose connection has no records, a message larger than its
// record, or two messages with one peer in one direction in one step.
std::shared_ptr<const FastPlan> compile_fast(mycollComm* comm, const Plan& plan, Coll coll,
                                             Algo algo, mycollDataType_t dtype, size_t count,
                                             int root, bool in_place);

struct FastCall {
  const void* input = nullptr;
  void* output = nullptr;
  mycollRedOp_t op = mycollSum;
  uint64_t coll_seq = 0;  // the call number in the headers
};

// Runs one collective on comm. On a failure marks comm broken and throws
// the Error to report (host_fail).
void run_fast(mycollComm* comm, const FastPlan& plan, const FastCall& call);

// One send or receive of a group's point-to-point batch.
struct P2pMsg {
  bool is_send = false;
  int peer = -1;
  void* buf = nullptr;  // send: read only
  size_t bytes = 0;
};

// The batch's plan on the small-message path (all messages in flight at
// once, as the general loop's one-step p2p task; the same headers and
// message numbers), or null when it does not qualify: a message to this
// rank or larger than its peer's records. The plan is the communicator's
// own, rebuilt per batch or, when the batch repeats the last one (the same
// peers, directions and sizes of its non-empty messages, in order, as
// training's do), renewed in place (addresses, message numbers). Takes the
// batch's message numbers: run it next.
const FastPlan* prepare_fast_p2p(mycollComm* comm, const P2pMsg* msgs, size_t n);
// Runs a plan prepare_fast_p2p gave. On a failure marks comm broken and
// throws (host_fail).
void run_fast_p2p(mycollComm* comm, const FastPlan& plan);

}  // namespace mycoll
