#include "mpi_compare.h"

#include "module.h"

namespace mycoll_perf {
namespace {

struct Loaded {
  const MpiApi* api = nullptr;
  std::string why;
};

Loaded load() {
  static const ModuleSpec spec = {"mycoll-perf-mpi.so", MYCOLL_PERF_MPI_ENTRY, true, "--vs mpi",
                                  "MPI", "openmpi-bin libopenmpi3",
                                  "libopenmpi-dev openmpi-bin"};
  Loaded l;
  l.api = static_cast<const MpiApi*>(load_module(spec, &l.why));
  return l;
}

}  // namespace

const MpiApi* load_mpi(std::string* why) {
  static const Loaded l = load();
  if (!l.api && why) *why = l.why;
  return l.api;
}

}  // namespace mycoll_perf
