// The build has what CI is supposed to cover. Where CI runs (CI is set, as
// .ci/run's hosts set CI=true) or where libucx-dev is installed, a build
// without the UCX transport, or a UCX that does not load, FAILS here instead
// of letting every UCX test skip quietly.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "transports/transport.h"

namespace {

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::string(ci) != "0" && std::string(ci) != "false";
}

bool ucx_headers_installed() {
  return access("/usr/include/ucp/api/ucp.h", F_OK) == 0;
}

}  // namespace

TEST(BuildConfig, UcxTransportBuiltAndLoadsWhereCiCoversIt) {
  if (!in_ci() && !ucx_headers_installed())
    GTEST_SKIP() << "not CI and no UCX headers on this host: UCX is optional here";
#if !MYCOLL_HAVE_UCX
  FAIL() << "the UCX transport was not built (CMake found no ucp/api/ucp.h) although "
         << (in_ci() ? "CI must cover it" : "/usr/include/ucp/api/ucp.h exists (reconfigure)")
         << ": scripts/install-deps.sh installs libucx-dev";
#else
  std::string why;
  EXPECT_TRUE(mycoll::ucx_available(&why)) << "UCX is built but does not work here: " << why;
#endif
}

TEST(BuildConfig, UcxUnavailableSaysWhatToInstall) {
  // Either UCX works, or the reason names what is missing.
  std::string why;
  if (mycoll::ucx_available(&why)) GTEST_SKIP() << "UCX is available here";
  EXPECT_NE(why.find("install"), std::string::npos) << why;
}
