#include "netns_hosts.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace mycoll_test {
namespace {

int run_script(const std::string& args, const std::string& log) {
  const std::string cmd =
      std::string(MYCOLL_SOURCE_DIR) + "/tests/e2e/netns.sh " + args + " > " + log + " 2>&1";
  return std::system(cmd.c_str());
}

}  // namespace

std::string NetnsHosts::up(const std::string& tag, int n, const std::string& subnet) {
  if (geteuid() != 0) return "needs root to create network namespaces";
  prefix_ = tag + std::to_string(getpid() % 100000);
  n_ = n;
  const std::string log = "/tmp/mycoll_netns_" + prefix_ + ".log";
  if (run_script("up " + std::to_string(n) + " " + prefix_ + " " + subnet, log) != 0) {
    run_script("down " + std::to_string(n) + " " + prefix_, "/dev/null");
    return "could not create network namespaces (see " + log + ")";
  }
  std::remove(log.c_str());  // kept only when it explains a failure
  up_ = true;
  return "";
}

void NetnsHosts::down() {
  if (up_) run_script("down " + std::to_string(n_) + " " + prefix_, "/dev/null");
  up_ = false;
}

void NetnsHosts::enter(int host) const {
  const std::string path = "/var/run/netns/" + prefix_ + "h" + std::to_string(host);
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    std::perror(("setns " + path).c_str());
    _exit(7);
  }
  close(fd);
  setenv("MYCOLL_HOST_ID", (prefix_ + "host" + std::to_string(host)).c_str(), 1);
  setenv("MYCOLL_SOCKET_IFNAME", ("=" + ifname(host)).c_str(), 1);
}

std::string NetnsHosts::ifname(int host) const { return prefix_ + "p" + std::to_string(host); }

}  // namespace mycoll_test
