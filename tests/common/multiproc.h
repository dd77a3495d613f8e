// Real multi-process tests: each rank is a forked child process.
// Rank 0's child creates the unique id; the parent relays it to the others,
// so the parent holds no library state (no threads before fork).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mycoll.h"

namespace mycoll_test {

struct LaunchOptions {
  int nranks = 2;
  // Set in every child before init (e.g. MYCOLL_TRANSPORT, MYCOLL_TIMEOUT).
  std::map<std::string, std::string> env;
  // Runs in each child before anything else (e.g. enter a network namespace).
  std::function<void(int rank)> pre_init;
  // Wall-clock limit for the whole launch; children still alive are killed.
  double timeout_s = 300;
  // Create the communicator (false: body gets comm = NULL and the id).
  bool init_comm = true;
};

struct RankResult {
  int exit_code = -1;  // 0 = the rank's body passed
  int signal = 0;      // killed by this signal (0 if exited)
  bool timed_out = false;
};

// body returns 0 on success; anything else (or a crash) fails the rank.
using RankBody = std::function<int(mycollComm_t comm, int rank, int nranks, const mycollUniqueId& id)>;

std::vector<RankResult> run_ranks(const LaunchOptions& opt, const RankBody& body);

// "rank 2: exit 1; rank 3: signal 9" for failure messages ("" when all passed).
std::string describe_failures(const std::vector<RankResult>& r);

// Prints a failure from inside a child (stderr, prefixed with rank) and
// counts it; check() returns cond.
bool check(bool cond, const std::string& what);
int failures();

// Small helpers of the e2e tests.
double seconds_since(std::chrono::steady_clock::time_point t0);
bool contains(const char* s, const char* what);  // false for a null s
std::string read_text_file(const std::string& path);  // "" when missing
// A fresh empty folder /tmp/mycoll_<prefix>_<pid>_<name>; remove_dir deletes one.
std::string scratch_dir(const std::string& prefix, const char* name);
void remove_dir(const std::string& dir);

}  // namespace mycoll_test
