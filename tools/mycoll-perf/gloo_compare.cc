#include "gloo_compare.h"

#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "module.h"

namespace mycoll_perf {
namespace {

struct Loaded {
  const GlooApi* api = nullptr;
  std::string why;
};

Loaded load() {
  static const ModuleSpec spec = {"mycoll-perf-gloo.so", MYCOLL_PERF_GLOO_ENTRY, false,
                                  "--vs gloo", "Gloo", "libgloo-dev", "libgloo-dev"};
  Loaded l;
  l.api = static_cast<const GlooApi*>(load_module(spec, &l.why));
  return l;
}

// The MPI-shaped table the benchmark uses, forwarding to Gloo.
const GlooApi* g_gloo = nullptr;
int g_rank = 0, g_size = 1;
std::string g_store_dir;

const MpiApi kAdapter = {
    [] { return 0; },  // started by start_gloo
    [] { g_gloo->finalize(); },
    [](int code) { std::_Exit(code); },
    [] { return g_rank; },
    [] { return g_size; },
    [](void* buf, size_t bytes, int root) { g_gloo->bcast(buf, bytes, root); },
    [](double v, MpiAgg how) { return g_gloo->allreduce(v, how); },
    [](mycollDataType_t t) { return t != mycollFloat16 && g_gloo->supports(t); },
    [](CollId c, const void* send, void* recv, size_t count, mycollDataType_t t, mycollRedOp_t op,
       int root, std::string* err) { return g_gloo->run(c, send, recv, count, t, op, root, err); },
    "Gloo",
};

void remove_store_dir() {
  if (g_store_dir.empty()) return;
  if (DIR* d = opendir(g_store_dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
        unlink((g_store_dir + "/" + e->d_name).c_str());
    closedir(d);
  }
  rmdir(g_store_dir.c_str());
  g_store_dir.clear();
}

}  // namespace

const GlooApi* load_gloo(std::string* why) {
  static const Loaded l = load();
  if (!l.api && why) *why = l.why;
  return l.api;
}

const MpiApi* start_gloo(mycollComm_t comm, int rank, int nranks, std::string* why) {
  const GlooApi* api = load_gloo(why);
  // Every rank learns whether rank 0 can go on (the module loads, the
  // directory exists), so none waits for a rendezvous that never happens.
  char dir[256] = {};
  if (rank == 0) {
    if (api) {
      char tmpl[] = "/tmp/mycoll-perf-gloo-XXXXXX";
      if (mkdtemp(tmpl)) std::snprintf(dir, sizeof(dir), "%s", tmpl);
    }
  }
  if (mycollBroadcast(dir, dir, sizeof(dir), mycollUint8, 0, comm, nullptr) != mycollSuccess) {
    *why = std::string("mycollBroadcast of Gloo's store directory failed: ") +
           mycollGetLastError(comm);
    return nullptr;
  }
  if (!api || dir[0] == 0) {
    if (api) *why = "rank 0 could not load Gloo or make its store directory under /tmp";
    return nullptr;
  }
  if (rank == 0) g_store_dir = dir;
  std::string err;
  int rc = api->init(rank, nranks, dir, "127.0.0.1", &err);
  int32_t bad = rc != 0;
  mycollAllReduce(&bad, &bad, 1, mycollInt32, mycollMax, comm, nullptr);
  if (bad) {
    *why = rc != 0 ? "Gloo rendezvous failed: " + err : "Gloo rendezvous failed on another rank";
    if (rank == 0) remove_store_dir();
    return nullptr;
  }
  g_gloo = api, g_rank = rank, g_size = nranks;
  return &kAdapter;
}

void finish_gloo() {
  if (!g_gloo) return;
  g_gloo->allreduce(0.0, MpiAgg::Sum);  // nobody still reads the store
  g_gloo->finalize();
  g_gloo = nullptr;
  remove_store_dir();
}

}  // namespace mycoll_perf
