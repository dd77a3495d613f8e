// What mycoll-perf was built from, for the -J document's metadata and the
// header: defined in build_commit.cc, which commit.cmake generates in the
// build tree at build time.
#pragma once

namespace mycoll_perf {

// The source tree's commit: "183dcb5", "183dcb5-dirty" when tracked files
// had uncommitted changes, "unknown" outside a git checkout (a tarball) or
// without git.
const char* build_commit();

}  // namespace mycoll_perf
