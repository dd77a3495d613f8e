// nccl_api_test: a program written only against nccl.h, linked against the
// built libnccl.so.2, run as forked ranks on host buffers, or with --mem cuda
// on GPU buffers (rank r on GPU r % GPUs: with fewer GPUs than ranks,
// several ranks share one).
//   nccl_api_test --np N [--suite NAME|all] [--mem host|cuda]
//   NAME: colls p2p comm errors shrink env initall graphs ctas agree soak soak1
// Exits 0 when every rank passed, 1 when one failed, 2 on bad arguments,
// 77 (skipped) with --mem cuda where no GPU or no CUDA is available.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "harness.h"
#include "suites.h"

int main(int argc, char** argv) {
  int np = 2;
  std::string which = "all", mem = "host";
  bool bad = argc % 2 == 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char* v = argv[i + 1];
    if (std::strcmp(argv[i], "--np") == 0) {
      np = std::atoi(v);
    } else if (std::strcmp(argv[i], "--suite") == 0) {
      which = v;
    } else if (std::strcmp(argv[i], "--mem") == 0) {
      mem = v;
    } else {
      bad = true;
    }
  }
  if (bad || np < 1 || np > 64 || (mem != "host" && mem != "cuda")) {
    std::fprintf(stderr, "usage: %s --np N [--suite NAME] [--mem host|cuda]\n", argv[0]);
    return 2;
  }
  if (mem == "cuda") {
    // Asked in a child: CUDA must not be initialised in a process that forks ranks.
    pid_t p = fork();
    if (p == 0) {
      std::string why;
      const int n = ntest::gpu_count(&why);
      if (n <= 0) std::printf("SKIP: --mem cuda: %s\n", why.c_str());
      std::fflush(stdout);
      _exit(n > 0 ? 0 : 77);
    }
    int status = 0;
    if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status)) return 2;
    if (WEXITSTATUS(status) != 0) return 77;
    ntest::set_mem(ntest::Mem::Cuda);
    unsetenv("MYCOLL_HOST_COMM");
  } else {
    // Host-memory communicators even where GPUs exist.
    setenv("MYCOLL_HOST_COMM", "1", 1);
  }
  setenv("MYCOLL_TIMEOUT", "60", 0);  // bounded waits
  char dir[] = "/tmp/nccl_api_test.XXXXXX";
  if (!mkdtemp(dir)) {
    std::perror("mkdtemp");
    return 2;
  }
  setenv("NTEST_TMPDIR", dir, 1);
  struct Entry {
    const char* name;
    ntest::Suite suite;
    bool init_world;
  };
  const Entry all[] = {
      {"colls", ntest::suite_colls, true},      {"p2p", ntest::suite_p2p, true},
      {"comm", ntest::suite_comm, true},        {"errors", ntest::suite_errors, true},
      {"shrink", ntest::suite_shrink, true},    {"env", ntest::suite_env, false},
      {"initall", ntest::suite_initall, false}, {"graphs", ntest::suite_graphs, false},
      {"ctas", ntest::suite_ctas, false},       {"agree", ntest::suite_agree, false},
      {"soak", ntest::suite_soak, true},        {"soak1", ntest::suite_soak1, false}};
  int failed = 0, ran = 0;
  for (const Entry& e : all) {
    if (which != "all" && which != e.name) continue;
    ++ran;
    failed += ntest::run_suite(e.name, np, e.suite, e.init_world, 480);
  }
  std::string cleanup = std::string("rm -rf ") + dir;
  if (std::system(cleanup.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  if (ran == 0) {
    std::fprintf(stderr, "no suite named %s\n", which.c_str());
    return 2;
  }
  return failed ? 1 : 0;
}
