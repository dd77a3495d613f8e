// In-process Bootstrap for unit tests (see thread_bootstrap.h).
#include "thread_bootstrap.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.h"

namespace mycoll {

struct ThreadGroup {
  int n = 0;
  double timeout_s = 60;
  uint64_t tag = 0;
  Secret secret{};

  std::mutex mu;
  std::condition_variable cv;
  bool aborted = false;

  struct Round {  // one collective call, identified by its sequence number
    size_t bytes = 0;
    std::vector<uint8_t> data;
    int arrived = 0;
    int left = 0;
  };
  std::map<uint64_t, Round> rounds;
  std::map<std::pair<int, int>, std::deque<uint8_t>> streams;  // (from, to) -> bytes

  // Waits on cv until ready() holds; throws on abort or timeout.
  template <typename Ready>
  void wait(std::unique_lock<std::mutex>& lk, int rank, const char* what, Ready ready) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                              std::chrono::duration<double>(timeout_s));
    while (!ready()) {
      if (aborted)
        throw_error(mycollRemoteError,
                    "thread bootstrap: rank " + std::to_string(rank) + " " + what + ": aborted");
      if (cv.wait_until(lk, deadline) == std::cv_status::timeout && !ready()) {
        if (aborted) continue;
        throw_error(mycollTimeout, "thread bootstrap: rank " + std::to_string(rank) + " " + what +
                                       ": timed out after " + std::to_string(timeout_s) + " s");
      }
    }
    if (aborted)
      throw_error(mycollRemoteError,
                  "thread bootstrap: rank " + std::to_string(rank) + " " + what + ": aborted");
  }
};

ThreadBootstrap::ThreadBootstrap(std::shared_ptr<ThreadGroup> group, int rank)
    : g_(std::move(group)), rank_(rank) {}
ThreadBootstrap::~ThreadBootstrap() = default;

int ThreadBootstrap::nranks() const { return g_->n; }
const Secret& ThreadBootstrap::secret() const { return g_->secret; }
uint64_t ThreadBootstrap::tag() const { return g_->tag; }

void ThreadBootstrap::allgather(void* data, size_t bytes) {
  std::unique_lock<std::mutex> lk(g_->mu);
  if (g_->aborted)
    throw_error(mycollRemoteError, "thread bootstrap: rank " + std::to_string(rank_) +
                                       " allgather: aborted");
  const uint64_t seq = seq_++;
  auto& r = g_->rounds[seq];
  if (r.arrived == 0) {
    r.bytes = bytes;
    r.data.resize(bytes * g_->n);
  } else if (r.bytes != bytes) {
    g_->aborted = true;
    g_->cv.notify_all();
    throw_error(mycollInvalidUsage, "thread bootstrap: allgather #" + std::to_string(seq) +
                                        ": rank " + std::to_string(rank_) + " passed " +
                                        std::to_string(bytes) + " bytes, another rank " +
                                        std::to_string(r.bytes));
  }
  if (bytes) std::memcpy(r.data.data() + rank_ * bytes, static_cast<uint8_t*>(data) + rank_ * bytes,
                         bytes);
  if (++r.arrived == g_->n) g_->cv.notify_all();
  g_->wait(lk, rank_, "allgather", [&] { return r.arrived == g_->n; });
  if (bytes) std::memcpy(data, r.data.data(), bytes * g_->n);
  if (++r.left == g_->n) g_->rounds.erase(seq);
}

void ThreadBootstrap::barrier() {
  std::vector<uint8_t> dummy(g_->n);
  allgather(dummy.data(), 1);
}

void ThreadBootstrap::send(int peer, const void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < g_->n, "thread bootstrap send: bad peer " + std::to_string(peer));
  std::lock_guard<std::mutex> lk(g_->mu);
  if (g_->aborted)
    throw_error(mycollRemoteError,
                "thread bootstrap: rank " + std::to_string(rank_) + " send: aborted");
  auto& s = g_->streams[{rank_, peer}];
  const auto* p = static_cast<const uint8_t*>(data);
  s.insert(s.end(), p, p + bytes);
  g_->cv.notify_all();
}

void ThreadBootstrap::recv(int peer, void* data, size_t bytes) {
  check_arg(peer >= 0 && peer < g_->n, "thread bootstrap recv: bad peer " + std::to_string(peer));
  std::unique_lock<std::mutex> lk(g_->mu);
  auto& s = g_->streams[{peer, rank_}];
  g_->wait(lk, rank_, "recv", [&] { return s.size() >= bytes; });
  auto* out = static_cast<uint8_t*>(data);
  std::copy(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(bytes), out);
  s.erase(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(bytes));
}

void ThreadBootstrap::abort() {
  std::lock_guard<std::mutex> lk(g_->mu);
  g_->aborted = true;
  g_->cv.notify_all();
}

std::vector<std::unique_ptr<ThreadBootstrap>> make_thread_bootstraps(int n, double timeout_s) {
  check_arg(n > 0, "make_thread_bootstraps: n must be > 0");
  auto g = std::make_shared<ThreadGroup>();
  g->n = n;
  g->timeout_s = timeout_s;
  std::random_device rd;
  g->tag = (uint64_t(rd()) << 32) ^ rd();
  for (auto& b : g->secret) b = static_cast<uint8_t>(rd());
  std::vector<std::unique_ptr<ThreadBootstrap>> out;
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<ThreadBootstrap>(g, r));
  return out;
}

void run_ranks(int n, const std::function<void(Bootstrap&)>& fn, double timeout_s) {
  auto bs = make_thread_bootstraps(n, timeout_s);
  std::mutex mu;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(*bs[r]);
      } catch (...) {
        {
          std::lock_guard<std::mutex> lk(mu);
          if (!first) first = std::current_exception();
        }
        bs[r]->abort();  // release the other ranks
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

std::vector<std::string> run_rank_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (const std::exception& e) {
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(exception without message)";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace mycoll
