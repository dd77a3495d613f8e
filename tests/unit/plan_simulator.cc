#include "tests/unit/plan_simulator.h"

#include <algorithm>
#include <exception>
#include <sstream>

namespace mycoll {
namespace sim {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
uint64_t input_value(int rank, size_t k) { return mix((uint64_t(rank) << 40) ^ k); }
uint64_t poison(int rank, size_t pos, uint64_t salt) {
  return mix(0xdeadbeefULL ^ (uint64_t(rank) << 44) ^ (salt << 36) ^ pos);
}

const char* buf_name(Buf b) {
  switch (b) {
    case Buf::Input: return "Input";
    case Buf::Output: return "Output";
    case Buf::Scratch: return "Scratch";
  }
  return "?";
}

std::string slice_str(const Slice& s) {
  std::ostringstream o;
  o << buf_name(s.buf) << "[" << s.offset << ",+" << s.count << "]";
  return o.str();
}

std::string op_str(const Op& op) {
  std::ostringstream o;
  switch (op.kind) {
    case OpKind::Send: o << "Send->" << op.peer << " " << slice_str(op.src); break;
    case OpKind::Recv: o << "Recv<-" << op.peer << " " << slice_str(op.dst); break;
    case OpKind::RecvReduce:
      o << "RecvReduce<-" << op.peer << " " << slice_str(op.dst) << " = " << slice_str(op.src)
        << " + in";
      break;
    case OpKind::Copy: o << "Copy " << slice_str(op.dst) << " = " << slice_str(op.src); break;
    case OpKind::Reduce: o << "Reduce " << slice_str(op.dst) << " += " << slice_str(op.src); break;
  }
  return o.str();
}

std::string where(int rank, size_t step, size_t idx, const Op& op) {
  std::ostringstream o;
  o << "rank " << rank << " step " << step << " op " << idx << " (" << op_str(op) << ")";
  return o.str();
}

// A resolved slice: memory 0 = arena, 1 = scratch.
struct Loc {
  int mem = 0;
  size_t off = 0;
  size_t count = 0;
  bool overlaps(const Loc& o) const {
    return mem == o.mem && off < o.off + o.count && o.off < off + count;
  }
  bool same(const Loc& o) const { return mem == o.mem && off == o.off && count == o.count; }
};

struct OpRef {
  int rank = -1;
  size_t step = 0, idx = 0;
};

bool is_transfer(OpKind k) { return k != OpKind::Copy && k != OpKind::Reduce; }
bool is_receive(OpKind k) { return k == OpKind::Recv || k == OpKind::RecvReduce; }

class Executor {
 public:
  Executor(const std::vector<Plan>& plans, std::vector<RankMemory>& mem)
      : plans_(plans), mem_(mem), n_(static_cast<int>(plans.size())) {}

  std::string run() {
    if (mem_.size() != plans_.size()) return "simulator: plans and memories differ in number";
    for (int r = 0; r < n_; ++r) {
      mem_[r].scratch.assign(plans_[r].scratch_count, 0);
      for (size_t i = 0; i < mem_[r].scratch.size(); ++i) mem_[r].scratch[i] = poison(r, i, 7);
    }
    std::string err = resolve_all();
    if (err.empty()) err = match();
    if (err.empty()) err = check_hazards();
    if (err.empty()) err = simulate();
    return err;
  }

 private:
  struct OpInfo {
    Loc src, dst;
    OpRef partner;
    bool done = false;
  };

  bool resolve(int r, const Slice& s, Loc* out, std::string* why) {
    const RankMemory& m = mem_[r];
    size_t limit = 0, base = 0;
    int memid = 0;
    switch (s.buf) {
      case Buf::Input: limit = m.counts.input; base = m.input_base; break;
      case Buf::Output: limit = m.counts.output; base = m.output_base; break;
      case Buf::Scratch: limit = plans_[r].scratch_count; memid = 1; break;
      default: *why = "unknown buffer"; return false;
    }
    if (s.offset > limit || s.count > limit - s.offset) {
      std::ostringstream o;
      o << slice_str(s) << " out of bounds (" << buf_name(s.buf) << " has " << limit
        << " elements)";
      *why = o.str();
      return false;
    }
    *out = Loc{memid, base + s.offset, s.count};
    return true;
  }

  std::string resolve_all() {
    info_.resize(n_);
    for (int r = 0; r < n_; ++r) {
      const auto& steps = plans_[r].steps;
      info_[r].resize(steps.size());
      for (size_t s = 0; s < steps.size(); ++s) {
        if (steps[s].ops.empty())
          return "rank " + std::to_string(r) + " step " + std::to_string(s) + " has no ops";
        info_[r][s].resize(steps[s].ops.size());
        for (size_t i = 0; i < steps[s].ops.size(); ++i) {
          const Op& op = steps[s].ops[i];
          OpInfo& oi = info_[r][s][i];
          std::string why;
          bool has_src = op.kind != OpKind::Recv, has_dst = op.kind != OpKind::Send;
          if (is_transfer(op.kind) && (op.peer < 0 || op.peer >= n_ || op.peer == r))
            return where(r, s, i, op) + ": bad peer";
          if (has_src && has_dst && op.src.count != op.dst.count)
            return where(r, s, i, op) + ": src and dst counts differ";
          if ((has_src ? op.src.count : op.dst.count) == 0)
            return where(r, s, i, op) + ": op with count 0 (must be omitted)";
          if (has_src && !resolve(r, op.src, &oi.src, &why)) return where(r, s, i, op) + ": " + why;
          if (has_dst && !resolve(r, op.dst, &oi.dst, &why)) return where(r, s, i, op) + ": " + why;
          if (has_src && has_dst && oi.src.overlaps(oi.dst) && !oi.src.same(oi.dst))
            return where(r, s, i, op) + ": src and dst partially overlap";
        }
      }
    }
    return "";
  }

  // k-th Send a->b pairs with the k-th receive on b from a.
  std::string match() {
    std::vector<std::vector<OpRef>> sends(size_t(n_) * n_), recvs(size_t(n_) * n_);
    for (int r = 0; r < n_; ++r)
      for (size_t s = 0; s < plans_[r].steps.size(); ++s)
        for (size_t i = 0; i < plans_[r].steps[s].ops.size(); ++i) {
          const Op& op = plans_[r].steps[s].ops[i];
          if (op.kind == OpKind::Send) sends[size_t(r) * n_ + op.peer].push_back({r, s, i});
          if (is_receive(op.kind)) recvs[size_t(op.peer) * n_ + r].push_back({r, s, i});
        }
    for (int a = 0; a < n_; ++a)
      for (int b = 0; b < n_; ++b) {
        const auto& sv = sends[size_t(a) * n_ + b];
        const auto& rv = recvs[size_t(a) * n_ + b];
        size_t common = std::min(sv.size(), rv.size());
        for (size_t k = 0; k < common; ++k) {
          const Op& so = op_at(sv[k]);
          const Op& ro = op_at(rv[k]);
          if (so.src.count != ro.dst.count)
            return "message " + std::to_string(k) + " from rank " + std::to_string(a) +
                   " to rank " + std::to_string(b) + ": count mismatch: " +
                   where(a, sv[k].step, sv[k].idx, so) + " vs " +
                   where(b, rv[k].step, rv[k].idx, ro);
          info_at(sv[k]).partner = rv[k];
          info_at(rv[k]).partner = sv[k];
        }
        if (sv.size() > common)
          return "unmatched send: " + where(a, sv[common].step, sv[common].idx, op_at(sv[common])) +
                 " has no receive on rank " + std::to_string(b);
        if (rv.size() > common)
          return "unmatched receive: " +
                 where(b, rv[common].step, rv[common].idx, op_at(rv[common])) +
                 " has no send on rank " + std::to_string(a);
      }
    return "";
  }

  std::string check_hazards() {
    for (int r = 0; r < n_; ++r)
      for (size_t s = 0; s < plans_[r].steps.size(); ++s) {
        const auto& ops = plans_[r].steps[s].ops;
        for (size_t i = 0; i < ops.size(); ++i) {
          if (!is_receive(ops[i].kind)) continue;
          const Loc& w = info_[r][s][i].dst;
          for (size_t j = 0; j < ops.size(); ++j) {
            if (j == i || !is_transfer(ops[j].kind)) continue;
            const OpInfo& o = info_[r][s][j];
            bool reads = ops[j].kind != OpKind::Recv && w.overlaps(o.src);
            bool writes = is_receive(ops[j].kind) && w.overlaps(o.dst);
            if (reads || writes)
              return "intra-step hazard: " + where(r, s, i, ops[i]) + " writes memory that " +
                     where(r, s, j, ops[j]) + (reads ? " reads" : " writes");
          }
        }
      }
    return "";
  }

  uint64_t* ptr(int r, const Loc& l) {
    return (l.mem == 0 ? mem_[r].arena.data() : mem_[r].scratch.data()) + l.off;
  }

  void run_copies(int r, size_t s) {
    const auto& ops = plans_[r].steps[s].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind != OpKind::Copy && ops[i].kind != OpKind::Reduce) continue;
      const OpInfo& oi = info_[r][s][i];
      if (ops[i].kind == OpKind::Reduce) {
        uint64_t* d = ptr(r, oi.dst);
        const uint64_t* src = ptr(r, oi.src);
        for (size_t k = 0; k < oi.dst.count; ++k) d[k] += src[k];
        continue;
      }
      if (oi.src.same(oi.dst)) continue;
      std::copy_n(ptr(r, oi.src), oi.src.count, ptr(r, oi.dst));
    }
  }

  void transfer(int a, const OpInfo& send, int b, const Op& rop, const OpInfo& recv) {
    const uint64_t* in = ptr(a, send.src);
    uint64_t* dst = ptr(b, recv.dst);
    if (rop.kind == OpKind::Recv) {
      std::copy_n(in, recv.dst.count, dst);
    } else {
      const uint64_t* local = ptr(b, recv.src);
      for (size_t k = 0; k < recv.dst.count; ++k) dst[k] = local[k] + in[k];
    }
  }

  std::string simulate() {
    std::vector<size_t> cur(n_, 0), left(n_, 0);
    std::vector<bool> entered(n_, false);
    // Enters steps (running their Copies) until one has transfers pending.
    auto settle = [&](int r) {
      while (cur[r] < plans_[r].steps.size()) {
        if (!entered[r]) {
          run_copies(r, cur[r]);
          entered[r] = true;
          left[r] = 0;
          for (const Op& op : plans_[r].steps[cur[r]].ops) left[r] += is_transfer(op.kind);
        }
        if (left[r] > 0) return;
        ++cur[r];
        entered[r] = false;
      }
    };
    for (int r = 0; r < n_; ++r) settle(r);
    for (;;) {
      bool progress = false, all_done = true;
      for (int a = 0; a < n_; ++a) {
        if (cur[a] >= plans_[a].steps.size()) continue;
        all_done = false;
        size_t s = cur[a];
        const auto& ops = plans_[a].steps[s].ops;
        for (size_t i = 0; i < ops.size(); ++i) {
          OpInfo& so = info_[a][s][i];
          if (ops[i].kind != OpKind::Send || so.done) continue;
          const OpRef& p = so.partner;
          if (cur[p.rank] != p.step || !entered[p.rank]) continue;
          OpInfo& ro = info_at(p);
          transfer(a, so, p.rank, op_at(p), ro);
          so.done = ro.done = true;
          --left[a];
          --left[p.rank];
          progress = true;
        }
      }
      if (all_done) return "";
      if (!progress) return deadlock(cur);
      for (int r = 0; r < n_; ++r) settle(r);
    }
  }

  std::string deadlock(const std::vector<size_t>& cur) {
    std::ostringstream o;
    o << "deadlock: no transfer can complete;";
    int shown = 0;
    for (int r = 0; r < n_ && shown < 6; ++r) {
      if (cur[r] >= plans_[r].steps.size()) continue;
      ++shown;
      o << " rank " << r << " waits in step " << cur[r] << "/" << plans_[r].steps.size() << " on";
      const auto& ops = plans_[r].steps[cur[r]].ops;
      int listed = 0;
      for (size_t i = 0; i < ops.size() && listed < 3; ++i) {
        const OpInfo& oi = info_[r][cur[r]][i];
        if (!is_transfer(ops[i].kind) || oi.done) continue;
        ++listed;
        o << " [" << op_str(ops[i]) << ", matched by rank " << oi.partner.rank << " step "
          << oi.partner.step << "]";
      }
      o << ";";
    }
    return o.str();
  }

  const Op& op_at(const OpRef& r) const { return plans_[r.rank].steps[r.step].ops[r.idx]; }
  OpInfo& info_at(const OpRef& r) { return info_[r.rank][r.step][r.idx]; }

  const std::vector<Plan>& plans_;
  std::vector<RankMemory>& mem_;
  int n_;
  std::vector<std::vector<std::vector<OpInfo>>> info_;
};

bool blocked_input(Coll c, bool root) {
  return c == Coll::ReduceScatter || c == Coll::AllToAll || (c == Coll::Scatter && root);
}

}  // namespace

std::string execute(const std::vector<Plan>& plans, std::vector<RankMemory>& mem) {
  return Executor(plans, mem).run();
}

std::string Case::describe() const {
  std::ostringstream o;
  o << algo_name(algo) << "/" << coll_name(args.coll) << " nranks=" << args.nranks
    << " root=" << args.root << " count=" << args.count << " stride=" << args.stride
    << " chunk=" << args.chunk << (args.in_place ? " in-place" : " out-of-place");
  if (args.host_of) {
    o << " hosts=[";
    for (int r = 0; r < args.nranks; ++r) o << (r ? " " : "") << args.host_of[r];
    o << "]";
  }
  return o.str();
}

std::string run_case(const Case& c) {
  const CollArgs& A = c.args;
  const int n = A.nranks;
  const size_t count = A.count, stride = A.stride ? A.stride : A.count;
  const std::string tag = c.describe() + ": ";
  constexpr size_t kGuard = 3;

  std::vector<Plan> plans(n);
  std::vector<RankMemory> mem(n);
  // Logical inputs: rank r's element k (k = b*count + i for blocked inputs).
  std::vector<std::vector<uint64_t>> in(n);
  for (int r = 0; r < n; ++r) {
    CollArgs a = A;
    a.rank = r;
    try {
      plans[r] = build_plan(c.algo, a);
    } catch (const std::exception& e) {
      return tag + "build_plan threw for rank " + std::to_string(r) + ": " + e.what();
    }
    if (count == 0 && !plans[r].steps.empty())
      return tag + "rank " + std::to_string(r) + ": count 0 must give an empty plan";
    RankMemory& m = mem[r];
    m.counts = buffer_counts(a);
    const bool root = r == A.root;
    size_t in_off = 0, out_off = 0;  // relative placement inside the arena
    if (A.in_place) {
      if (A.coll == Coll::AllGather) in_off = r * stride;
      if (A.coll == Coll::ReduceScatter) out_off = r * stride;
      if (A.coll == Coll::Gather && root) in_off = A.root * stride;
      if (A.coll == Coll::Scatter && root) out_off = A.root * stride;
    } else {
      out_off = m.counts.input + kGuard;
    }
    m.input_base = kGuard + in_off;
    m.output_base = kGuard + out_off;
    size_t end = std::max(m.input_base + m.counts.input, m.output_base + m.counts.output);
    m.arena.resize(end + kGuard);
    for (size_t i = 0; i < m.arena.size(); ++i) m.arena[i] = poison(r, i, 1);
    if (m.counts.input > 0) {
      bool blk = blocked_input(A.coll, root);
      in[r].resize(blk ? n * count : count);
      for (size_t k = 0; k < in[r].size(); ++k) {
        in[r][k] = input_value(r, k);
        size_t pos = blk ? (k / count) * stride + k % count : k;
        m.arena[m.input_base + pos] = in[r][k];
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    const Plan& p = plans[r];
    bool reduced = A.coll == Coll::AllReduce || A.coll == Coll::ReduceScatter ||
                   (A.coll == Coll::Reduce && r == A.root);
    size_t want = reduced ? count : 0;
    if (p.result.count != want || (want > 0 && (p.result.buf != Buf::Output || p.result.offset != 0)))
      return tag + "rank " + std::to_string(r) + ": Plan::result is " + slice_str(p.result) +
             ", expected Output[0,+" + std::to_string(want) + "]";
  }

  // Reference: expected arenas = initial ones with the outputs written.
  std::vector<std::vector<uint64_t>> expect(n);
  for (int r = 0; r < n; ++r) {
    RankMemory& m = mem[r];
    expect[r] = m.arena;
    auto put = [&](size_t b, size_t i, uint64_t v) {
      expect[r][m.output_base + b * stride + i] = v;
    };
    auto sum_over = [&](size_t k) {
      uint64_t s = 0;
      for (int q = 0; q < n; ++q) s += in[q][k];
      return s;
    };
    for (size_t i = 0; i < count; ++i) {
      switch (A.coll) {
        case Coll::AllReduce: put(0, i, sum_over(i)); break;
        case Coll::Broadcast: put(0, i, in[A.root][i]); break;
        case Coll::Reduce:
          if (r == A.root) put(0, i, sum_over(i));
          break;
        case Coll::ReduceScatter: put(0, i, sum_over(r * count + i)); break;
        case Coll::Scatter: put(0, i, in[A.root][r * count + i]); break;
        case Coll::AllGather:
          for (int b = 0; b < n; ++b) put(b, i, in[b][i]);
          break;
        case Coll::AllToAll:
          for (int b = 0; b < n; ++b) put(b, i, in[b][r * count + i]);
          break;
        case Coll::Gather:
          if (r == A.root)
            for (int b = 0; b < n; ++b) put(b, i, in[b][i]);
          break;
        case Coll::SendRecv: break;
      }
    }
  }

  std::string err = execute(plans, mem);
  if (!err.empty()) return tag + err;

  for (int r = 0; r < n; ++r) {
    const RankMemory& m = mem[r];
    for (size_t pos = 0; pos < m.arena.size(); ++pos) {
      if (m.arena[pos] == expect[r][pos]) continue;
      std::ostringstream o;
      o << tag << "rank " << r << " arena element " << pos;
      auto in_region = [&](size_t base, size_t cnt) { return pos >= base && pos < base + cnt; };
      if (in_region(m.output_base, m.counts.output)) {
        size_t rel = pos - m.output_base;
        o << " = Output[" << rel << "] (block " << rel / stride << " elem " << rel % stride << ")";
      } else if (in_region(m.input_base, m.counts.input)) {
        o << " = Input[" << pos - m.input_base << "] (must stay untouched)";
      } else {
        o << " (guard, must stay untouched)";
      }
      o << ": got " << m.arena[pos] << ", expected " << expect[r][pos];
      return o.str();
    }
  }
  return "";
}

}  // namespace sim
}  // namespace mycoll
