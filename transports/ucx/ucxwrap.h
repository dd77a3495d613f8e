// UCX loaded at run time (dlopen "libucp.so.0" and "libucs.so.0"), so
// libmycoll loads on hosts without UCX and MYCOLL_NET=ucx there says what to
// install. Only types, constants and inline helpers come from
// <ucp/api/ucp.h>; every UCX function the transport calls goes through the
// table below (ucp_init is an inline over ucp_init_version).
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace mycoll {

struct UcxApi {
  decltype(&::ucp_config_read) config_read;
  decltype(&::ucp_config_modify) config_modify;
  decltype(&::ucp_config_release) config_release;
  decltype(&::ucp_init_version) init_version;
  decltype(&::ucp_cleanup) cleanup;
  decltype(&::ucp_worker_create) worker_create;
  decltype(&::ucp_worker_destroy) worker_destroy;
  decltype(&::ucp_worker_progress) worker_progress;
  decltype(&::ucp_worker_get_address) worker_get_address;
  decltype(&::ucp_worker_release_address) worker_release_address;
  decltype(&::ucp_ep_create) ep_create;
  decltype(&::ucp_ep_close_nbx) ep_close_nbx;
  decltype(&::ucp_ep_print_info) ep_print_info;
  decltype(&::ucp_tag_send_nbx) tag_send_nbx;
  decltype(&::ucp_tag_recv_nbx) tag_recv_nbx;
  decltype(&::ucp_request_check_status) request_check_status;
  decltype(&::ucp_request_cancel) request_cancel;
  decltype(&::ucp_request_free) request_free;
  decltype(&::ucs_status_string) status_string;

  // ucp_init as the header's inline does it, with this header's API version.
  ucs_status_t init(const ucp_params_t* params, const ucp_config_t* config,
                    ucp_context_h* ctx) const {
    return init_version(UCP_API_MAJOR, UCP_API_MINOR, params, config, ctx);
  }
};

// Loads libucs and libucp once per process (thread-safe). Returns nullptr
// and sets *why ("libucp.so.0 not found (...); install libucx0 ...") when it
// cannot. The dynamic loader searches as for any library (LD_LIBRARY_PATH, ldconfig).
const UcxApi* ucx_api(std::string* why);

// The loaded table; only valid after ucx_api() succeeded (the transport is
// made only then).
const UcxApi& ucx();

}  // namespace mycoll
