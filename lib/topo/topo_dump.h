// MYCOLL_TOPO_DUMP_FILE: each rank writes its view of the topology as JSON
// after init (hosts and their ranks, this rank's GPU, the transport and
// connection per peer, network interfaces and RDMA devices).
#pragma once

#include <cstdint>
#include <string>

struct mycollComm;

namespace mycoll {

// The JSON document for this rank of comm (self-contained, UTF-8).
std::string topology_json(const mycollComm& comm);

// "0000:19:00.0" for device_bus_id()'s encoding.
std::string bus_id_text(uint64_t id);

// "%h" -> hostname, "%p" -> pid, "%r" -> rank, "%%" -> "%".
std::string expand_dump_path(const std::string& pattern, int rank);

// Writes topology_json to MYCOLL_TOPO_DUMP_FILE when it is set. A file that
// cannot be written is a warning (the communicator stays usable), never an
// error. Called at the end of comm_create.
void maybe_dump_topology(const mycollComm& comm);

}  // namespace mycoll
