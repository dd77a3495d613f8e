#include "transports/ucx/ucxwrap.h"

#include <dlfcn.h>

namespace mycoll {
namespace {

struct Loaded {
  UcxApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool load_sym(void* lib, const char* soname, const char* name, F* out, std::string* why) {
  void* p = dlsym(lib, name);
  if (!p) {
    *why = std::string(soname) + " lacks " + name + " (UCX older than the headers mycoll was "
           "built with?)";
    return false;
  }
  *out = reinterpret_cast<F>(p);
  return true;
}

void* open_lib(const char* soname, std::string* why) {
  // RTLD_NODELETE: UCX keeps threads and handlers that point into itself.
  void* lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char* e = dlerror();
    *why = std::string(soname) + " could not be loaded (" + (e ? e : "dlopen failed") +
           "); install UCX (Debian/Ubuntu: apt-get install libucx0; RHEL: ucx) or put its lib "
           "directory on LD_LIBRARY_PATH";
  }
  return lib;
}

Loaded load() {
  Loaded l;
  void* ucs = open_lib("libucs.so.0", &l.why);
  if (!ucs) return l;
  void* ucp = open_lib("libucp.so.0", &l.why);
  if (!ucp) return l;
  UcxApi& a = l.api;
  const char* p = "libucp.so.0";
  l.ok = load_sym(ucp, p, "ucp_config_read", &a.config_read, &l.why) &&
         load_sym(ucp, p, "ucp_config_modify", &a.config_modify, &l.why) &&
         load_sym(ucp, p, "ucp_config_release", &a.config_release, &l.why) &&
         load_sym(ucp, p, "ucp_init_version", &a.init_version, &l.why) &&
         load_sym(ucp, p, "ucp_cleanup", &a.cleanup, &l.why) &&
         load_sym(ucp, p, "ucp_worker_create", &a.worker_create, &l.why) &&
         load_sym(ucp, p, "ucp_worker_destroy", &a.worker_destroy, &l.why) &&
         load_sym(ucp, p, "ucp_worker_progress", &a.worker_progress, &l.why) &&
         load_sym(ucp, p, "ucp_worker_get_address", &a.worker_get_address, &l.why) &&
         load_sym(ucp, p, "ucp_worker_release_address", &a.worker_release_address, &l.why) &&
         load_sym(ucp, p, "ucp_ep_create", &a.ep_create, &l.why) &&
         load_sym(ucp, p, "ucp_ep_close_nbx", &a.ep_close_nbx, &l.why) &&
         load_sym(ucp, p, "ucp_ep_print_info", &a.ep_print_info, &l.why) &&
         load_sym(ucp, p, "ucp_tag_send_nbx", &a.tag_send_nbx, &l.why) &&
         load_sym(ucp, p, "ucp_tag_recv_nbx", &a.tag_recv_nbx, &l.why) &&
         load_sym(ucp, p, "ucp_request_check_status", &a.request_check_status, &l.why) &&
         load_sym(ucp, p, "ucp_request_cancel", &a.request_cancel, &l.why) &&
         load_sym(ucp, p, "ucp_request_free", &a.request_free, &l.why) &&
         load_sym(ucs, "libucs.so.0", "ucs_status_string", &a.status_string, &l.why);
  return l;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const UcxApi* ucx_api(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok) {
    if (why) *why = l.why;
    return nullptr;
  }
  return &l.api;
}

const UcxApi& ucx() { return loaded().api; }

}  // namespace mycoll
