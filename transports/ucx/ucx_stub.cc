// Built instead of ucx.cc when CMake found no UCX headers/libraries
// (cmake/Dependencies.cmake): UCX is then unavailable, and naming it
// (MYCOLL_NET=ucx, MYCOLL_TRANSPORT=ucx) is an error at init saying why.
#include "base/error.h"
#include "transports/transport.h"

namespace mycoll {

namespace {
constexpr const char* kWhy =
    "this mycoll was built without UCX (ucp/api/ucp.h and libucp were not found at build time; "
    "install libucx-dev and rebuild)";
}

bool ucx_available(std::string* why) {
  if (why) *why = kWhy;
  return false;
}

std::unique_ptr<Transport> make_ucx_transport() { throw_error(mycollInvalidUsage, kWhy); }

}  // namespace mycoll
