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
#include "kernels/device_plan.h"

namespace mycoll {

struct DevicePlan {
  std::vector<DevOp> ops;
  std::vector<uint32_t> chan;  // channel c's ops: [chan[c], chan[c+1])
  int nch = 1;
  size_t scratch_bytes = 0;
};

// Channels for a message of `bytes`: one per channel_bytes, 1..max_channels.
int device_channels(size_t bytes, size_t channel_bytes, int max_channels);

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

}  // namespace mycoll
