#include "launch.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace mycoll_launch {
namespace {

// How long a non-zero rank waits for rank 0 to relay the unique id.
constexpr int kIdRelayTimeoutMs = 120 * 1000;

bool write_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes within timeout_ms in total; false on EOF, error or timeout.
bool read_all(int fd, void* data, size_t n, int timeout_ms) {
  char* p = static_cast<char*>(data);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(left));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return false;
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The relay of one forked process. write_fds: process 0's pipes to
// processes 1..np-1 (index p, -1 elsewhere); read_fd: this process' pipe from
// process 0 (-1 on process 0).
class PipeRelay {
 public:
  PipeRelay(int proc, int np, std::vector<int> write_fds, int read_fd)
      : proc_(proc), np_(np), write_fds_(std::move(write_fds)), read_fd_(read_fd) {}
  ~PipeRelay() {
    for (int fd : write_fds_)
      if (fd >= 0) close(fd);
    if (read_fd_ >= 0) close(read_fd_);
  }
  bool share(void* data, size_t bytes) {
    if (proc_ == 0) {
      bool ok = true;
      for (int peer = 1; peer < np_; ++peer) {
        if (write_fds_[peer] >= 0 && write_all(write_fds_[peer], data, bytes)) continue;
        std::fprintf(stderr, "process 0: relaying %zu bytes to process %d failed: %s\n", bytes,
                     peer, std::strerror(errno));
        ok = false;
      }
      return ok;
    }
    if (read_all(read_fd_, data, bytes, kIdRelayTimeoutMs)) return true;
    std::fprintf(stderr,
                 "process %d: nothing from process 0 within %d s (%zu bytes expected; process 0 "
                 "failed?)\n",
                 proc_, kIdRelayTimeoutMs / 1000, bytes);
    return false;
  }

 private:
  int proc_, np_;
  std::vector<int> write_fds_;
  int read_fd_;
};

// launch()'s per-rank body on top of fork_procs: rank 0 makes the unique id
// and relays it; every rank creates its communicator.
int forked_rank(int rank, int np, const Share& share, const RankMain& body,
                const std::function<void(int)>& before_init) {
  mycollUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (rank == 0) {
    mycollResult_t r = mycollGetUniqueId(&id);
    if (r != mycollSuccess) {
      std::fprintf(stderr, "rank 0: %s\n", describe(r, "mycollGetUniqueId", nullptr).c_str());
      return 2;  // closing the pipes (at exit) tells the others
    }
  }
  // Rank 0 goes on after a partial relay failure: the ranks that got the id
  // fail at init (rank missing), the others fail here.
  if (!share(&id, sizeof(id)) && rank != 0) return 2;
  if (before_init) before_init(rank);
  mycollComm_t comm = nullptr;
  mycollResult_t r = mycollCommInitRank(&comm, np, id, rank);
  if (r != mycollSuccess) {
    std::fprintf(stderr, "rank %d: %s\n", rank, describe(r, "mycollCommInitRank", nullptr).c_str());
    return 2;
  }
  return run_rank(comm, body);
}

const char* env_rank_variable() {
  for (const char* name :
       {"MYCOLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (std::getenv(name)) return name;
  return nullptr;
}

int fork_procs_impl(int np, const ProcMain& body, double grace_s) {
  // Every pipe exists before the first fork, so each child inherits them.
  std::vector<int> rd(np, -1), wr(np, -1);
  for (int r = 1; r < np; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      std::perror("launch: pipe");
      return 1;
    }
    rd[r] = fds[0];
    wr[r] = fds[1];
  }
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(np, -1);
  for (int r = 0; r < np; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("launch: fork");
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) waitpid(pids[k], nullptr, 0);
      return 1;
    }
    if (pid == 0) {
      // Keep only this rank's pipe ends, so EOF reaches a reader whose
      // writer (rank 0) died.
      for (int k = 1; k < np; ++k) {
        if (k != r) close(rd[k]);
        if (r != 0) close(wr[k]);
      }
      // Process 0 must not die of SIGPIPE when a reader is already gone.
      signal(SIGPIPE, SIG_IGN);
      int rc = 2;
      {
        PipeRelay relay(r, np, r == 0 ? wr : std::vector<int>(np, -1), r == 0 ? -1 : rd[r]);
        Share share = [&relay](void* data, size_t bytes) { return relay.share(data, bytes); };
        try {
          rc = body(r, np, share);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "process %d: %s\n", r, e.what());
          rc = 2;
        }
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc & 0xff);
    }
    pids[r] = pid;
  }
  for (int r = 1; r < np; ++r) {
    close(rd[r]);
    close(wr[r]);
  }

  // Reap; after the first failure the rest get grace_s, then SIGKILL.
  std::vector<int> status(np, -1);
  std::vector<bool> done(np, false), killed(np, false);
  int running = np;
  bool failed = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int st = 0;
    pid_t pid = waitpid(-1, &st, failed ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // no children left (ECHILD)
    if (pid == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        for (int r = 0; r < np; ++r)
          if (!done[r] && !killed[r]) {
            kill(pids[r], SIGKILL);
            killed[r] = true;
          }
        deadline = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (int r = 0; r < np; ++r) {
      if (pids[r] != pid) continue;
      done[r] = true;
      status[r] = st;
      --running;
      bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
      if (!ok && !failed) {
        failed = true;
        deadline = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long>(grace_s * 1000));
      }
    }
  }
  int rc = 0;
  for (int r = 0; r < np; ++r) {
    int st = status[r];
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
    if (killed[r]) {
      std::fprintf(stderr,
                   "launch: process %d killed: still running %.0f s after another process "
                   "failed\n",
                   r, grace_s);
      rc = std::max(rc, 2);
    } else if (WIFSIGNALED(st)) {
      std::fprintf(stderr, "launch: process %d died of signal %d (%s)\n", r, WTERMSIG(st),
                   strsignal(WTERMSIG(st)));
      rc = std::max(rc, 2);
    } else {
      std::fprintf(stderr, "launch: process %d exited with status %d\n", r, WEXITSTATUS(st));
      rc = std::max(rc, WIFEXITED(st) ? WEXITSTATUS(st) : 2);
    }
  }
  return rc;
}

}  // namespace

bool launched_by_env() { return env_rank_variable() != nullptr; }

std::string describe(mycollResult_t r, const char* what, mycollComm_t comm) {
  const std::string head = std::string(what) + " failed: ";
  const char* last = mycollGetLastError(comm);
  if (!last || !*last) return head + mycollGetErrorString(r);
  // The library's message starts with the call's name ("mycollAllReduce:
  // remote error: ..."): say it once.
  std::string why = last;
  const std::string fn = std::string(what).substr(0, std::string(what).find(' ')) + ": ";
  if (why.compare(0, fn.size(), fn) == 0) why.erase(0, fn.size());
  return head + why;
}

void must(mycollResult_t r, const char* what, mycollComm_t comm) {
  if (r != mycollSuccess) throw std::runtime_error(describe(r, what, comm));
}

int run_rank(mycollComm_t comm, const RankMain& body) {
  int rank = -1, nranks = 0;
  int rc = 0;
  bool failed_call = false;
  try {
    must(mycollCommUserRank(comm, &rank), "mycollCommUserRank", comm);
    must(mycollCommCount(comm, &nranks), "mycollCommCount", comm);
    rc = body(comm, rank, nranks);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    rc = 2;
    failed_call = true;
  }
  // After a failed call peers may be gone or stuck: abort (tells them)
  // rather than a normal teardown.
  if (failed_call)
    mycollCommAbort(comm);
  else
    mycollCommDestroy(comm);
  return rc;
}

int fork_procs(int np, const ProcMain& body, double grace_s) {
  if (np < 1) {
    std::fprintf(stderr, "launch: %d processes requested (need >= 1)\n", np);
    return 2;
  }
  return fork_procs_impl(np, body, grace_s);
}

bool run_in_child(const std::function<int()>& fn, int* result, double timeout_s) {
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("run_in_child: fork");
    return false;
  }
  if (pid == 0) {
    int rc = 255;
    try {
      rc = fn();
    } catch (...) {}
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(rc & 0xff);
  }
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  for (;;) {
    int st = 0;
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w < 0 && errno == EINTR) continue;
    if (w == pid) {
      if (!WIFEXITED(st)) return false;
      *result = WEXITSTATUS(st);
      return true;
    }
    if (w < 0) return false;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      std::fprintf(stderr, "run_in_child: child still running after %.0f s: killed\n", timeout_s);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int env_local_rank() {
  for (const char* name : {"MYCOLL_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                           "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long r = std::strtol(v, &end, 10);
    if (*end == '\0' && r >= 0 && r < (1 << 20)) return static_cast<int>(r);
  }
  return -1;
}

int env_rank() {
  const char* name = env_rank_variable();
  if (!name) return -1;
  char* end = nullptr;
  long r = std::strtol(std::getenv(name), &end, 10);
  return *end == '\0' && r >= 0 && r < (1 << 30) ? static_cast<int>(r) : -1;
}

int launch(int np, const RankMain& body, double grace_s,
           const std::function<void(int rank)>& before_init) {
  if (np > 0)
    return fork_procs(
        np,
        [&](int rank, int n, const Share& share) {
          return forked_rank(rank, n, share, body, before_init);
        },
        grace_s);
  mycollComm_t comm = nullptr;
  if (launched_by_env()) {
    if (before_init) before_init(-1);
    mycollResult_t r = mycollCommInitFromEnv(&comm);
    if (r != mycollSuccess) {
      std::fprintf(stderr, "%s=%s: %s\n", env_rank_variable(), std::getenv(env_rank_variable()),
                   describe(r, "mycollCommInitFromEnv", nullptr).c_str());
      return 2;
    }
    return run_rank(comm, body);
  }
  if (before_init) before_init(0);
  mycollUniqueId id;
  mycollResult_t r = mycollGetUniqueId(&id);
  if (r == mycollSuccess) r = mycollCommInitRank(&comm, 1, id, 0);
  if (r != mycollSuccess) {
    std::fprintf(stderr, "%s\n", describe(r, "single-rank init", nullptr).c_str());
    return 2;
  }
  return run_rank(comm, body);
}

}  // namespace mycoll_launch
