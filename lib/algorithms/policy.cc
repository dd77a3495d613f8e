// AlgoPolicy: the MYCOLL_ALGO spec and the automatic size/rank rule. The
// rule and its reasons are written in docs/algorithms.md; keep both in step.
#include <cctype>
#include <string>

#include "algorithms/plan.h"
#include "base/error.h"

namespace mycoll {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string lower(const std::string& s) {
  std::string out;
  for (char ch : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// Lower case, without '_' and '-', so "All_Reduce" and "reduce-scatter" match.
std::string normalize(const std::string& s) {
  std::string out;
  for (char ch : lower(s))
    if (ch != '_' && ch != '-') out += ch;
  return out;
}

// -2 for "auto", -1 for unknown, else the Algo value.
int parse_algo(const std::string& name) {
  std::string n = normalize(name);
  if (n == "auto") return -2;
  for (int i = 0; i < kNumAlgos; ++i)
    if (n == algo_name(static_cast<Algo>(i))) return i;
  return -1;
}

int parse_coll(const std::string& name) {
  std::string n = normalize(name);
  for (int i = 0; i < kNumColls; ++i)
    if (n == coll_name(static_cast<Coll>(i))) return i;
  return -1;
}

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why) {
  throw_error(mycollInvalidArgument,
              "MYCOLL_ALGO '" + spec + "': " + why +
                  " (expected auto | ring | tree | rhd | direct | hier | twoshot | doubling, or "
                  "comma-separated <collective>:<algorithm> entries)");
}

}  // namespace

AlgoPolicy AlgoPolicy::parse(const std::string& spec) {
  AlgoPolicy policy;
  const std::string whole = trim(spec);
  if (whole.empty()) return policy;
  bool seen[kNumColls] = {};
  bool seen_global = false;
  size_t start = 0;
  while (start <= whole.size()) {
    size_t comma = whole.find(',', start);
    if (comma == std::string::npos) comma = whole.size();
    const std::string entry = trim(whole.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) bad_spec(spec, "empty entry");
    size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      int a = parse_algo(entry);
      if (a == -1) bad_spec(spec, "unknown algorithm '" + entry + "'");
      if (seen_global) bad_spec(spec, "more than one global algorithm ('" + entry + "')");
      seen_global = true;
      policy.global_ = a >= 0 ? a : -1;
      continue;
    }
    const std::string cname = trim(entry.substr(0, colon));
    const std::string aname = trim(entry.substr(colon + 1));
    int c = parse_coll(cname);
    if (c < 0) bad_spec(spec, "unknown collective '" + cname + "' in entry '" + entry + "'");
    int a = parse_algo(aname);
    if (a == -1) bad_spec(spec, "unknown algorithm '" + aname + "' in entry '" + entry + "'");
    if (a >= 0 && !algo_supports(static_cast<Algo>(a), static_cast<Coll>(c)))
      bad_spec(spec, std::string("algorithm '") + algo_name(static_cast<Algo>(a)) +
                         "' does not serve collective '" + coll_name(static_cast<Coll>(c)) +
                         "' (entry '" + entry + "')");
    if (seen[c]) bad_spec(spec, "collective '" + cname + "' named twice (entry '" + entry + "')");
    seen[c] = true;
    policy.forced_[c] = a;  // -2: explicitly auto, overriding a global family
  }
  return policy;
}

Algo AlgoPolicy::choose(Coll c, int nranks, size_t bytes) const {
  int ci = static_cast<int>(c);
  if (ci >= 0 && ci < kNumColls) {
    if (forced_[ci] >= 0) return static_cast<Algo>(forced_[ci]);
    if (forced_[ci] == -2) return auto_rule(c, nranks, bytes);
  }
  if (global_ >= 0 && algo_supports(static_cast<Algo>(global_), c))
    return static_cast<Algo>(global_);
  return auto_rule(c, nranks, bytes);
}

bool AlgoPolicy::forced(Coll c) const {
  int ci = static_cast<int>(c);
  if (ci >= 0 && ci < kNumColls) {
    if (forced_[ci] >= 0) return true;
    if (forced_[ci] == -2) return false;
  }
  return global_ >= 0 && algo_supports(static_cast<Algo>(global_), c);
}

// Oversubscribed (more ranks than cores): every step waits for its peer to
// be scheduled, so the ring's 2(n-1) steps lose to rhd's 2 log2 n up to 8
// MiB; and every byte a rank moves is CPU time the others wait for, so the
// one shot's (n-1) copies of the message lose to rhd once they pass 32 KiB
// (docs/algorithms.md).
Algo AlgoPolicy::auto_rule(Coll c, int nranks, size_t bytes) const {
  Algo a = auto_choice_hosts(c, nranks, hosts_, bytes);
  if (host_links_ == HostLinks::Shm && (c == Coll::AllGather || c == Coll::ReduceScatter))
    return host_blocks(c, nranks, bytes, a);
  if (host_links_ == HostLinks::Network && c == Coll::AllReduce && network_doubling(nranks, bytes))
    return Algo::Doubling;
  if (host_links_ == HostLinks::Shm && c == Coll::AllReduce &&
      shm_doubling(nranks, bytes, oversubscribed_))
    return Algo::Doubling;
  if (host_links_ == HostLinks::Shm && (c == Coll::Gather || c == Coll::Scatter) &&
      shm_rooted_tree(nranks, bytes, oversubscribed_))
    return Algo::Tree;
  if (!oversubscribed_ || c != Coll::AllReduce || nranks <= 2) return a;
  // Measured on 2 cores at 4 and 8 ranks (session 34), not with
  // one_shot_max_bytes' core per rank: the one shot up to 32 KiB of copies.
  if (nranks <= 16 && bytes * static_cast<size_t>(nranks - 1) <= 32 * KiB) return Algo::Direct;
  if (a == Algo::Direct) return Algo::Rhd;
  if (a == Algo::Ring && bytes <= 8 * MiB) return Algo::Rhd;
  return a;
}

// All-gather and reduce-scatter of host memory at 3-8 ranks. The direct
// exchange sends each block straight to the rank that needs it: the same
// bytes as the ring or rhd, in one step, against the ring's n-1 and rhd's
// log2 n (two more for a rank count that is not a power of two, its fold).
// Direct was the fastest of the three at every size up to 8 KiB at 4-8
// ranks and up to 256 KiB (all-gather) and 16 KiB (reduce-scatter) at 3,
// where rhd's fold is 3 steps to the ring's 2; above that, the ring at 3
// ranks and `rule` at more (docs/performance.md, "Session 49: three ranks"
// and "Session 50: all-gather and reduce-scatter at 4-8 ranks"). GPU
// communicators with proxied peers keep the rule: there direct took up to
// 1.5x rhd's time at 8 ranks (every message passes the proxy thread in
// turn; docs/gpu.md, "What was run (session 52)"); so do other rank counts,
// and ranks with any peer across a network (socket, ib, ucx): there every
// message pays a network stack, and direct's n-1 of them per rank took
// 1.2-2x rhd's time up to 4 KiB at 4 ranks (docs/performance.md,
// "Session 58").
Algo AlgoPolicy::host_blocks(Coll c, int nranks, size_t bytes, Algo rule) {
  if (nranks < 3 || nranks > 8) return rule;
  if (nranks == 3) {
    const size_t direct_max = c == Coll::AllGather ? 256 * KiB : 16 * KiB;
    return bytes <= direct_max ? Algo::Direct : Algo::Ring;
  }
  return bytes <= 8 * KiB ? Algo::Direct : rule;
}

// All-reduce of host memory across a network at 3 ranks or more, up to 32
// KiB: recursive doubling sends the whole vector in log2 p steps of one
// message each way (two more with a fold). The one shot's n-1 messages per
// rank in one step, and rhd's 2 log2 p steps, each pay a network stack per
// message. Beside both between network namespaces (socket transport; 2
// cores, so 4-16 ranks are oversubscribed): 3 ranks 28-48 us against the
// one shot's 42-69 up to 32 KiB; 4 ranks 45-79 against 63-101; 8 ranks
// 118-226 against rhd's 96-340 and the one shot's 263-446; 16 ranks 399-655
// against rhd's 326-978; two emulated hosts of two ranks (shm inside) 53-73
// against 80-112. The one cell rhd kept was 8 B at 8 and 16 ranks (96 and
// 326 us against 120 and 399): with fewer elements than ranks most of its
// messages are empty and vanish, which on 2 cores shared by 8-16 ranks
// saves CPU time. From 64 KiB the vectors' bytes count: rhd was level at
// 3-4 ranks and ahead at 8 and 16 (docs/performance.md, "Session 59"). Two
// ranks keep the rule: the one shot is the same exchange.
bool AlgoPolicy::network_doubling(int nranks, size_t bytes) {
  return nranks >= 3 && bytes <= 32 * KiB;
}

// All-reduce of host memory over shm. With a core per rank (16 cores,
// ranks bound a core each): at 4 and 8 ranks up to 2 KiB recursive
// doubling took 0.54-0.93 us at 4 ranks up to 512 B (the one shot
// 0.57-1.11) and 1.47-1.98 at 1-2 KiB (rhd 1.70-2.59); at 8 ranks
// 0.87-3.32 against the one shot's and rhd's 1.20-3.91; at 16 ranks up to
// 512 B 1.12-2.11 against rhd's 2.10-3.22 (level at 1-2 KiB, behind from
// 4 KiB). Oversubscribed (2 cores; 4-8 ranks) the one shot's fused small
// path stays ahead up to 2 KiB, and doubling took 0.55-0.9x the time of
// the one shot and rhd over 2-16 KiB (4 ranks 4-16 KiB 7.4-9.5 us against
// 8.4-17.1, 6 ranks 17.0-22.7 against 19.8-31.7, 8 ranks 19.1-35.0 against
// 21.5-41.4), behind from 32 KiB (docs/performance.md, "Session 59").
// With a core each, 5-7 ranks (not measured; there doubling's fold would
// race the one shot) keep the rule; above 8 every count takes doubling up
// to 512 B, measured at 16 (against rhd, which has the same fold for a
// non-power of two and twice the steps).
bool AlgoPolicy::shm_doubling(int nranks, size_t bytes, bool oversubscribed) {
  if (oversubscribed) return nranks >= 4 && nranks <= 8 && bytes > 2 * KiB && bytes <= 16 * KiB;
  if (nranks == 4 || nranks == 8) return bytes <= 2 * KiB;
  return nranks > 8 && bytes <= 512;
}

// Gather and scatter of host memory over shm with a core per rank, 8
// ranks or more, blocks up to 4 KiB: the tree (binomial; 16 ranks and more
// already take it by auto_choice up to 8 KiB blocks). The root of the
// direct exchange takes n-1 messages in turn, each a cache line's trip
// from another core; the tree's root takes log2 n, their subtrees' blocks
// gathered on the way in parallel. On the GPU machine's 16 cores, ranks
// bound a core each, 8 ranks beside direct: gather 32 B-32 KiB 0.50-3.16 us
// against 0.71-3.47 (Open MPI 0.60-10.4; direct's 32-128 B cells were
// 0.79-1.00 of Open MPI, the tree's 1.17-1.44), scatter 0.39-3.97 against
// 0.62-4.60. At 4 ranks the two were level, direct ahead for scatter at
// 128-512 B (0.24-0.28 us against 0.45-0.50); on 2 cores (ranks sharing
// them) the tree took 1.06-1.41x direct's time for gather at 4 and 8 ranks
// (docs/performance.md, "Session 57" and "Session 60"). 5-7 ranks are not
// measured and keep direct.
bool AlgoPolicy::shm_rooted_tree(int nranks, size_t bytes, bool oversubscribed) {
  return !oversubscribed && nranks >= 8 && bytes / static_cast<size_t>(nranks) <= 4 * KiB;
}

// All-to-all of host memory on one host at 3-8 ranks: every block in one
// step while blocks are at most 16 KiB. The pairwise exchange's n-1 steps
// each wait for both ranks of a pair; in one step a rank moves whichever
// blocks its peers are ready for. Beside pairwise, at 3, 4 and 8 ranks: out
// of place 1.2-2.0x faster at 4-16 KiB blocks (level below, where the
// small-message path already fused the pairwise steps), in place 1.1-2.3x
// at every size up to 16 KiB blocks. From 32 KiB blocks pairwise keeps one
// block in flight each way and the one step was level or behind (4 ranks,
// 32-64 KiB blocks: 0.74-0.87). Measured on shm (docs/performance.md,
// "Session 52: small all-to-all blocks in one step"); on one host over
// sockets (4 ranks between network namespaces) it took 0.96-1.09x
// pairwise's time up to 1 KiB blocks and 0.84-0.87x at 4 and 16 KiB
// ("Session 58").
// Several hosts, more ranks and GPU communicators keep pairwise.
bool AlgoPolicy::alltoall_one_step(int nranks, size_t block_bytes) const {
  return hosts_ == 1 && nranks >= 3 && nranks <= 8 && block_bytes <= 16 * KiB;
}

// Several hosts: the tree family's flat trees (binary, binomial) cross a host
// boundary on most edges; the two-level tree of hier crosses it once per host
// (chains inside, a tree over the hosts), with the same pipelined schedule
// and about as many rounds. So wherever the single-host rule picks a tree,
// several hosts with more ranks than hosts get hier. Ring (its rings and
// chains already cross each host boundary once in host-major order), rhd
// (topology-aware: local exchanges carry the big halves) and direct stay.
Algo AlgoPolicy::auto_choice_hosts(Coll c, int nranks, int hosts, size_t bytes) {
  Algo a = auto_choice(c, nranks, bytes);
  if (hosts > 1 && hosts < nranks && a == Algo::Tree && algo_supports(Algo::Hier, c))
    return Algo::Hier;
  return a;
}

// The largest all-reduce the one shot takes on hosts. Measured with a
// core per rank (16 cores, ranks bound a core each, shm; docs/algorithms.md):
// against rhd it leads up to 32 KiB at 3 ranks (rhd's extra steps for a
// non-power of two), up to 2 KiB at 4-6 ranks, up to 512 B at 7-8, and
// nowhere at 16 (rhd 2.1-2.3 us against 2.9-3.5 at 8 B). Two ranks take it
// while its one copy is at most 256 KiB.
size_t AlgoPolicy::one_shot_max_bytes(int nranks) {
  if (nranks <= 2) return 256 * KiB;
  if (nranks == 3) return 32 * KiB;
  if (nranks <= 6) return 2 * KiB;
  if (nranks <= 8) return 512;
  return 0;
}

// bytes is the collective's whole message: the buffer of allreduce,
// broadcast and reduce; all n blocks of allgather, reducescatter, alltoall
// (one rank's send buffer), scatter and gather (the root's blocked buffer).
Algo AlgoPolicy::auto_choice(Coll c, int nranks, size_t bytes) {
  switch (c) {
    case Coll::AllReduce:
      // One shot (one step, n-1 copies of the message out) while that
      // traffic stays small: latency is what counts there.
      if (bytes <= one_shot_max_bytes(nranks)) return Algo::Direct;
      if (nranks <= 2) return Algo::Ring;
      if (bytes <= 256 * KiB) return Algo::Rhd;
      if (nranks >= 16 && bytes <= 4 * MiB) return Algo::Tree;
      return Algo::Ring;
    case Coll::AllGather:
    case Coll::ReduceScatter:
      if (nranks > 2 && bytes <= 256 * KiB) return Algo::Rhd;
      return Algo::Ring;
    case Coll::Broadcast:
    case Coll::Reduce:
      if (nranks > 2 && (bytes <= 256 * KiB || (nranks >= 32 && bytes <= 4 * MiB)))
        return Algo::Tree;
      return Algo::Ring;
    case Coll::Scatter:
    case Coll::Gather:
      if (nranks >= 16 && bytes / static_cast<size_t>(nranks) <= 8 * KiB) return Algo::Tree;
      return Algo::Direct;
    case Coll::AllToAll:
    case Coll::SendRecv: return Algo::Direct;
  }
  return Algo::Ring;
}

}  // namespace mycoll
