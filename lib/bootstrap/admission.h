// Admission of not-yet-authenticated connections on the bootstrap's
// listeners (root and rank listeners): a flood costs the real ranks nothing.
//  - Bounded: at most kMaxPending handshakes at once, at most
//    kMaxPendingPerSource from one IP address; a new connection past a bound
//    evicts the oldest one (of that source, else overall) instead of being
//    refused, so idle connections cannot lock the real ranks out. A real rank
//    authenticates at once, so it is never the oldest for long.
//  - Short: kPreAuthSeconds to authenticate and announce.
//  - Quiet: rejected connections are counted and summarised at most every
//    few seconds (WARN when any was hostile), never one line each, so a
//    flood cannot fill or block stderr.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bootstrap/socket_util.h"

namespace mycoll {
namespace net {

constexpr size_t kMaxPending = 1024;
constexpr size_t kMaxPendingPerSource = 128;
constexpr double kPreAuthSeconds = 5.0;

class RejectLog {
 public:
  explicit RejectLog(std::string who) : who_(std::move(who)) {}
  ~RejectLog() { flush(true); }
  // One rejected connection: from `peer`, because `why`; hostile = protocol
  // or authentication violation (else a plain close or timeout).
  void add(const SockAddr& peer, const std::string& why, bool hostile);
  // Emits the summary when the interval has passed (or force and any).
  void flush(bool force = false);
  uint64_t total() const { return total_; }

 private:
  std::string who_;
  uint64_t total_ = 0, count_ = 0, hostile_ = 0, evicted_ = 0;
  std::string last_;
  Clock::time_point next_ = Clock::now();
};

// Adds hs to pending, evicting the oldest handshake when a bound is reached.
void admit_pending(std::vector<std::unique_ptr<ServerHandshake>>& pending,
                   std::unique_ptr<ServerHandshake> hs, RejectLog& log);

}  // namespace net
}  // namespace mycoll
