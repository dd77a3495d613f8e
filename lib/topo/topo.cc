#include "topo/topo.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "base/error.h"

namespace mycoll {

std::string local_host_id(const Config& cfg) {
  if (!cfg.host_id.empty()) return cfg.host_id;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  return std::string(host) + "/" + boot;
}

static void copy_str(char* dst, size_t cap, const std::string& s) {
  std::strncpy(dst, s.c_str(), cap - 1);
  dst[cap - 1] = '\0';
}

PeerInfo local_peer_info(int rank, int cuda_device, const std::string& ip, const Config& cfg) {
  PeerInfo p;
  p.rank = rank;
  p.pid = static_cast<int32_t>(getpid());
  p.cuda_device = cuda_device;
  copy_str(p.host_id, sizeof(p.host_id), local_host_id(cfg));
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  copy_str(p.hostname, sizeof(p.hostname), host);
  copy_str(p.ip, sizeof(p.ip), ip);
  return p;
}

std::vector<int> host_major_order(const std::vector<PeerInfo>& all) {
  std::vector<std::string> hosts;  // in order of first appearance
  for (const auto& p : all)
    if (std::find(hosts.begin(), hosts.end(), p.host_id) == hosts.end()) hosts.push_back(p.host_id);
  std::vector<int> order;
  for (const auto& h : hosts)
    for (size_t r = 0; r < all.size(); ++r)
      if (all[r].host_id == h) order.push_back(static_cast<int>(r));
  return order;
}

int count_hosts(const std::vector<PeerInfo>& all) {
  std::set<std::string> hosts;
  for (const auto& p : all) hosts.insert(p.host_id);
  return static_cast<int>(hosts.size());
}

static bool same_host(const PeerInfo& a, const PeerInfo& b) {
  return std::strncmp(a.host_id, b.host_id, sizeof(a.host_id)) == 0;
}

static bool same_gpu(const PeerInfo& a, const PeerInfo& b) {
  return a.cuda_device >= 0 && b.cuda_device >= 0 && a.gpu_bus_id == b.gpu_bus_id &&
         same_host(a, b);
}

std::vector<int> ranks_on_gpu(const std::vector<PeerInfo>& all, int rank) {
  std::vector<int> out;
  for (size_t r = 0; r < all.size(); ++r)
    if (static_cast<int>(r) == rank || same_gpu(all[r], all[rank]))
      out.push_back(static_cast<int>(r));
  return out;
}

CpuMask local_cpu_mask() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return m;  // more CPUs than cpu_set_t holds
  for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) m.bits[c / 64] |= uint64_t(1) << (c % 64);
  return m;
}

std::vector<char> oversubscribed_hosts(const std::vector<PeerInfo>& all,
                                       const std::vector<CpuMask>& masks, std::vector<int>* cpus) {
  const size_t n = std::min(all.size(), masks.size());
  // Per host: its ranks, the union of their masks, and whether every mask
  // is known; then each rank's answer from its host.
  struct Host {
    int ranks = 0;
    bool known = true;
    CpuMask cpus;
    int count = 0;  // CPUs in the union; 0 when some mask is unknown
  };
  std::map<std::string, Host> hosts;
  for (size_t r = 0; r < n; ++r) {
    Host& h = hosts[all[r].host_id];
    ++h.ranks;
    bool any = false;
    for (int w = 0; w < 16; ++w) {
      h.cpus.bits[w] |= masks[r].bits[w];
      any |= masks[r].bits[w] != 0;
    }
    h.known &= any;
  }
  for (auto& [id, h] : hosts) {
    int count = 0;
    for (uint64_t w : h.cpus.bits) count += __builtin_popcountll(w);
    h.count = h.known ? count : 0;
  }
  std::vector<char> over(all.size(), 0);
  if (cpus) cpus->assign(all.size(), 0);
  for (size_t r = 0; r < n; ++r) {
    const Host& h = hosts[all[r].host_id];
    over[r] = h.known && h.ranks > h.count;
    if (cpus) (*cpus)[r] = h.count;
  }
  return over;
}

int max_ranks_per_gpu(const std::vector<PeerInfo>& all) {
  int most = 1;
  for (size_t r = 0; r < all.size(); ++r)
    most = std::max(most, static_cast<int>(ranks_on_gpu(all, static_cast<int>(r)).size()));
  return most;
}

int shared_gpu_block_budget(int sms, int per_gpu) {
  return std::max(1, sms / std::max(1, per_gpu));
}

std::string choose_net(const Config& cfg, bool needed) {
  std::string why;
  if (cfg.net.empty()) {
    // Best available: verbs when an RDMA device exists, else TCP sockets.
    if (needed && ib_available(cfg.ib.hca, &why)) return "ib";
    return "socket";
  }
  if (cfg.net == "socket") return "socket";
  if (cfg.net == "ib") {
    if (!ib_available(cfg.ib.hca, &why)) throw_error(mycollInvalidUsage, "MYCOLL_NET=ib: " + why);
    return "ib";
  }
  if (cfg.net == "ucx") {
    if (!ucx_available(&why)) throw_error(mycollInvalidUsage, "MYCOLL_NET=ucx: " + why);
    return "ucx";
  }
  throw_error(mycollInvalidArgument, "MYCOLL_NET=" + cfg.net + " is not one of ib, ucx, socket");
}

std::vector<std::string> select_transports(const Config& cfg, const std::vector<PeerInfo>& all,
                                           int rank) {
  const PeerInfo& me = all[rank];
  const bool gpu = me.cuda_device >= 0;
  const std::string net = choose_net(cfg, count_hosts(all) > 1);
  std::vector<std::string> out(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const PeerInfo& peer = all[r];
    if (static_cast<int>(r) == rank) {
      out[r] = "self";
      continue;
    }
    const bool local = same_host(me, peer);
    if (!cfg.transport.empty()) {
      const std::string& t = cfg.transport;
      if (t == "shm") {
        if (!local)
          throw_error(mycollInvalidUsage, "MYCOLL_TRANSPORT=shm cannot serve rank " +
                                              std::to_string(r) + " on host " + peer.hostname +
                                              ": shared memory needs both ranks on one host");
      } else if (t == "cuda_ipc") {
        if (!gpu || peer.cuda_device < 0)
          throw_error(mycollInvalidUsage,
                      "MYCOLL_TRANSPORT=cuda_ipc needs GPU communicators; rank " +
                          std::to_string(r) + " or this rank is host-only");
        if (!local)
          throw_error(mycollInvalidUsage, "MYCOLL_TRANSPORT=cuda_ipc cannot serve rank " +
                                              std::to_string(r) + " on another host (" +
                                              peer.hostname + ")");
      } else if (t == "ib" || t == "ucx") {
        std::string why;
        if (!(t == "ib" ? ib_available(cfg.ib.hca, &why) : ucx_available(&why)))
          throw_error(mycollInvalidUsage, "MYCOLL_TRANSPORT=" + t + ": " + why);
      } else if (t != "socket") {
        throw_error(
            mycollInvalidArgument,
            "MYCOLL_TRANSPORT=" + t + " is not a transport (shm, socket, ib, ucx, cuda_ipc)");
      }
      out[r] = t;
      continue;
    }
    if (local)
      out[r] = (gpu && peer.cuda_device >= 0) ? "cuda_ipc" : "shm";
    else
      out[r] = net;
  }
  // The device engine either runs everything in kernels (all peers on
  // cuda_ipc) or stages everything through host memory: a GPU communicator
  // with any host-transport peer uses shm for its same-host GPU peers too.
  bool any_host = false;
  for (size_t r = 0; r < all.size(); ++r) any_host |= out[r] != "self" && out[r] != "cuda_ipc";
  if (gpu && any_host)
    for (auto& t : out)
      if (t == "cuda_ipc") t = "shm";
  return out;
}

}  // namespace mycoll
