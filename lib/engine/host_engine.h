// Host engine: executes plans over host memory with the communicator's
// connections, on the calling thread. Several communicators' tasks run
// interleaved in one progress loop (a group spanning communicators), each
// communicator's tasks in order.
#pragma once

#include <vector>

#include "engine/host_fast.h"
#include "engine/plan_cache.h"
#include "engine/task.h"

struct mycollComm;

namespace mycoll {

// The host engine's per-communicator state (mycollComm::host_state).
struct HostState;
// The communicator's plan cache (made with its HostState on first use).
PlanCache& host_plan_cache(mycollComm* comm);
// Buffers of the small-message point-to-point path, kept with the
// communicator so a warm batch allocates nothing (the caller holds the
// communicator's exclusive pin).
std::vector<P2pMsg>& host_p2p_msgs(mycollComm* comm);
FastPlan& host_p2p_plan(mycollComm* comm);

struct HostWork {
  mycollComm* comm = nullptr;
  std::vector<Task> tasks;
};

// Runs all work to completion. On a transport failure or timeout, marks the
// failing communicator broken (mycollComm::fail) and throws the Error after
// every other communicator's work has also finished or failed.
void run_host(std::vector<HostWork>& work);

}  // namespace mycoll
