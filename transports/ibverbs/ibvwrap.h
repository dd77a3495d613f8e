// libibverbs loaded at run time (dlopen "libibverbs.so.1"), so libmycoll
// loads and runs on hosts without RDMA libraries. Only the verbs structs come
// from <infiniband/verbs.h>; every non-inline verbs function is called
// through the table below. (ibv_post_send/post_recv/poll_cq are inline in the
// header: they dispatch through the context's ops and need no symbol.)
#pragma once

#include <infiniband/verbs.h>

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
// when it cannot. MYCOLL_IB_LIBRARY-free: the soname is fixed.
const IbvApi* ibv_api(std::string* why);

}  // namespace mycoll
