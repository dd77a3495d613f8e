// See peer_watch.h.
#include "engine/peer_watch.h"

#include <utility>

namespace mycoll {

PeerWatch::PeerWatch(Bootstrap& bootstrap, std::vector<bool> watched, std::function<bool()> local,
                     std::function<void(const Bootstrap::PeerTrouble&)> peer, double period_s)
    : bootstrap_(bootstrap),
      watched_(std::move(watched)),
      local_(std::move(local)),
      peer_(std::move(peer)),
      period_s_(period_s) {
  thread_ = std::thread([this] { run(); });
}

PeerWatch::~PeerWatch() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void PeerWatch::run() {
  while (!stop_.load()) {
    const Bootstrap::PeerTrouble trouble = bootstrap_.peer_trouble(period_s_, watched_);
    if (stop_.load() || local_()) return;
    if (trouble.any()) {
      peer_(trouble);
      return;
    }
  }
}

}  // namespace mycoll
