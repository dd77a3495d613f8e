// Device and port selection for the verbs transport, and ib_available().
#include <arpa/inet.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "transports/ibverbs/ib_device.h"
#include "transports/ibverbs/ib_transport.h"
#include "transports/transport.h"

namespace mycoll {
namespace {

int mtu_bytes(ibv_mtu m) { return 128 << static_cast<int>(m); }

// "RoCE v2", "IB/RoCE v1" or "" (sysfs; the verbs call for it is private).
std::string gid_type(const std::string& dev, int port, int idx) {
  std::ifstream f("/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) +
                  "/gid_attrs/types/" + std::to_string(idx));
  std::string t;
  std::getline(f, t);
  return t;
}

bool gid_zero(const ibv_gid& g) {
  static const uint8_t z[16] = {};
  return std::memcmp(g.raw, z, 16) == 0;
}

bool gid_ipv4_mapped(const ibv_gid& g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, prefix, 12) == 0;
}

std::string gid_text(const ibv_gid& g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g.raw, buf, sizeof(buf));
  return buf;
}

struct DeviceList {
  const IbvApi* api;
  ibv_device** list = nullptr;
  int n = 0;
  explicit DeviceList(const IbvApi* a) : api(a) { list = api->get_device_list(&n); }
  ~DeviceList() {
    if (list) api->free_device_list(list);
  }
};

struct PortChoice {
  std::string dev;
  int port = 0;
};

// Walks devices x ports; calls f(ctx, name, port, attr) for each active port
// the spec allows until f returns true. Returns a description of what was
// seen (for error messages).
template <typename F>
std::string walk_ports(const IbvApi* api, const std::string& spec, F&& f, bool* found) {
  *found = false;
  DeviceList dl(api);
  if (!dl.list || dl.n == 0) return "no RDMA device (ibv_get_device_list found none)";
  std::string seen;
  for (int i = 0; i < dl.n && !*found; ++i) {
    std::string name = api->get_device_name(dl.list[i]);
    ibv_context* ctx = api->open_device(dl.list[i]);
    if (!ctx) {
      seen += (seen.empty() ? "" : ", ") + name + " (cannot open: " + std::strerror(errno) + ")";
      continue;
    }
    ibv_device_attr da{};
    int nports = api->query_device(ctx, &da) == 0 ? da.phys_port_cnt : 1;
    bool keep = false;
    for (int p = 1; p <= nports && !*found; ++p) {
      ibv_port_attr pa{};
      if (ibvw_query_port(api, ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
      bool allowed = ib_hca_matches(spec, name, p);
      seen += (seen.empty() ? "" : ", ") + name + ":" + std::to_string(p) +
              (pa.state == IBV_PORT_ACTIVE ? " active" : " down") + (allowed ? "" : " (excluded by MYCOLL_IB_HCA)");
      if (!allowed || pa.state != IBV_PORT_ACTIVE) continue;
      if (f(ctx, name, p, pa, da)) {
        *found = true;
        keep = true;
      }
    }
    if (!keep) api->close_device(ctx);
  }
  return "no active RDMA port" + std::string(spec.empty() ? "" : " matching MYCOLL_IB_HCA=" + spec) +
         " (seen: " + seen + ")";
}

}  // namespace

bool ib_hca_matches(const std::string& spec_in, const std::string& dev, int port) {
  std::string spec = spec_in;
  if (spec.empty()) return true;
  bool exclude = false, exact = false;
  if (spec[0] == '^') {
    exclude = true;
    spec.erase(0, 1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.erase(0, 1);
  }
  bool hit = false;
  size_t b = 0;
  while (b <= spec.size() && !hit) {
    size_t e = spec.find(',', b);
    if (e == std::string::npos) e = spec.size();
    std::string item = spec.substr(b, e - b);
    b = e + 1;
    if (item.empty()) continue;
    int want_port = -1;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      want_port = std::atoi(item.c_str() + colon + 1);
      item.resize(colon);
    }
    bool name_ok = exact ? dev == item : dev.compare(0, item.size(), item) == 0;
    hit = name_ok && (want_port < 0 || want_port == port);
  }
  return exclude ? !hit : hit;
}

std::shared_ptr<IbDevice> IbDevice::open(const IbConfig& s) {
  std::string why;
  const IbvApi* api = ibv_api(&why);
  if (!api) throw_error(mycollInvalidUsage, "ibverbs transport: " + why);
  auto d = std::make_shared<IbDevice>();
  d->api = api;
  bool found = false;
  std::string seen = walk_ports(
      api, s.hca,
      [&](ibv_context* ctx, const std::string& name, int port, const ibv_port_attr& pa,
          const ibv_device_attr& da) {
        d->ctx = ctx;
        d->name = name;
        d->port = port;
        d->lid = pa.lid;
        d->mtu = pa.active_mtu;
        d->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
        d->max_qp_wr = da.max_qp_wr;
        return true;
      },
      &found);
  if (!found) throw_error(mycollInvalidUsage, "ibverbs transport: " + seen);

  ibv_port_attr pa{};
  ibvw_query_port(api, d->ctx, static_cast<uint8_t>(d->port), &pa);
  if (s.gid_index >= 0) {
    if (s.gid_index >= pa.gid_tbl_len)
      throw_error(mycollInvalidArgument, "MYCOLL_IB_GID_INDEX=" + std::to_string(s.gid_index) +
                                             " is beyond " + d->name + ":" + std::to_string(d->port) +
                                             "'s GID table (" + std::to_string(pa.gid_tbl_len) +
                                             " entries)");
    d->gid_index = s.gid_index;
  } else if (d->roce) {
    // Auto: an IPv4-mapped RoCE v2 GID, else any RoCE v2 GID, else the first
    // non-zero one.
    int best = -1, best_rank = 0;
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
      ibv_gid g{};
      if (api->query_gid(d->ctx, static_cast<uint8_t>(d->port), i, &g) != 0 || gid_zero(g)) continue;
      bool v2 = gid_type(d->name, d->port, i) == "RoCE v2";
      int rank = v2 && gid_ipv4_mapped(g) ? 3 : v2 ? 2 : 1;
      if (rank > best_rank) {
        best = i;
        best_rank = rank;
      }
    }
    if (best < 0)
      throw_error(mycollInvalidUsage, "ibverbs transport: " + d->name + ":" +
                                          std::to_string(d->port) +
                                          " has no usable RoCE GID (is the netdev up with an address?)");
    d->gid_index = best;
  } else {
    d->gid_index = 0;
  }
  if (api->query_gid(d->ctx, static_cast<uint8_t>(d->port), d->gid_index, &d->gid) != 0)
    throw_error(mycollSystemError, "ibverbs transport: ibv_query_gid(" + d->name + ", index " +
                                       std::to_string(d->gid_index) + "): " + std::strerror(errno));
  d->roce_v2 = d->roce && gid_type(d->name, d->port, d->gid_index) == "RoCE v2";
  d->pd = api->alloc_pd(d->ctx);
  if (!d->pd)
    throw_error(mycollSystemError, "ibverbs transport: ibv_alloc_pd on " + d->name + ": " +
                                       std::strerror(errno));
  d->regs = std::make_unique<RegCache>(api, d->pd);
  log_info(Subsys::Transport, "ib: device {} port {} gid index {} ({}) {} active MTU {}", d->name,
           d->port, d->gid_index, gid_text(d->gid), d->roce ? (d->roce_v2 ? "RoCE v2" : "RoCE v1") : "IB",
           mtu_bytes(d->mtu));
  return d;
}

IbDevice::~IbDevice() {
  regs.reset();
  if (pd) api->dealloc_pd(pd);
  if (ctx) api->close_device(ctx);
}

std::string IbDevice::describe() const {
  return name + ":" + std::to_string(port) + " gid " + std::to_string(gid_index) + " (" +
         (roce ? (roce_v2 ? "RoCE v2" : "RoCE v1") : "IB") + ")";
}

bool ib_probe(const std::string& hca_spec, std::string* why) {
  const IbvApi* api = ibv_api(why);
  if (!api) return false;
  bool found = false;
  std::string seen = walk_ports(
      api, hca_spec,
      [&](ibv_context* ctx, const std::string&, int, const ibv_port_attr&, const ibv_device_attr&) {
        api->close_device(ctx);  // only probing
        return true;
      },
      &found);
  if (!found && why) *why = seen;
  return found;
}

bool ib_available(const std::string& spec, std::string* why) {
  // Device probing opens contexts: do it once per process.
  static std::mutex mu;
  static std::map<std::string, std::pair<bool, std::string>> memo;
  std::lock_guard<std::mutex> g(mu);
  auto it = memo.find(spec);
  if (it == memo.end()) {
    std::string w;
    bool ok = ib_probe(spec, &w);
    it = memo.emplace(spec, std::make_pair(ok, w)).first;
  }
  if (!it->second.first && why) *why = it->second.second;
  return it->second.first;
}

}  // namespace mycoll
