// libibverbs loaded at run time (dlopen "libibverbs.so.1"), so libmycoll
// loads and runs on hosts without RDMA libraries. Only the verbs structs come
// from <infiniband/verbs.h>; every non-inline verbs function is called
// through the table below. (ibv_post_send/post_recv/poll_cq are inline in the
// header: they dispatch through the context's ops and need no symbol.)
#pragma once

#include <infiniband/verbs.h>

#include <cstring>
#include <string>

namespace mycoll {

struct IbvApi {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  decltype(&::ibv_query_port) query_port;  // the IBVERBS_1.1 symbol
  decltype(&::ibv_query_gid) query_gid;
  decltype(&::ibv_alloc_pd) alloc_pd;
  decltype(&::ibv_dealloc_pd) dealloc_pd;
  decltype(&::ibv_reg_mr) reg_mr;
  decltype(&::ibv_dereg_mr) dereg_mr;
  decltype(&::ibv_create_cq) create_cq;
  decltype(&::ibv_destroy_cq) destroy_cq;
  decltype(&::ibv_create_qp) create_qp;
  decltype(&::ibv_modify_qp) modify_qp;
  decltype(&::ibv_destroy_qp) destroy_qp;
  decltype(&::ibv_wc_status_str) wc_status_str;
};

// Loads the library once per process (thread-safe). Returns nullptr and sets
// *why ("libibverbs.so.1 not found: ...", "libibverbs.so.1 lacks ibv_x")
// when it cannot.
const IbvApi* ibv_api(std::string* why);

// ibv_query_port as the header's inline does it: the provider's extended op
// when present, else the exported (compat layout) symbol.
inline int ibvw_query_port(const IbvApi* api, ibv_context* ctx, uint8_t port,
                           ibv_port_attr* attr) {
  verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (!vctx) {
    std::memset(attr, 0, sizeof(*attr));
    return api->query_port(ctx, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
  }
  return vctx->query_port(ctx, port, attr, sizeof(*attr));
}

}  // namespace mycoll
