// Placeholder until transports/ibverbs lands: reports verbs as unavailable.
#include "core/error.h"
#include "transports/transport.h"

namespace mycoll {

bool ib_available(std::string* why) {
  if (why) *why = "the ibverbs transport is not built yet";
  return false;
}

std::unique_ptr<Transport> make_ib_transport() {
  throw_error(mycollInvalidUsage, "the ibverbs transport is not built yet");
}

}  // namespace mycoll
