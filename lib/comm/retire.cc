#include "comm/retire.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/log.h"
#include "comm/comm.h"
#include "engine/device_engine.h"

namespace mycoll {
namespace {

struct Job {
  std::thread thread;
  bool done = false;    // guarded by Behind::mu
  bool watched = true;  // run_behind still waits for it (and joins it): guarded by Behind::mu
};

// The jobs run_behind started. At process exit (this object's destructor)
// it waits for those still running and joins them, so none is cut off
// halfway through freeing GPU memory. A forked child has none of its
// parent's threads: it leaves their list alone.
class Behind {
 public:
  ~Behind() {
    if (getpid() != pid) return;  // a forked child: the list names the parent's threads
    wait(-1);                     // no bound: each job is bounded by MYCOLL_TIMEOUT
    std::lock_guard<std::mutex> g(mu);
    for (Job& j : *jobs)  // every one has ended
      if (j.thread.joinable()) j.thread.join();
    delete jobs;
  }

  std::mutex mu;
  std::condition_variable cv;
  std::list<Job>* jobs = new std::list<Job>;  // guarded by mu; leaked in a forked child
  const pid_t pid = getpid();

  // Joins the jobs that ended and that no run_behind waits for. Holds mu
  // (they no longer need it).
  void reap() {
    for (auto it = jobs->begin(); it != jobs->end();) {
      if (!it->done || it->watched) {
        ++it;
        continue;
      }
      it->thread.join();
      it = jobs->erase(it);
    }
  }
  size_t running() const {
    size_t n = 0;
    for (const Job& j : *jobs) n += j.done ? 0 : 1;
    return n;
  }
  // wait_behind (max_s < 0: no bound).
  int wait(double max_s) {
    std::unique_lock<std::mutex> lk(mu);
    auto none_running = [&] { return running() == 0; };
    if (max_s < 0) {
      if (!none_running())
        log_info(Subsys::Init,
                 "process exit waits for {} destroyed communicator(s) whose peers in other "
                 "processes have not all reached destroy (at most MYCOLL_TIMEOUT)",
                 running());
      cv.wait(lk, none_running);
    } else {
      cv.wait_for(lk, std::chrono::duration<double>(max_s), none_running);
    }
    reap();
    return static_cast<int>(running());
  }
};

Behind& behind() {
  static Behind b;
  return b;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool run_behind(std::function<void()> job, double wait_s) noexcept {
  auto work = std::make_shared<std::function<void()>>(std::move(job));
  Behind& b = behind();
  std::unique_lock<std::mutex> lk(b.mu);
  b.reap();
  auto it = b.jobs->emplace(b.jobs->end());
  try {
    it->thread = std::thread([&b, it, work] {
      (*work)();
      std::lock_guard<std::mutex> g(b.mu);
      it->done = true;
      b.cv.notify_all();
    });
  } catch (...) {  // no thread to be had: the job runs here, to its end
    b.jobs->erase(it);
    lk.unlock();
    (*work)();
    return true;
  }
  if (!b.cv.wait_for(lk, std::chrono::duration<double>(wait_s), [&] { return it->done; })) {
    it->watched = false;  // reap() joins it once it ends
    return false;
  }
  it->thread.join();
  b.jobs->erase(it);
  return true;
}

int wait_behind(double max_s) noexcept { return behind().wait(max_s < 0 ? 0 : max_s); }

void free_comm(mycollComm* c) noexcept {
  if (!c) return;
  if (!c->device || !c->device->quiesce()) {
    delete c;
    return;
  }
  // Copies of what the lines after run_behind need: once it returns false,
  // the job may free c at any moment.
  const std::string tag = c->log_tag;
  const double timeout_s = c->cfg.timeout_s;
  const auto start = std::chrono::steady_clock::now();
  const bool met = run_behind(
      [c, start] {
        {
          LogScope scope(&c->log_tag);
          c->device->meet();
          const double took = seconds_since(start);
          if (took > kMeetInlineS)
            log_info(Subsys::Init,
                     "destroy: the peers met after {:.1f} s; this communicator's GPU memory is "
                     "freed now",
                     took);
        }
        delete c;
      },
      kMeetInlineS);
  if (met) return;
  LogScope scope(&tag);
  log_info(Subsys::Init,
           "destroy: not every peer in another process has reached destroy within {} s (they "
           "may destroy their communicators in another order); destroy returns, and this "
           "communicator's GPU memory is freed once they have (within MYCOLL_TIMEOUT = {} s; "
           "the process waits for that at exit)",
           kMeetInlineS, timeout_s);
}

}  // namespace mycoll
