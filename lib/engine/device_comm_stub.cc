// Placeholder until the device engine lands: GPU communicators are refused
// with a clear error instead of misbehaving.
#include "core/comm.h"
#include "core/error.h"
#include "engine/device_engine.h"

namespace mycoll {

std::unique_ptr<DeviceComm> DeviceComm::create(mycollComm& comm) {
  throw_error(mycollInvalidUsage, "GPU communicators are not available in this build yet (device " +
                                      std::to_string(comm.cuda_device) + ")");
}

}  // namespace mycoll
