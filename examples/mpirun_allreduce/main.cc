// All-reduce of host buffers across processes started by a launcher.
//
//   mpirun -np 4 -x MYCOLL_ADDR=<rank 0 host>:29555 ./mpirun_allreduce
//
// The program uses no MPI calls: mycollCommInitFromEnv reads the rank and
// size the launcher exports (Open MPI's OMPI_COMM_WORLD_RANK/SIZE, Slurm's
// SLURM_PROCID/NTASKS, torchrun's RANK/WORLD_SIZE, or MYCOLL_RANK/NRANKS)
// and meets the other ranks at MYCOLL_ADDR, where rank 0 listens.
// Every element of every result is checked; exit status 0 means all passed.
#include <mycoll.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool ok(mycollResult_t r, mycollComm_t comm, const char* what) {
  if (r == mycollSuccess) return true;
  std::fprintf(stderr, "%s failed: %s: %s\n", what, mycollGetErrorString(r),
               mycollGetLastError(comm));
  return false;
}

// Inputs whose sums are exact in float: small integers.
float input(int rank, size_t i) { return static_cast<float>((i * 13 + rank * 7) % 101); }

}  // namespace

int main(int argc, char** argv) {
  size_t count = 1000003;  // odd: uneven chunks for every rank count
  int iters = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--count") && i + 1 < argc) {
      count = std::strtoull(argv[++i], nullptr, 10);
    } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--count N] [--iters K]\n", argv[0]);
      return 2;
    }
  }

  mycollComm_t comm = nullptr;
  if (!ok(mycollCommInitFromEnv(&comm), nullptr, "mycollCommInitFromEnv")) return 1;
  int rank = 0, n = 0;
  mycollCommUserRank(comm, &rank);
  mycollCommCount(comm, &n);

  int bad = 0;
  std::vector<float> send(count), recv(count);
  std::vector<int64_t> mx(count);
  for (int it = 0; it < iters && !bad; ++it) {
    // Sum of floats, out of place.
    for (size_t i = 0; i < count; ++i) send[i] = input(rank, i) + static_cast<float>(it);
    if (!ok(mycollAllReduce(send.data(), recv.data(), count, mycollFloat32, mycollSum, comm,
                            nullptr),
            comm, "mycollAllReduce(sum)"))
      return 1;
    for (size_t i = 0; i < count && bad < 5; ++i) {
      float want = 0;
      for (int r = 0; r < n; ++r) want += input(r, i) + static_cast<float>(it);
      if (recv[i] != want) {
        std::fprintf(stderr, "rank %d: sum[%zu] = %g, expected %g\n", rank, i, recv[i], want);
        ++bad;
      }
    }
    // Max of int64, in place.
    for (size_t i = 0; i < count; ++i)
      mx[i] = static_cast<int64_t>((i + static_cast<size_t>(rank) * 31) % 977) - it;
    if (!ok(mycollAllReduce(mx.data(), mx.data(), count, mycollInt64, mycollMax, comm, nullptr),
            comm, "mycollAllReduce(max)"))
      return 1;
    for (size_t i = 0; i < count && bad < 5; ++i) {
      int64_t want = INT64_MIN;
      for (int r = 0; r < n; ++r)
        want = std::max<int64_t>(want, static_cast<int64_t>((i + static_cast<size_t>(r) * 31) % 977) - it);
      if (mx[i] != want) {
        std::fprintf(stderr, "rank %d: max[%zu] = %" PRId64 ", expected %" PRId64 "\n", rank, i,
                     mx[i], want);
        ++bad;
      }
    }
  }
  std::printf("rank %d of %d: %d x all-reduce (sum float32, max int64) of %zu elements: %s\n",
              rank, n, iters, count, bad ? "WRONG" : "OK");
  mycollCommDestroy(comm);
  return bad ? 1 : 0;
}
