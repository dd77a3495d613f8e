// Without CUDA in the build, GPU communicators are refused with a clear error.

#if !MYCOLL_HAVE_CUDA
#include "comm/comm.h"
#include "base/error.h"
#include "engine/device_engine.h"

namespace mycoll {

std::unique_ptr<DeviceComm> DeviceComm::create(mycollComm& comm) {
  throw_error(mycollInvalidUsage, "this build of mycoll has no CUDA support: no GPU communicator (device " +
                                      std::to_string(comm.cuda_device) + ")");
}

}  // namespace mycoll

#endif  // !MYCOLL_HAVE_CUDA
