#include "transports/ibverbs/ib_regcache.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "base/error.h"

namespace mycoll {

static uintptr_t page_size() {
  static const uintptr_t p = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return p;
}

RegCache::~RegCache() {
  for (auto& [start, e] : by_start_) api_->dereg_mr(e.mr);
}

ibv_mr* RegCache::get(const void* addr, size_t len, int access) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = a + (len ? len : 1);
  ++clock_;
  // Candidates start at or before a; entries may overlap, so walk back a few.
  auto it = by_start_.upper_bound(a);
  for (int k = 0; k < 8 && it != by_start_.begin(); ++k) {
    --it;
    Entry& e = it->second;
    if (!e.stale && e.end >= end && (e.access & access) == access) {
      ++e.refs;
      e.last_use = clock_;
      ++hits_;
      return e.mr;
    }
  }
  ++misses_;
  const uintptr_t ps = page_size();
  const uintptr_t start = a & ~(ps - 1);
  uintptr_t stop = (end + ps - 1) & ~(ps - 1);
  // An entry at the same start that did not cover the request (too short or
  // weaker access) is superseded by one covering both.
  auto same = by_start_.find(start);
  if (same != by_start_.end()) {
    stop = std::max(stop, same->second.end);
    access |= same->second.access;
    if (same->second.refs == 0) drop(same);
  }
  if (by_start_.count(start)) {
    // Still referenced: register without caching under this key.
    ibv_mr* mr = api_->reg_mr(pd_, reinterpret_cast<void*>(start), stop - start, access);
    if (!mr)
      throw_error(mycollSystemError, "ibv_reg_mr(" + std::to_string(stop - start) +
                                         " bytes): " + std::strerror(errno));
    return mr;  // put() of an unknown MR deregisters it
  }
  evict();
  ibv_mr* mr = api_->reg_mr(pd_, reinterpret_cast<void*>(start), stop - start, access);
  if (!mr)
    throw_error(mycollSystemError,
                "ibv_reg_mr(" + std::to_string(stop - start) + " bytes at 0x" +
                    fmt::format("{:x}", start) + "): " + std::strerror(errno) +
                    " (locked-memory limit? see ulimit -l)");
  by_start_[start] = Entry{mr, stop, access, 1, false, clock_};
  return mr;
}

void RegCache::put(ibv_mr* mr) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(mr->addr);
  auto it = by_start_.find(start);
  if (it == by_start_.end() || it->second.mr != mr) {
    api_->dereg_mr(mr);  // an uncached registration
    return;
  }
  if (--it->second.refs == 0 && it->second.stale) drop(it);
}

void RegCache::invalidate(const void* addr, size_t len) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr), end = a + len;
  for (auto it = by_start_.begin(); it != by_start_.end();) {
    auto next = std::next(it);
    if (it->first < end && it->second.end > a) {
      if (it->second.refs == 0)
        drop(it);
      else
        it->second.stale = true;
    }
    it = next;
  }
}

void RegCache::evict() {
  while (by_start_.size() >= max_entries_) {
    auto victim = by_start_.end();
    for (auto it = by_start_.begin(); it != by_start_.end(); ++it)
      if (it->second.refs == 0 &&
          (victim == by_start_.end() || it->second.last_use < victim->second.last_use))
        victim = it;
    if (victim == by_start_.end()) return;  // everything in use: grow past the limit
    drop(victim);
  }
}

void RegCache::drop(std::map<uintptr_t, Entry>::iterator it) {
  api_->dereg_mr(it->second.mr);
  by_start_.erase(it);
}

}  // namespace mycoll
