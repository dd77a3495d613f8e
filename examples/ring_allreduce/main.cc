// ring_allreduce: runs the hand-written ring all-reduce (ring.cc) on float32
// host buffers and checks it element by element against mycollAllReduce and
// against an exact reference.
//
//   ring_allreduce --np 4 [--count N]      4 local ranks, forked by the program
//   mpirun -np 4 -x MYCOLL_ADDR=127.0.0.1:29500 ring_allreduce [--count N]
//
// Exit status 0 when every rank printed OK.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"
#include "launch.h"
#include "ring.h"

namespace {

using mycoll_launch::must;
using ring_example::input_value;

int rank_main(mycollComm_t comm, int rank, int nranks, size_t count) {
  std::vector<float> send(count), ring_out(count, -1000.f), lib_out(count, -2000.f);
  std::vector<float> in_place(count);
  for (size_t i = 0; i < count; ++i) {
    send[i] = input_value(rank, i);
    in_place[i] = send[i];
  }
  std::vector<float> scratch(count / nranks + 1);
  const ring_example::RingOps ops = ring_example::host_ring_ops();

  // Out of place, then in place (sendbuff == recvbuff).
  must(ring_example::ring_allreduce(send.data(), ring_out.data(), scratch.data(), count, comm,
                                    nullptr, ops),
       "ring_allreduce (out of place)", comm);
  must(ring_example::ring_allreduce(in_place.data(), in_place.data(), scratch.data(), count, comm,
                                    nullptr, ops),
       "ring_allreduce (in place)", comm);
  // The library's own all-reduce on the same input.
  must(mycollAllReduce(send.data(), lib_out.data(), count, mycollFloat32, mycollSum, comm, nullptr),
       "mycollAllReduce", comm);

  const size_t wrong = ring_example::verify(rank, nranks, send, ring_out, in_place, lib_out);
  if (wrong == 0)
    std::printf("rank %d/%d: OK (%zu floats, ring == mycollAllReduce == exact)\n", rank, nranks,
                count);
  std::fflush(stdout);
  return wrong == 0 ? 0 : 1;
}

void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s [--np N] [--count N]\n"
               "  --np N      fork N local ranks (default: 1 rank, or the launcher's ranks when\n"
               "              MYCOLL_RANK/RANK/OMPI_COMM_WORLD_RANK/... is set)\n"
               "  --count N   float32 elements per rank (default 1048579)\n",
               prog);
}

}  // namespace

int main(int argc, char** argv) {
  long long np = 0, count = 1048579;  // not a multiple of small rank counts
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--np" && has_value) {
      if (!ring_example::parse_size(argv[++i], 1, &np)) {
        std::fprintf(stderr, "--np: '%s' is not a rank count >= 1\n", argv[i]);
        return 2;
      }
    } else if (a == "--count" && has_value) {
      if (!ring_example::parse_size(argv[++i], 0, &count)) {
        std::fprintf(stderr, "--count: '%s' is not an element count >= 0\n", argv[i]);
        return 2;
      }
    } else {
      usage(argv[0]);
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  const size_t n = static_cast<size_t>(count);
  return mycoll_launch::launch(static_cast<int>(np), [n](mycollComm_t comm, int rank, int nranks) {
    return rank_main(comm, rank, nranks, n);
  });
}
