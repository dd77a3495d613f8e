// Unique ids and the root rendezvous server.
//
// The root is one detached thread per rendezvous with all of its state on its
// own heap object, so it never keeps the process from exiting (an at-exit
// hook stops live roots within ~0.2 s; after fork() it lives in the parent
// only). It serves exactly one rendezvous: it ends after
// sending the address table, after its timeout, or when every rank that had
// registered has gone away. One poll loop drives every connection through a
// non-blocking handshake, so port scanners, garbage senders and clients with
// a wrong secret are dropped without delaying the real ranks.
#include <poll.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include "bootstrap/admission.h"
#include "bootstrap/wire.h"
#include "base/config.h"
#include "base/error.h"
#include "base/log.h"

namespace mycoll {

using namespace bswire;
using net::Clock;
using net::Deadline;
using net::Fd;
using net::ServerHandshake;
using net::SockAddr;

namespace {

// Progress reports to waiting ranks at most this often.
constexpr auto kStatusInterval = std::chrono::milliseconds(100);

// Live root threads, so process exit can stop them before static
// destructors (the logger) run: the at-exit hook asks them to stop and waits
// briefly. Atomics only, so a fork() child (which has no root threads; the
// atfork hook zeroes the count) can never block on it.
std::atomic<int> g_live_roots{0};
std::atomic<bool> g_stop_roots{false};

// Which roots of this process are running, by key (from their secret), and
// whether each is sending its final failure report, so that a rank whose own
// process hosts its root can wait for the root to finish telling the other
// ranks before its failed init returns: the caller may end the process at
// once, and the root would die with it, half told. Atomics only (see above);
// a root beyond the last slot is not waited for.
struct RootSlot {
  std::atomic<uint64_t> key{0};  // 0: free
  std::atomic<bool> ending{false};
};
constexpr int kRootSlots = 64;
RootSlot g_root_slots[kRootSlots];

uint64_t root_key(const Secret& secret) {
  uint64_t k = 0;
  std::memcpy(&k, secret.data(), sizeof(k));
  return k ? k : 1;  // 0 marks a free slot
}

void stop_roots_at_exit() {
  g_stop_roots.store(true);
  for (int i = 0; i < 100 && g_live_roots.load(std::memory_order_acquire) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void register_exit_hook_once() {
  static const bool once = [] {
    // (Logging state is never destroyed, lib/base/log.cc: the hook may log.)
    std::atexit(stop_roots_at_exit);
    pthread_atfork(nullptr, nullptr, [] {
      g_live_roots.store(0);
      for (auto& r : g_root_slots) r.key.store(0);
    });
    return true;
  }();
  (void)once;
}

void append_frame(std::vector<uint8_t>& out, uint32_t kind, const void* payload, size_t len) {
  FrameHeader h{kFrameMagic, kind, len};
  const auto* hp = reinterpret_cast<const uint8_t*>(&h);
  out.insert(out.end(), hp, hp + sizeof(h));
  const auto* pp = static_cast<const uint8_t*>(payload);
  out.insert(out.end(), pp, pp + len);
}

class Root {
 public:
  Root(Fd listen, SockAddr where, const Secret& secret, uint64_t tag, int nranks, double timeout_s)
      : listen_(std::move(listen)),
        where_(where.str()),
        secret_(secret),
        tag_(tag),
        nranks_(nranks),
        timeout_s_(timeout_s),
        deadline_(Deadline::after(timeout_s)),
        rejects_("root " + where_) {}

  // Set while the root sends its final failure report (wait_for_local_root).
  void set_ending_flag(std::atomic<bool>* ending) { ending_ = ending; }

  // Thread body. Never throws.
  void run() {
    try {
      loop();
    } catch (const std::exception& e) {
      log_warn(Subsys::Bootstrap, "root {}: stopped: {}", where_, e.what());
      fail_all(mycollInternalError, std::string("bootstrap root failed: ") + e.what());
    }
  }

 private:
  struct Member {
    Fd fd;
    SockAddr peer;
    uint8_t addr[net::kAddrBytes];
  };

  void loop() {
    log_info(Subsys::Bootstrap, "root listening on {} (timeout {} s)", where_, timeout_s_);
    auto next_status = Clock::now();
    for (;;) {
      if (g_stop_roots.load()) return;  // process exit
      if (nranks_ > 0 && static_cast<int>(members_.size()) == nranks_) {
        send_table();
        return;
      }
      if (deadline_.expired()) {
        time_out();
        return;
      }
      if (had_member_ && members_.empty() && pending_.empty()) {
        log_warn(Subsys::Bootstrap,
                 "root {}: every registered rank left before the rendezvous completed; "
                 "stopping",
                 where_);
        return;
      }
      if (status_dirty_ && Clock::now() >= next_status) {
        broadcast_status();
        status_dirty_ = false;
        next_status = Clock::now() + kStatusInterval;
      }

      // Poll: listener, handshakes, registered ranks (to notice departures).
      std::vector<pollfd> fds;
      fds.push_back({listen_.get(), POLLIN, 0});
      for (auto& hs : pending_) fds.push_back({hs->fd(), POLLIN, 0});
      std::vector<int> member_ranks;
      for (auto& [r, m] : members_) {
        fds.push_back({m.fd.get(), POLLIN, 0});
        member_ranks.push_back(r);
      }
      Deadline wake = deadline_;
      for (auto& hs : pending_) wake.at = std::min(wake.at, hs->deadline().at);
      if (status_dirty_) wake.at = std::min(wake.at, next_status);
      int rc = ::poll(fds.data(), fds.size(), wake.poll_ms(200));
      if (rc < 0 && errno != EINTR) throw_system("poll");

      // Handshakes first (indices 1..pending), then members, then accept:
      // accepting last keeps the indices of this round valid.
      std::vector<std::unique_ptr<ServerHandshake>> still;
      for (size_t i = 0; i < pending_.size(); ++i) {
        auto& hs = pending_[i];
        ServerHandshake::State st = ServerHandshake::State::kRunning;
        if (fds[1 + i].revents) st = hs->on_readable();
        if (st == ServerHandshake::State::kRunning && hs->deadline().expired()) {
          rejects_.add(hs->peer(), "no handshake in time", false);
          continue;
        }
        if (st == ServerHandshake::State::kFailed) {
          drop_log(*hs);
          continue;
        }
        if (st == ServerHandshake::State::kDone) {
          admit(*hs);
          continue;
        }
        still.push_back(std::move(hs));
      }
      const size_t base = 1 + pending_.size();
      pending_ = std::move(still);
      for (size_t i = 0; i < member_ranks.size(); ++i)
        if (fds[base + i].revents) check_member(member_ranks[i]);
      if (fds[0].revents & POLLIN) accept_new();
    }
  }

  void drop_log(const ServerHandshake& hs) { rejects_.add(hs.peer(), hs.failure(), hs.hostile()); }

  void accept_new() {
    for (int i = 0; i < 64; ++i) {
      SockAddr peer;
      Fd fd = net::accept_nonblocking(listen_.get(), &peer);
      if (!fd.valid()) return;
      Deadline d = Deadline::after(std::min(net::kPreAuthSeconds, deadline_.seconds_left()));
      auto hs = std::make_unique<ServerHandshake>(std::move(fd), peer, secret_, kRoleRoot,
                                                  sizeof(RankHello), d);
      if (hs->start() == ServerHandshake::State::kFailed) {
        drop_log(*hs);
        continue;
      }
      net::admit_pending(pending_, std::move(hs), rejects_);
    }
  }

  // A registered rank's socket became readable: it left (EOF) or broke the
  // protocol (ranks send nothing after their hello).
  void check_member(int rank) {
    auto it = members_.find(rank);
    uint8_t byte;
    ssize_t k = ::recv(it->second.fd.get(), &byte, 1, MSG_DONTWAIT);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (k > 0)
      log_warn(Subsys::Bootstrap, "root {}: rank {} ({}) sent unexpected data; dropping it", where_,
               rank, it->second.peer.str());
    else
      log_info(Subsys::Bootstrap, "root {}: rank {} ({}) left before the rendezvous completed",
               where_, rank, it->second.peer.str());
    members_.erase(it);  // no status update: "k arrived" counts ranks that gave up
  }

  void reject(ServerHandshake& hs, mycollResult_t code, const std::string& msg) {
    log_warn(Subsys::Bootstrap, "root {}: rejected {}: {}", where_, hs.peer().str(), msg);
    std::vector<uint8_t> frame;
    ErrorHeader eh{static_cast<int32_t>(code), 0};
    std::vector<uint8_t> payload(reinterpret_cast<uint8_t*>(&eh),
                                 reinterpret_cast<uint8_t*>(&eh) + sizeof(eh));
    payload.insert(payload.end(), msg.begin(), msg.end());
    append_frame(frame, kRootError, payload.data(), payload.size());
    net::send_all(hs.fd(), frame.data(), frame.size(), Deadline::after(1.0));
  }

  void admit(ServerHandshake& hs) {
    RankHello h;
    std::string why;
    if (!parse_rank_hello(hs.announcement().data(), hs.announcement().size(), nranks_, &h, &why)) {
      reject(hs, mycollInvalidUsage, why);
      return;
    }
    if (members_.count(h.rank)) {
      reject(hs, mycollInvalidUsage,
             "bootstrap: rank " + std::to_string(h.rank) + " joined twice (from " +
                 members_[h.rank].peer.str() + " and " + hs.peer().str() + ")");
      return;
    }
    nranks_ = h.nranks;
    Member m;
    m.peer = hs.peer();
    std::memcpy(m.addr, h.addr, sizeof(m.addr));
    m.fd = hs.take_fd();
    members_[h.rank] = std::move(m);
    had_member_ = true;
    status_dirty_ = true;
    log_info(Subsys::Bootstrap, "root {}: rank {} of {} joined from {} ({} present)", where_,
             h.rank, nranks_, members_[h.rank].peer.str(), members_.size());
  }

  void send_to_all(const std::vector<uint8_t>& frame, double timeout_s) {
    Deadline d = Deadline::after(timeout_s);
    for (auto& [r, m] : members_) {
      int err = 0;
      auto st = net::send_all(m.fd.get(), frame.data(), frame.size(), d, &err);
      if (st != net::IoStatus::kOk)
        log_warn(Subsys::Bootstrap, "root {}: cannot reach rank {} ({}): {}", where_, r,
                 m.peer.str(), net::io_status_text(st, err));
    }
  }

  void broadcast_status() {
    if (members_.empty()) return;
    StatusMsg s{static_cast<int32_t>(members_.size()), nranks_};
    std::vector<uint8_t> frame;
    append_frame(frame, kRootStatus, &s, sizeof(s));
    send_to_all(frame, 1.0);
  }

  void send_table() {
    std::vector<uint8_t> payload(sizeof(TableHeader) + members_.size() * net::kAddrBytes);
    TableHeader th{tag_, nranks_, 0};
    std::memcpy(payload.data(), &th, sizeof(th));
    for (auto& [r, m] : members_)
      std::memcpy(payload.data() + sizeof(th) + r * net::kAddrBytes, m.addr, net::kAddrBytes);
    std::vector<uint8_t> frame;
    append_frame(frame, kRootTable, payload.data(), payload.size());
    send_to_all(frame, std::max(5.0, deadline_.seconds_left()));
    log_info(Subsys::Bootstrap, "root {}: all {} ranks present; table sent", where_, nranks_);
  }

  void fail_all(mycollResult_t code, const std::string& msg) {
    if (ending_) ending_->store(true);
    ErrorHeader eh{static_cast<int32_t>(code), 0};
    std::vector<uint8_t> payload(reinterpret_cast<uint8_t*>(&eh),
                                 reinterpret_cast<uint8_t*>(&eh) + sizeof(eh));
    payload.insert(payload.end(), msg.begin(), msg.end());
    std::vector<uint8_t> frame;
    append_frame(frame, kRootError, payload.data(), payload.size());
    send_to_all(frame, 1.0);
  }

  void time_out() {
    std::string missing;
    int shown = 0, nmissing = 0;
    for (int r = 0; r < nranks_; ++r)
      if (!members_.count(r)) {
        ++nmissing;
        if (shown++ < 16) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    if (nmissing > 16) missing += ", ...";
    std::string msg = "bootstrap: timed out after " + fmt::format("{:.1f}", timeout_s_) +
                      " s: " + std::to_string(members_.size()) + " of " +
                      (nranks_ > 0 ? std::to_string(nranks_) : std::string("?")) +
                      " ranks arrived at root " + where_ +
                      (nranks_ > 0 ? " (missing ranks: " + missing + ")" : "");
    log_warn(Subsys::Bootstrap, "{}", msg);
    fail_all(mycollTimeout, msg);
  }

  Fd listen_;
  std::string where_;
  Secret secret_;
  uint64_t tag_;
  int nranks_;  // -1 until the first rank says
  double timeout_s_;
  Deadline deadline_;
  std::vector<std::unique_ptr<ServerHandshake>> pending_;
  std::map<int, Member> members_;
  bool had_member_ = false;
  bool status_dirty_ = false;
  net::RejectLog rejects_;
  std::atomic<bool>* ending_ = nullptr;
};

void launch_root(Fd listen, SockAddr where, const Secret& secret, uint64_t tag, int nranks,
                 double timeout_s) {
  register_exit_hook_once();
  auto root = std::make_shared<Root>(std::move(listen), where, secret, tag, nranks, timeout_s);
  RootSlot* slot = nullptr;
  for (auto& r : g_root_slots) {
    uint64_t free = 0;
    if (r.key.compare_exchange_strong(free, root_key(secret))) {
      r.ending.store(false);
      slot = &r;
      root->set_ending_flag(&r.ending);
      break;
    }
  }
  g_live_roots.fetch_add(1);
  try {
    std::thread([root, slot]() mutable {
      root->run();
      root.reset();  // sockets closed before the count says "stopped"
      if (slot) slot->key.store(0);
      g_live_roots.fetch_sub(1, std::memory_order_release);
    }).detach();
  } catch (...) {
    if (slot) slot->key.store(0);
    g_live_roots.fetch_sub(1);
    throw;
  }
}

}  // namespace

void create_unique_id(mycollUniqueId* id) {
  check_arg(id != nullptr, "mycollGetUniqueId: uniqueId is NULL");
  const std::string ip = net::pick_interface_ip(env_get("MYCOLL_SOCKET_IFNAME"));
  SockAddr bound;
  Fd listen = net::listen_on(ip, 0, false, &bound);
  UniqueIdData d;
  d.magic = kIdMagic;
  d.version = kIdVersion;
  bound.to_bytes(d.addr);
  net::random_bytes(d.secret.data(), d.secret.size());
  d.tag = net::random_u64();
  launch_root(std::move(listen), bound, d.secret, d.tag, -1, timeout_from_env());
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &d, sizeof(d));
}

// The launcher's name for this job (step), "" when none is known.
std::string job_identity() {
  std::string id = env_get("MYCOLL_JOB_ID");
  if (!id.empty()) return "mycoll:" + id;
  auto get = [](const char* n) {
    const char* v = std::getenv(n);
    return std::string(v ? v : "");
  };
  if (!get("SLURM_JOB_ID").empty())
    return "slurm:" + get("SLURM_JOB_ID") + "." + get("SLURM_STEP_ID");
  if (!get("PMIX_NAMESPACE").empty()) return "pmix:" + get("PMIX_NAMESPACE");
  if (!get("OMPI_MCA_ess_base_jobid").empty()) return "ompi:" + get("OMPI_MCA_ess_base_jobid");
  if (!get("TORCHELASTIC_RUN_ID").empty()) return "torchrun:" + get("TORCHELASTIC_RUN_ID");
  return "";
}

UniqueIdData unique_id_from_address(const std::string& host, int port) {
  check_arg(port > 0 && port < 65536,
            "bootstrap: port " + std::to_string(port) + " out of range 1..65535");
  SockAddr addr = SockAddr::resolve(host, port);
  UniqueIdData d;
  d.magic = kIdMagic;
  d.version = kIdVersion;
  addr.to_bytes(d.addr);
  // Every rank derives the same secret without talking: from MYCOLL_SECRET,
  // and the job identity, so that two jobs given one address never pair
  // (their proofs differ and each root drops the other job's ranks).
  // Without MYCOLL_SECRET nothing secret goes in: anyone who can reach the
  // port and knows the job id can join, which is said at WARN (or refused
  // with MYCOLL_REQUIRE_SECRET=1).
  const std::string user = env_get("MYCOLL_SECRET");
  const std::string job = job_identity();
  if (user.empty()) {
    const std::string req = env_get("MYCOLL_REQUIRE_SECRET");
    const std::string where = host + ":" + std::to_string(port);
    if (req == "1" || req == "true" || req == "yes")
      throw_error(mycollInvalidUsage,
                  "mycollCommInitFromEnv: MYCOLL_REQUIRE_SECRET=1 but MYCOLL_SECRET is not set: "
                  "refusing an unauthenticated rendezvous at " + where +
                      " (set MYCOLL_SECRET to the same random value on every rank, e.g. "
                      "MYCOLL_SECRET=$(cat secret-file))");
    static std::atomic<bool> warned{false};
    const bool loopback = addr.ip().rfind("127.", 0) == 0 || addr.ip() == "::1";
    if (!loopback && !warned.exchange(true))
      log_warn(Subsys::Bootstrap,
               "rendezvous at {} is unauthenticated (MYCOLL_SECRET unset): any process that can "
               "reach it{} can join this job. Set MYCOLL_SECRET to the same random value on every "
               "rank (e.g. MYCOLL_SECRET=$(cat secret-file)) or pass a unique id through the "
               "launcher; MYCOLL_REQUIRE_SECRET=1 refuses to run without one.",
               where, job.empty() ? "" : " and knows the job id (" + job + ")");
  }
  const std::string material = "mycoll-rendezvous-v2|" + std::to_string(user.size()) + ":" +
                               user + "|job=" + job + "|" + host + ":" + std::to_string(port);
  auto h = net::sha256(reinterpret_cast<const uint8_t*>(material.data()), material.size());
  std::memcpy(d.secret.data(), h.data(), d.secret.size());
  // The root hands every rank a fresh random tag in the table; this one only
  // names the id.
  std::memcpy(&d.tag, h.data() + 16, sizeof(d.tag));
  return d;
}

void wait_for_local_root(const Secret& secret, double max_s) {
  const uint64_t key = root_key(secret);
  const auto until = Clock::now() + std::chrono::duration<double>(max_s);
  for (;;) {
    bool reporting = false;
    for (auto& r : g_root_slots) reporting |= r.key.load() == key && r.ending.load();
    if (!reporting || Clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void start_root_listener(const UniqueIdData& id, int nranks, double timeout_s) {
  check_arg(nranks >= 1, "bootstrap: nranks must be >= 1");
  SockAddr addr = SockAddr::from_bytes(id.addr);
  SockAddr bound;
  Fd listen;
  // A port that is busy for a moment (e.g. a rank's outgoing socket that the
  // kernel gave this port) gets a short grace period.
  const Deadline d = Deadline::after(std::min(timeout_s, 3.0));
  for (;;) {
    try {
      listen = net::listen_on("", addr.port(), true, &bound);
      break;
    } catch (const Error& e) {
      if (d.expired())
        throw_error(e.code(), std::string("bootstrap root (rank 0) cannot listen on port ") +
                                  std::to_string(addr.port()) + ": " + e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  launch_root(std::move(listen), bound, id.secret, net::random_u64(), nranks, timeout_s);
}

}  // namespace mycoll
