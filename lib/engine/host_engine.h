// Host engine: executes plans over host memory with the communicator's
// connections, on the calling thread. Several communicators' tasks run
// interleaved in one progress loop (a group spanning communicators), each
// communicator's tasks in order.
#pragma once

#include <vector>

#include "engine/task.h"

struct mycollComm;

namespace mycoll {

struct HostWork {
  mycollComm* comm = nullptr;
  std::vector<Task> tasks;
};

// Runs all work to completion. On a transport failure or timeout, marks the
// failing communicator broken (mycollComm::fail) and throws the Error after
// every other communicator's work has also finished or failed.
void run_host(std::vector<HostWork>& work);

}  // namespace mycoll
