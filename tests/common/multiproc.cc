#include "multiproc.h"

#include <ftw.h>
#include <sys/stat.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mycoll_test {

static int g_failures = 0;
static int g_rank = -1;

bool check(bool cond, const std::string& what) {
  if (!cond) {
    if (g_failures < 20) std::fprintf(stderr, "[rank %d] FAILED: %s\n", g_rank, what.c_str());
    ++g_failures;
  }
  return cond;
}
int failures() { return g_failures; }

static bool read_full(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
static bool write_full(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t r = write(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

static int child_main(const LaunchOptions& opt, const RankBody& body, int rank, int id_in,
                      int id_out) {
  g_rank = rank;
  for (const auto& [k, v] : opt.env) setenv(k.c_str(), v.c_str(), 1);
  if (opt.pre_init) opt.pre_init(rank);
  mycollUniqueId id;
  if (rank == 0) {
    if (mycollGetUniqueId(&id) != mycollSuccess) {
      std::fprintf(stderr, "[rank 0] mycollGetUniqueId failed: %s\n", mycollGetLastError(nullptr));
      return 3;
    }
    if (!write_full(id_out, &id, sizeof(id))) return 4;
  } else if (!read_full(id_in, &id, sizeof(id))) {
    return 4;
  }
  mycollComm_t comm = nullptr;
  if (opt.init_comm) {
    mycollResult_t r = mycollCommInitRank(&comm, opt.nranks, id, rank);
    if (r != mycollSuccess) {
      std::fprintf(stderr, "[rank %d] mycollCommInitRank failed: %s\n", rank,
                   mycollGetLastError(nullptr));
      return 5;
    }
  }
  int rc = body(comm, rank, opt.nranks, id);
  if (comm) mycollCommDestroy(comm);
  if (rc == 0 && g_failures > 0) rc = 1;
  return rc;
}

std::vector<RankResult> run_ranks(const LaunchOptions& opt, const RankBody& body) {
  const int n = opt.nranks;
  std::vector<pid_t> pids(n, -1);
  std::vector<int> to_child(n, -1);
  int from_rank0[2];
  if (pipe(from_rank0) != 0) std::abort();
  std::fflush(nullptr);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (pipe(p) != 0) std::abort();
    pid_t pid = fork();
    if (pid == 0) {
      close(p[1]);
      close(from_rank0[0]);
      int rc = 99;
      try {
        rc = child_main(opt, body, r, p[0], from_rank0[1]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    close(p[0]);
    pids[r] = pid;
    to_child[r] = p[1];
  }
  close(from_rank0[1]);
  mycollUniqueId id;
  if (read_full(from_rank0[0], &id, sizeof(id))) {
    for (int r = 1; r < n; ++r) write_full(to_child[r], &id, sizeof(id));
  }
  close(from_rank0[0]);
  for (int r = 0; r < n; ++r) close(to_child[r]);

  std::vector<RankResult> res(n);
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long>(opt.timeout_s * 1000));
  int left = n;
  while (left > 0) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] != pid) continue;
        if (WIFEXITED(status)) res[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) res[r].signal = WTERMSIG(status);
        pids[r] = -1;
        --left;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (pids[r] <= 0) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        res[r].timed_out = true;
        pids[r] = -1;
        --left;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return res;
}

std::string describe_failures(const std::vector<RankResult>& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].exit_code == 0 && !r[i].timed_out && r[i].signal == 0) continue;
    s += "rank " + std::to_string(i) + ": ";
    if (r[i].timed_out)
      s += "timed out (killed); ";
    else if (r[i].signal)
      s += "signal " + std::to_string(r[i].signal) + "; ";
    else
      s += "exit " + std::to_string(r[i].exit_code) + "; ";
  }
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool contains(const char* s, const char* what) { return s && std::strstr(s, what) != nullptr; }

std::string read_text_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string scratch_dir(const std::string& prefix, const char* name) {
  const std::string d = "/tmp/mycoll_" + prefix + "_" + std::to_string(getpid()) + "_" + name;
  remove_dir(d);
  if (mkdir(d.c_str(), 0700) != 0) return "";
  return d;
}

// Depth first, links not followed (nftw); what cannot be removed stays.
void remove_dir(const std::string& dir) {
  nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) {
        std::remove(path);
        return 0;
      },
      16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace mycoll_test
