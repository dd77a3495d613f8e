#include "mpi_compare.h"

#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <vector>

namespace mycoll_perf {
namespace {

std::string exe_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

struct Loaded {
  const MpiApi* api = nullptr;
  std::string why;
};

Loaded load() {
  Loaded l;
  const std::string dir = exe_dir();
  // Build tree: the module sits next to the executable; installed: in
  // <prefix>/lib*/mycoll/ (MYCOLL_PERF_MPI_MODULE_DIR, relative to bin/).
  std::vector<std::string> candidates = {dir + "/mycoll-perf-mpi.so"};
#ifdef MYCOLL_PERF_MPI_MODULE_DIR
  candidates.push_back(dir + "/" MYCOLL_PERF_MPI_MODULE_DIR "/mycoll-perf-mpi.so");
#endif
  std::string tried;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    // RTLD_GLOBAL: Open MPI's own components expect libmpi's symbols global.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char* e = dlerror();
      l.why = std::string("--vs mpi needs MPI, which did not load: ") + (e ? e : path) +
              ". Install the MPI this mycoll-perf was built with (Debian/Ubuntu: apt-get install "
              "openmpi-bin libopenmpi3) or put its lib directory on LD_LIBRARY_PATH";
      return l;
    }
    auto entry = reinterpret_cast<const MpiApi* (*)()>(dlsym(h, MYCOLL_PERF_MPI_ENTRY));
    if (!entry) {
      l.why = path + " lacks " MYCOLL_PERF_MPI_ENTRY " (a module of another mycoll-perf?)";
      return l;
    }
    l.api = entry();
    return l;
  }
  l.why = "--vs mpi needs the MPI module mycoll-perf-mpi.so, which is not installed (looked for " +
          tried + "): this mycoll-perf was built where CMake found no MPI; install MPI "
          "(Debian/Ubuntu: libopenmpi-dev openmpi-bin) and rebuild";
  return l;
}

}  // namespace

const MpiApi* load_mpi(std::string* why) {
  static const Loaded l = load();
  if (!l.api && why) *why = l.why;
  return l.api;
}

}  // namespace mycoll_perf
