// RDMA verbs transport internals shared with its tests.
#pragma once

#include <string>

namespace mycoll {

class Connection;

// Test hook: moves the connection's QP to the error state without telling
// the peer (as a fatal local HCA error would). Returns false if c is not an
// ibverbs connection.
bool ib_force_qp_error(Connection* c);

// Parses a MYCOLL_IB_HCA-style spec ("mlx5_0:1,mlx5_1", "^mlx4", "=rxe0")
// against a device name and port; exposed for unit tests.
bool ib_hca_matches(const std::string& spec, const std::string& dev, int port);

}  // namespace mycoll
