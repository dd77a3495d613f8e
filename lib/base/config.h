// Every MYCOLL_* variable in one registry (name, type, default, meaning).
// Config::from_env() parses them once; a communicator owns its copy.
// tools/gen_env_doc prints docs/environment.md from the same registry.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mycoll {

struct EnvVar {
  const char* name;
  const char* type;  // "int", "double", "string", "bool", "enum", "bytes"
  const char* default_value;
  const char* meaning;
  // true: read once per process (at the first log line); false: read again
  // by every communicator init (mycollCommInit*, mycollCommSplit).
  bool per_process = false;
};

// The registry, in documentation order.
const std::vector<EnvVar>& env_registry();

// docs/environment.md, generated from the registry.
std::string environment_markdown();

// Reads a registered variable: the environment's value or the default.
// Throws InvalidArgument for a name that is not registered (a programming
// error caught by tests).
std::string env_get(const char* name);

// MYCOLL_TIMEOUT in seconds: the one parser of it, for Config::from_env()
// and for what runs before a communicator has its Config (the rendezvous
// root). Throws InvalidArgument unless it is a number > 0.
double timeout_from_env();

// UCX transport settings (MYCOLL_UCX_*), read by the transport at connect.
struct UcxConfig {
  size_t chunk_bytes = 256 * 1024;  // MYCOLL_UCX_CHUNK_BYTES (64..1G)
  int window = 8;                   // MYCOLL_UCX_WINDOW (1..1024)
  bool peer_error_mode = true;      // MYCOLL_UCX_ERROR_MODE: peer (true) or none
};

// RDMA verbs transport settings (MYCOLL_IB_*).
struct IbConfig {
  std::string hca;                 // MYCOLL_IB_HCA ("" = first active port)
  int gid_index = -1;              // MYCOLL_IB_GID_INDEX (-1 = auto)
  int timeout = 14;                // MYCOLL_IB_TIMEOUT (QP ACK timeout exponent, 1..31)
  int retry_cnt = 7;               // MYCOLL_IB_RETRY_CNT (0..7)
  size_t buffer_bytes = 4u << 20;  // MYCOLL_IB_BUFFER_BYTES (receive ring per peer, 4K..1G)
};

struct Config {
  std::string debug_level;                     // MYCOLL_DEBUG
  double timeout_s = 300;                      // MYCOLL_TIMEOUT
  std::string transport;                       // MYCOLL_TRANSPORT ("" = auto)
  std::string net;                             // MYCOLL_NET
  std::string algo;                            // MYCOLL_ALGO ("" = auto)
  std::string socket_ifname;                   // MYCOLL_SOCKET_IFNAME
  std::string host_id;                         // MYCOLL_HOST_ID (override of hostname+boot id)
  size_t shm_fifo_bytes = 1u << 20;            // MYCOLL_SHM_FIFO_BYTES
  size_t shm_read_bytes = 2u << 20;            // MYCOLL_SHM_READ_BYTES (0 = never)
  bool shm_read_bytes_set = false;             // MYCOLL_SHM_READ_BYTES given in the environment
  size_t shm_read_bytes_alltoall = 2u << 20;   // an all-to-all's (set at comm init)
  bool shm_read_speed_check = true;            // MYCOLL_SHM_READ_SPEED_CHECK
  size_t host_nt_copy_bytes = 4u << 20;        // MYCOLL_HOST_NT_COPY_BYTES (0 = never)
  size_t socket_buffer_bytes = 0;              // MYCOLL_SOCKET_BUFFER_BYTES
  size_t chunk_bytes = 0;                      // MYCOLL_CHUNK_BYTES (pipelined tree/chain)
  bool chunk_bytes_set = false;                // MYCOLL_CHUNK_BYTES given in the environment
  int gpu_channels = 64;                       // MYCOLL_NCHANNELS
  bool gpu_channels_set = false;               // MYCOLL_NCHANNELS given in the environment
  int gpu_plan_channels = 32;                  // MYCOLL_GPU_PLAN_CHANNELS
  size_t gpu_slot_bytes = 65536;               // MYCOLL_GPU_SLOT_BYTES
  int gpu_slots = 16;                          // MYCOLL_GPU_SLOTS
  size_t gpu_channel_bytes = 8192;             // MYCOLL_GPU_CHANNEL_BYTES
  size_t gpu_ll_bytes = 16384;                 // MYCOLL_GPU_LL_BYTES
  size_t gpu_oneshot_bytes = 65536;            // MYCOLL_GPU_ONESHOT_BYTES (0 = off)
  size_t gpu_twoshot_bytes = size_t(4) << 20;  // MYCOLL_GPU_TWOSHOT_BYTES (0 = off)
  size_t gpu_ll_coll_bytes = size_t(2) << 20;  // MYCOLL_GPU_LL_COLL_BYTES (0 = off)
  bool gpu_call_check = true;                  // MYCOLL_GPU_CALL_CHECK (not 0)
  bool gpu_pdl = true;                         // MYCOLL_GPU_PDL: LL kernel, programmatic launch
  bool gpu_call_check_strict = false;          // MYCOLL_GPU_CALL_CHECK=strict
  size_t gpu_ring_bytes = size_t(1) << 20;     // MYCOLL_GPU_RING_BYTES (0 = off)
  size_t gpu_direct_bytes = size_t(1) << 20;   // MYCOLL_GPU_DIRECT_BYTES (0 = off)
  size_t flight_ops = 0;                       // MYCOLL_FLIGHT_RECORDER (0 = off)
  std::string flight_file;                     // MYCOLL_FLIGHT_RECORDER_FILE
  int flight_signal = 0;                       // MYCOLL_FLIGHT_RECORDER_SIGNAL (0 = none)
  std::string topo_dump_file;                  // MYCOLL_TOPO_DUMP_FILE ("" = none)
  UcxConfig ucx;                               // MYCOLL_UCX_*
  IbConfig ib;                                 // MYCOLL_IB_*

  // Parses every variable; throws InvalidArgument naming the variable on a
  // malformed value.
  static Config from_env();
  // The single-copy threshold a rank applies to what it sends over shm:
  // MYCOLL_SHM_READ_BYTES when given, else 2 MiB, or 1 MiB on a host whose
  // ranks outnumber the CPUs they may run on (docs/environment.md).
  size_t shm_read_bytes_for(bool host_oversubscribed) const;
  // The threshold for a gather's messages: MYCOLL_SHM_READ_BYTES when
  // given, else 0 (never single copy): the root receives from every other
  // rank, so single copy puts every copy on its CPU, while through the FIFO
  // each sender makes half of them (docs/performance.md, "Session 53").
  size_t shm_read_bytes_gather() const;
  // The threshold for an all-to-all's messages, from the ranks on this
  // host and the CPUs they may run on (cpus 0: unknown): MYCOLL_SHM_READ_BYTES
  // when given; else 128 KiB where the ranks are 3 or more per CPU (each
  // exchange then waits on ranks that are not running, and the FIFO's
  // second copy is CPU time they wait for); else shm_read_bytes_for.
  size_t shm_read_bytes_alltoall_for(int ranks_on_host, int cpus) const;
  // MYCOLL_SHM_READ_SPEED_CHECK. The median of a host's speed checks
  // (process_vm_readv's speed in thousandths of memcpy's; negative: that
  // rank made none), the upper one of an even count; -1 when none checked.
  // Every rank of the host takes it from the same values, so they agree.
  static int32_t read_speed_median(std::vector<int32_t> permille);
  // Below this (0.35 of memcpy's speed at 256 KiB) the FIFO's two copies,
  // one on each side at once, beat the reader's one process_vm_readv.
  static constexpr int32_t kSlowReadPermille = 350;
  // After the thresholds are set for the host: with MYCOLL_SHM_READ_BYTES
  // unset and the host's median below kSlowReadPermille, single copy is off
  // (shm_read_bytes and shm_read_bytes_alltoall 0). Returns whether it was.
  bool apply_read_speed(int32_t median_permille);
  // The pipeline chunk of a host broadcast of `message_bytes`:
  // MYCOLL_CHUNK_BYTES when given; else, when a host of the communicator is
  // oversubscribed and reads single copy (big_chunks: mycollComm::
  // broadcast_big_chunks) and the message holds two such chunks, at least
  // the single-copy threshold there (broadcast_chunk_bytes_oversubscribed),
  // so each chunk is read single copy; else chunk_bytes.
  size_t broadcast_chunk_bytes(size_t message_bytes, bool big_chunks) const;
  // That chunk for an oversubscribed communicator, as INFO reports it.
  static size_t broadcast_chunk_bytes_oversubscribed(size_t chunk_bytes);
};

// Helpers shared by parsers (throw InvalidArgument naming `what`).
double parse_double(const std::string& text, const char* what);
long long parse_int(const std::string& text, const char* what);
size_t parse_bytes(const std::string& text, const char* what);  // "4M", "64K", "1G", "123"

}  // namespace mycoll
