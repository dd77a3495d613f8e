#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <map>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "comm/comm.h"
#include "comm/flight_recorder.h"
#include "comm/registry.h"
#include "engine/device_engine.h"
#include "topo/topo.h"
#include "topo/topo_dump.h"

using namespace mycoll;

void mycollComm::fail(mycollResult_t code, const std::string& reason, const Waits& waits) {
  {
    std::lock_guard<std::mutex> g(err_mu);
    if (async_error.load() == mycollSuccess) async_reason = reason;
  }
  int expected = mycollSuccess;
  const bool first = async_error.compare_exchange_strong(expected, code);
  registry_mark_unusable(this);  // calls of count 0 check the slot alone
  // Tell the other ranks why (over the bootstrap links, before the
  // connections close), so they report this cause instead of blaming this
  // rank for closing.
  if (first && bootstrap)
    bootstrap->fail_with(reason.find("rank " + std::to_string(rank)) != std::string::npos
                             ? reason
                             : "rank " + std::to_string(rank) + ": " + reason,
                         waits);
  for (auto& c : conns)
    if (c) c->shutdown();
  if (flight && !flight_dumped.exchange(true)) {
    LogScope scope(&log_tag);
    try {
      log_warn(Subsys::Coll, "flight recorder written to {}", flight_dump(*this, reason));
    } catch (const std::exception& e) {
      log_warn(Subsys::Coll, "{}", e.what());
    }
  }
}

std::string mycollComm::with_remote_cause(const std::string& own, const Waits& waits,
                                          double wait_s) {
  if (!bootstrap) return own;
  const Bootstrap::Cause c = bootstrap->root_cause(waits, wait_s);
  std::string msg = own;
  if (!c.root.empty()) msg += "; root cause: " + c.root;
  if (!c.reports.empty() && c.reports != own)
    msg += (c.root.empty() ? "; first failure, reported by the peers: "
                           : "; reported by the other ranks: ") +
           c.reports;
  if (msg == own) return own;
  std::lock_guard<std::mutex> g(err_mu);
  async_reason = msg;
  return msg;
}

void mycollComm::interrupt() {
  aborted = true;
  registry_mark_unusable(this);
  if (device) device->abort();
  for (auto& c : conns)
    if (c) c->shutdown();
  if (bootstrap) bootstrap->abort();
}

void mycollComm::throw_unusable() const {
  if (aborted.load()) throw_error(mycollInvalidUsage, "communicator was aborted");
  // check_usable saw one of the two set, and neither is ever cleared.
  int e = async_error.load();
  throw_error(static_cast<mycollResult_t>(e),
              "communicator is unusable after an earlier failure: " + async_reason);
}

mycollComm::~mycollComm() {
  magic = 0;
  if (flight) flight_unregister(this);
}

namespace mycoll {

// Settings every rank of a communicator must share (docs/environment.md):
// the connections' (MYCOLL_TRANSPORT, MYCOLL_NET), the plans'
// (MYCOLL_ALGO, MYCOLL_CHUNK_BYTES) and, between GPU ranks, the inbox
// layout's and the kernel choice's (MYCOLL_GPU_*, MYCOLL_PROTO). Ranks that
// differ would run different schedules or lay out their FIFOs differently:
// a wait until MYCOLL_TIMEOUT, or a peer's stores past this rank's inbox.
// So a difference fails the init on every rank (they all see the same
// table), naming the variable and both values. MYCOLL_NCHANNELS is agreed
// instead (the device engine takes the smallest, with a WARN).
namespace {

struct Agreed {
  const char* name;
  bool gpu;  // compared only on GPU communicators
  uint64_t (*of)(const Config&);
  const char* const* spelled = nullptr;  // the value v as the variable spells it: spelled[v]
};

const char* const kCallCheckSpelled[] = {"0", "1", "strict"};

// A Config field as the table compares it.
template <auto kField>
uint64_t field(const Config& c) {
  return static_cast<uint64_t>(c.*kField);
}

const Agreed kAgreed[] = {
    {"MYCOLL_CHUNK_BYTES", false, field<&Config::chunk_bytes>},
    {"MYCOLL_SHM_READ_SPEED_CHECK", false, field<&Config::shm_read_speed_check>},
    {"MYCOLL_GPU_PLAN_CHANNELS", true, field<&Config::gpu_plan_channels>},
    {"MYCOLL_GPU_SLOT_BYTES", true, field<&Config::gpu_slot_bytes>},
    {"MYCOLL_GPU_SLOTS", true, field<&Config::gpu_slots>},
    {"MYCOLL_GPU_CHANNEL_BYTES", true, field<&Config::gpu_channel_bytes>},
    {"MYCOLL_GPU_LL_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_ll_bytes>},
    {"MYCOLL_GPU_ONESHOT_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_oneshot_bytes>},
    {"MYCOLL_GPU_TWOSHOT_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_twoshot_bytes>},
    {"MYCOLL_GPU_LL_COLL_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_ll_coll_bytes>},
    {"MYCOLL_GPU_RING_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_ring_bytes>},
    {"MYCOLL_GPU_DIRECT_BYTES (or MYCOLL_PROTO)", true, field<&Config::gpu_direct_bytes>},
    {"MYCOLL_GPU_CALL_CHECK", true,
     [](const Config& c) {
       return uint64_t(c.gpu_call_check ? (c.gpu_call_check_strict ? 2 : 1) : 0);
     },
     kCallCheckSpelled},
};
constexpr size_t kNumAgreed = std::size(kAgreed);

// What MYCOLL_ALGO forces, per collective (-1: the automatic rule), packed:
// spellings that force the same ("Ring" and "ring", "auto" and unset) agree.
uint64_t forced_algos(const AlgoPolicy& p) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the per-collective choices
  for (int k = 0; k < kNumColls; ++k) {
    const Coll coll = static_cast<Coll>(k);
    const int a = p.forced(coll) ? static_cast<int>(p.choose(coll, 2, 0)) : -1;
    h = (h ^ static_cast<uint64_t>(a + 1)) * 0x100000001b3ull;
  }
  return h;
}

// A value as the variable spells it.
std::string shown(const Agreed& a, uint64_t v) {
  return a.spelled ? a.spelled[v] : std::to_string(v);
}

std::string quoted(const char* s) { return std::string("'") + s + "'"; }

}  // namespace

static void check_consistent_config(mycollComm& c) {
  struct Fingerprint {
    char transport[32];
    char net[16];
    char algo[64];       // for the message (a longer value is cut)
    uint64_t algo_hash;  // what it forces (forced_algos)
    uint64_t values[kNumAgreed];
  } mine{};
  std::strncpy(mine.transport, c.cfg.transport.c_str(), sizeof(mine.transport) - 1);
  std::strncpy(mine.net, c.cfg.net.c_str(), sizeof(mine.net) - 1);
  std::strncpy(mine.algo, c.cfg.algo.c_str(), sizeof(mine.algo) - 1);
  mine.algo_hash = forced_algos(c.algo);
  for (size_t k = 0; k < kNumAgreed; ++k) mine.values[k] = kAgreed[k].of(c.cfg);
  std::vector<Fingerprint> all(c.nranks);
  all[c.rank] = mine;
  c.bootstrap->allgather(all.data(), sizeof(Fingerprint));
  auto differ = [&](const std::string& what, const std::string& here, int r,
                    const std::string& there) {
    throw_error(mycollInvalidUsage, what + " differs between ranks: this rank has " + here +
                                        ", rank " + std::to_string(r) + " has " + there +
                                        "; set it alike on every rank of the communicator");
  };
  const bool gpu_here = c.cuda_device >= 0;
  for (int r = 0; r < c.nranks; ++r) {
    // Every rank drives a GPU or none does: a GPU rank's device setup is
    // collective over the communicator, and the kernels need a peer kernel.
    if ((c.peers[r].cuda_device >= 0) != gpu_here)
      throw_error(mycollInvalidUsage,
                  std::string("this rank ") + (gpu_here ? "drives a GPU" : "uses host memory") +
                      " and rank " + std::to_string(r) + (gpu_here ? " host memory" : " a GPU") +
                      ": a communicator's ranks must all use GPUs or all host memory "
                      "(MYCOLL_HOST_COMM=1 on some ranks only, or a rank that sees no GPU?)");
    const Fingerprint& f = all[r];
    if (std::strncmp(f.transport, mine.transport, sizeof(mine.transport)) != 0 ||
        std::strncmp(f.net, mine.net, sizeof(mine.net)) != 0)
      differ("MYCOLL_TRANSPORT/MYCOLL_NET", quoted(mine.transport) + "/" + quoted(mine.net), r,
             quoted(f.transport) + "/" + quoted(f.net));
    if (f.algo_hash != mine.algo_hash)
      differ("MYCOLL_ALGO (NCCL_ALGO sets it through libnccl.so.2)", quoted(mine.algo), r,
             quoted(f.algo));
    for (size_t k = 0; k < kNumAgreed; ++k)  // every rank is a GPU rank or none is (above)
      if (f.values[k] != mine.values[k] && (!kAgreed[k].gpu || gpu_here))
        differ(kAgreed[k].name, shown(kAgreed[k], mine.values[k]), r,
               shown(kAgreed[k], f.values[k]));
  }
}

// This rank's process_vm_readv speed check in thousandths of memcpy's speed
// (MYCOLL_SHM_READ_SPEED_CHECK), or -1 where it takes no part: a GPU rank,
// MYCOLL_SHM_READ_BYTES given, no shm peer, or process_vm_readv failing.
static int32_t read_speed_permille(const mycollComm& c) {
  if (!c.cfg.shm_read_speed_check || c.cfg.shm_read_bytes_set || c.cuda_device >= 0) return -1;
  bool shm_peer = false;
  for (int r = 0; r < c.nranks; ++r) shm_peer |= r != c.rank && c.transport_of[r] == "shm";
  if (!shm_peer) return -1;
  const double ratio = shm_read_speed_ratio();
  if (ratio < 0) return -1;
  return static_cast<int32_t>(std::min(ratio, 100.0) * 1000.0 + 0.5);
}

static void connect_host_transports(mycollComm& c) {
  c.conns.resize(c.nranks);
  // Every rank runs every host transport's connect, in the same order,
  // since connect is collective.
  const std::pair<const char*, std::unique_ptr<Transport> (*)()> kinds[] = {
      {"shm", &make_shm_transport},
      {"socket", &make_socket_transport},
      {"ib", &make_ib_transport},
      {"ucx", &make_ucx_transport}};
  // Which transports any rank uses (so every rank joins the same connects).
  std::vector<char> used(std::size(kinds), 0), all_used(std::size(kinds) * c.nranks, 0);
  for (size_t k = 0; k < std::size(kinds); ++k)
    for (int r = 0; r < c.nranks; ++r)
      if (c.transport_of[r] == kinds[k].first) used[k] = 1;
  std::copy(used.begin(), used.end(), all_used.begin() + c.rank * used.size());
  c.bootstrap->allgather(all_used.data(), used.size());
  for (size_t k = 0; k < std::size(kinds); ++k) {
    const auto& [name, make] = kinds[k];
    bool anyone = false;
    for (int r = 0; r < c.nranks; ++r) anyone |= all_used[r * used.size() + k] != 0;
    if (!anyone) continue;
    std::vector<int> peers;
    for (int r = 0; r < c.nranks; ++r)
      if (c.transport_of[r] == name) peers.push_back(r);
    auto t = make();
    auto conns = t->connect(*c.bootstrap, c.peers, peers, c.cfg);
    for (size_t i = 0; i < peers.size(); ++i) c.conns[peers[i]] = std::move(conns[i]);
  }
}

Plan comm_build_plan(const mycollComm& c, Algo algo, CollArgs a) {
  // Collectives whose buffers are laid out by rank keep rank order.
  const bool reorder = !coll_is_blocked(a.coll) && a.coll != Coll::SendRecv;
  if (!reorder || c.vrank_of.empty()) {
    if (!c.host_of_rank.empty()) a.host_of = c.host_of_rank.data();
    return build_plan(algo, a);
  }
  a.host_of = c.host_of_vrank.data();
  a.rank = c.vrank_of[a.rank];
  a.root = c.vrank_of[a.root];
  Plan p = build_plan(algo, a);
  for (Step& s : p.steps)
    for (Op& op : s.ops)
      if (op.peer >= 0) op.peer = c.rank_at[op.peer];
  return p;
}

std::string comm_id_text(uint64_t id) { return fmt::format("{:08x}", id & 0xffffffffu); }

// A few sizes' automatic choice for all-reduce, for the init summary.
static std::string algo_summary(const mycollComm& c) {
  std::string s = c.cfg.algo.empty() ? "auto" : c.cfg.algo;
  s += " (all_reduce";
  for (size_t bytes : {size_t(8), size_t(64) << 10, size_t(16) << 20})
    s += fmt::format(" {}:{}",
                     bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "M"
                     : bytes >= 1024     ? std::to_string(bytes >> 10) + "K"
                                         : std::to_string(bytes) + "B",
                     algo_name(c.device ? c.device->choose_algo(c.algo, Coll::AllReduce, bytes)
                                        : c.algo.choose(Coll::AllReduce, c.nranks, bytes)));
  return s + ")";
}

static std::string transport_summary(const mycollComm& c) {
  std::map<std::string, int> count;
  for (int r = 0; r < c.nranks; ++r)
    if (r != c.rank) ++count[c.transport_of[r]];
  std::string s;
  for (const auto& [name, n] : count) s += fmt::format("{}{}:{}", s.empty() ? "" : ",", name, n);
  return s.empty() ? "none" : s;
}

std::unique_ptr<mycollComm> comm_create(const UniqueIdData& id, int nranks, int rank,
                                        int cuda_device, const mycollComm* parent,
                                        CancelFlag cancel, const CommOptions* opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto c = std::make_unique<mycollComm>();
  c->rank = rank;
  c->nranks = nranks;
  c->cuda_device = cuda_device;
  c->parent_id = parent ? parent->id : 0;
  c->log_tag = fmt::format("rank {}/{}", rank, nranks);  // the id comes with the rendezvous
  LogScope scope(&c->log_tag);
  log_set_rank(rank);       // MYCOLL_DEBUG_FILE with %r
  warn_unknown_env_once();  // MYCOLL_* typos
  c->cfg = Config::from_env();
  c->opts = opts ? *opts : parent ? parent->opts : CommOptions{};
  c->algo = AlgoPolicy::parse(c->cfg.algo);
  c->p2p_sent.assign(nranks, 0);
  c->p2p_recvd.assign(nranks, 0);
  c->bootstrap =
      Bootstrap::init(id, rank, nranks, c->cfg.timeout_s, c->cfg.socket_ifname, std::move(cancel));
  // Every rank got the same fresh random tag from the root: mix it into an id.
  uint64_t h = c->bootstrap->tag() + 0x9e3779b97f4a7c15ull;
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  c->id = h ^ (h >> 31);
  c->log_tag = fmt::format("comm {} rank {}/{}", comm_id_text(c->id), rank, nranks);
  if (parent)
    log_info(Subsys::Init, "split from comm {} (rank {} there)", comm_id_text(parent->id),
             parent->rank);

  c->peers.resize(nranks);
  c->peers[rank] = local_peer_info(rank, cuda_device, c->bootstrap->local_ip(), c->cfg);
  if (cuda_device >= 0) c->peers[rank].gpu_bus_id = device_bus_id(cuda_device);
  c->bootstrap->allgather(c->peers.data(), sizeof(PeerInfo));
  for (int r = 0; r < nranks; ++r) {  // every rank sees the same table: all refuse together
    std::string why;
    if (!check_peer_info(c->peers[r], r, &why)) throw_error(mycollRemoteError, why);
  }
  check_consistent_config(*c);
  c->transport_of = select_transports(c->cfg, c->peers, rank);
  {
    // Oversubscription is judged per host from every rank's affinity mask:
    // ranks bound to a core each (mpirun, srun --cpu-bind) are not
    // oversubscribed; ranks confined to fewer CPUs than there are of them
    // are, whatever the machine has.
    // With it goes each rank's process_vm_readv speed check (-1: none).
    struct HostFacts {
      CpuMask mask;
      int32_t read_permille;
      int32_t unused;
    };
    std::vector<HostFacts> facts(nranks);
    facts[rank].mask = local_cpu_mask();
    facts[rank].read_permille = read_speed_permille(*c);
    c->bootstrap->allgather(facts.data(), sizeof(HostFacts));
    std::vector<CpuMask> masks(nranks);
    for (int r = 0; r < nranks; ++r) masks[r] = facts[r].mask;
    std::vector<int> cpus;
    const std::vector<char> over = oversubscribed_hosts(c->peers, masks, &cpus);
    c->host_oversubscribed = over[rank];
    // Each host's speed checks, and its verdict (the median), the same on
    // every rank since every rank has every rank's facts.
    auto host_of = [&](int r) {
      const char* id = c->peers[r].host_id;
      return std::string(id, strnlen(id, sizeof(c->peers[r].host_id)));
    };
    std::map<std::string, std::vector<int32_t>> speeds_of_host;
    for (int r = 0; r < nranks; ++r) speeds_of_host[host_of(r)].push_back(facts[r].read_permille);
    std::map<std::string, int32_t> median_of_host;
    for (const auto& [host, speeds] : speeds_of_host)
      median_of_host[host] = Config::read_speed_median(speeds);
    const int local = static_cast<int>(speeds_of_host[host_of(rank)].size());  // ranks here
    // Each rank decides for what it sends; cfg is this communicator's own
    // (read at its init), so nothing else sees the lowered thresholds.
    c->cfg.shm_read_bytes_alltoall = c->cfg.shm_read_bytes_alltoall_for(local, cpus[rank]);
    c->cfg.shm_read_bytes = c->cfg.shm_read_bytes_for(over[rank]);
    const int32_t median = median_of_host[host_of(rank)];
    if (median >= 0) {
      const bool slow = c->cfg.apply_read_speed(median);
      log_info(Subsys::Tuning,
               "rank {}: process_vm_readv copies at {:.2f} of memcpy's speed on this host "
               "(median of its ranks' checks, MYCOLL_SHM_READ_SPEED_CHECK){}",
               rank, median / 1000.0,
               slow ? fmt::format(": below {:.2f}, so shm messages go through the FIFO at "
                                  "every size (MYCOLL_SHM_READ_BYTES sets a threshold)",
                                  Config::kSlowReadPermille / 1000.0)
                    : fmt::format(": {:.2f} or more, so large shm messages are read single copy",
                                  Config::kSlowReadPermille / 1000.0));
    }
    // Every rank must choose the same algorithm, so the rule switches when
    // any host of a host communicator is oversubscribed (hosts may differ
    // in ranks and cores).
    bool any = false;
    for (int r = 0; r < nranks; ++r) {
      if (!over[r] || c->peers[r].cuda_device >= 0) continue;
      any = true;
      const int32_t m = median_of_host[host_of(r)];
      c->broadcast_big_chunks |= m < 0 || m >= Config::kSlowReadPermille;
    }
    if (over[rank]) {
      std::string read;
      if (!c->cfg.shm_read_bytes_set)
        read = c->cfg.shm_read_bytes == 0 && c->cfg.shm_read_bytes_alltoall == 0
                   ? std::string("; shm single copy off (process_vm_readv is slow here)")
               : c->cfg.shm_read_bytes_alltoall == c->cfg.shm_read_bytes
                   ? fmt::format("; shm single copy from {} B", c->cfg.shm_read_bytes)
                   : fmt::format("; shm single copy from {} B (all-to-all from {} B)",
                                 c->cfg.shm_read_bytes, c->cfg.shm_read_bytes_alltoall);
      log_info(Subsys::Tuning, "rank {}: {} ranks on this host may run on {} CPUs{}", rank, local,
               cpus[rank], read);
    }
    if (any) {
      // What follows from it is the same on every rank, so every rank says
      // it (on a host with a CPU per rank too).
      c->algo.set_oversubscribed(true);
      const size_t big = Config::broadcast_chunk_bytes_oversubscribed(c->cfg.chunk_bytes);
      log_info(Subsys::Tuning,
               "rank {}: a host of this communicator has more ranks than CPUs: automatic "
               "all-reduce prefers fewer steps{}",
               rank,
               c->cfg.chunk_bytes_set || big == c->cfg.chunk_bytes || !c->broadcast_big_chunks
                   ? ""
                   : fmt::format("; broadcasts of {} B or more in chunks of {} B", 2 * big, big));
    }
  }
  // Host memory, and whether every pair talks over shm: the same answer on
  // every rank (the transport of a pair is chosen alike at both ends, from
  // settings init checks are alike).
  bool host_memory = true, all_shm = true;
  for (int r = 0; r < nranks; ++r) {
    host_memory &= c->peers[r].cuda_device < 0;
    all_shm &= r == rank || c->transport_of[r] == "shm";
  }
  using Links = AlgoPolicy::HostLinks;
  c->algo.set_host_links(!host_memory ? Links::None : all_shm ? Links::Shm : Links::Network);
  std::vector<int> order = host_major_order(c->peers);
  const int nhosts = count_hosts(c->peers);
  c->algo.set_hosts(nhosts);
  if (nhosts > 1) {
    c->host_of_rank.assign(nranks, 0);
    c->host_of_vrank.assign(nranks, 0);
    for (int v = 1; v < nranks; ++v) {
      bool same = std::strncmp(c->peers[order[v]].host_id, c->peers[order[v - 1]].host_id,
                               sizeof(c->peers[0].host_id)) == 0;
      c->host_of_vrank[v] = c->host_of_vrank[v - 1] + (same ? 0 : 1);
    }
    for (int v = 0; v < nranks; ++v) c->host_of_rank[order[v]] = c->host_of_vrank[v];
  }
  bool identity = true;
  for (int v = 0; v < nranks; ++v) identity &= order[v] == v;
  if (!identity) {
    c->rank_at = order;
    c->vrank_of.assign(nranks, 0);
    for (int v = 0; v < nranks; ++v) c->vrank_of[order[v]] = v;
    std::string s;
    for (int r : order) s += (s.empty() ? "" : " ") + std::to_string(r);
    log_info(Subsys::Init,
             "rank {}: ranks interleave hosts; rings/chains/trees of allreduce, "
             "broadcast and reduce follow host-major order: {}",
             rank, s);
  }
  connect_host_transports(*c);
  if (cuda_device >= 0) {
    c->device = DeviceComm::create(*c);
  } else if (c->opts.max_blocks > 0) {
    log_info(Subsys::Init,
             "rank {}: a cap of {} thread blocks per kernel (ncclConfig_t.maxCTAs, "
             "NCCL_MAX_CTAS or NCCL_MAX_NCHANNELS) has no effect on a host communicator",
             rank, c->opts.max_blocks);
  }

  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    std::string how = c->conns[r] ? c->conns[r]->describe() : c->transport_of[r];
    if (c->device && c->transport_of[r] == "cuda_ipc") how = c->device->describe_peer(r);
    log_info(Subsys::Transport, "-> rank {} ({}): {}", r, c->peers[r].hostname, how);
  }
  maybe_dump_topology(*c);  // MYCOLL_TOPO_DUMP_FILE
  if (c->cfg.flight_ops > 0) {
    c->flight = std::make_unique<FlightRecorder>(c->cfg.flight_ops);
    flight_register(c.get());
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const std::string dev = cuda_device < 0 ? std::string("none")
                                          : fmt::format("cuda:{} bus {}", cuda_device,
                                                        bus_id_text(c->peers[rank].gpu_bus_id));
  log_info(Subsys::Init,
           "Init COMPLETE comm {} rank {} nranks {}{} device {} host {} pid {} hosts {} "
           "mycoll {}.{}.{} transports {} algorithms {} in {:.1f} ms",
           comm_id_text(c->id), rank, nranks,
           parent ? " parent " + comm_id_text(parent->id) : std::string(), dev,
           c->peers[rank].hostname, getpid(), nhosts, MYCOLL_MAJOR, MYCOLL_MINOR, MYCOLL_PATCH,
           transport_summary(*c), algo_summary(*c), ms);
  return c;
}

}  // namespace mycoll
