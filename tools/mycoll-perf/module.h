// Loading a peer library's plugin (mycoll-perf-mpi.so, mycoll-perf-gloo.so):
// next to the executable in a build tree, in MYCOLL_PERF_MPI_MODULE_DIR
// (relative to bin/) once installed. Each peer keeps its own messages.
#pragma once

#include <string>

namespace mycoll_perf {

struct ModuleSpec {
  const char* file;          // "mycoll-perf-mpi.so"
  const char* entry;         // the symbol returning the plugin's table
  bool global;               // RTLD_GLOBAL (Open MPI's components need libmpi's symbols global)
  const char* flag;          // "--vs mpi"
  const char* peer;          // "MPI"
  const char* install_run;   // what to install when the plugin cannot load its library
  const char* install_dev;   // what to install and rebuild with when the plugin was not built
};

// The entry's result (the plugin's table), or nullptr with *why saying what
// is missing and what to install.
const void* load_module(const ModuleSpec& m, std::string* why);

}  // namespace mycoll_perf
