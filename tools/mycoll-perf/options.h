// Command line of mycoll-perf: nccl-tests' flags (-b -e -f -i -n -w -c -d -o -r -z -a
// -t -g -G -J -R, short or long: --minbytes ...) plus -B/--best_of, --np, --json, --vs,
// --mem, --skip-without-gpu, --dirty.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "colls.h"
#include "mycoll.h"

namespace mycoll_perf {

struct Options {
  std::vector<const CollInfo*> colls;  // in run order
  size_t min_bytes = 32u << 20;        // -b
  size_t max_bytes = 32u << 20;        // -e
  double step_factor = 2;              // -f (used unless -i given without -f)
  size_t step_bytes = 0;               // -i
  int iters = 20;                      // -n
  int warmup = 1;                      // -w (per size, before timing)
  int repeats = 1;                     // -B: timed batches per size, fastest reported
  int local_register = 0;              // -R: 0 none, 1 local, 2 symmetric (nccl-tests)
  int check = 1;                       // -c
  std::vector<mycollDataType_t> dtypes{mycollFloat32};  // -d (name or "all")
  std::vector<mycollRedOp_t> ops{mycollSum};            // -o (name or "all")
  int root = 0;                                         // -r
  int blocking = 0;               // -z: device: sync the stream after each call
  int average = 3;                // -a 0 rank 0, 1 avg, 2 min, 3 max over ranks
  std::string json_path;          // --json (JSON Lines, one object per size)
  std::string output_file;        // -J/--output_file (one JSON document)
  std::string command_line;       // argv as given, for -J's metadata
  int np = 0;                     // --np (0: launcher env or one process)
  bool vs_mpi = false;            // --vs mpi
  bool vs_nccl = false;           // --vs nccl (device memory only)
  bool vs_gloo = false;           // --vs gloo (host memory; gloo_compare.h)
  std::string mem = "host";       // --mem host|cuda
  int threads = 1;                // -t: threads per process (device memory)
  int gpus = 1;                   // -g: GPUs per thread (device memory)
  int graph_launches = 0;         // -G: time this many CUDA graph launches
  bool skip_without_gpu = false;  // --skip-without-gpu: exit 0 "SKIP: ..."
  int dirty = 0;                  // --dirty: rewrite every input line before each call
  bool cuda() const { return mem == "cuda"; }
};

// Parses argv. On error or -h prints to stderr and returns false with
// *exit_code set (0 for -h, 2 for a bad command line).
bool parse_options(int argc, char** argv, Options* o, int* exit_code);

// The sizes in bytes to run, from -b to -e by -f or -i.
std::vector<size_t> size_list(const Options& o);

// "-b 8 -e 65536 -f 2 -n 20 -w 1 -B 1 -c 1 -r 0 -a 3" for the header (-R only when not 0).
std::string describe_options(const Options& o);

// The one stderr line -R 1 or -R 2 deserves (mycoll has no buffer
// registration, so the flag changes nothing); empty for -R 0.
std::string registration_notice(const Options& o);

}  // namespace mycoll_perf
