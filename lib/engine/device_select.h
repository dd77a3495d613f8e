// The device engine's one decision: which GPU code moves a collective.
// (collective, algorithm, bytes, ranks, peers on cuda_ipc, what is forced)
// -> (kernel, schedule, protocol). Pure code, no CUDA: the unit tests check
// it like the algorithm policy, and the engine logs its answer per call at
// INFO. Every input is alike on every rank (the message size, the
// communicator's limits, MYCOLL_* settings that must match), so every rank
// picks the same kernel for every call: the kernels' protocols depend on it.
//
// Rows, tried in this order (the first that accepts the call serves it):
//   kernel   schedule         protocol  collectives            when
//   ring     ring / chain     simple    AR AG RS BC RD         algo ring, whole >= ring_bytes
//                                                              (BC/RD also above ll_bcast /
//                                                              ll_reduce bytes)
//   ll_coll  direct / flat    ll        AG RS A2A; BC RD       algo direct (BC/RD: or not
//                                                              forced), whole <= ll_coll_bytes
//                                                              (BC/RD <= ll_bcast / ll_reduce
//                                                              bytes)
//   direct   direct           simple    A2A SC GA              algo direct, whole >= direct_bytes,
//                                                              a resident grid (channels > 0)
//   ll_coll  direct (1 shot)  ll        AR                     algo direct, bytes <= oneshot_bytes
//   ll_coll  rs+ag (2 shots)  ll        AR                     algo twoshot, bytes <= twoshot_bytes
//   plan     the algorithm's  per message (ll up to MYCOLL_GPU_LL_BYTES on a channel, else simple)
//            plan (ring, tree, rhd, direct, hier)
// Send/receive batches (SR), one rank's batch at a time:
//   p2p_ll   per message      ll        SR                     every peer on cuda_ipc, every
//                                                              slice <= p2p_ll_slice_bytes, keys
//                                                              and slices within the kernel's
//                                                              capacity (p2p_ll_takes)
//   plan     per message      per message (as above)           otherwise
// (A rank picks for its own batch alone: both kernels move every slice
// alike, so a sender on one and its receiver on the other interoperate.)
// MYCOLL_PROTO=simple turns the ll rows off, =ll the simple rows (config).
#pragma once

#include <cstdint>
#include <string>

#include "algorithms/plan.h"

namespace mycoll {

enum class DevKernel : uint8_t { Plan, Ring, LlColl, Direct, P2pLl };
const char* dev_kernel_name(DevKernel k);  // "plan", "ring", "ll_coll", ...

// What this communicator's kernels can take, fixed at init (0 = row off).
struct DevLimits {
  int nranks = 1;
  bool any_proxy = false;        // some rank has peers behind a host transport
  uint64_t ring_bytes = 0;       // MYCOLL_GPU_RING_BYTES (0: off)
  uint64_t direct_bytes = 0;     // MYCOLL_GPU_DIRECT_BYTES (0: off)
  uint64_t oneshot_bytes = 0;    // the inbox's one-shot capacity (0: off)
  uint64_t twoshot_bytes = 0;    // two-shot capacity
  uint64_t ll_coll_bytes = 0;    // LL-collective capacity (whole message)
  uint64_t ll_bcast_bytes = 0;   // largest LL broadcast
  uint64_t ll_reduce_bytes = 0;  // largest LL reduce
  // The LL point-to-point kernel (p2p_ll_limits, device_plan_build.h).
  uint64_t p2p_ll_slice_bytes = 0;  // largest per-channel slice (0: off)
  int p2p_ll_keys = 0;              // (peer, channel, direction) pairs per batch
  int p2p_ll_slices = 0;            // slices per batch
};

// A send/receive batch of one rank, every message cut over channels as both
// point-to-point kernels cut it (cut_p2p, device_plan_build.h).
struct P2pShape {
  bool ll_peers = false;   // every op a Send or Recv to a peer on cuda_ipc (others unset if not)
  uint64_t max_slice = 0;  // largest per-channel slice
  uint64_t max_msg = 0;    // largest message (the size check's field is 32 bits)
  int keys = 0;            // (peer, channel, direction) pairs
  int slices = 0;          // non-empty slices
  int max_key_slices = 0;  // most slices of one key (the kernel counts them in a byte)
};

// One call, as every rank sees it.
struct DevCall {
  Coll coll = Coll::AllReduce;
  Algo algo = Algo::Ring;    // the algorithm policy's choice (forced or automatic)
  bool algo_forced = false;  // MYCOLL_ALGO names this collective's algorithm
  uint64_t block_bytes = 0;  // count x dtype size (blocked collectives: one block)
  int direct_channels = 0;   // the direct kernel's channels per peer (0: grid not resident)
  P2pShape p2p;              // SendRecv: the batch
};

struct DevChoice {
  DevKernel kernel = DevKernel::Plan;
  const char* schedule = "plan";  // ring, chain, direct, flat tree, rs+ag, plan
  const char* proto = "per message";
  bool two_shot = false;  // ll_coll all-reduce: reduce-scatter + all-gather
};

DevChoice select_device_kernel(const DevCall& call, const DevLimits& lim);

// The p2p_ll row: whether the LL point-to-point kernel takes a batch.
bool p2p_ll_takes(const P2pShape& s, const DevLimits& lim);

// The smallest whole message of collective c with the ring algorithm that
// the fused ring kernel takes (the ring row's threshold; 0: never).
uint64_t ring_kernel_from(Coll c, const DevLimits& lim);

// The automatic algorithm of a GPU communicator whose peers are all on
// cuda_ipc (!lim.any_proxy), measured on H200s (docs/algorithms.md): every
// step of a plan costs a FIFO hand-over, so the kernels the table above
// offers decide up to tens of MiB. `whole` is the whole message.
//   all-reduce: direct (the LL kernel's one shot) up to lim.oneshot_bytes
//     (n <= 8); twoshot (the LL kernel's two shots) up to lim.twoshot_bytes; direct while the n-1
//     copies stay within 1 MiB (n <= 8); rhd up to 8 MiB (n > 2; 4 MiB at
//     3-4 ranks when the fused ring kernel takes the size); ring.
//   all-gather, reduce-scatter: direct (the LL-collective kernel) up to
//     lim.ll_coll_bytes (at n = 2 only up to 2 MiB when the fused ring
//     kernel takes the size); rhd up to 4 MiB (n > 2; n > 4 when the fused
//     ring kernel takes the size); ring.
//   the others: the host rule (broadcast and reduce take the LL kernel by
//     the table's row whenever they are not forced; all-to-all is direct).
Algo device_auto_algo(Coll c, uint64_t whole, const DevLimits& lim);

// The algorithm a call runs on a GPU communicator: the one MYCOLL_ALGO
// names, else device_auto_algo where every peer is on cuda_ipc, else the
// host rule (peers behind the GPU proxy run the plans as hosts do).
Algo device_algo(const AlgoPolicy& policy, Coll c, uint64_t whole, const DevLimits& lim);

// "ring kernel (ring schedule, simple protocol)" for logs.
std::string describe(const DevChoice& c);

}  // namespace mycoll
