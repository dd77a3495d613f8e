// mycoll-perf: nccl-tests-style benchmark of every mycoll collective.
//
//   mycoll-perf all_reduce --np 4 -b 8 -e 128M -f 2         4 local ranks, forked here
//   MYCOLL_ADDR=127.0.0.1:29500 mpirun -np 4 mycoll-perf all_reduce ...   (launcher env)
//   mpirun -np 4 mycoll-perf all_reduce --vs mpi ...        MPI bootstrap + MPI comparison
//   mycoll-perf all_reduce --mem cuda --np 8 --vs nccl ...  8 GPUs, against NCCL
//
// See README.md for every flag and the exact command lines.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "bench.h"
#include "gloo_compare.h"
#include "launch.h"
#include "mpi_compare.h"
#include "options.h"

#ifdef MYCOLL_PERF_CUDA
#include "gpu_launch.h"
#endif

namespace {

using mycoll_perf::Options;

// Under mpirun: MPI_Init, rank 0's unique id broadcast with MPI_Bcast, then
// the benchmark with MPI's equivalents timed in the same processes. MPI is
// the module mycoll-perf-mpi.so, loaded only here (mpi_compare.h).
int run_under_mpi(const Options& o) {
  std::string why;
  const mycoll_perf::MpiApi* mpi = mycoll_perf::load_mpi(&why);
  if (!mpi) {
    std::fprintf(stderr, "mycoll-perf: %s\n", why.c_str());
    return 2;
  }
  if (mpi->init() != 0) {
    std::fprintf(stderr, "mycoll-perf: MPI_Init failed\n");
    return 2;
  }
  const int rank = mpi->rank(), size = mpi->size();
  mycollUniqueId id;
  std::memset(&id, 0, sizeof(id));
  int ok = 1;
  if (rank == 0) {
    mycollResult_t r = mycollGetUniqueId(&id);
    if (r != mycollSuccess) {
      std::fprintf(stderr, "rank 0: %s\n",
                   mycoll_launch::describe(r, "mycollGetUniqueId", nullptr).c_str());
      ok = 0;
    }
  }
  mpi->bcast(&ok, sizeof(ok), 0);
  if (!ok) {
    mpi->finalize();
    return 2;
  }
  mpi->bcast(&id, sizeof(id), 0);
  mycollComm_t comm = nullptr;
#ifdef MYCOLL_PERF_CUDA
  if (o.cuda()) {
    try {
      mycoll_perf::select_local_gpu();  // the communicator binds to the current device
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      mpi->abort(2);
      return 2;
    }
  }
#endif
  mycollResult_t r = mycollCommInitRank(&comm, size, id, rank);
  if (r != mycollSuccess) {
    std::fprintf(stderr, "rank %d: %s\n", rank,
                 mycoll_launch::describe(r, "mycollCommInitRank", nullptr).c_str());
    mpi->abort(2);
    return 2;
  }
  int rc = mycoll_launch::run_rank(comm, [&](mycollComm_t c, int rk, int n) {
    return mycoll_perf::run_benchmark(c, rk, n, o, /*with_mpi=*/true);
  });
  // A failed rank may leave the others inside a collective: end them all.
  const int worst = static_cast<int>(mpi->allreduce(rc, mycoll_perf::MpiAgg::Max));
  mpi->finalize();
  return worst;
}

// NVLink multicast (NVLS) can take the shared GPU hosts down: NCCL must not
// use it. Set before anything can initialise NCCL (children inherit it).
void disable_nvls() {
  const char* v = std::getenv("NCCL_NVLS_ENABLE");
  if (v && std::strcmp(v, "0") != 0)
    std::fprintf(stderr,
                 "mycoll-perf: warning: NCCL_NVLS_ENABLE=%s ignored, forced to 0 (NVLink "
                 "multicast is not allowed on these hosts)\n",
                 v);
  if (!v || std::strcmp(v, "0") != 0) setenv("NCCL_NVLS_ENABLE", "0", 1);
}

// --vs gloo: Gloo connected over the same ranks (gloo_compare.h), then the
// benchmark with Gloo's equivalents timed beside mycoll's.
int run_vs_gloo(mycollComm_t comm, int rank, int nranks, const Options& o) {
  std::string why;
  const mycoll_perf::MpiApi* gloo = mycoll_perf::start_gloo(comm, rank, nranks, &why);
  if (!gloo) {
    std::fprintf(stderr, "mycoll-perf: rank %d: %s\n", rank, why.c_str());
    return 2;
  }
  int rc = mycoll_perf::run_benchmark_vs(comm, rank, nranks, o, gloo);
  mycoll_perf::finish_gloo();
  return rc;
}

// With --vs mpi / --vs gloo, freed memory stays in the process (glibc: no
// mmap'd chunks, no trimming), for both libraries alike;
// MYCOLL_PERF_KEEP_FREED=0 turns that off. Open MPI's large collectives
// allocate and free temporary buffers of their message's size per call;
// given back to the system, the next calls of either library map fresh
// pages, and where a hypervisor shadows page tables (the 2-core VMs of
// docs/performance.md) the next tens of calls ran up to 10x slower: each
// collective's first size after another's 64 MiB, and MPI's own large
// all-reduce, reduce and reduce-scatter (docs/performance.md, "Session 20:
// the first lap"). On by default since session 21: it measures the
// libraries, not the hypervisor's cost of a page's first use.
void keep_freed_memory() {
  const char* v = std::getenv("MYCOLL_PERF_KEEP_FREED");
  if (v != nullptr && std::strcmp(v, "0") == 0) return;
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
}

}  // namespace

int main(int argc, char** argv) {
  // A line per size reaches a log file at once: a run killed by a timeout
  // still shows how far it got.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  disable_nvls();
  Options o;
  int exit_code = 0;
  if (!mycoll_perf::parse_options(argc, argv, &o, &exit_code)) return exit_code;
  // Host buffers want host communicators even on a machine with GPUs.
  if (!o.cuda()) setenv("MYCOLL_HOST_COMM", "1", 0);
  if (o.vs_mpi || o.vs_gloo) keep_freed_memory();

  if (o.vs_mpi) {
    if (o.np > 0) {
      std::fprintf(stderr, "mycoll-perf: --vs mpi runs under mpirun; drop --np\n");
      return 2;
    }
    return run_under_mpi(o);
  }
  if (o.cuda()) {
#ifdef MYCOLL_PERF_CUDA
    return mycoll_perf::run_gpu(o);
#else
    if (o.skip_without_gpu) {
      std::printf("SKIP: no GPU (mycoll-perf built without CUDA)\n");
      return 0;
    }
    std::fprintf(stderr,
                 "mycoll-perf: --mem cuda: built without CUDA (no nvcc at configure time)\n");
    return 2;
#endif
  }
  if (o.np > 0 && o.root >= o.np) {
    std::fprintf(stderr, "mycoll-perf: -r %d is not a rank of --np %d\n", o.root, o.np);
    return 2;
  }
  if (o.np == 0 && !mycoll_launch::launched_by_env())
    std::fprintf(stderr, "mycoll-perf: one rank (use --np N, or a launcher: see README.md)\n");
  return mycoll_launch::launch(o.np, [&](mycollComm_t comm, int rank, int nranks) {
    if (o.vs_gloo) return run_vs_gloo(comm, rank, nranks, o);
    return mycoll_perf::run_benchmark(comm, rank, nranks, o, /*with_mpi=*/false);
  });
}
