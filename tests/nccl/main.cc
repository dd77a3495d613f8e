// nccl_api_test: a program written only against nccl.h, linked against the
// built libnccl.so.2, run as forked ranks on host buffers.
//   nccl_api_test --np N [--suite colls|p2p|comm|errors|shrink|env|all]
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "harness.h"
#include "suites.h"

int main(int argc, char** argv) {
  int np = 2;
  std::string which = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--np") == 0) np = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--suite") == 0) which = argv[i + 1];
  }
  if (np < 1 || np > 64) {
    std::fprintf(stderr, "usage: %s --np N [--suite NAME]\n", argv[0]);
    return 2;
  }
  // Host-memory communicators even where GPUs exist; bounded waits.
  setenv("MYCOLL_HOST_COMM", "1", 1);
  setenv("MYCOLL_TIMEOUT", "60", 0);
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
  const Entry all[] = {{"colls", ntest::suite_colls, true},   {"p2p", ntest::suite_p2p, true},
                       {"comm", ntest::suite_comm, true},     {"errors", ntest::suite_errors, true},
                       {"shrink", ntest::suite_shrink, true}, {"env", ntest::suite_env, false}};
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
