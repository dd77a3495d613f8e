// An opened RDMA device port: context, protection domain, the chosen GID and
// the registration cache. Shared (shared_ptr) by the connections made on it,
// so it outlives the Transport object that opened it.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "base/config.h"
#include "transports/ibverbs/ib_regcache.h"
#include "transports/ibverbs/ibvwrap.h"

namespace mycoll {

class IbDevice {
 public:
  // Opens the first active port allowed by s.hca and picks the GID. Throws
  // Error(InvalidUsage) naming what is missing. s: the communicator's
  // Config::ib (MYCOLL_IB_*, parsed once at init).
  static std::shared_ptr<IbDevice> open(const IbConfig& s);
  ~IbDevice();

  const IbvApi* api = nullptr;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  std::string name;
  int port = 1;
  int gid_index = 0;
  ibv_gid gid{};
  bool roce = false;     // Ethernet link layer (RoCE) vs InfiniBand
  bool roce_v2 = false;
  uint16_t lid = 0;
  ibv_mtu mtu = IBV_MTU_1024;  // active MTU of the port
  int max_qp_wr = 0;

  // Registration cache for this PD; calls under reg_mu.
  std::mutex reg_mu;
  std::unique_ptr<RegCache> regs;

  std::string describe() const;  // "rxe0:1 gid 1 (RoCE v2)"
};

// Lists what the host offers; false with a reason when no usable port.
bool ib_probe(const std::string& hca_spec, std::string* why);

}  // namespace mycoll
