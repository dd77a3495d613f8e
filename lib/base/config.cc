#include "base/config.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace mycoll {

const std::vector<EnvVar>& env_registry() {
  static const std::vector<EnvVar> vars = {
      {"MYCOLL_DEBUG", "enum", "WARN",
       "Log level: NONE, WARN (default: warnings only), INFO (per communicator a short init "
       "summary ending in one \"Init COMPLETE\" line; per-call lines only with the COLL "
       "subsystem), TRACE (also every step of every collective: peer, bytes, waits). A malformed "
       "value is a warning and WARN.",
       true},
      {"MYCOLL_DEBUG_SUBSYS", "string", "",
       "Subsystems INFO and TRACE print, as NCCL_DEBUG_SUBSYS: a comma list of INIT, BOOTSTRAP, "
       "NET, TRANSPORT, GPU, PROXY, TUNING, ENV, COLL, ALL; a leading ^ prints all but those "
       "(\"^TRANSPORT\"). Unset = all but COLL (the per-call lines) at INFO, all at TRACE. "
       "Warnings ignore it. Unknown names are a warning.",
       true},
      {"MYCOLL_DEBUG_FILE", "string", "",
       "Write logs to this file instead of stderr: %h is replaced by the hostname, %p by the pid, "
       "%r by the rank (the launcher's rank variable, else the first communicator's rank; lines "
       "before it are held until then), %% by %. The directory must exist: a file that cannot be "
       "opened is a warning on stderr, and logs stay on stderr.",
       true},
      {"MYCOLL_DEBUG_TIMESTAMP_LEVELS", "string", "WARN",
       "Levels whose lines start with a timestamp: a comma list of WARN, INFO, TRACE, or ALL, "
       "NONE.",
       true},
      {"MYCOLL_DEBUG_TIMESTAMP_FORMAT", "string", "[%F %T] ",
       "strftime format of that timestamp, local time; %Nf adds N digits of the second's "
       "fraction (\"[%T.%3f] \").",
       true},
      {"MYCOLL_TIMEOUT", "double", "300",
       "Seconds any wait (bootstrap, a peer's data, a flag) may last before the operation fails "
       "with mycollTimeout naming the peer and the operation."},
      {"MYCOLL_TRANSPORT", "string", "",
       "Force the transport for every peer: shm (one host), socket (TCP), ib (RDMA verbs), ucx, "
       "cuda_ipc (GPU communicators on one host). Unset = automatic (shm on one host, cuda_ipc "
       "between GPUs of one host, MYCOLL_NET between hosts). A transport that cannot serve a "
       "peer, or is not available here (no RDMA port, no UCX), is mycollInvalidUsage at init "
       "saying why; it must be alike on every rank (checked at init)."},
      {"MYCOLL_NET", "enum", "",
       "Network transport between hosts: ib (RDMA verbs), ucx, or socket (TCP). Unset = ib when "
       "ranks span several hosts and an active RDMA port exists, else socket. Naming one that is "
       "not available is an error at init."},
      {"MYCOLL_ALGO", "string", "auto",
       "Algorithm: auto, ring, tree, rhd, direct, hier (two-level: chains inside hosts, a tree "
       "over hosts), twoshot (all-reduce as direct reduce-scatter + all-gather), doubling "
       "(all-reduce by recursive doubling of the whole vector), or per "
       "collective, e.g. "
       "\"allreduce:rhd,broadcast:tree\" (others stay automatic)."},
      {"MYCOLL_SOCKET_IFNAME", "string", "",
       "Interfaces for bootstrap and sockets: prefix list (\"eth,ens\"), ^ to exclude "
       "(\"^docker,lo\"), = for exact names. Unset = first non-loopback interface that is up, "
       "else loopback."},
      {"MYCOLL_SECRET", "string", "",
       "Shared secret for mycollCommInitFromEnv rendezvous (mycollGetUniqueId makes a random one "
       "itself); the same value on every rank, e.g. MYCOLL_SECRET=$(cat secret-file). Unset = "
       "the rendezvous is unauthenticated (a WARN says so when it is not on loopback): only the "
       "job identity (MYCOLL_JOB_ID or the launcher's job id) keeps jobs apart."},
      {"MYCOLL_REQUIRE_SECRET", "bool", "0",
       "1 = mycollCommInitFromEnv refuses to run an unauthenticated rendezvous (no MYCOLL_SECRET) "
       "instead of warning."},
      {"MYCOLL_JOB_ID", "string", "",
       "Job identity mixed into the rendezvous so two jobs given one address never pair. Unset = "
       "taken from the launcher: SLURM_JOB_ID/SLURM_STEP_ID, PMIX_NAMESPACE, "
       "OMPI_MCA_ess_base_jobid, TORCHELASTIC_RUN_ID."},
      {"MYCOLL_HOST_ID", "string", "",
       "Override this process' host identity (default: hostname + boot id). Ranks with equal ids "
       "are treated as one host (shm allowed)."},
      {"MYCOLL_SHM_FIFO_BYTES", "bytes", "1M",
       "Size of each shared-memory FIFO (one per ordered pair of ranks)."},
      {"MYCOLL_SHM_READ_BYTES", "bytes", "2M",
       "Shared memory: messages of collectives that do not reduce (and send/recv) of at least "
       "this size are read by the receiver straight from the sender's buffer (process_vm_readv: "
       "one copy, but the sender waits for the reader) instead of going through the FIFO (two "
       "copies, on both sides at once, and the sender may run ahead). 0 = never. The default "
       "(messages of two FIFO laps and more at the default FIFO size) is where single copy "
       "measured faster with freshly written inputs and a CPU per rank (docs/performance.md). "
       "Unset, it is 1M on a host whose ranks outnumber the CPUs they may run on: there the "
       "FIFO's two copies cost CPU time the other ranks wait for, and single copy measured "
       "faster from messages of one FIFO lap at 2 and 4 ranks per CPU. "
       "Unset, a gather's messages always go through the FIFO: its root receives from every "
       "rank, and single copy would put all those copies on the root's CPU (the FIFO measured "
       "1.0-1.9x faster at 2-16 ranks on two hosts, except 8 ranks on 2 CPUs of one: 0.83-0.92). "
       "Unset, an all-to-all's messages go single copy from 128K where a host has 3 or more "
       "ranks per CPU (measured 1.1-1.8x faster there on two hosts). "
       "Unset, and where MYCOLL_SHM_READ_SPEED_CHECK finds process_vm_readv slow on the host, "
       "never. Where the sender's memory cannot be read (checked at connect) the FIFO is used. "
       "Each rank decides for what it sends."},
      {"MYCOLL_SHM_READ_SPEED_CHECK", "bool", "1",
       "Shared memory, MYCOLL_SHM_READ_BYTES unset: at init each host-memory rank with a shm "
       "peer times process_vm_readv against memcpy (256 KiB, best of 9, about 0.2 ms once per "
       "process); where the median of its host's ranks is below 0.35 of memcpy's speed, large "
       "messages go through the FIFO on that host at every size (the FIFO's two memcpys run on "
       "both sides at once; single copy is one slower copy on the reader). Measured: a 2-core "
       "AMD VM 0.24-0.28 (the FIFO 1.1-3.7x faster from 2 MiB), a 16-core Intel host "
       "0.45-0.55 (single copy up to 1.8x faster from 2 MiB) (docs/performance.md, session "
       "61). "
       "0 = no check: the thresholds of MYCOLL_SHM_READ_BYTES as if reads were fast. Must be "
       "alike on every rank."},
      {"MYCOLL_HOST_NT_COPY_BYTES", "bytes", "4M",
       "Host memory: a local copy of a collective that does not reduce (a rank's own block into "
       "the output of an all-gather, all-to-all, gather or scatter, the root's broadcast input "
       "into its output, an in-place all-to-all's block out of scratch) of at least this many "
       "bytes is made with non-temporal stores on x86-64: the destination lines are not read "
       "first, so the copy moves two bytes of memory traffic per byte instead of three while "
       "the peers' reads of this rank's buffer share the memory bandwidth; the copied block is "
       "then not left in the cache. In the 2-rank all-gather's pattern (each rank copies its "
       "block while the peer reads it with process_vm_readv) that was 11-31% faster from 4 MiB "
       "blocks on a 2-core AMD VM and 0-13% on a 16-core Intel host, and level or mixed at "
       "0.5-2 MiB (docs/performance.md, session 55). 0 = never (plain memmove)."},
      {"MYCOLL_SOCKET_BUFFER_BYTES", "bytes", "0",
       "SO_SNDBUF/SO_RCVBUF for socket transport connections (0 = OS default, autotuned)."},
      {"MYCOLL_CHUNK_BYTES", "bytes", "512K",
       "Pipelining chunk of tree and chain algorithms on the host engine. Unset, a broadcast "
       "of 2 MiB or more on a communicator with an oversubscribed host (more ranks than CPUs) "
       "that reads single copy uses chunks of 1 MiB, the single-copy threshold there, so each "
       "chunk is read single copy (where MYCOLL_SHM_READ_SPEED_CHECK turned single copy off, "
       "512K chunks through the FIFO measured faster)."},
      {"MYCOLL_NCHANNELS", "int", "64",
       "GPU: most channels (thread blocks, each with its own FIFOs) one collective uses; large "
       "messages use all of them, small ones fewer. The fused ring and direct kernels use up to "
       "this many, and so do point-to-point batches; the plan kernel's collectives at most "
       "MYCOLL_GPU_PLAN_CHANNELS of them. Costs about 1.1 MiB "
       "of GPU memory per channel and rank of the communicator. Ranks that set different "
       "values all use the smallest (a WARN says so); ncclConfig_t.maxCTAs and NCCL_MAX_CTAS "
       "cap it further through libnccl.so.2 (docs/nccl.md)."},
      {"MYCOLL_GPU_PLAN_CHANNELS", "int", "32",
       "GPU: most channels the plan kernel splits a collective over (the collectives no other "
       "kernel serves: tree, rhd, small rings), at most MYCOLL_NCHANNELS; 1..64. Point-to-point "
       "batches use up to MYCOLL_NCHANNELS. Must be alike on every rank (checked at init)."},
      {"MYCOLL_GPU_SLOT_BYTES", "bytes", "64K",
       "GPU: size of one FIFO slot (a multiple of 16); the unit in which data is handed over."},
      {"MYCOLL_GPU_SLOTS", "int", "16", "GPU: slots per FIFO (per peer and channel)."},
      {"MYCOLL_GPU_CHANNEL_BYTES", "bytes", "8K",
       "GPU: message bytes per channel before another channel is added."},
      {"MYCOLL_GPU_LL_BYTES", "bytes", "16K",
       "GPU: a message whose share on one channel is at most this size travels with the "
       "low-latency protocol (data and flag in one 16-byte store, no fence; half the link "
       "bandwidth); larger ones with the bandwidth protocol (slots, fence, flag). 0 disables it."},
      {"MYCOLL_PROTO", "enum", "auto",
       "GPU: the protocol of every kernel: simple (slots, fence, counter: bandwidth) or ll (data "
       "and flag in one 16-byte store: latency). simple turns off the one-shot, two-shot and LL "
       "collective kernels and the plan kernel's LL ring (as MYCOLL_GPU_ONESHOT_BYTES, "
       "_TWOSHOT_BYTES, _LL_COLL_BYTES, _LL_BYTES = 0); ll turns off the fused ring and direct "
       "kernels (_RING_BYTES, _DIRECT_BYTES = 0) and sends every plan-kernel message that fits "
       "the LL ring with it. auto: each size takes the faster (the selection table in "
       "lib/engine/device_select.h). Must be alike on every rank (checked at init)."},
      {"MYCOLL_GPU_ONESHOT_BYTES", "bytes", "64K",
       "GPU: all-reduce of at most this many bytes per rank, on a communicator whose peers are all "
       "on cuda_ipc, with the direct algorithm (the automatic rule's choice for small messages), "
       "runs as one kernel: every rank writes its input into every peer's inbox, then reduces "
       "all inputs in rank order. Costs 4 x this x ranks bytes of GPU memory per rank; at most "
       "4M. 0 disables it."},
      {"MYCOLL_GPU_TWOSHOT_BYTES", "bytes", "4M",
       "GPU: all-reduce of at most this many bytes per rank, on a communicator whose peers are all "
       "on cuda_ipc, with the twoshot algorithm (the automatic rule's choice above the one-shot "
       "size), runs as one kernel: every rank sends part j of its input to rank j, which reduces "
       "it in rank order and sends the result to every rank. Costs about 8 x this bytes of GPU "
       "memory per rank; at most 64M. 0 disables it (the twoshot plan then runs)."},
      {"MYCOLL_GPU_LL_COLL_BYTES", "bytes", "2M",
       "GPU: all-gather, reduce-scatter, all-to-all, broadcast and reduce whose whole message "
       "(all-gather's output, reduce-scatter's and all-to-all's input, broadcast's and reduce's "
       "buffer) is at most this many bytes, on a communicator whose peers are all on cuda_ipc, "
       "run as one kernel of low-latency lines through every peer's inbox: all-gather, "
       "reduce-scatter and all-to-all with the direct algorithm (the automatic rule's choice "
       "for these sizes), broadcast and reduce up to 256K with the direct algorithm or whenever "
       "MYCOLL_ALGO does not name their algorithm. Costs 4 x this x ranks bytes of GPU memory per "
       "rank; at most 16M. 0 disables it."},
      {"MYCOLL_GPU_CALL_CHECK", "enum", "1",
       "GPU: 1 = every collective kernel compares its call (collective, datatype, op, root, "
       "count) with every peer's, so ranks that made different calls get mycollInvalidUsage "
       "naming the peer and what differs, never a silently wrong buffer (docs/reliability.md); "
       "a rank that only sends in the call (a ring chain's first rank, a tree broadcast's root, "
       "a reduce's leaves, a gather's other ranks) checks one peer it sends to at once and the "
       "others in its next collective kernel. "
       "strict = every rank checks every peer within the call itself. 0 = no check: a mismatch "
       "then hangs until MYCOLL_TIMEOUT or returns wrong data. What it costs: "
       "docs/performance.md (\"call check\"). Must be alike on every rank (checked at init)."},
      {"MYCOLL_GPU_PDL", "bool", "1",
       "GPU: 1 = the LL kernel's and the fused ring kernel's calls issued on a stream outside "
       "CUDA-graph capture, on a rank that has its GPU to itself, are launched with "
       "programmatic stream serialization (programmatic dependent launch, sm_90): the GPU "
       "schedules the kernel as its predecessor's blocks exit, before that grid has completed, "
       "and the kernel waits for the grid's completion before it touches memory, which takes "
       "about 0.6-0.9 us off a small LL call issued right after another and about 1 us off a "
       "ring-kernel call (docs/performance.md \"Session 30\", \"Session 41\"). Neither kernel "
       "lets its successor be scheduled earlier (no early trigger), so a waiting successor "
       "never holds SMs beside a grid that may be waiting for a peer. Ranks sharing a GPU "
       "never use it. 0 = plain launches."},
      {"MYCOLL_GPU_RING_BYTES", "bytes", "1M",
       "GPU: all-reduce, all-gather, reduce-scatter, broadcast and reduce with the ring "
       "algorithm whose whole message (all-gather's output, reduce-scatter's input) is at least "
       "this many bytes, on a communicator whose peers are all on cuda_ipc, run in the fused "
       "ring kernel: every FIFO slot is received, reduced and forwarded to the next rank in one "
       "pass, instead of the plan kernel's step-by-step ring and pipelined chain. Smaller ones "
       "run the plan kernel (low-latency protocol), except broadcast and reduce above 256 KiB, "
       "where the LL kernel's flat tree stops: those always take the fused kernel's chain. 0 "
       "disables it."},
      {"MYCOLL_GPU_DIRECT_BYTES", "bytes", "1M",
       "GPU: all-to-all (out of place), scatter and gather with the direct algorithm whose whole "
       "message (all-to-all's input, scatter's and gather's blocked buffer) is at least this "
       "many bytes, on a communicator whose peers are all on cuda_ipc, run in the direct "
       "kernel: one thread block per peer, direction and channel streams the block through "
       "the FIFOs, with more channels than the plan kernel runs. Smaller ones (above "
       "MYCOLL_GPU_LL_COLL_BYTES) and in-place all-to-all run the plan kernel. 0 disables it."},
      {"MYCOLL_UCX_CHUNK_BYTES", "bytes", "256K",
       "UCX transport: largest message one UCX send carries (and size of each receive slot); "
       "larger transfers are split."},
      {"MYCOLL_UCX_WINDOW", "int", "8",
       "UCX transport: messages in flight per peer and direction (send slots and pre-posted "
       "receives of MYCOLL_UCX_CHUNK_BYTES each); a sender runs at most this many messages "
       "ahead of what its reader consumed (credits)."},
      {"MYCOLL_UCX_ERROR_MODE", "enum", "peer",
       "UCX transport: peer (UCX reports a failed peer; UCX 1.13 then excludes its shared-memory "
       "transports) or none (any UCX transport; a dead peer on another host then shows as "
       "MYCOLL_TIMEOUT)."},
      {"MYCOLL_TOPO_DUMP_FILE", "string", "",
       "After init every rank writes its view of the topology as JSON to this path (%h host, %p "
       "pid, %r rank): hosts, its GPU, transport per peer, network interfaces, RDMA devices."},
      {"MYCOLL_IB_HCA", "string", "",
       "RDMA verbs transport: devices/ports to use, NCCL_IB_HCA style: prefix list "
       "(\"mlx5_0:1,mlx5_1\"), ^ to exclude, = for exact names. Unset = first active port."},
      {"MYCOLL_IB_GID_INDEX", "int", "-1",
       "RDMA verbs transport: GID index on RoCE ports (-1 = auto: an IPv4-mapped RoCE v2 GID, "
       "else any RoCE v2 GID, else the first non-zero one)."},
      {"MYCOLL_IB_TIMEOUT", "int", "14",
       "RDMA verbs transport: QP local ACK timeout exponent (4.096 us x 2^value per try, 1..31)."},
      {"MYCOLL_IB_RETRY_CNT", "int", "7",
       "RDMA verbs transport: transport retries before a peer counts as dead (0..7)."},
      {"MYCOLL_IB_BUFFER_BYTES", "bytes", "4M",
       "RDMA verbs transport: receive ring per peer (and send staging ring of the same size)."},
      {"MYCOLL_FLIGHT_RECORDER", "int", "0",
       "Flight recorder: each communicator keeps its last N operations (sequence number, "
       "collective, count, dtype, op, root, algorithm, engine, state enqueued/started/done/failed, "
       "timestamps, the peer it waits on) and writes them as JSON to MYCOLL_FLIGHT_RECORDER_FILE "
       "when a collective fails (timeout, dead peer), at mycollCommAbort, on mycollCommDump and "
       "on MYCOLL_FLIGHT_RECORDER_SIGNAL. tools/flight/mycoll-flight reads every rank's file and "
       "names the rank that is behind. 0 = off (nothing recorded); at most 1000000. GPU "
       "communicators record the enqueue only."},
      {"MYCOLL_FLIGHT_RECORDER_FILE", "string", "/tmp/mycoll-flight.%c.%r.json",
       "Where the flight recorder is written: %c communicator id, %r rank, %h host, %p pid. The "
       "directory must exist."},
      {"MYCOLL_FLIGHT_RECORDER_SIGNAL", "string", "",
       "A signal (USR1, USR2 or its number) that makes every communicator with a flight recorder "
       "write it, e.g. kill -USR2 <pid> on a job that seems stuck. Unset = none (mycoll installs "
       "no handler)."},
      {"MYCOLL_HOST_COMM", "bool", "0",
       "1: mycollCommInitRank / mycollCommInitFromEnv make host-only communicators (host "
       "buffers) even where a GPU is present; 0: bind to the calling thread's current CUDA "
       "device when GPUs exist, like NCCL."},
      {"MYCOLL_RANK", "int", "", "mycollCommInitFromEnv: this process' rank."},
      {"MYCOLL_NRANKS", "int", "", "mycollCommInitFromEnv: number of ranks."},
      {"MYCOLL_ADDR", "string", "",
       "mycollCommInitFromEnv: host:port where rank 0 listens for the rendezvous."},
  };
  return vars;
}

std::string environment_markdown() {
  std::string md =
      "# Environment variables\n\n"
      "Generated by `mycoll-gen-env-doc` from the registry in `lib/base/config.cc`\n"
      "(a unit test fails when this file and the registry differ).\n\n"
      "- **When they are read.** Variables marked *process* are read once per process,\n"
      "  at the first log line; changing them later has no effect. All others are read\n"
      "  again by every communicator init (`mycollCommInitRank`, `mycollCommInitAll`,\n"
      "  `mycollCommInitFromEnv`, `mycollCommSplit`), so two communicators of one process\n"
      "  may differ. Settings that shape connections, plans and the GPU inbox must be\n"
      "  alike on every rank of a communicator: `MYCOLL_TRANSPORT`, `MYCOLL_NET`,\n"
      "  `MYCOLL_ALGO`, `MYCOLL_CHUNK_BYTES` and, between GPU ranks, `MYCOLL_PROTO`,\n"
      "  `MYCOLL_GPU_PLAN_CHANNELS`, `_SLOT_BYTES`, `_SLOTS`, `_CHANNEL_BYTES`,\n"
      "  `_LL_BYTES`, `_ONESHOT_BYTES`, `_TWOSHOT_BYTES`, `_LL_COLL_BYTES`,\n"
      "  `_RING_BYTES`, `_DIRECT_BYTES` and `_CALL_CHECK`. Init checks them: a\n"
      "  difference fails it on every rank with `mycollInvalidUsage` naming the\n"
      "  variable and both values. `MYCOLL_NCHANNELS` may differ (every rank takes\n"
      "  the smallest, with a warning).\n"
      "- **Malformed values.** A malformed or out-of-range value of a communicator\n"
      "  variable makes that init fail with `mycollInvalidArgument` naming the variable\n"
      "  (`mycollGetLastError`); a malformed logging variable is a warning on stderr and\n"
      "  its default.\n"
      "- **Typos.** At the first communicator init every `MYCOLL_*` variable of the\n"
      "  environment that is not listed here is warned about once, with the closest\n"
      "  name (`MYCOLL_TIMEOUTS is not a mycoll variable ... did you mean MYCOLL_TIMEOUT?`).\n"
      "- **Shared hosts.** Set a per-job `MYCOLL_SECRET` when launching with\n"
      "  `mycollCommInitFromEnv` on any host other jobs share (see `MYCOLL_SECRET`).\n\n"
      "| variable | type | read | default | meaning |\n| --- | --- | --- | --- | --- |\n";
  for (const auto& v : env_registry()) {
    md += std::string("| `") + v.name + "` | " + v.type + " | " +
          (v.per_process ? "process" : "comm") + " | " +
          (v.default_value[0] ? std::string("`") + v.default_value + "`" : std::string("(unset)")) +
          " | " + v.meaning + " |\n";
  }
  return md;
}

std::string env_get(const char* name) {
  for (const auto& v : env_registry()) {
    if (std::strcmp(v.name, name) == 0) {
      const char* s = std::getenv(name);
      return s ? std::string(s) : std::string(v.default_value);
    }
  }
  throw_error(mycollInternalError, std::string("unregistered environment variable ") + name);
}

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n\r");
  return s.substr(b, e - b + 1);
}

double parse_double(const std::string& text, const char* what) {
  std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || errno != 0 || *end != '\0')
    throw_error(mycollInvalidArgument, std::string(what) + ": '" + text + "' is not a number");
  return v;
}

long long parse_int(const std::string& text, const char* what) {
  std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || errno != 0 || *end != '\0')
    throw_error(mycollInvalidArgument, std::string(what) + ": '" + text + "' is not an integer");
  return v;
}

size_t parse_bytes(const std::string& text, const char* what) {
  std::string t = trim(text);
  if (t.empty()) throw_error(mycollInvalidArgument, std::string(what) + ": empty size");
  size_t mult = 1;
  char last = t.back();
  if (last == 'B' || last == 'b') {
    t.pop_back();
    if (!t.empty()) last = t.back();
  }
  switch (last) {
    case 'K':
    case 'k':
      mult = 1ull << 10;
      t.pop_back();
      break;
    case 'M':
    case 'm':
      mult = 1ull << 20;
      t.pop_back();
      break;
    case 'G':
    case 'g':
      mult = 1ull << 30;
      t.pop_back();
      break;
    default: break;
  }
  long long v = parse_int(t, what);
  if (v < 0)
    throw_error(mycollInvalidArgument, std::string(what) + ": negative size '" + text + "'");
  return static_cast<size_t>(v) * mult;
}

double timeout_from_env() {
  const double t = parse_double(env_get("MYCOLL_TIMEOUT"), "MYCOLL_TIMEOUT");
  if (!(t > 0)) throw_error(mycollInvalidArgument, "MYCOLL_TIMEOUT must be > 0 seconds");
  return t;
}

namespace {

// An int variable that must lie in [lo, hi]: InvalidArgument naming it otherwise.
int int_in_range(const char* name, long long lo, long long hi) {
  const long long v = parse_int(env_get(name), name);
  if (v < lo || v > hi)
    throw_error(mycollInvalidArgument, std::string(name) + " must be " + std::to_string(lo) + ".." +
                                           std::to_string(hi) + ", got " + std::to_string(v));
  return static_cast<int>(v);
}

UcxConfig ucx_from_env() {
  UcxConfig u;
  u.chunk_bytes = parse_bytes(env_get("MYCOLL_UCX_CHUNK_BYTES"), "MYCOLL_UCX_CHUNK_BYTES");
  if (u.chunk_bytes < 64 || u.chunk_bytes > (size_t(1) << 30))
    throw_error(mycollInvalidArgument, "MYCOLL_UCX_CHUNK_BYTES must be in 64..1G");
  u.window = int_in_range("MYCOLL_UCX_WINDOW", 1, 1024);
  const std::string mode = trim(env_get("MYCOLL_UCX_ERROR_MODE"));
  if (mode != "peer" && mode != "none")
    throw_error(mycollInvalidArgument, "MYCOLL_UCX_ERROR_MODE='" + mode + "' is not peer or none");
  u.peer_error_mode = mode == "peer";
  return u;
}

IbConfig ib_from_env() {
  IbConfig b;
  b.hca = trim(env_get("MYCOLL_IB_HCA"));
  b.gid_index = int_in_range("MYCOLL_IB_GID_INDEX", -1, 1 << 20);
  b.timeout = int_in_range("MYCOLL_IB_TIMEOUT", 1, 31);
  b.retry_cnt = int_in_range("MYCOLL_IB_RETRY_CNT", 0, 7);
  b.buffer_bytes = parse_bytes(env_get("MYCOLL_IB_BUFFER_BYTES"), "MYCOLL_IB_BUFFER_BYTES");
  if (b.buffer_bytes < 4096 || b.buffer_bytes > (size_t(1) << 30))
    throw_error(mycollInvalidArgument,
                "MYCOLL_IB_BUFFER_BYTES must be 4K..1G, got " + std::to_string(b.buffer_bytes));
  return b;
}

}  // namespace

// Unset MYCOLL_SHM_READ_BYTES on an oversubscribed host: messages of one
// default FIFO lap and more go single copy (docs/performance.md, "Session 47").
static constexpr size_t kShmReadBytesOversubscribed = 1u << 20;

size_t Config::shm_read_bytes_for(bool host_oversubscribed) const {
  if (shm_read_bytes_set || !host_oversubscribed) return shm_read_bytes;
  return kShmReadBytesOversubscribed;
}

size_t Config::shm_read_bytes_gather() const { return shm_read_bytes_set ? shm_read_bytes : 0; }

// All-to-all where ranks are 3 or more per CPU: single copy from 128 KiB
// messages measured 1.1-1.8x faster at 3 and 4 ranks per CPU on two hosts
// (2 and 16 cores); at 2 per CPU the hosts disagreed, and the other
// collectives did not gain (docs/performance.md, "Session 53").
static constexpr size_t kShmReadBytesAllToAllCrowded = 128u << 10;

size_t Config::shm_read_bytes_alltoall_for(int ranks_on_host, int cpus) const {
  const size_t base = shm_read_bytes_for(cpus > 0 && ranks_on_host > cpus);
  if (shm_read_bytes_set || cpus <= 0 || ranks_on_host < 3 * cpus) return base;
  return std::min(base, kShmReadBytesAllToAllCrowded);
}

int32_t Config::read_speed_median(std::vector<int32_t> permille) {
  permille.erase(std::remove_if(permille.begin(), permille.end(), [](int32_t v) { return v < 0; }),
                 permille.end());
  if (permille.empty()) return -1;
  std::sort(permille.begin(), permille.end());
  return permille[permille.size() / 2];
}

// The check's copies are 256 KiB. Measured 0.24-0.28 on a 2-core AMD VM,
// where the FIFO was 1.1-3.7x faster than single copy from 2 MiB, and
// 0.45-0.55 on a 16-core Intel host, where single copy was up to 1.8x
// faster (docs/performance.md, "Session 61"; "Session 56" had the first
// readings, of 1 MiB copies, which the two hosts came within 0.04 of each
// other on).
bool Config::apply_read_speed(int32_t median_permille) {
  if (shm_read_bytes_set || median_permille < 0 || median_permille >= kSlowReadPermille)
    return false;
  shm_read_bytes = 0;
  shm_read_bytes_alltoall = 0;
  return true;
}

// Broadcast chunks of 512 KiB stay under that threshold and go through the
// FIFO; 1 MiB chunks measured faster at 4 and 8 ranks on 2 CPUs from 2 MiB
// messages. A 1 MiB message keeps its two 512 KiB chunks: as one chunk it
// was slower at 4 ranks. Reduce keeps its chunk: it goes through the FIFO
// whatever the size, and 1 MiB chunks were slower there (docs/performance.md,
// "Session 48"). Where the speed check turned single copy off, 512 KiB
// chunks through the FIFO were 0-30 % faster than 1 MiB ones at 4 and 8
// ranks on 2 CPUs ("Session 56"), so the caller asks for big chunks only
// where they are read single copy.
size_t Config::broadcast_chunk_bytes_oversubscribed(size_t chunk_bytes) {
  return std::max(chunk_bytes, kShmReadBytesOversubscribed);
}

size_t Config::broadcast_chunk_bytes(size_t message_bytes, bool big_chunks) const {
  if (chunk_bytes_set || !big_chunks) return chunk_bytes;
  const size_t big = broadcast_chunk_bytes_oversubscribed(chunk_bytes);
  return message_bytes >= 2 * big ? big : chunk_bytes;
}

Config Config::from_env() {
  Config c;
  c.debug_level = env_get("MYCOLL_DEBUG");
  c.timeout_s = timeout_from_env();
  c.transport = trim(env_get("MYCOLL_TRANSPORT"));
  c.net = trim(env_get("MYCOLL_NET"));
  c.algo = trim(env_get("MYCOLL_ALGO"));
  c.socket_ifname = trim(env_get("MYCOLL_SOCKET_IFNAME"));
  c.host_id = trim(env_get("MYCOLL_HOST_ID"));
  c.host_nt_copy_bytes =
      parse_bytes(env_get("MYCOLL_HOST_NT_COPY_BYTES"), "MYCOLL_HOST_NT_COPY_BYTES");
  c.shm_fifo_bytes = parse_bytes(env_get("MYCOLL_SHM_FIFO_BYTES"), "MYCOLL_SHM_FIFO_BYTES");
  if (c.shm_fifo_bytes < 4096)
    throw_error(mycollInvalidArgument, "MYCOLL_SHM_FIFO_BYTES must be at least 4K");
  c.shm_read_bytes = parse_bytes(env_get("MYCOLL_SHM_READ_BYTES"), "MYCOLL_SHM_READ_BYTES");
  c.shm_read_bytes_set = std::getenv("MYCOLL_SHM_READ_BYTES") != nullptr;
  c.shm_read_bytes_alltoall = c.shm_read_bytes;
  c.socket_buffer_bytes =
      parse_bytes(env_get("MYCOLL_SOCKET_BUFFER_BYTES"), "MYCOLL_SOCKET_BUFFER_BYTES");
  c.chunk_bytes = parse_bytes(env_get("MYCOLL_CHUNK_BYTES"), "MYCOLL_CHUNK_BYTES");
  c.chunk_bytes_set = std::getenv("MYCOLL_CHUNK_BYTES") != nullptr;
  c.gpu_channels = static_cast<int>(parse_int(env_get("MYCOLL_NCHANNELS"), "MYCOLL_NCHANNELS"));
  if (c.gpu_channels < 1 || c.gpu_channels > 64)
    throw_error(mycollInvalidArgument, "MYCOLL_NCHANNELS must be in 1..64");
  c.gpu_channels_set = std::getenv("MYCOLL_NCHANNELS") != nullptr;
  c.gpu_plan_channels =
      static_cast<int>(parse_int(env_get("MYCOLL_GPU_PLAN_CHANNELS"), "MYCOLL_GPU_PLAN_CHANNELS"));
  if (c.gpu_plan_channels < 1 || c.gpu_plan_channels > 64)
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_PLAN_CHANNELS must be in 1..64");
  c.gpu_slot_bytes = parse_bytes(env_get("MYCOLL_GPU_SLOT_BYTES"), "MYCOLL_GPU_SLOT_BYTES");
  if (c.gpu_slot_bytes < 1024 || c.gpu_slot_bytes % 16 != 0)
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_SLOT_BYTES must be a multiple of 16, >= 1K");
  c.gpu_slots = static_cast<int>(parse_int(env_get("MYCOLL_GPU_SLOTS"), "MYCOLL_GPU_SLOTS"));
  if (c.gpu_slots < 2 || c.gpu_slots > 1024)
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_SLOTS must be in 2..1024");
  c.gpu_channel_bytes =
      parse_bytes(env_get("MYCOLL_GPU_CHANNEL_BYTES"), "MYCOLL_GPU_CHANNEL_BYTES");
  if (c.gpu_channel_bytes == 0) c.gpu_channel_bytes = 1;
  c.gpu_ll_bytes = parse_bytes(env_get("MYCOLL_GPU_LL_BYTES"), "MYCOLL_GPU_LL_BYTES");
  c.gpu_oneshot_bytes =
      parse_bytes(env_get("MYCOLL_GPU_ONESHOT_BYTES"), "MYCOLL_GPU_ONESHOT_BYTES");
  if (c.gpu_oneshot_bytes > (size_t(4) << 20))
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_ONESHOT_BYTES must be at most 4M");
  c.gpu_twoshot_bytes =
      parse_bytes(env_get("MYCOLL_GPU_TWOSHOT_BYTES"), "MYCOLL_GPU_TWOSHOT_BYTES");
  if (c.gpu_twoshot_bytes > (size_t(64) << 20))
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_TWOSHOT_BYTES must be at most 64M");
  c.gpu_ll_coll_bytes =
      parse_bytes(env_get("MYCOLL_GPU_LL_COLL_BYTES"), "MYCOLL_GPU_LL_COLL_BYTES");
  if (c.gpu_ll_coll_bytes > (size_t(16) << 20))
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_LL_COLL_BYTES must be at most 16M");
  const std::string check = trim(env_get("MYCOLL_GPU_CALL_CHECK"));
  if (check != "0" && check != "1" && check != "strict")
    throw_error(mycollInvalidArgument,
                "MYCOLL_GPU_CALL_CHECK='" + check + "' is not 0, 1 or strict");
  c.gpu_call_check = check != "0";
  c.gpu_call_check_strict = check == "strict";
  const std::string pdl = trim(env_get("MYCOLL_GPU_PDL"));
  if (pdl != "0" && pdl != "1")
    throw_error(mycollInvalidArgument, "MYCOLL_GPU_PDL='" + pdl + "' is not 0 or 1");
  c.gpu_pdl = pdl != "0";
  const std::string speed = trim(env_get("MYCOLL_SHM_READ_SPEED_CHECK"));
  if (speed != "0" && speed != "1")
    throw_error(mycollInvalidArgument, "MYCOLL_SHM_READ_SPEED_CHECK='" + speed + "' is not 0 or 1");
  c.shm_read_speed_check = speed != "0";
  c.gpu_ring_bytes = parse_bytes(env_get("MYCOLL_GPU_RING_BYTES"), "MYCOLL_GPU_RING_BYTES");
  c.gpu_direct_bytes = parse_bytes(env_get("MYCOLL_GPU_DIRECT_BYTES"), "MYCOLL_GPU_DIRECT_BYTES");
  std::string proto = trim(env_get("MYCOLL_PROTO"));
  std::transform(proto.begin(), proto.end(), proto.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (proto == "simple") {
    c.gpu_oneshot_bytes = c.gpu_twoshot_bytes = c.gpu_ll_coll_bytes = c.gpu_ll_bytes = 0;
  } else if (proto == "ll") {
    c.gpu_ring_bytes = c.gpu_direct_bytes = 0;
    c.gpu_ll_bytes = size_t(1) << 30;  // capped at what the LL ring holds
  } else if (!proto.empty() && proto != "auto") {
    throw_error(mycollInvalidArgument,
                "MYCOLL_PROTO='" + proto + "' is not a protocol (expected auto, simple or ll)");
  }
  const long long fr = parse_int(env_get("MYCOLL_FLIGHT_RECORDER"), "MYCOLL_FLIGHT_RECORDER");
  if (fr < 0 || fr > 1000000)
    throw_error(mycollInvalidArgument, "MYCOLL_FLIGHT_RECORDER must be in 0..1000000");
  c.flight_ops = static_cast<size_t>(fr);
  c.flight_file = env_get("MYCOLL_FLIGHT_RECORDER_FILE");
  const std::string sig = trim(env_get("MYCOLL_FLIGHT_RECORDER_SIGNAL"));
  if (sig == "USR1" || sig == "SIGUSR1")
    c.flight_signal = SIGUSR1;
  else if (sig == "USR2" || sig == "SIGUSR2")
    c.flight_signal = SIGUSR2;
  else if (!sig.empty())
    c.flight_signal = static_cast<int>(parse_int(sig, "MYCOLL_FLIGHT_RECORDER_SIGNAL"));
  if (c.flight_signal < 0 || c.flight_signal >= NSIG || c.flight_signal == SIGKILL ||
      c.flight_signal == SIGSTOP)
    throw_error(mycollInvalidArgument, "MYCOLL_FLIGHT_RECORDER_SIGNAL='" + sig +
                                           "' is not USR1, USR2 or a catchable signal number");
  c.topo_dump_file = env_get("MYCOLL_TOPO_DUMP_FILE");
  c.ucx = ucx_from_env();
  c.ib = ib_from_env();
  return c;
}

}  // namespace mycoll
