// Choice of the network interface the bootstrap and socket transport bind to.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/socket_util.h"
#include "base/error.h"
#include "base/log.h"

namespace mycoll {
namespace net {
namespace {

struct IfAddr {
  std::string name;
  std::string ip;
  int family = 0;
  bool loopback = false;
};

std::vector<IfAddr> list_up_addresses() {
  std::vector<IfAddr> out;
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) throw_system("getifaddrs");
  for (ifaddrs* a = head; a; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    int fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (fam == AF_INET6) {
      // Link-local IPv6 needs a scope id that does not travel in a table.
      auto* v6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;
    }
    SockAddr sa;
    std::memcpy(&sa.storage, a->ifa_addr,
                fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    out.push_back({a->ifa_name, sa.ip(), fam, (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(head);
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    std::string tok = s.substr(start, end - start);
    while (!tok.empty() && tok.front() == ' ') tok.erase(tok.begin());
    while (!tok.empty() && tok.back() == ' ') tok.pop_back();
    if (!tok.empty()) out.push_back(tok);
    start = end + 1;
  }
  return out;
}

// First IPv4 address among `cands` accepted by `keep`, else first IPv6.
template <typename Pred>
const IfAddr* first_match(const std::vector<IfAddr>& cands, Pred keep) {
  for (int fam : {AF_INET, AF_INET6})
    for (const auto& c : cands)
      if (c.family == fam && keep(c)) return &c;
  return nullptr;
}

bool has_prefix(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

std::string pick_interface_ip(const std::string& ifname_spec) {
  const std::vector<IfAddr> cands = list_up_addresses();
  std::string spec = ifname_spec;
  while (!spec.empty() && spec.front() == ' ') spec.erase(spec.begin());

  const IfAddr* pick = nullptr;
  if (!spec.empty()) {
    // NCCL_SOCKET_IFNAME-style: "eth,ens" prefixes; "^docker,lo" excludes;
    // "=eth0" exact names (also "^=eth0").
    bool exclude = false, exact = false;
    size_t pos = 0;
    if (pos < spec.size() && spec[pos] == '^') exclude = true, ++pos;
    if (pos < spec.size() && spec[pos] == '=') exact = true, ++pos;
    const std::vector<std::string> toks = split_commas(spec.substr(pos));
    auto matches = [&](const IfAddr& c) {
      for (const auto& t : toks)
        if (exact ? c.name == t : has_prefix(c.name, t.c_str())) return true;
      return false;
    };
    pick = first_match(cands, [&](const IfAddr& c) { return matches(c) != exclude; });
    if (!pick) {
      std::string avail;
      for (const auto& c : cands) avail += (avail.empty() ? "" : ", ") + c.name + " " + c.ip;
      throw_error(mycollInvalidArgument, "MYCOLL_SOCKET_IFNAME='" + ifname_spec +
                                             "' matches no up interface (available: " +
                                             (avail.empty() ? "none" : avail) + ")");
    }
  } else {
    auto virtual_bridge = [](const IfAddr& c) {
      return has_prefix(c.name, "docker") || has_prefix(c.name, "virbr");
    };
    pick = first_match(cands, [&](const IfAddr& c) { return !c.loopback && !virtual_bridge(c); });
    if (!pick) pick = first_match(cands, [&](const IfAddr& c) { return !c.loopback; });
    if (!pick) pick = first_match(cands, [](const IfAddr&) { return true; });
    if (!pick) return "127.0.0.1";  // no address at all: loopback still works in-host
  }
  log_info(Subsys::Net, "using interface {} ({}) [MYCOLL_SOCKET_IFNAME='{}']", pick->name, pick->ip,
           ifname_spec);
  return pick->ip;
}

}  // namespace net
}  // namespace mycoll
