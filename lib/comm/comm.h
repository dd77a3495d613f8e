// The communicator: what one rank knows about its peers, the connections
// to them, and the state of its operations. Built in lib/comm/comm_init.cc,
// used by the API layer and the engines.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/aligned_buffer.h"
#include "base/config.h"
#include "bootstrap/bootstrap.h"
#include "comm/flight_recorder.h"
#include "mycoll.h"
#include "transports/transport.h"

namespace mycoll {
class DeviceComm;  // lib/engine/device_engine.h (GPU communicators only)
struct HostState;  // lib/engine/host_engine.h (host communicators only)
void destroy_host_state(HostState* s);

// What a communicator's creator asks for beyond the environment: the NCCL
// shim's ncclConfig_t.maxCTAs and NCCL_MAX_CTAS / NCCL_MAX_NCHANNELS. A
// child split without options inherits its parent's.
struct CommOptions {
  // Most thread blocks any one GPU kernel of the communicator runs (at
  // least 2 where the call check has a block of its own), so its kernels
  // leave the rest of the GPU to computation; 0: no cap. Ranks asking for
  // different caps all take the smallest.
  int max_blocks = 0;
};

// The tighter of two block caps, where 0 means none.
constexpr int tighter_cap(int a, int b) { return a > 0 && (b <= 0 || a < b) ? a : b; }
}  // namespace mycoll

// The opaque handle of the C API.
struct mycollComm {
  static constexpr uint64_t kMagic = 0x6d79636f6c6c436dull;  // "mycollCm"
  uint64_t magic = kMagic;

  int rank = 0;
  int nranks = 1;
  int cuda_device = -1;  // -1: host-only communicator
  // Communicator id: alike on every rank (from the rendezvous' random tag),
  // printed as 8 hex digits in every log line; parent_id: the communicator
  // it was split from (0: none).
  uint64_t id = 0;
  uint64_t parent_id = 0;
  std::string log_tag;  // "comm 5a1f3c2e rank 1/4": prefix of its log lines (LogScope)
  mycoll::Config cfg;
  mycoll::CommOptions opts;
  mycoll::AlgoPolicy algo;
  std::unique_ptr<mycoll::Bootstrap> bootstrap;
  std::vector<mycoll::PeerInfo> peers;  // indexed by rank
  // This rank's host runs more ranks than the CPUs their affinity masks
  // cover together (topo oversubscribed_hosts, at init): waits yield early.
  bool host_oversubscribed = false;
  // A host of this communicator is oversubscribed and reads single copy
  // there (its speed check did not turn it off): broadcasts pipeline in
  // chunks of that threshold (Config::broadcast_chunk_bytes). The same on
  // every rank, since ranks must agree on chunks.
  bool broadcast_big_chunks = false;
  // conns[r]: connection to rank r (null for self). transport_of[r]: its name.
  std::vector<std::unique_ptr<mycoll::Connection>> conns;
  std::vector<std::string> transport_of;
  // Position of each rank in the host-major order and back (identity on one
  // host). Plans of collectives whose buffers are not indexed by rank
  // (all-reduce, broadcast, reduce) are built in that order, so rings and
  // chains cross each host boundary once.
  std::vector<int> vrank_of, rank_at;
  // Host index of each rank, in rank order and in host-major order (hosts
  // numbered by their lowest rank); empty on one host. comm_build_plan
  // hands the matching one to the builders as CollArgs::host_of.
  std::vector<int> host_of_rank, host_of_vrank;
  std::unique_ptr<mycoll::DeviceComm> device;  // GPU state, when cuda_device >= 0

  // Host engine scratch, grown on demand and reused; page-aligned.
  mycoll::AlignedBuffer scratch;
  // Host engine state kept between calls (plan cache, progress buffers),
  // made at the first host collective.
  std::unique_ptr<mycoll::HostState, void (*)(mycoll::HostState*)> host_state{
      nullptr, &mycoll::destroy_host_state};

  // Sticky failure: set when a collective failed mid-flight (stream state
  // lost); every later call returns it. mycollSuccess while healthy.
  std::atomic<int> async_error{mycollSuccess};
  std::string async_reason;
  std::atomic<bool> aborted{false};
  // This communicator's handle (lib/comm/registry.h) and how many of its
  // calls wait in an open group (destroying it then is an error).
  // Atomic: a failure on a watch thread during init reads it
  // (registry_mark_unusable) while registry_add stores it.
  std::atomic<mycollComm_t> handle{nullptr};
  std::atomic<int> queued{0};

  std::mutex err_mu;
  std::string last_error;
  uint64_t op_seq = 0;    // operations issued (collectives, p2p batches): logs, flight recorder
  uint64_t coll_seq = 0;  // collectives issued: the call number in host message headers
  std::unique_ptr<mycoll::FlightRecorder> flight;  // MYCOLL_FLIGHT_RECORDER > 0
  std::atomic<bool> flight_dumped{false};          // written once on failure
  // Point-to-point messages sent to / received from each rank (host message
  // headers carry them, so a send matched with the wrong receive is caught).
  std::vector<uint64_t> p2p_sent, p2p_recvd;

  // Marks the communicator broken with a reason and tells peers (shuts down
  // every connection so their waits end promptly). waits: the ranks the
  // failed operation was waiting for (a silent peer, a connection that
  // ended; bootstrap.h's Waits), which the report carries so that other
  // ranks can follow the waits to the root cause.
  void fail(mycollResult_t code, const std::string& reason, const mycoll::Waits& waits = {});
  // After fail(): `own` plus the root cause found by following the waits
  // from waits through the other ranks' reports, and those reports
  // (waiting up to wait_s for the cause to settle, or with no waits.on for
  // a report), which then also becomes the sticky reason.
  std::string with_remote_cause(const std::string& own, const mycoll::Waits& waits, double wait_s);
  // Abort, first half: marks the communicator aborted and makes every
  // blocked and future operation on it give up promptly (kernels, transport
  // connections, bootstrap). Frees nothing; safe while calls are in flight.
  void interrupt();
  // Throws the sticky error if the communicator is broken or aborted. Every
  // call checks: two loads inline, the throwing part out of line.
  void check_usable() const {
    if (aborted.load() || async_error.load() != mycollSuccess) throw_unusable();
  }
  [[noreturn]] void throw_unusable() const;
  ~mycollComm();
};

namespace mycoll {

// build_plan for this communicator: all-reduce, broadcast and reduce are
// built over the host-major order (peers mapped back to ranks); collectives
// whose buffers are laid out by rank use rank order. Either way the builders
// get the host layout (CollArgs::host_of) when ranks span several hosts.
Plan comm_build_plan(const mycollComm& c, Algo algo, CollArgs a);

// Creates a communicator (collective over nranks ranks). cuda_device < 0 for
// a host-only communicator. Throws Error.
// parent: the communicator split from (its id is logged), or null.
// cancel: ends the init early when set from another thread (Bootstrap::init).
// opts: null for the parent's (a split) or none.
std::unique_ptr<mycollComm> comm_create(const UniqueIdData& id, int nranks, int rank,
                                        int cuda_device, const mycollComm* parent = nullptr,
                                        CancelFlag cancel = {}, const CommOptions* opts = nullptr);

// "5a1f3c2e": how logs and dumps name a communicator id.
std::string comm_id_text(uint64_t id);

}  // namespace mycoll
