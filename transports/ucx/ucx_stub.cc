// Placeholder until transports/ucx lands: reports UCX as unavailable.
#include "core/error.h"
#include "transports/transport.h"

namespace mycoll {

bool ucx_available(std::string* why) {
  if (why) *why = "the UCX transport is not built yet";
  return false;
}

std::unique_ptr<Transport> make_ucx_transport() {
  throw_error(mycollInvalidUsage, "the UCX transport is not built yet");
}

}  // namespace mycoll
