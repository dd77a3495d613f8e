#include "bootstrap/blame.h"

#include <algorithm>

namespace mycoll {

namespace {

const bswire::Report* report_of(const BlameView& v, int rank) {
  for (const bswire::Report& r : *v.reports)
    if (r.origin == rank) return &r;
  return nullptr;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

// The waits followed breadth first from this rank's (with_also: and every
// `also` list).
Blame follow(const BlameView& v, bool with_also) {
  Blame b;
  const int n = static_cast<int>(v.gone->size());
  std::vector<int> via(n, -2);  // -2 unseen; else who waited for it (self: -1)
  std::vector<int> order;       // breadth first
  auto visit = [&](const std::vector<int>& ws, int from) {
    for (int w : ws)
      if (w >= 0 && w < n && via[w] == -2) {
        via[w] = from;
        order.push_back(w);
      }
  };
  if (v.self >= 0 && v.self < n) via[v.self] = -1;
  visit(v.waits_for, -1);
  if (with_also) visit(v.also, -1);
  b.settled = true;
  for (size_t i = 0; i < order.size(); ++i) {
    const int r = order[i];
    const bswire::Report* rep = report_of(v, r);
    if (rep && !rep->waits_for.empty()) {
      visit(rep->waits_for, r);
      if (with_also) visit(rep->also, r);
      continue;
    }
    if (rep && !rep->also.empty()) {  // caused by these ranks (blame.h)
      const size_t before = order.size();
      visit(rep->also, r);
      if (order.size() > before) continue;
    }
    b.roots.push_back(r);
    std::string t;
    if (rep) {
      t = rep->text.find("rank " + std::to_string(r)) == std::string::npos
              ? "rank " + std::to_string(r) + ": " + rep->text
              : rep->text;
    } else if (!(*v.gone)[r].empty()) {
      t = "rank " + std::to_string(r) + " reported no failure and its link " + (*v.gone)[r];
    } else {
      t = "rank " + std::to_string(r) +
          " reported no failure and made no progress (stopped, hung or unreachable?)";
      b.settled = false;
    }
    if (via[r] >= 0) t += " (rank " + std::to_string(via[r]) + " was waiting for it)";
    b.text += (b.text.empty() ? "" : "; ") + t;
  }
  if (b.roots.empty()) {
    std::vector<int> ring = order;
    if (v.self >= 0) ring.push_back(v.self);
    std::sort(ring.begin(), ring.end());
    b.text = "ranks " + rank_list(ring) +
             " were all waiting for one another (calls that do not match across ranks?)";
  }
  return b;
}

}  // namespace

Blame find_root_cause(const BlameView& v) {
  if (v.waits_for.empty()) return Blame{};
  Blame b = follow(v, false);
  if (!b.roots.empty()) return b;
  // A cycle: where a lost connection closed it, the other transfers of the
  // rank that lost it lead on (blame.h).
  Blame on = follow(v, true);
  return on.roots.empty() ? b : on;
}

}  // namespace mycoll
