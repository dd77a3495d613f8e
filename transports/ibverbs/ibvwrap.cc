#include "transports/ibverbs/ibvwrap.h"

#include <dlfcn.h>

#include <mutex>

namespace mycoll {
namespace {

struct Loaded {
  IbvApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool load_sym(void* lib, const char* name, F* out, std::string* why) {
  void* p = dlsym(lib, name);
  if (!p) {
    *why = std::string("libibverbs.so.1 lacks ") + name;
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}

Loaded load() {
  Loaded l;
  // RTLD_NODELETE: providers keep pointers into the library after close.
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char* e = dlerror();
    l.why = std::string("libibverbs.so.1 not found (") + (e ? e : "dlopen failed") +
            "); install rdma-core/libibverbs1";
    return l;
  }
  IbvApi& a = l.api;
  l.ok = load_sym(lib, "ibv_get_device_list", &a.get_device_list, &l.why) &&
         load_sym(lib, "ibv_free_device_list", &a.free_device_list, &l.why) &&
         load_sym(lib, "ibv_get_device_name", &a.get_device_name, &l.why) &&
         load_sym(lib, "ibv_open_device", &a.open_device, &l.why) &&
         load_sym(lib, "ibv_close_device", &a.close_device, &l.why) &&
         load_sym(lib, "ibv_query_device", &a.query_device, &l.why) &&
         load_sym(lib, "ibv_query_port", &a.query_port, &l.why) &&
         load_sym(lib, "ibv_query_gid", &a.query_gid, &l.why) &&
         load_sym(lib, "ibv_alloc_pd", &a.alloc_pd, &l.why) &&
         load_sym(lib, "ibv_dealloc_pd", &a.dealloc_pd, &l.why) &&
         load_sym(lib, "ibv_reg_mr", &a.reg_mr, &l.why) &&
         load_sym(lib, "ibv_dereg_mr", &a.dereg_mr, &l.why) &&
         load_sym(lib, "ibv_create_cq", &a.create_cq, &l.why) &&
         load_sym(lib, "ibv_destroy_cq", &a.destroy_cq, &l.why) &&
         load_sym(lib, "ibv_create_qp", &a.create_qp, &l.why) &&
         load_sym(lib, "ibv_modify_qp", &a.modify_qp, &l.why) &&
         load_sym(lib, "ibv_destroy_qp", &a.destroy_qp, &l.why) &&
         load_sym(lib, "ibv_wc_status_str", &a.wc_status_str, &l.why);
  return l;
}

}  // namespace

const IbvApi* ibv_api(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace mycoll
