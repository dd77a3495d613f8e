#include "gpu_launch.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "launch.h"
#include "nccl_compare.h"

namespace mycoll_perf {
namespace {

using mycoll_launch::describe;
using mycoll_launch::must;
using mycoll_launch::Share;

constexpr double kRelayTimeoutS = 300;  // env mode: the id broadcast

void cuda_must(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw std::runtime_error(what + " failed: " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ")");
}

// Polls until stream's work is done; throws after timeout_s.
void sync_stream(cudaStream_t s, double timeout_s, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) cuda_must(e, what);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s)
      throw std::runtime_error(std::string(what) + ": not complete after " +
                               std::to_string(static_cast<int>(timeout_s)) + " s");
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

// Number of GPUs, counted in a forked child so that this process has made
// no CUDA call when it forks the ranks. 0 when there is no driver or GPU.
int probe_gpus() {
  int n = 0;
  bool ok = mycoll_launch::run_in_child(
      [] {
        int c = 0;
        if (cudaGetDeviceCount(&c) != cudaSuccess) c = 0;
        return std::min(c, 250);
      },
      &n);
  return ok ? n : 0;
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string topology(int nprocs, const Options& o) {
  return plural(nprocs, "process", "processes") + " x " + plural(o.threads, "thread", "threads") +
         " x " + plural(o.gpus, "GPU", "GPUs");
}

// Too few GPUs: "SKIP: ..." and 0 with --skip-without-gpu, else an error.
int not_enough_gpus(const Options& o, int have, int need, const std::string& why) {
  if (o.skip_without_gpu) {
    if (have <= 0)
      std::printf("SKIP: no GPU\n");
    else
      std::printf("SKIP: %d GPUs needed (%s), %d present\n", need, why.c_str(), have);
    return 0;
  }
  std::fprintf(stderr, "mycoll-perf: --mem cuda needs %d GPUs (%s), %d present\n", need,
               why.c_str(), have);
  return 2;
}

struct Proc {
  int proc = 0, nprocs = 1;
  int first_dev = 0;                // this process' first local GPU
  int ngpus = 1;                    // GPUs present: slots wrap round-robin over them
  Share share;                      // process 0 -> every process
  mycollComm_t env_comm = nullptr;  // launcher mode: this process' communicator (rank = proc)
};

// What process 0 made for every rank.
struct Ids {
  bool mycoll_init_all = false;   // mycollCommInitAll (one process, one thread)
  bool mycoll_reuse_env = false;  // the process communicator is the only rank's
  mycollUniqueId mycoll{};
  bool nccl_init_all = false;
  NcclUniqueId nccl{};
};

// mycollCommInitRank for every slot, each on its device; several at once
// from helper threads (each blocks until every rank joined).
void init_mycoll_ranks(std::vector<RankSlot>& slots, int world, const mycollUniqueId& id) {
  std::vector<std::string> errs(slots.size());
  auto init = [&](size_t g) {
    cudaError_t e = cudaSetDevice(slots[g].device);
    if (e != cudaSuccess) {
      errs[g] = std::string("cudaSetDevice(") + std::to_string(slots[g].device) +
                ") failed: " + cudaGetErrorString(e);
      return;
    }
    mycollResult_t r = mycollCommInitRank(&slots[g].comm, world, id, slots[g].rank);
    if (r != mycollSuccess) errs[g] = describe(r, "mycollCommInitRank", nullptr);
  };
  if (slots.size() == 1) {
    init(0);
  } else {
    std::vector<std::thread> th;
    for (size_t g = 0; g < slots.size(); ++g) th.emplace_back(init, g);
    for (auto& t : th) t.join();
  }
  for (size_t g = 0; g < slots.size(); ++g)
    if (!errs[g].empty())
      throw std::runtime_error("rank " + std::to_string(slots[g].rank) + ": " + errs[g]);
}

void init_nccl(std::vector<RankSlot>& slots, int world, const Ids& ids) {
  const NcclApi& a = nccl_api();
  std::vector<NcclComm> comms(slots.size(), nullptr);
  std::vector<int> devs;
  for (const RankSlot& s : slots) devs.push_back(s.device);
  if (ids.nccl_init_all) {
    nccl_must(a.CommInitAll(comms.data(), static_cast<int>(devs.size()), devs.data()),
              "ncclCommInitAll", nullptr);
  } else {
    nccl_must(a.GroupStart(), "ncclGroupStart (init)", nullptr);
    int first = 0;
    for (size_t g = 0; g < slots.size() && first == 0; ++g) {
      cuda_must(cudaSetDevice(slots[g].device), "cudaSetDevice");
      first = a.CommInitRank(&comms[g], world, ids.nccl, slots[g].rank);
    }
    int end = a.GroupEnd();
    nccl_must(first, "ncclCommInitRank (rank " + std::to_string(slots[0].rank) + ")", nullptr);
    nccl_must(end, "ncclGroupEnd (ncclCommInitRank of rank " + std::to_string(slots[0].rank) + ")",
              nullptr);
  }
  for (size_t g = 0; g < slots.size(); ++g) slots[g].nccl = comms[g];
}

// One thread: its G ranks, their communicators, the benchmark, teardown.
int run_thread(const Options& o, const Proc& pc, int t, const Ids& ids) {
  const int T = o.threads, G = o.gpus, world = pc.nprocs * T * G;
  std::vector<RankSlot> slots(G);
  for (int g = 0; g < G; ++g) {
    slots[g].rank = (pc.proc * T + t) * G + g;
    slots[g].device = (pc.first_dev + t * G + g) % pc.ngpus;
  }
  int rc = 2;
  bool failed = true;
  try {
    cuda_must(cudaSetDevice(slots[0].device), "cudaSetDevice");
    if (ids.mycoll_reuse_env) {
      slots[0].comm = pc.env_comm;
    } else if (ids.mycoll_init_all) {
      std::vector<mycollComm_t> comms(G, nullptr);
      std::vector<int> devs;
      for (const RankSlot& s : slots) devs.push_back(s.device);
      must(mycollCommInitAll(comms.data(), G, devs.data()), "mycollCommInitAll", nullptr);
      for (int g = 0; g < G; ++g) slots[g].comm = comms[g];
    } else {
      init_mycoll_ranks(slots, world, ids.mycoll);
    }
    if (o.vs_nccl) init_nccl(slots, world, ids);
    BenchSetup setup;
    setup.slots = slots;
    setup.nranks = world;
    setup.topology = topology(pc.nprocs, o);
    setup.with_nccl = o.vs_nccl;
    rc = run_benchmark(setup, o);
    failed = false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", slots[0].rank, e.what());
  }
  // After a failure peers may be gone or stuck: abort rather than destroy.
  if (o.vs_nccl) {
    const NcclApi& a = nccl_api();
    for (RankSlot& s : slots) {
      if (!s.nccl) continue;
      if (!failed)
        a.CommDestroy(s.nccl);
      else if (a.CommAbort)
        a.CommAbort(s.nccl);
    }
  }
  // mycollCommDestroy may wait for the other ranks (it does in this
  // library): a thread's ranks are torn down concurrently, one helper thread
  // each, as they were created.
  auto teardown = [&](RankSlot& s) {
    if (!s.comm || s.comm == pc.env_comm) return;
    cudaSetDevice(s.device);
    if (failed)
      mycollCommAbort(s.comm);
    else
      mycollCommDestroy(s.comm);
  };
  if (slots.size() == 1) {
    teardown(slots[0]);
  } else {
    std::vector<std::thread> th;
    for (RankSlot& s : slots) th.emplace_back(teardown, std::ref(s));
    for (auto& x : th) x.join();
  }
  return rc;
}

// Everything one process does once its place (proc, first GPU) is known.
int process_main(const Options& o, const Proc& pc) {
  const int T = o.threads, G = o.gpus;
  cuda_must(cudaSetDevice(pc.first_dev), "cudaSetDevice(" + std::to_string(pc.first_dev) + ")");
  Ids ids;
  ids.mycoll_init_all = pc.nprocs == 1 && T == 1 && G > 1 && !pc.env_comm;
  ids.mycoll_reuse_env = pc.env_comm && T * G == 1;
  // Every process takes the same branches in the same order, so each
  // share() has its partner call everywhere.
  if (!ids.mycoll_init_all && !ids.mycoll_reuse_env) {
    if (pc.proc == 0) must(mycollGetUniqueId(&ids.mycoll), "mycollGetUniqueId", nullptr);
    if (!pc.share(&ids.mycoll, sizeof(ids.mycoll)))
      throw std::runtime_error("process " + std::to_string(pc.proc) +
                               ": relaying mycoll's unique id failed");
  }
  if (o.vs_nccl) {
    const NcclApi& a = nccl_api();  // a missing NCCL fails every process here, alike
    ids.nccl_init_all = pc.nprocs == 1 && T == 1;
    if (!ids.nccl_init_all) {
      if (pc.proc == 0) nccl_must(a.GetUniqueId(&ids.nccl), "ncclGetUniqueId", nullptr);
      if (!pc.share(&ids.nccl, sizeof(ids.nccl)))
        throw std::runtime_error("process " + std::to_string(pc.proc) +
                                 ": relaying NCCL's unique id failed");
    }
  }
  std::vector<int> rcs(T, 2);
  if (T == 1) {
    rcs[0] = run_thread(o, pc, 0, ids);
  } else {
    std::vector<std::thread> threads;
    for (int t = 0; t < T; ++t)
      threads.emplace_back([&, t] { rcs[t] = run_thread(o, pc, t, ids); });
    for (auto& th : threads) th.join();
  }
  return *std::max_element(rcs.begin(), rcs.end());
}

// Launcher mode: one process per launcher rank.
int run_env(const Options& o) {
  const int per = o.threads * o.gpus;
  int have = 0;
  if (cudaGetDeviceCount(&have) != cudaSuccess) have = 0;
  int local = mycoll_launch::env_local_rank();
  if (local < 0) {
    const int r = std::max(0, mycoll_launch::env_rank());
    local = have >= per ? r % (have / per) : 0;
    std::fprintf(stderr,
                 "mycoll-perf: no local rank in the environment (LOCAL_RANK, "
                 "OMPI_COMM_WORLD_LOCAL_RANK, ...): rank %d uses local slot %d\n",
                 r, local);
  }
  if (have < 1)
    return not_enough_gpus(
        o, have, (local + 1) * per,
        "local rank " + std::to_string(local) + " x " + std::to_string(per) + " per process");
  if ((local + 1) * per > have)
    std::fprintf(stderr,
                 "mycoll-perf: local rank %d shares a GPU with other ranks (%d GPU(s)): "
                 "timings measure a shared GPU\n",
                 local, have);
  Proc pc;
  pc.ngpus = have;
  pc.first_dev = (local * per) % have;
  cuda_must(cudaSetDevice(pc.first_dev), "cudaSetDevice");
  mycollResult_t r = mycollCommInitFromEnv(&pc.env_comm);
  if (r != mycollSuccess) {
    std::fprintf(stderr, "%s\n", describe(r, "mycollCommInitFromEnv", nullptr).c_str());
    return 2;
  }
  int rc = 2;
  try {
    must(mycollCommUserRank(pc.env_comm, &pc.proc), "mycollCommUserRank", pc.env_comm);
    must(mycollCommCount(pc.env_comm, &pc.nprocs), "mycollCommCount", pc.env_comm);
    // Relay = a broadcast from process 0 on the process communicator.
    pc.share = [&pc](void* data, size_t bytes) {
      void* buf = nullptr;
      cudaStream_t s = nullptr;
      bool ok = false;
      try {
        cuda_must(cudaSetDevice(pc.first_dev), "cudaSetDevice");
        cuda_must(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        cuda_must(cudaMalloc(&buf, bytes), "cudaMalloc");
        // On s: a plain cudaMemcpy may return before its DMA lands, and
        // s (non-blocking) would not wait for it. data outlives the sync.
        cuda_must(cudaMemcpyAsync(buf, data, bytes, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
        must(mycollBroadcast(buf, buf, bytes, mycollUint8, 0, pc.env_comm,
                             reinterpret_cast<mycollStream_t>(s)),
             "mycollBroadcast (id relay)", pc.env_comm);
        sync_stream(s, kRelayTimeoutS, "id relay (mycollBroadcast)");
        cuda_must(cudaMemcpy(data, buf, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
        ok = true;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "process %d: %s\n", pc.proc, e.what());
      }
      if (buf) cudaFree(buf);
      if (s) cudaStreamDestroy(s);
      return ok;
    };
    rc = process_main(o, pc);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "process %d: %s\n", pc.proc, e.what());
  }
  if (rc == 2)
    mycollCommAbort(pc.env_comm);
  else
    mycollCommDestroy(pc.env_comm);
  return rc;
}

}  // namespace

void select_local_gpu() {
  int have = 0;
  cuda_must(cudaGetDeviceCount(&have), "cudaGetDeviceCount");
  int local = mycoll_launch::env_local_rank();
  if (local < 0) local = std::max(0, mycoll_launch::env_rank());
  if (have <= 0) throw std::runtime_error("--mem cuda: no GPU");
  cuda_must(cudaSetDevice(local % have), "cudaSetDevice");
}

int run_gpu(const Options& o) {
  if (o.np == 0 && mycoll_launch::launched_by_env()) return run_env(o);
  const int np = o.np > 0 ? o.np : 1;
  const int per = o.threads * o.gpus;
  const int have = probe_gpus();  // in a child: no CUDA call here before forking
  if (have < 1) return not_enough_gpus(o, have, np * per, topology(np, o));
  if (have < np * per) {
    // Ranks round-robin over the GPUs present (rank r on GPU r % have).
    if (o.vs_nccl) {
      std::fprintf(stderr,
                   "mycoll-perf: --vs nccl needs a GPU per rank (%d ranks, %d GPUs): NCCL refuses "
                   "ranks sharing a GPU; run without --vs nccl to measure mycoll alone\n",
                   np * per, have);
      return 2;
    }
    std::printf(
        "# %d ranks on %d GPU(s): ranks share GPUs round-robin, so these timings measure "
        "a shared GPU (correctness and development, not speed)\n",
        np * per, have);
    std::fflush(stdout);
  }
  auto body = [&o, per, have](int proc, int nprocs, const Share& share) {
    Proc pc;
    pc.proc = proc;
    pc.nprocs = nprocs;
    pc.ngpus = have;
    pc.first_dev = (proc * per) % have;
    pc.share = share;
    return process_main(o, pc);
  };
  if (o.np > 0) return mycoll_launch::fork_procs(o.np, body);
  try {
    return body(0, 1, [](void*, size_t) { return true; });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mycoll-perf: %s\n", e.what());
    return 2;
  }
}

}  // namespace mycoll_perf
