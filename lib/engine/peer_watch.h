// A GPU communicator's watch over its peers. Kernels wait on their peers
// in device memory, where no host call is waiting on any link: without a
// watch, a rank whose peer died or failed would wait until MYCOLL_TIMEOUT,
// and a failure this rank's kernel found (a timeout, a mismatch) would
// reach the others only when the application next asked
// (mycollCommGetAsyncError). One thread per communicator, asleep on the
// bootstrap's links:
//   - this rank's kernel recorded an error: `local` reports it (the
//     communicator fails, which sends the reason to every rank);
//   - another rank's failure report arrived, or the link from a rank in
//     `watched` ended (its process exited or was killed): `peer` gets what
//     happened (the device engine stops its kernels with that cause).
// Ranks of this process are not watched (a thread cannot die alone; ranks
// in one process end their communicators without a barrier).
// Either ends the watch; so does the destructor (at most one period later).
// Internal to lib/engine.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"

namespace mycoll {

class PeerWatch {
 public:
  // local(): true when this rank failed (the watch ends). period_s: how
  // often local() is asked.
  PeerWatch(Bootstrap& bootstrap, std::vector<bool> watched, std::function<bool()> local,
            std::function<void(const Bootstrap::PeerTrouble&)> peer, double period_s);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

 private:
  void run();

  Bootstrap& bootstrap_;
  const std::vector<bool> watched_;
  const std::function<bool()> local_;
  const std::function<void(const Bootstrap::PeerTrouble&)> peer_;
  const double period_s_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace mycoll
