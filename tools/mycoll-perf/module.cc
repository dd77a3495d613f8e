#include "module.h"

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

}  // namespace

const void* load_module(const ModuleSpec& m, std::string* why) {
  const std::string dir = exe_dir();
  std::vector<std::string> candidates = {dir + "/" + m.file};
#ifdef MYCOLL_PERF_MPI_MODULE_DIR
  candidates.push_back(dir + "/" MYCOLL_PERF_MPI_MODULE_DIR "/" + m.file);
#endif
  std::string tried;
  for (const std::string& path : candidates) {
    if (access(path.c_str(), F_OK) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | (m.global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
      const char* e = dlerror();
      *why = std::string(m.flag) + " needs " + m.peer + ", which did not load: " +
             (e ? e : path) + ". Install the " + m.peer +
             " this mycoll-perf was built with (Debian/Ubuntu: apt-get install " + m.install_run +
             ") or put its lib directory on LD_LIBRARY_PATH";
      return nullptr;
    }
    auto entry = reinterpret_cast<const void* (*)()>(dlsym(h, m.entry));
    if (!entry) {
      *why = path + " lacks " + m.entry + " (a module of another mycoll-perf?)";
      return nullptr;
    }
    return entry();
  }
  *why = std::string(m.flag) + " needs the " + m.peer + " module " + m.file +
         ", which is not installed (looked for " + tried + "): this mycoll-perf was built where "
         "CMake found no " + m.peer + "; install " + m.peer + " (Debian/Ubuntu: " + m.install_dev +
         ") and rebuild";
  return nullptr;
}

}  // namespace mycoll_perf
