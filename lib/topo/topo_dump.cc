#include "topo/topo_dump.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "comm/comm.h"
#include "base/config.h"
#include "base/log.h"
#include "engine/device_engine.h"

namespace mycoll {
namespace {

std::string quote(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\r': o += "\\r"; break;
      case '\t': o += "\\t"; break;
      default:
        if (ch < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", ch);
          o += b;
        } else {
          o += static_cast<char>(ch);
        }
    }
  }
  return o + "\"";
}

std::string cstr(const char* s, size_t cap) { return std::string(s, strnlen(s, cap)); }

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Interfaces in getifaddrs order, each with its IPv4/IPv6 addresses.
std::string nics_json() {
  struct Nic {
    unsigned flags = 0;
    std::vector<std::string> addrs;
  };
  std::vector<std::string> order;
  std::map<std::string, Nic> nics;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_name) continue;
      if (!nics.count(a->ifa_name)) order.push_back(a->ifa_name);
      Nic& n = nics[a->ifa_name];
      n.flags = a->ifa_flags;
      if (!a->ifa_addr) continue;
      char buf[INET6_ADDRSTRLEN] = {};
      if (a->ifa_addr->sa_family == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof(buf));
        n.addrs.push_back(buf);
      } else if (a->ifa_addr->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, buf,
                  sizeof(buf));
        n.addrs.push_back(buf);
      }
    }
    freeifaddrs(list);
  }
  std::string o = "[";
  for (size_t i = 0; i < order.size(); ++i) {
    const Nic& n = nics[order[i]];
    o += std::string(i ? ", " : "") + "{\"name\": " + quote(order[i]) +
         ", \"up\": " + ((n.flags & IFF_UP) ? "true" : "false") +
         ", \"loopback\": " + ((n.flags & IFF_LOOPBACK) ? "true" : "false") + ", \"addresses\": [";
    for (size_t k = 0; k < n.addrs.size(); ++k) o += (k ? ", " : "") + quote(n.addrs[k]);
    o += "]}";
  }
  return o + "]";
}

// /sys/class/infiniband/<dev>/ports/<n>/{state,link_layer}; [] without RDMA.
std::string rdma_json() {
  const std::string root = "/sys/class/infiniband";
  std::string o = "[";
  bool first = true;
  for (const auto& dev : list_dir(root)) {
    o += std::string(first ? "" : ", ") + "{\"name\": " + quote(dev) + ", \"ports\": [";
    first = false;
    bool pfirst = true;
    for (const auto& port : list_dir(root + "/" + dev + "/ports")) {
      std::string base = root + "/" + dev + "/ports/" + port;
      o += std::string(pfirst ? "" : ", ") + "{\"port\": " + quote(port) +
           ", \"state\": " + quote(read_line(base + "/state")) +
           ", \"link_layer\": " + quote(read_line(base + "/link_layer")) + "}";
      pfirst = false;
    }
    o += "]}";
  }
  return o + "]";
}

}  // namespace

std::string bus_id_text(uint64_t id) {
  char b[32];
  std::snprintf(b, sizeof(b), "%04x:%02x:%02x.0", static_cast<unsigned>(id >> 32),
                static_cast<unsigned>((id >> 8) & 0xff), static_cast<unsigned>(id & 0xff));
  return b;
}

std::string expand_dump_path(const std::string& pattern, int rank) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size()) {
      char c = pattern[i + 1];
      if (c == 'h') { out += host; ++i; continue; }
      if (c == 'p') { out += std::to_string(getpid()); ++i; continue; }
      if (c == 'r') { out += std::to_string(rank); ++i; continue; }
      if (c == '%') { out += '%'; ++i; continue; }
    }
    out += pattern[i];
  }
  return out;
}

std::string topology_json(const mycollComm& c) {
  const PeerInfo& me = c.peers[c.rank];
  std::ostringstream o;
  o << "{\n  \"rank\": " << c.rank << ",\n  \"nranks\": " << c.nranks
    << ",\n  \"pid\": " << me.pid
    << ",\n  \"hostname\": " << quote(cstr(me.hostname, sizeof(me.hostname)))
    << ",\n  \"host_id\": " << quote(cstr(me.host_id, sizeof(me.host_id)))
    << ",\n  \"bootstrap_ip\": " << quote(cstr(me.ip, sizeof(me.ip)));

  // Hosts in order of their lowest rank.
  std::vector<std::string> ids;
  std::map<std::string, std::vector<int>> ranks_of;
  for (int r = 0; r < c.nranks; ++r) {
    std::string id = cstr(c.peers[r].host_id, sizeof(c.peers[r].host_id));
    if (!ranks_of.count(id)) ids.push_back(id);
    ranks_of[id].push_back(r);
  }
  o << ",\n  \"hosts\": [";
  for (size_t h = 0; h < ids.size(); ++h) {
    const auto& rs = ranks_of[ids[h]];
    const PeerInfo& first = c.peers[rs[0]];
    o << (h ? "," : "") << "\n    {\"host\": " << h << ", \"host_id\": " << quote(ids[h])
      << ", \"hostname\": " << quote(cstr(first.hostname, sizeof(first.hostname)))
      << ", \"ranks\": [";
    for (size_t k = 0; k < rs.size(); ++k) o << (k ? ", " : "") << rs[k];
    o << "]}";
  }
  o << "\n  ]";

  o << ",\n  \"gpu\": ";
  if (c.cuda_device >= 0)
    o << "{\"cuda_device\": " << c.cuda_device
      << ", \"pci_bus_id\": " << quote(me.gpu_bus_id ? bus_id_text(me.gpu_bus_id) : "") << "}";
  else
    o << "null";

  o << ",\n  \"peers\": [";
  bool first = true;
  for (int r = 0; r < c.nranks; ++r) {
    if (r == c.rank) continue;
    const PeerInfo& p = c.peers[r];
    std::string transport = r < static_cast<int>(c.transport_of.size()) ? c.transport_of[r] : "";
    std::string how;
    if (c.device && transport == "cuda_ipc")
      how = c.device->describe_peer(r);
    else if (r < static_cast<int>(c.conns.size()) && c.conns[r])
      how = c.conns[r]->describe();
    o << (first ? "" : ",") << "\n    {\"rank\": " << r
      << ", \"hostname\": " << quote(cstr(p.hostname, sizeof(p.hostname)))
      << ", \"same_host\": "
      << (std::strncmp(p.host_id, me.host_id, sizeof(p.host_id)) == 0 ? "true" : "false")
      << ", \"cuda_device\": " << p.cuda_device << ", \"transport\": " << quote(transport)
      << ", \"connection\": " << quote(how) << "}";
    first = false;
  }
  o << "\n  ]";
  o << ",\n  \"nics\": " << nics_json();
  o << ",\n  \"rdma_devices\": " << rdma_json();
  o << "\n}\n";
  return o.str();
}

void maybe_dump_topology(const mycollComm& c) {
  const std::string& pattern = c.cfg.topo_dump_file;
  if (pattern.empty()) return;
  std::string path = expand_dump_path(pattern, c.rank);
  std::string json = topology_json(c);
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  bool ok = f && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  if (f) ok = (std::fclose(f) == 0) && ok;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    int e = errno;
    std::remove(tmp.c_str());
    log_warn(Subsys::Init, "MYCOLL_TOPO_DUMP_FILE: rank {} cannot write {}: {}", c.rank, path,
             std::strerror(e));
    return;
  }
  log_info(Subsys::Init, "rank {}: topology written to {}", c.rank, path);
}

}  // namespace mycoll
