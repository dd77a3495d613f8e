// Several "hosts" on one machine for the multi-host tests: network
// namespaces joined by a bridge (tests/e2e/netns.sh), each with its own
// address. The names carry a tag and this test process's id, so suites
// that run at the same time (two ctest runs on one machine; ctest -j runs
// each test in its own process) never tear down each other's hosts.
#pragma once

#include <string>

namespace mycoll_test {

class NetnsHosts {
 public:
  // Creates n hosts on subnet ("10.231.0": host i is 10.231.0.(i+1)).
  // Returns "" or why not (the reason to skip: not root, no `ip`, ...).
  std::string up(const std::string& tag, int n, const std::string& subnet);
  // Removes them (nothing when up() failed or was not called).
  void down();
  // In a forked rank, before init: joins host `host`'s network namespace
  // (exits with 7 when it cannot), sets MYCOLL_HOST_ID and
  // MYCOLL_SOCKET_IFNAME to that host's identity and interface.
  void enter(int host) const;
  // The interface inside host `host`, the only way to the others.
  std::string ifname(int host) const;

 private:
  std::string prefix_;
  int n_ = 0;
  bool up_ = false;
};

}  // namespace mycoll_test
