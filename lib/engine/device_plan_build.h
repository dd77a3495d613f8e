// Host-side construction of what the plan kernel executes: a collective split
// into channels (one column of the data each, one self-contained plan each),
// flattened into DevOps with byte offsets. Pure code (no CUDA calls), so the
// unit tests interpret these lists on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "algorithms/plan.h"
#include "engine/device_select.h"
#include "kernels/device_plan.h"

namespace mycoll {

struct DevicePlan {
  std::vector<DevOp> ops;
  std::vector<uint32_t> chan;  // channel c's ops: [chan[c], chan[c+1])
  int nch = 1;
  size_t scratch_bytes = 0;
  // A peer this rank sends to when it receives nothing in the call (a
  // broadcast root, a reduce leaf, a gather's non-root): such a rank may
  // defer its call check (kernels/prims/call_check.cuh). -1 otherwise.
  int sends_only_to = -1;
};

// Channels for a message of `bytes`: one per channel_bytes, 1..max_channels.
int device_channels(size_t bytes, size_t channel_bytes, int max_channels);

// The direct kernel's channels per peer for blocks of `block_bytes` on a
// communicator of `nranks` whose smallest GPU has `min_sms` multiprocessors:
// one per channel_bytes, at most max_channels, and few enough that its
// largest grid, (nranks - 1) x channels + copy_blocks, fits min_sms -
// spare_sms (every block must be resident at once: each waits on a block of
// a peer). 0 when even one channel per peer does not fit. Depends only on
// values alike on every rank, so both ends of a FIFO split a block alike.
int direct_kernel_channels(size_t block_bytes, size_t channel_bytes, int max_channels, int nranks,
                           int min_sms, int copy_blocks, int spare_sms);

// Pipelining chunk (elements) of tree/chain plans for one channel's column of
// `count` elements: about 64 KiB each, at most 64 (4 for two ranks), aligned.
size_t device_pipeline_chunk(size_t count, size_t es, size_t align, int nranks);

struct DeviceCollArgs {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;
  size_t es = 4;  // element size
  bool avg = false;
  size_t count = 0;
  int root = 0;
  bool in_place = false;
  int nranks = 1;
  int rank = 0;
  int nch = 1;
  int max_step_ops = 256;
};

// One plan per channel, each over the column [lo, hi) of every rank block
// (16-byte aligned boundaries), built by `build` (the communicator's
// build_plan) and flattened. Throws InvalidUsage when a step has more
// operations than the kernel handles (max_step_ops).
DevicePlan build_device_collective(const DeviceCollArgs& a,
                                   const std::function<Plan(const CollArgs&)>& build);

// A point-to-point batch (absolute-address slices, see make_p2p_task): every
// message split over device_channels(its bytes) channels, so both sides agree.
DevicePlan build_device_p2p(const Plan& p2p, size_t channel_bytes, int max_channels,
                            int max_step_ops = 256);

// The bytes [lo, hi) of a point-to-point message of `bytes` that channel ch
// carries when the message is split over nch channels (16-byte aligned
// boundaries; may be empty). The one rule of the plan kernel's batches
// (build_device_p2p) and the LL point-to-point kernel's (build_p2p_ll): a
// sender and a receiver cut a message alike whichever kernel each runs.
struct ByteRange {
  size_t lo = 0, hi = 0;
};
ByteRange p2p_slice(size_t bytes, int nch, int ch);

// What the LL point-to-point kernel (kernels/colls/p2p.cu) is told about one
// rank's communicator.
struct P2pLlContext {
  FifoGeom geom{};
  int rank = 0;
  char* local = nullptr;         // my inbox
  std::vector<char*> remote;     // remote[r]: rank r's inbox mapped here
  std::vector<bool> ll;          // peer r's ll ring may be used (cuda_ipc)
  uint64_t ll_max = 0;           // DevComm::ll_max_bytes
  size_t channel_bytes = 1;      // MYCOLL_GPU_CHANNEL_BYTES
  int max_channels = 1;          // channels a message may be split over
  int max_keys = kP2pLlMaxKeys;  // the kernel's capacity
  int max_slices = kP2pLlMaxSlices;
};

// A batch for the LL point-to-point kernel: keys (one thread block each) in
// order of first appearance, each key's slices contiguous in batch order.
struct P2pLlBatch {
  std::vector<P2pLlKey> keys;
  std::vector<uint64_t> ptr;    // slice: source (send) or destination (recv) address
  std::vector<uint32_t> bytes;  // slice: bytes (1 .. ll_max)
  std::vector<uint32_t> msg;    // slice: its whole message's bytes (the receivers' size check)
  int threads = 32;             // threads per block: a multiple of 32, 32 .. kP2pLlMaxThreads
};

// One per-channel slice of a point-to-point batch.
struct P2pPiece {
  int key;       // its (peer, direction, channel) in P2pCut::keys
  uint64_t ptr;  // source (send) or destination (recv) address
  uint32_t bytes;
  uint32_t msg;  // the whole message (the size check)
};
// A batch cut as both point-to-point kernels cut it (every message split as
// by build_device_p2p): its shape, the selection table's input (P2pShape,
// lib/engine/device_select.h), and its slices with their keys (peer,
// direction, channel) in order of first appearance. Either kernel moves
// every slice in the ll ring or FIFO of its (peer, channel) with the same
// counters, so the two interoperate slice by slice: each rank picks for its
// own batch alone. Stops at an op the LL kernel cannot take (not a Send or
// Recv, or a peer without a usable ll ring): shape.ll_peers false.
struct P2pCut {
  P2pShape shape;
  std::vector<P2pPiece> pieces;
  std::vector<P2pLlKey> keys;  // .first: the channel, until layout_p2p_ll
  std::vector<int> nkey;       // slices per key
};
P2pCut cut_p2p(const Plan& p2p, const P2pLlContext& cx);
// The LL point-to-point kernel's capacities in the table's limits: the
// largest slice (MYCOLL_GPU_LL_BYTES, the ll ring, the 32-bit size field),
// keys and slices per batch.
void p2p_ll_limits(const P2pLlContext& cx, DevLimits* l);
// Lays out a batch the table gave the LL point-to-point kernel
// (p2p_ll_takes) for it.
void layout_p2p_ll(const P2pCut& cut, const P2pLlContext& cx, P2pLlBatch* out);
// cut_p2p, the table's row and layout_p2p_ll in one: whether the LL
// point-to-point kernel takes the batch (then *out is filled).
bool build_p2p_ll(const Plan& p2p, const P2pLlContext& cx, P2pLlBatch* out);

}  // namespace mycoll
