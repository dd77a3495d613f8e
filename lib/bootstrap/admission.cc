#include "bootstrap/admission.h"

#include "base/log.h"

namespace mycoll {
namespace net {

constexpr auto kSummaryInterval = std::chrono::seconds(5);

void RejectLog::add(const SockAddr& peer, const std::string& why, bool hostile) {
  ++total_;
  ++count_;
  const bool evicted = why.rfind("evicted", 0) == 0;
  evicted_ += evicted;
  hostile_ += hostile && !evicted;
  last_ = peer.str() + ": " + why;
  flush();
}

void RejectLog::flush(bool force) {
  if (count_ == 0 || (!force && Clock::now() < next_)) return;
  if (hostile_ > 0 || evicted_ > 0)
    log_warn(Subsys::Bootstrap,
             "{}: dropped {} connection(s) ({} failed authentication or sent garbage, {} evicted "
             "as oldest unauthenticated); last from {}",
             who_, count_, hostile_, evicted_, last_);
  else
    log_info(Subsys::Bootstrap, "{}: dropped {} connection(s) ({} evicted); last from {}", who_,
             count_, evicted_, last_);
  count_ = hostile_ = evicted_ = 0;
  next_ = Clock::now() + kSummaryInterval;
}

void admit_pending(std::vector<std::unique_ptr<ServerHandshake>>& pending,
                   std::unique_ptr<ServerHandshake> hs, RejectLog& log) {
  const std::string ip = hs->peer().ip();
  size_t from_source = 0, oldest_of_source = pending.size();
  for (size_t i = 0; i < pending.size(); ++i) {
    if (pending[i]->peer().ip() != ip) continue;
    if (from_source++ == 0) oldest_of_source = i;
  }
  size_t victim = pending.size();
  if (from_source >= kMaxPendingPerSource)
    victim = oldest_of_source;
  else if (pending.size() >= kMaxPending)
    victim = 0;
  if (victim < pending.size()) {
    log.add(pending[victim]->peer(), "evicted: oldest unauthenticated connection", false);
    pending.erase(pending.begin() + static_cast<long>(victim));
  }
  pending.push_back(std::move(hs));
}

}  // namespace net
}  // namespace mycoll
