#include "options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "datatypes.h"

namespace mycoll_perf {
namespace {

void usage(const char* prog) {
  std::fprintf(
      stderr,
      "usage: %s <collective> [flags]\n"
      "  collective: all_reduce all_gather reduce_scatter broadcast reduce alltoall scatter\n"
      "              gather sendrecv, several joined by commas (a,b: in that order),\n"
      "              or all (each in turn)\n"
      "Flags as nccl-tests spells them (short, or long as --name V or --name=V):\n"
      "  -b, --minbytes <bytes>   smallest size (K/M/G suffixes), default 32M\n"
      "  -e, --maxbytes <bytes>   largest size, default 32M\n"
      "  -f, --stepfactor <f>     multiply the size by this each step, default 2\n"
      "  -i, --stepbytes <bytes>  add this to the size each step (instead of -f)\n"
      "  -n, --iters <iters>      timed iterations per size, default 20\n"
      "  -w, --warmup_iters <n>   warm-up iterations per size, default 1\n"
      "  -c, --check <0|1>        check every element of one extra run per size, count\n"
      "                           #wrong (default 1)\n"
      "  -d, --datatype <type>    int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                           bfloat16 | all\n"
      "  -o, --op <op>            sum prod max min avg | all (reductions only), default sum\n"
      "  -r, --root <root>        root of broadcast/reduce/scatter/gather, default 0\n"
      "  -z, --blocking <0|1>     sync the stream after every call (device memory; host\n"
      "                           collectives always complete on return), default 0\n"
      "  -a, --average <0..3>     time over ranks: 0 rank 0, 1 average, 2 min, 3 max (default)\n"
      "  -t, --nthreads <T>       threads per process, one rank each (--mem cuda), default 1\n"
      "  -g, --ngpus <G>          GPUs per thread, one rank each, driven in one group\n"
      "                           (--mem cuda), default 1\n"
      "  -G, --cudagraph <N>      capture -n iterations in a CUDA graph, time N launches of\n"
      "                           it (--mem cuda)\n"
      "  -J, --output_file FILE   write the results and the run's metadata to FILE as one\n"
      "                           JSON document (FILE must end in .json)\n"
      "  -R, --local_register <0|1|2>  buffer registration: 0 none (default), 1 local, 2\n"
      "                           symmetric. Accepted for nccl-tests command lines; mycoll\n"
      "                           has no registration, so 1 and 2 change nothing (one line\n"
      "                           on stderr says so)\n"
      "mycoll-perf's own:\n"
      "  -B, --best_of <K>        time K batches of -n iterations per size (a barrier before\n"
      "                           each) and report the fastest, for mycoll and its peer alike:\n"
      "                           filters stalls of a shared host out (default 1)\n"
      "  --np <N>                 fork N local processes (default: processes from the\n"
      "                           launcher's environment, else 1 process)\n"
      "  --json FILE              also write one JSON object per line per size and collective\n"
      "  --vs mpi                 under mpirun: bootstrap over MPI and time MPI's equivalent too\n"
      "  --vs gloo                time Gloo's equivalent too (its TCP transport on loopback;\n"
      "                           --np or a launcher)\n"
      "  --vs nccl                time NCCL (libnccl.so.2, loaded at run time) on the same GPUs,\n"
      "                           buffers and stream (needs --mem cuda)\n"
      "  --mem <m>                buffer memory: host (default) or cuda (device buffers, one\n"
      "                           GPU per rank)\n"
      "  --skip-without-gpu       with --mem cuda: print 'SKIP: ...' and exit 0 when fewer\n"
      "                           GPUs than needed are present (for test suites)\n"
      "  --dirty <0|1>            host memory: before every timed call (mycoll's and MPI's\n"
      "                           alike) rewrite each 64-byte line of every rank's input with\n"
      "                           its own value, so the call reads data its producer just\n"
      "                           wrote (as a training step's new gradients) rather than lines\n"
      "                           every cache already holds from the previous call (default 0)\n"
      "Exit status: 0 when every checked element was right, 1 if any #wrong > 0, 2 on errors.\n",
      prog);
}

// nccl-tests' long names (all_reduce_perf -h) and mycoll-perf's own, as the
// short flag they stand for; nullptr for any other name.
const char* short_flag(const std::string& long_name) {
  static const struct {
    const char* long_name;
    const char* short_name;
  } kLong[] = {
      {"--minbytes", "-b"},    {"--maxbytes", "-e"},       {"--stepfactor", "-f"},
      {"--stepbytes", "-i"},   {"--iters", "-n"},          {"--warmup_iters", "-w"},
      {"--check", "-c"},       {"--datatype", "-d"},       {"--op", "-o"},
      {"--root", "-r"},        {"--blocking", "-z"},       {"--average", "-a"},
      {"--nthreads", "-t"},    {"--ngpus", "-g"},          {"--cudagraph", "-G"},
      {"--output_file", "-J"}, {"--local_register", "-R"}, {"--best_of", "-B"},
  };
  for (const auto& f : kLong)
    if (long_name == f.long_name) return f.short_name;
  return nullptr;
}

// "64K" -> 65536; false when s is not a non-negative size.
bool parse_bytes(const char* s, size_t* out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno != 0 || end == s || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k':
    case 'K':
      mult = 1024.0;
      ++end;
      break;
    case 'm':
    case 'M':
      mult = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      mult = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(std::llround(v * mult));
  return true;
}

bool parse_int(const char* s, int min, int max, int* out) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max) return false;
  *out = static_cast<int>(v);
  return true;
}

// The flags that take an integer in [min, max].
struct IntFlag {
  const char* flag;
  int min, max;
  int Options::*field;
};
constexpr IntFlag kIntFlags[] = {
    {"-n", 1, 1 << 30, &Options::iters},
    {"-w", 0, 1 << 30, &Options::warmup},
    {"-B", 1, 1000, &Options::repeats},
    {"-R", 0, 2, &Options::local_register},
    {"-c", 0, 1, &Options::check},
    {"-r", 0, 1 << 30, &Options::root},
    {"-z", 0, 1, &Options::blocking},
    {"-a", 0, 3, &Options::average},
    {"--np", 1, 4096, &Options::np},
    {"--dirty", 0, 1, &Options::dirty},
    {"-t", 1, 1024, &Options::threads},
    {"-g", 1, 1024, &Options::gpus},
    {"-G", 0, 1 << 20, &Options::graph_launches},
};

const IntFlag* int_flag(const std::string& a) {
  for (const IntFlag& f : kIntFlags)
    if (a == f.flag) return &f;
  return nullptr;
}

}  // namespace

bool parse_options(int argc, char** argv, Options* o, int* exit_code) {
  *exit_code = 2;
  bool factor_given = false, increment_given = false;
  std::string coll_name;
  for (int i = 0; i < argc; ++i) o->command_line += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    // "--minbytes=8" is "--minbytes 8"; long names become their short flag.
    std::string inline_value;
    bool has_inline_value = false;
    const size_t eq = a.find('=');
    if (a.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      inline_value = a.substr(eq + 1);
      has_inline_value = true;
      a.resize(eq);
    }
    const std::string given = a;  // for messages: the name as typed
    if (const char* s = short_flag(a)) a = s;
    if (a == "-h" || a == "--help") {
      usage(argv[0]);
      *exit_code = 0;
      return false;
    }
    if (a.empty() || a[0] != '-') {
      if (!coll_name.empty()) {
        std::fprintf(stderr, "mycoll-perf: two collectives given ('%s', '%s')\n", coll_name.c_str(),
                     a.c_str());
        return false;
      }
      coll_name = a;
      continue;
    }
    if (a == "--skip-without-gpu" && !has_inline_value) {
      o->skip_without_gpu = true;
      continue;
    }
    if (!has_inline_value && i + 1 >= argc) {
      std::fprintf(stderr, "mycoll-perf: %s needs a value (see -h)\n", given.c_str());
      return false;
    }
    const char* v = has_inline_value ? inline_value.c_str() : argv[++i];
    bool ok = true;
    if (a == "-b")
      ok = parse_bytes(v, &o->min_bytes);
    else if (a == "-e")
      ok = parse_bytes(v, &o->max_bytes);
    else if (a == "-f") {
      char* end = nullptr;
      o->step_factor = std::strtod(v, &end);
      ok = end != v && *end == '\0' && o->step_factor >= 1;
      factor_given = true;
    } else if (a == "-i") {
      ok = parse_bytes(v, &o->step_bytes);
      increment_given = true;
    } else if (const IntFlag* f = int_flag(a))
      ok = parse_int(v, f->min, f->max, &(o->*f->field));
    else if (a == "--json")
      o->json_path = v;
    else if (a == "-J") {
      // As nccl-tests: the format follows the suffix, and JSON is the only one.
      o->output_file = v;
      const std::string& f = o->output_file;
      if (f.size() <= 5 || f.compare(f.size() - 5, 5, ".json") != 0) {
        std::fprintf(stderr,
                     "mycoll-perf: -J/--output_file %s: the format follows the suffix "
                     "and only .json is supported\n",
                     v);
        return false;
      }
    } else if (a == "--mem")
      o->mem = v;
    else if (a == "--vs") {
      o->vs_mpi = std::strcmp(v, "mpi") == 0;
      o->vs_nccl = std::strcmp(v, "nccl") == 0;
      o->vs_gloo = std::strcmp(v, "gloo") == 0;
      ok = o->vs_mpi || o->vs_nccl || o->vs_gloo;
    } else if (a == "-d") {
      o->dtypes.clear();
      if (std::strcmp(v, "all") == 0) {
        // The types mycoll-perf generates and checks (datatypes.cc): the
        // fp8 types (10, 11) are not benchmarked yet.
        for (int t = 0; t <= mycollBfloat16; ++t)
          o->dtypes.push_back(static_cast<mycollDataType_t>(t));
      } else {
        mycollDataType_t t;
        ok = parse_dtype(v, &t);
        o->dtypes.push_back(t);
      }
    } else if (a == "-o") {
      o->ops.clear();
      if (std::strcmp(v, "all") == 0) {
        for (int k = 0; k < mycollNumOps; ++k) o->ops.push_back(static_cast<mycollRedOp_t>(k));
      } else {
        mycollRedOp_t op;
        ok = parse_op(v, &op);
        o->ops.push_back(op);
      }
    } else {
      std::fprintf(stderr, "mycoll-perf: unknown flag %s (see -h)\n", given.c_str());
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "mycoll-perf: bad value '%s' for %s (see -h)\n", v, given.c_str());
      // -R K was mycoll-perf's best-of before -R took nccl-tests' meaning.
      if (a == "-R")
        std::fprintf(stderr,
                     "mycoll-perf: -R is buffer registration (0, 1 or 2), as in "
                     "nccl-tests; the fastest of K batches is -B K (--best_of K)\n");
      return false;
    }
  }
  if (coll_name.empty()) {
    usage(argv[0]);
    return false;
  }
  if (coll_name == "all") {
    for (const CollInfo& c : all_colls()) o->colls.push_back(&c);
  } else {
    // One name, or several separated by commas (run in that order in one process).
    for (size_t at = 0; at <= coll_name.size();) {
      size_t end = std::min(coll_name.find(',', at), coll_name.size());
      const std::string name = coll_name.substr(at, end - at);
      const CollInfo* c = find_coll(name);
      if (!c) {
        std::fprintf(stderr, "mycoll-perf: unknown collective '%s' (see -h)\n", name.c_str());
        return false;
      }
      o->colls.push_back(c);
      at = end + 1;
    }
  }
  if (increment_given && !factor_given) o->step_factor = 1;
  if (o->mem != "host" && o->mem != "cuda") {
    std::fprintf(stderr, "mycoll-perf: --mem '%s' is not host or cuda\n", o->mem.c_str());
    return false;
  }
  if (!o->cuda()) {
    const char* needs_cuda = o->vs_nccl              ? "--vs nccl"
                             : o->threads > 1        ? "-t"
                             : o->gpus > 1           ? "-g"
                             : o->graph_launches > 0 ? "-G"
                                                     : nullptr;
    if (needs_cuda) {
      std::fprintf(stderr, "mycoll-perf: %s needs --mem cuda\n", needs_cuda);
      return false;
    }
  }
  if (o->vs_gloo && o->cuda()) {
    std::fprintf(stderr, "mycoll-perf: --vs gloo compares host memory: drop --mem cuda\n");
    return false;
  }
  if (o->dirty && (o->cuda() || o->vs_gloo)) {
    std::fprintf(stderr,
                 "mycoll-perf: --dirty rewrites host inputs before mycoll's and MPI's "
                 "calls: not with %s\n",
                 o->cuda() ? "--mem cuda" : "--vs gloo");
    return false;
  }
  if (o->vs_mpi && (o->threads > 1 || o->gpus > 1)) {
    std::fprintf(stderr, "mycoll-perf: --vs mpi runs one rank per process: drop -t/-g\n");
    return false;
  }
  if (o->min_bytes > o->max_bytes) {
    std::fprintf(stderr, "mycoll-perf: -b %zu is larger than -e %zu\n", o->min_bytes, o->max_bytes);
    return false;
  }
  *exit_code = 0;
  return true;
}

std::vector<size_t> size_list(const Options& o) {
  std::vector<size_t> sizes;
  size_t s = o.min_bytes;
  while (s <= o.max_bytes) {
    sizes.push_back(s);
    size_t next = s;
    if (o.step_factor > 1)
      next = s == 0 ? 1 : static_cast<size_t>(std::ceil(static_cast<double>(s) * o.step_factor));
    else
      next = s + o.step_bytes;
    if (next <= s) break;  // factor 1 and no increment (or s == 0): one size
    s = next;
  }
  return sizes;
}

std::string describe_options(const Options& o) {
  std::string s = "-b " + std::to_string(o.min_bytes) + " -e " + std::to_string(o.max_bytes);
  if (o.step_factor > 1) {
    char f[32];
    std::snprintf(f, sizeof(f), " -f %g", o.step_factor);
    s += f;
  } else {
    s += " -i " + std::to_string(o.step_bytes);
  }
  s += " -n " + std::to_string(o.iters) + " -w " + std::to_string(o.warmup) + " -B " +
       std::to_string(o.repeats) + " -c " + std::to_string(o.check) + " -r " +
       std::to_string(o.root) + " -a " + std::to_string(o.average);
  if (o.local_register) s += " -R " + std::to_string(o.local_register);
  if (o.dirty) s += " --dirty 1";
  if (o.cuda())
    s += " -z " + std::to_string(o.blocking) + " -t " + std::to_string(o.threads) + " -g " +
         std::to_string(o.gpus) + " -G " + std::to_string(o.graph_launches);
  return s;
}

std::string registration_notice(const Options& o) {
  if (o.local_register == 0) return "";
  const std::string kind = o.local_register == 1 ? "local" : "symmetric";
  return "mycoll-perf: -R " + std::to_string(o.local_register) + " (" + kind +
         " registration) changes nothing: mycoll has no buffer registration, and no peer's "
         "buffers are registered either (the fastest of K batches is -B K)";
}

}  // namespace mycoll_perf
