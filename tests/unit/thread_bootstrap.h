// An in-process Bootstrap for unit tests: ranks are threads of one process
// sharing memory. allgather/barrier/send/recv go through a shared state
// guarded by a mutex and condition variable; every wait is bounded by the
// group's timeout (Error(mycollTimeout)) and ends with Error(mycollRemoteError)
// once the group is aborted.
//
// Usage:
//   run_ranks(4, [&](Bootstrap& bs) { ... bs.rank() ... });
// spawns 4 threads, each with its own ThreadBootstrap of one group, joins
// them and rethrows the first exception thrown by any rank (the group is
// aborted at that moment so the other ranks do not wait for the timeout).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace mycoll {

struct ThreadGroup;  // shared state of one group of ranks

class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(std::shared_ptr<ThreadGroup> group, int rank);
  ~ThreadBootstrap() override;

  int rank() const override { return rank_; }
  int nranks() const override;
  const Secret& secret() const override;
  uint64_t tag() const override;  // random per group
  std::string local_ip() const override { return "127.0.0.1"; }

  void allgather(void* data, size_t bytes) override;
  void barrier() override;
  // Byte streams per ordered pair: recv(peer, n) takes the next n bytes the
  // peer sent to this rank, however they were split into send() calls.
  void send(int peer, const void* data, size_t bytes) override;
  void recv(int peer, void* data, size_t bytes) override;
  // Aborts the whole group: every blocked and future call of every rank
  // throws Error(mycollRemoteError).
  void abort() override;

 private:
  std::shared_ptr<ThreadGroup> g_;
  int rank_;
  uint64_t seq_ = 0;  // collectives called so far by this rank
};

// A new group of n ranks; waits time out after timeout_s.
std::vector<std::unique_ptr<ThreadBootstrap>> make_thread_bootstraps(int n,
                                                                    double timeout_s = 60);

// Runs fn on n threads (one ThreadBootstrap each); rethrows the first
// exception after all threads ended.
void run_ranks(int n, const std::function<void(Bootstrap&)>& fn, double timeout_s = 60);

// Runs fn(rank) for every rank in its own thread (no bootstrap); returns each
// rank's exception message ("" = success).
std::vector<std::string> run_rank_threads(int n, const std::function<void(int)>& fn);

}  // namespace mycoll
