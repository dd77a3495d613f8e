#include "bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend.h"
#include "build_info.h"
#include "check.h"
#include "colls.h"
#include "datatypes.h"
#include "launch.h"
#include "mpi_compare.h"
#include "progress.h"
#include "text.h"

namespace mycoll_perf {
namespace {

using mycoll_launch::must;
using Clock = std::chrono::steady_clock;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr size_t kHostRecordBytes = 128;   // "pid hostname device" per rank, for the header
constexpr size_t kLargeBytes = 32u << 20;  // the summary's "large sizes" start here

// One measured variant (out of place, in place, or MPI/NCCL). NaN = not measured.
struct Result {
  double time_us = kNaN;
  double algbw = kNaN;   // GB/s
  double busbw = kNaN;   // GB/s
  long long wrong = -1;  // -1 = not checked
};

struct Line {
  const CollInfo* coll = nullptr;
  size_t bytes = 0;  // size column: the whole buffer of the collective
  size_t count = 0;  // the count argument of the call
  mycollDataType_t type = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  int root = -1;
  Result oop, ip, vs;   // vs: MPI or NCCL (out of place)
  double ratio = kNaN;  // mycoll out-of-place busbw / vs busbw
};

// Per-slot send/recv pointers of one variant.
struct Ptrs {
  const void* send;
  void* recv;
};
using Issue = std::function<void(const std::vector<Ptrs>&)>;

// Bytes of one rank's input (host memory), for --dirty.
struct Span {
  const void* p;
  size_t n;
};

// --dirty: stores every 64-byte line of each span with the value it holds,
// so the data stays the checked input while each line becomes modified in
// this core's cache, as after the computation that produced it: a peer
// that reads it (or a copy out of it) pays the transfer a real input costs.
void rewrite_lines(const std::vector<Span>& spans) {
  for (const Span& s : spans) {
    volatile char* q = static_cast<volatile char*>(const_cast<void*>(s.p));
    for (size_t i = 0; i < s.n; i += 64) q[i] = q[i];
  }
}

class Bench {
 public:
  Bench(const BenchSetup& s, const Options& o)
      : n_(s.nranks),
        o_(o),
        mpi_(s.vs         ? s.vs
             : s.with_mpi ? load_mpi(nullptr)
                          : nullptr),
        nccl_(s.with_nccl),
        topology_(s.topology) {
    for (const RankSlot& r : s.slots) {
      slots_.emplace_back();
      slots_.back().r = r;
      if (r.rank == 0) lead_ = true;
    }
  }
  ~Bench() {
    if (json_) std::fclose(json_);
    if (doc_) std::fclose(doc_);
  }

  int run() {
    if (slots_.empty()) throw std::runtime_error("mycoll-perf: a thread with no rank");
    if (o_.root >= n_)
      throw std::runtime_error("-r " + std::to_string(o_.root) + ": root out of range for " +
                               std::to_string(n_) + " ranks");
    const size_t cap = std::max<size_t>(o_.max_bytes, 64);
    for (Slot& s : slots_) {
      s.be = make_backend(o_.mem, s.r.device);
      check_device(s);
      const mycollComm_t comm = s.r.comm;
      const NcclComm nc = s.r.nccl;
      const int rank = s.r.rank;
      s.be->set_wait_hook([comm, nc, rank] {
        mycollResult_t async = mycollSuccess;
        must(mycollCommGetAsyncError(comm, &async), "mycollCommGetAsyncError", comm);
        if (async != mycollSuccess && async != mycollInProgress)
          must(async, ("rank " + std::to_string(rank) + ": mycoll (asynchronous error)").c_str(),
               comm);
        nccl_check_async(nc, rank);
      });
      s.send = std::make_unique<Buffer>(*s.be, cap);
      s.recv = std::make_unique<Buffer>(*s.be, cap);
      s.small = std::make_unique<Buffer>(*s.be, 64);
    }
    stage_.assign(cap, 0);
    if (o_.check) want_.assign(cap, 0);
    open_json();
    const std::string notice = registration_notice(o_);
    if (lead_ && !notice.empty()) std::fprintf(stderr, "%s\n", notice.c_str());
    print_header();
    progress_ = std::make_unique<Progress>(stderr, lead_ && stderr_is_terminal(), sweep_steps(o_));
    long long wrong = 0;
    for (const CollInfo* c : o_.colls) wrong += run_coll(*c);
    barrier();  // nobody tears down while a peer may still use its buffers
    write_document();
    return wrong > 0 ? 1 : 0;
  }

 private:
  struct Slot {
    RankSlot r;
    std::unique_ptr<Backend> be;
    std::unique_ptr<Buffer> send, recv, small;
  };

  // The library binds a communicator to the device current at init: make
  // sure that is the device this rank's buffers are on.
  void check_device(Slot& s) {
    int dev = -2;
    must(mycollCommCuDevice(s.r.comm, &dev), "mycollCommCuDevice", s.r.comm);
    if (o_.cuda() && dev != s.r.device)
      throw std::runtime_error("rank " + std::to_string(s.r.rank) + ": communicator is on device " +
                               std::to_string(dev) +
                               ", its buffers on cuda:" + std::to_string(s.r.device) +
                               (dev < 0 ? " (the library saw no GPU at init)" : ""));
  }

  // Issues f(slot, index) for every slot: directly for one, else in one
  // mycoll group; throws naming the first failing call.
  // A template, not a std::function: the timed loop calls it once per
  // collective, and a std::function of a capturing lambda allocates.
  template <typename F>
  void each_mycoll(const std::string& what, F&& f) {
    if (slots_.size() == 1) {
      slots_[0].be->make_current();
      must(f(slots_[0], 0), what.c_str(), slots_[0].r.comm);
      return;
    }
    must(mycollGroupStart(), (what + " (mycollGroupStart)").c_str(), nullptr);
    mycollResult_t first = mycollSuccess;
    mycollComm_t failed = nullptr;
    for (size_t i = 0; i < slots_.size() && first == mycollSuccess; ++i) {
      slots_[i].be->make_current();
      first = f(slots_[i], i);
      failed = slots_[i].r.comm;
    }
    mycollResult_t end = mycollGroupEnd();  // always close the group
    must(first, what.c_str(), failed);
    must(end, (what + " (mycollGroupEnd)").c_str(), slots_[0].r.comm);
  }

  void each_nccl(const std::string& what, const std::function<int(Slot&, size_t)>& f) {
    const NcclApi& a = nccl_api();
    if (slots_.size() == 1) {
      slots_[0].be->make_current();
      nccl_must(f(slots_[0], 0), what, slots_[0].r.nccl);
      return;
    }
    nccl_must(a.GroupStart(), what + " (ncclGroupStart)", nullptr);
    int first = 0;
    NcclComm failed = nullptr;
    for (size_t i = 0; i < slots_.size() && first == 0; ++i) {
      slots_[i].be->make_current();
      first = f(slots_[i], i);
      failed = slots_[i].r.nccl;
    }
    int end = a.GroupEnd();
    nccl_must(first, what, failed);
    nccl_must(end, what + " (ncclGroupEnd)", slots_[0].r.nccl);
  }

  void sync_all() {
    for (Slot& s : slots_) s.be->synchronize();
  }

  // A 1-element all-reduce: every rank has entered it before any leaves.
  void barrier() {
    each_mycoll("barrier (1-element mycollAllReduce)", [](Slot& s, size_t) {
      return mycollAllReduce(s.small->data(), s.small->data(), 1, mycollFloat32, mycollSum,
                             s.r.comm, s.be->stream());
    });
    sync_all();
  }

  // All-reduce of one double per rank (vals[i] from slot i).
  double reduce_doubles(const std::vector<double>& vals, mycollRedOp_t op) {
    for (size_t i = 0; i < slots_.size(); ++i)
      slots_[i].be->to_buffer(slots_[i].small->data(), &vals[i], sizeof(double));
    each_mycoll("time/result reduction (mycollAllReduce)", [op](Slot& s, size_t) {
      return mycollAllReduce(s.small->data(), s.small->data(), 1, mycollFloat64, op, s.r.comm,
                             s.be->stream());
    });
    sync_all();
    double v = 0;
    slots_[0].be->from_buffer(&v, slots_[0].small->data(), sizeof(v));
    return v;
  }

  double reduce_same(double v, mycollRedOp_t op) {
    return reduce_doubles(std::vector<double>(slots_.size(), v), op);
  }

  // This thread's time (the same for all its ranks) -> one number per -a
  // (default: max over ranks).
  double aggregate_time(double local_us) {
    switch (o_.average) {
      case 0: {
        std::vector<double> v;
        for (const Slot& s : slots_) v.push_back(s.r.rank == 0 ? local_us : 0.0);
        return reduce_doubles(v, mycollSum);
      }
      case 1: return reduce_same(local_us, mycollSum) / n_;
      case 2: return reduce_same(local_us, mycollMin);
      default: return reduce_same(local_us, mycollMax);
    }
  }

  void open_json() {
    double failed = 0;
    if (lead_ && !o_.json_path.empty()) {
      json_ = std::fopen(o_.json_path.c_str(), "w");
      if (!json_) failed = 1;
    }
    if (lead_ && !o_.output_file.empty()) {
      doc_ = std::fopen(o_.output_file.c_str(), "w");
      if (!doc_) failed = 2;
    }
    // Every rank learns whether rank 0 could open them, so all stop together.
    const double f = reduce_same(failed, mycollMax);
    if (f == 1)
      throw std::runtime_error("--json " + o_.json_path + ": rank 0 cannot open it for writing");
    if (f == 2)
      throw std::runtime_error("-J " + o_.output_file + ": rank 0 cannot open it for writing");
  }

  // -J: {"metadata": {...}, "results": [the --json objects]}, written at the end.
  void write_document() {
    if (!doc_) return;
    std::fprintf(doc_, "{\"metadata\": %s,\n \"results\": [", doc_meta_.c_str());
    for (size_t i = 0; i < doc_rows_.size(); ++i)
      std::fprintf(doc_, "%s\n  %s", i ? "," : "", doc_rows_[i].c_str());
    std::fprintf(doc_, "\n]}\n");
    std::fclose(doc_);
    doc_ = nullptr;
  }

  // The run's metadata for -J: what ran, where, when, against what.
  std::string metadata(int version, const std::vector<char>& recs) const {
    char v[32];
    std::snprintf(v, sizeof(v), "%d.%d.%d", version / 10000, version / 100 % 100, version % 100);
    std::string m = "{\"tool\": \"mycoll-perf\", \"library_version\": " + json_str(v);
    std::snprintf(v, sizeof(v), "%d.%d.%d", MYCOLL_MAJOR, MYCOLL_MINOR, MYCOLL_PATCH);
    m += ", \"header_version\": " + json_str(v) + ", \"commit\": " + json_str(build_commit()) +
         ", \"date\": " + json_str(utc_now()) + ", \"command_line\": " + json_str(o_.command_line) +
         ", \"options\": " + json_str(describe_options(o_)) +
         ", \"best_of\": " + std::to_string(o_.repeats) +
         ", \"local_register\": " + std::to_string(o_.local_register) +
         ", \"mem\": " + json_str(slots_[0].be->name()) + ", \"nranks\": " + std::to_string(n_) +
         ", \"topology\": " + json_str(topology_);
    if (nccl_) {
      const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
      m += ", \"peer\": " + json_str("NCCL " + nccl_describe()) +
           ", \"nccl_nvls_enable\": " + json_str(nvls ? nvls : "");
    } else if (mpi_) {
      m += ", \"peer\": " + json_str(vs_name());
    }
    m += ", \"ranks\": [";
    for (int r = 0; r < n_; ++r) {
      const char* rr = recs.data() + kHostRecordBytes * r;
      int pid = 0, used = 0;
      char h[kHostRecordBytes] = {};
      std::sscanf(rr, "%d %63s %n", &pid, h, &used);
      const std::string dev(rr + used, strnlen(rr + used, kHostRecordBytes - used));
      m += std::string(r ? ", " : "") + "{\"rank\": " + std::to_string(r) +
           ", \"pid\": " + std::to_string(pid) + ", \"host\": " + json_str(h) +
           ", \"device\": " + json_str(dev) + "}";
    }
    return m + "]}";
  }

  void print_header() {
    // Every rank's pid, host and device, gathered to print them from rank 0.
    char host[64] = {};
    gethostname(host, sizeof(host) - 1);
    std::vector<std::unique_ptr<Buffer>> mine, all;
    for (Slot& s : slots_) {
      char rec[kHostRecordBytes] = {};
      std::snprintf(rec, sizeof(rec), "%d %s %s", static_cast<int>(getpid()), host,
                    s.be->describe().c_str());
      mine.push_back(std::make_unique<Buffer>(*s.be, kHostRecordBytes));
      s.be->to_buffer(mine.back()->data(), rec, sizeof(rec));
      all.push_back(std::make_unique<Buffer>(*s.be, kHostRecordBytes * n_));
    }
    each_mycoll("header (mycollAllGather of hosts)", [&](Slot& s, size_t i) {
      return mycollAllGather(mine[i]->data(), all[i]->data(), kHostRecordBytes, mycollUint8,
                             s.r.comm, s.be->stream());
    });
    sync_all();
    if (!lead_) return;
    size_t lead = 0;
    while (slots_[lead].r.rank != 0) ++lead;
    std::vector<char> recs(kHostRecordBytes * n_);
    slots_[lead].be->from_buffer(recs.data(), all[lead]->data(), recs.size());
    int version = 0;
    mycollGetVersion(&version);
    if (doc_) doc_meta_ = metadata(version, recs);
    std::printf(
        "# mycoll-perf (nccl-tests style): library %d.%d.%d, header %d.%d.%d, commit %s, %s "
        "memory\n",
        version / 10000, version / 100 % 100, version % 100, MYCOLL_MAJOR, MYCOLL_MINOR,
        MYCOLL_PATCH, build_commit(), slots_[0].be->name());
    std::printf("# nranks %d%s%s%s, %s, time = %s over ranks of each rank's average%s\n", n_,
                topology_.empty() ? "" : " (", topology_.c_str(), topology_.empty() ? "" : ")",
                describe_options(o_).c_str(),
                o_.average == 0   ? "rank 0's"
                : o_.average == 1 ? "mean"
                : o_.average == 2 ? "min"
                                  : "max",
                mpi_ ? (std::string(", compared with ") + vs_name()).c_str() : "");
    if (nccl_) {
      const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
      std::printf("# compared with NCCL %s, NCCL_NVLS_ENABLE=%s\n", nccl_describe().c_str(),
                  nvls ? nvls : "(unset)");
    }
    if (o_.cuda() && o_.graph_launches > 0)
      std::printf("# CUDA graphs: each size captures -n %d calls and times %d launches\n", o_.iters,
                  o_.graph_launches);
    std::printf("#\n# Using devices\n");
    for (int r = 0; r < n_; ++r) {
      const char* rr = recs.data() + kHostRecordBytes * r;
      int pid = 0, used = 0;
      char h[kHostRecordBytes] = {};
      std::sscanf(rr, "%d %63s %n", &pid, h, &used);
      std::string dev(rr + used, strnlen(rr + used, kHostRecordBytes - used));
      std::printf("#  Rank %2d Pid %7d on %10s device %s\n", r, pid, h, dev.c_str());
    }
    std::fflush(stdout);
  }

  void print_table_header(const CollInfo& c) {
    if (!lead_) return;
    std::string l1 = "#\n# " + std::string(c.name) + "\n#" + std::string(52, ' ');
    std::string l2, l3;
    char b[256];
    std::snprintf(b, sizeof(b), "%12s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop",
                  "root");
    l2 = b;
    std::snprintf(b, sizeof(b), "%12s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "");
    l3 = b;
    auto block = [&](const char* title) {
      std::snprintf(b, sizeof(b), "  %-31s", title);
      l1 += b;
      std::snprintf(b, sizeof(b), "  %7s  %6s  %6s  %6s", "time", "algbw", "busbw", "#wrong");
      l2 += b;
      std::snprintf(b, sizeof(b), "  %7s  %6s  %6s  %6s", "(us)", "(GB/s)", "(GB/s)", "");
      l3 += b;
    };
    block("        out-of-place");
    block("          in-place");
    if (mpi_ || nccl_) {
      std::snprintf(b, sizeof(b), "  %9s%-14s", "", vs_name());
      l1 += b;
      std::snprintf(b, sizeof(b), "  %7s  %6s  %6s", "time", "busbw", "ratio");
      l2 += b;
      std::snprintf(b, sizeof(b), "  %7s  %6s  %6s", "(us)", "(GB/s)", "");
      l3 += b;
    }
    l2[0] = '#';
    l3[0] = '#';
    std::printf("%s\n%s\n%s\n", l1.c_str(), l2.c_str(), l3.c_str());
    std::fflush(stdout);
  }

  // All types x ops x sizes of one collective; returns mycoll's #wrong total.
  long long run_coll(const CollInfo& c) {
    print_table_header(c);
    long long wrong = 0, vs_wrong = 0;
    double bw_sum = 0;
    int bw_count = 0;
    std::vector<Line> lines;
    const std::vector<mycollRedOp_t> none{mycollSum};
    for (mycollDataType_t t : o_.dtypes) {
      for (mycollRedOp_t op : c.reduces ? o_.ops : none) {
        for (size_t bytes : size_list(o_)) {
          progress_->step(step_label(o_, c, t, op, bytes));
          Line line = measure(c, t, op, bytes);
          progress_->clear();  // before the table's line, on a terminal shared with stdout
          for (const Result* r : {&line.oop, &line.ip}) {
            if (r->wrong > 0) wrong += r->wrong;
            if (!std::isnan(r->busbw)) {
              bw_sum += r->busbw;
              ++bw_count;
            }
          }
          if (line.vs.wrong > 0) vs_wrong += line.vs.wrong;
          if (lead_) {
            print_line(line);
            write_json(json_row(line));
          }
          lines.push_back(line);
        }
      }
    }
    if (lead_) {
      std::printf("# Out of bounds values : %lld %s\n", wrong, wrong ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %g\n#\n", bw_count ? bw_sum / bw_count : 0.0);
      if (mpi_ || nccl_) print_summary(c, lines, vs_wrong);
      std::fflush(stdout);
    }
    return wrong;
  }

  // Per size: the ratio; then its minimum over large sizes and over all.
  void print_summary(const CollInfo& c, const std::vector<Line>& lines, long long vs_wrong) {
    const char* vs = vs_name();
    std::printf("# %s: mycoll busbw / %s busbw (out of place; > 1: mycoll faster)\n", c.name, vs);
    const Line* min_large = nullptr;
    const Line* min_all = nullptr;
    for (const Line& l : lines) {
      std::printf("#   %12zu B  %8s  %4s  ratio %s\n", l.bytes, dtype_name(l.type),
                  c.reduces ? op_name(l.op) : "", fmt_bw(l.ratio).c_str());
      if (std::isnan(l.ratio)) continue;
      if (!min_all || l.ratio < min_all->ratio) min_all = &l;
      if (l.bytes >= kLargeBytes && (!min_large || l.ratio < min_large->ratio)) min_large = &l;
    }
    auto show = [](const char* label, const Line* l) {
      if (l)
        std::printf("# %s: %.2f (at %zu B)\n", label, l->ratio, l->bytes);
      else
        std::printf("# %s: N/A (no such size measured)\n", label);
    };
    show("Min ratio, sizes >= 32 MiB", min_large);
    show("Min ratio, all sizes      ", min_all);
    if (vs_wrong > 0)
      std::printf(
          "# WARNING: %s's outputs differ from the expected values in %lld elements: "
          "%s or this checker is wrong (see stderr)\n",
          vs, vs_wrong, vs);
    std::printf("#\n");
  }

  Line measure(const CollInfo& c, mycollDataType_t t, mycollRedOp_t op, size_t bytes) {
    const size_t es = dtype_size(t);
    const size_t elems = bytes / es;
    const size_t count = c.blocked ? elems / static_cast<size_t>(n_) : elems;
    const int root = c.rooted ? o_.root : 0;
    Line line;
    line.coll = &c;
    line.bytes = layout(c, count, 0, n_, root).total * es;
    line.count = count;
    line.type = t;
    line.op = op;
    line.root = c.rooted ? root : -1;
    const std::string what = std::string(c.name) + " of " + std::to_string(line.bytes) +
                             " bytes (" + dtype_name(t) +
                             (c.reduces ? std::string(" ") + op_name(op) : "") + ")";
    std::vector<Ptrs> oop, ip;
    for (Slot& s : slots_) {
      const Layout l = layout(c, count, s.r.rank, n_, root);
      oop.push_back({s.send->data(), s.recv->data()});
      ip.push_back({s.recv->data() + l.ip_in_off * es, s.recv->data() + l.ip_out_off * es});
    }
    auto mycoll_call = [&](const std::string& w) -> Issue {
      return [&, w](const std::vector<Ptrs>& p) {
        each_mycoll(w, [&](Slot& s, size_t i) {
          return run_mycoll(c, p[i].send, p[i].recv, count, t, op, root, s.r.comm, s.be->stream());
        });
      };
    };
    const Issue mycoll_oop = mycoll_call(what + " out of place");
    const Issue mycoll_ip = mycoll_call(what + " in place");
    // --dirty: the input bytes each rank's call reads, rewritten before it.
    std::vector<Span> oop_in, ip_in;
    if (o_.dirty)
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Layout l = layout(c, count, slots_[i].r.rank, n_, root);
        if (!l.has_input) continue;
        oop_in.push_back({oop[i].send, l.in_count * es});
        ip_in.push_back({ip[i].send, l.in_count * es});
      }

    line.oop.time_us = time_batch(mycoll_oop, oop, oop_in);
    if (o_.check)
      line.oop.wrong = check_run(c, count, t, op, root, false, mycoll_oop, what + " out of place");
    if (c.has_in_place) {
      line.ip.time_us = time_batch(mycoll_ip, ip, ip_in);
      if (o_.check)
        line.ip.wrong = check_run(c, count, t, op, root, true, mycoll_ip, what + " in place");
    }
    if (nccl_) {
      const std::string w = "NCCL " + what;
      const Issue nccl_oop = [&, w](const std::vector<Ptrs>& p) {
        each_nccl(w, [&](Slot& s, size_t i) {
          return run_nccl(c, p[i].send, p[i].recv, count, t, op, root, s.r.rank, n_, s.r.nccl,
                          s.be->stream());
        });
      };
      line.vs.time_us = time_batch(nccl_oop, oop, {});
      if (o_.check) line.vs.wrong = check_run(c, count, t, op, root, false, nccl_oop, w);
    }
    // MPI counts are int: larger sizes (and types MPI lacks) show N/A.
    if (mpi_ && slots_.size() == 1 && mpi_->supports(t) && slots_[0].be->mpi_can_access() &&
        count <= static_cast<size_t>(std::numeric_limits<int>::max()))
      line.vs.time_us = time_mpi(c, oop[0], count, t, op, root, what, oop_in);
    const double factor = c.busbw_factor(n_);
    for (Result* r : {&line.oop, &line.ip, &line.vs}) {
      if (std::isnan(r->time_us)) continue;
      r->algbw = r->time_us > 0 ? static_cast<double>(line.bytes) / r->time_us / 1e3 : 0.0;
      r->busbw = r->algbw * factor;
    }
    // Same bytes and factor on both sides: the busbw ratio is the time ratio
    // (also defined for one rank, where busbw is 0).
    if (!std::isnan(line.vs.time_us) && line.oop.time_us > 0)
      line.ratio = line.vs.time_us / line.oop.time_us;
    return line;
  }

  // -w warm-up calls, then -B times: a barrier and -n timed calls (wall
  // clock, stream synchronised at the end; -z 1: after every call). -G N:
  // the -n calls are captured in one CUDA graph per rank, launched N times.
  // Each batch's time is aggregated over ranks (-a); the fastest is returned.
  // `dirty` (--dirty): input spans rewritten before every timed call.
  double time_batch(const Issue& issue, const std::vector<Ptrs>& p,
                    const std::vector<Span>& dirty) {
    for (int i = 0; i < o_.warmup; ++i) {
      issue(p);
      if (o_.blocking) sync_all();
    }
    sync_all();
    double best = 0;
    for (int k = 0; k < o_.repeats; ++k) {
      const double t = time_one_batch(issue, p, dirty);
      if (k == 0 || t < best) best = t;
    }
    return best;
  }

  double time_one_batch(const Issue& issue, const std::vector<Ptrs>& p,
                        const std::vector<Span>& dirty) {
    barrier();
    double us = 0;
    if (o_.graph_launches > 0) {
      try {
        for (Slot& s : slots_) s.be->begin_capture();
        for (int i = 0; i < o_.iters; ++i) issue(p);
        for (Slot& s : slots_) s.be->end_capture();
      } catch (...) {
        for (Slot& s : slots_) s.be->abandon_capture();
        throw;
      }
      barrier();  // capture time differs between ranks
      const auto t0 = Clock::now();
      for (int g = 0; g < o_.graph_launches; ++g)
        for (Slot& s : slots_) s.be->launch_graph();
      sync_all();
      us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() /
           (static_cast<double>(o_.iters) * o_.graph_launches);
      for (Slot& s : slots_) s.be->drop_graph();
    } else {
      const auto t0 = Clock::now();
      for (int i = 0; i < o_.iters; ++i) {
        rewrite_lines(dirty);
        issue(p);
        if (o_.blocking) sync_all();
      }
      sync_all();
      us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;
    }
    return aggregate_time(us);
  }

  // Initialises inputs (and poisons outputs) of every slot, runs the
  // collective once and compares every output element of every rank with
  // the exact expectation. Returns the number of wrong elements over all ranks.
  long long check_run(const CollInfo& c, size_t count, mycollDataType_t t, mycollRedOp_t op,
                      int root, bool in_place, const Issue& issue, const std::string& what) {
    const size_t es = dtype_size(t);
    char* stage = stage_.data();
    std::vector<Ptrs> p;
    for (Slot& s : slots_) {
      const Layout l = layout(c, count, s.r.rank, n_, root);
      if (in_place) {
        const size_t span = std::max(l.ip_in_off + l.in_count, l.ip_out_off + l.out_count);
        std::memset(stage, 0xff, span * es);
        if (l.has_input)
          fill_input_image(c, op, s.r.rank, n_, t, l.in_count, stage + l.ip_in_off * es);
        s.be->to_buffer(s.recv->data(), stage, span * es);
        p.push_back({s.recv->data() + l.ip_in_off * es, s.recv->data() + l.ip_out_off * es});
      } else {
        if (l.has_input) {
          fill_input_image(c, op, s.r.rank, n_, t, l.in_count, stage);
          s.be->to_buffer(s.send->data(), stage, l.in_count * es);
        }
        std::memset(stage, 0xff, l.out_count * es);
        s.be->to_buffer(s.recv->data(), stage, l.out_count * es);
        p.push_back({s.send->data(), s.recv->data()});
      }
    }
    issue(p);
    sync_all();
    // avg divides once at the end; allow the rounding of that division.
    double tol = 0;
    if (op == mycollAvg && c.reduces && dtype_is_float(t))
      tol = t == mycollFloat16    ? 1e-3
            : t == mycollBfloat16 ? 8e-3
            : t == mycollFloat32  ? 1e-6
                                  : 1e-12;
    std::vector<double> wrong;
    for (size_t i = 0; i < slots_.size(); ++i) {
      Slot& s = slots_[i];
      const Layout l = layout(c, count, s.r.rank, n_, root);
      wrong.push_back(0);
      if (!l.has_output) continue;
      s.be->from_buffer(stage, p[i].recv, l.out_count * es);
      fill_expected_image(c, op, s.r.rank, n_, root, count, t, l.out_count, want_.data());
      wrong.back() = static_cast<double>(compare_image(
          c, op, s.r.rank, n_, root, count, t, l.out_count, stage, want_.data(), tol, what));
    }
    return static_cast<long long>(reduce_doubles(wrong, mycollSum));
  }

  double time_mpi(const CollInfo& c, const Ptrs& p, size_t count, mycollDataType_t t,
                  mycollRedOp_t op, int root, const std::string& what,
                  const std::vector<Span>& dirty) {
    auto call = [&] {
      rewrite_lines(dirty);
      std::string err;
      if (!mpi_->run(c.id, p.send, p.recv, count, t, op, root, &err))
        throw std::runtime_error(std::string(vs_name()) + " " + what + " failed: " + err);
    };
    for (int i = 0; i < o_.warmup; ++i) call();
    double best = 0;
    for (int k = 0; k < o_.repeats; ++k) {  // -B: the fastest batch, as for mycoll
      const double t = time_mpi_batch(call);
      if (k == 0 || t < best) best = t;
    }
    return best;
  }

  template <typename Call>
  double time_mpi_batch(const Call& call) {
    mpi_->allreduce(1.0, MpiAgg::Sum);  // the same 1-element all-reduce barrier as for mycoll
    const auto t0 = Clock::now();
    for (int i = 0; i < o_.iters; ++i) call();
    double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o_.iters;
    const int rank = slots_[0].r.rank;
    switch (o_.average) {
      case 0: return mpi_->allreduce(rank == 0 ? us : 0.0, MpiAgg::Sum);
      case 1: return mpi_->allreduce(us, MpiAgg::Sum) / n_;
      case 2: return mpi_->allreduce(us, MpiAgg::Min);
      default: return mpi_->allreduce(us, MpiAgg::Max);
    }
  }

  void print_line(const Line& l) {
    std::printf("%12zu  %12zu  %8s  %6s  %6d", l.bytes, l.count, dtype_name(l.type),
                l.coll->reduces ? op_name(l.op) : "none", l.root);
    for (const Result* r : {&l.oop, &l.ip})
      std::printf("  %7s  %6s  %6s  %6s", fmt_time(r->time_us).c_str(), fmt_bw(r->algbw).c_str(),
                  fmt_bw(r->busbw).c_str(), fmt_wrong(r->wrong).c_str());
    if (mpi_ || nccl_)
      std::printf("  %7s  %6s  %6s", fmt_time(l.vs.time_us).c_str(), fmt_bw(l.vs.busbw).c_str(),
                  fmt_bw(l.ratio).c_str());
    std::printf("\n");
    std::fflush(stdout);
  }

  // One row to every JSON output: a line of --json's file (JSON Lines), an
  // element of -J's "results".
  void write_json(const std::string& row) {
    if (json_) {
      std::fprintf(json_, "%s\n", row.c_str());
      std::fflush(json_);
    }
    if (doc_) doc_rows_.push_back(row);
  }

  // One JSON object with every column of the table's line.
  std::string json_row(const Line& l) const {
    std::string row;
    appendf(&row,
            "{\"collective\":\"%s\",\"nranks\":%d,\"mem\":\"%s\",\"size\":%zu,\"count\":%zu,"
            "\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d,\"iters\":%d,",
            l.coll->name, n_, slots_[0].be->name(), l.bytes, l.count, dtype_name(l.type),
            l.coll->reduces ? op_name(l.op) : "none", l.root, o_.iters);
    appendf(&row,
            "\"oop_time_us\":%s,\"oop_algbw_gbs\":%s,\"oop_busbw_gbs\":%s,\"oop_wrong\":%s,"
            "\"ip_time_us\":%s,\"ip_algbw_gbs\":%s,\"ip_busbw_gbs\":%s,\"ip_wrong\":%s",
            json_num(l.oop.time_us).c_str(), json_num(l.oop.algbw).c_str(),
            json_num(l.oop.busbw).c_str(), json_wrong(l.oop.wrong).c_str(),
            json_num(l.ip.time_us).c_str(), json_num(l.ip.algbw).c_str(),
            json_num(l.ip.busbw).c_str(), json_wrong(l.ip.wrong).c_str());
    if (o_.cuda())
      appendf(&row,
              ",\"topology\":\"%s\",\"threads\":%d,\"gpus_per_thread\":%d,"
              "\"graph_launches\":%d,\"blocking\":%d",
              topology_.c_str(), o_.threads, o_.gpus, o_.graph_launches, o_.blocking);
    if (mpi_) {
      const char* k = std::strcmp(vs_name(), "Gloo") == 0 ? "gloo" : "mpi";
      appendf(&row, ",\"%s_time_us\":%s,\"%s_algbw_gbs\":%s,\"%s_busbw_gbs\":%s,\"ratio\":%s", k,
              json_num(l.vs.time_us).c_str(), k, json_num(l.vs.algbw).c_str(), k,
              json_num(l.vs.busbw).c_str(), json_num(l.ratio).c_str());
    }
    if (nccl_)
      appendf(&row,
              ",\"nccl_time_us\":%s,\"nccl_algbw_gbs\":%s,\"nccl_busbw_gbs\":%s,"
              "\"nccl_wrong\":%s,\"ratio\":%s",
              json_num(l.vs.time_us).c_str(), json_num(l.vs.algbw).c_str(),
              json_num(l.vs.busbw).c_str(), json_wrong(l.vs.wrong).c_str(),
              json_num(l.ratio).c_str());
    return row + "}";
  }

  std::vector<Slot> slots_;
  int n_;
  const Options& o_;
  const MpiApi* mpi_;  // --vs mpi / gloo: the loaded module (main.cc loaded it first)
  // "MPI", "Gloo" (the MPI-shaped table's name) or "NCCL": column and summary labels.
  const char* vs_name() const { return mpi_ ? (mpi_->name ? mpi_->name : "MPI") : "NCCL"; }
  bool nccl_;
  std::string topology_;
  bool lead_ = false;                   // this thread drives rank 0: it prints
  std::vector<char> stage_;             // host image of a buffer, for init and checks
  std::vector<char> want_;              // expected output image (-c 1)
  FILE* json_ = nullptr;                // --json
  FILE* doc_ = nullptr;                 // -J, written by write_document() at the end
  std::string doc_meta_;                // -J's "metadata" object
  std::vector<std::string> doc_rows_;   // -J's "results"
  std::unique_ptr<Progress> progress_;  // the sweep's line on a terminal's stderr
};

}  // namespace

int run_benchmark(const BenchSetup& setup, const Options& o) {
  Bench b(setup, o);
  return b.run();
}

int run_benchmark(mycollComm_t comm, int rank, int nranks, const Options& o, bool with_mpi) {
  BenchSetup s;
  int device = -1;  // --mem cuda under mpirun: the device the caller selected before init
  if (o.cuda()) must(mycollCommCuDevice(comm, &device), "mycollCommCuDevice", comm);
  s.slots.push_back(RankSlot{comm, rank, device, nullptr});
  s.nranks = nranks;
  s.with_mpi = with_mpi;
  return run_benchmark(s, o);
}

int run_benchmark_vs(mycollComm_t comm, int rank, int nranks, const Options& o, const MpiApi* vs) {
  BenchSetup s;
  s.slots.push_back(RankSlot{comm, rank, -1, nullptr});
  s.nranks = nranks;
  s.vs = vs;
  return run_benchmark(s, o);
}

}  // namespace mycoll_perf
