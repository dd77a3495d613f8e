// Memory registration cache keyed by address range.
//
// ibv_reg_mr pins pages and costs a system call plus page-table walks, so a
// registration is looked up before it is made: get(addr, len, access) returns
// an MR covering [addr, addr+len) with at least `access`, registering (whole
// pages) only on a miss. Entries are reference counted; unreferenced ones are
// kept for reuse and the least recently used are deregistered once more than
// max_entries exist. invalidate() drops every entry overlapping a range: the
// owner of memory must call it before unmapping memory it registered (a
// pin-down cache cannot notice munmap by itself).
//
// Not thread-safe by itself: the owner serializes calls (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "transports/ibverbs/ibvwrap.h"

namespace mycoll {

class RegCache {
 public:
  RegCache(const IbvApi* api, ibv_pd* pd, size_t max_entries = 64)
      : api_(api), pd_(pd), max_entries_(max_entries) {}
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // MR covering the range (one reference taken). Throws Error(SystemError)
  // naming the range when registration fails.
  ibv_mr* get(const void* addr, size_t len, int access);
  // Returns a reference taken by get().
  void put(ibv_mr* mr);
  // Deregisters every unreferenced entry overlapping the range; referenced
  // ones are marked to be dropped on their last put().
  void invalidate(const void* addr, size_t len);

  size_t entries() const { return by_start_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    ibv_mr* mr;
    uintptr_t end;
    int access;
    int refs;
    bool stale;
    uint64_t last_use;
  };
  void evict();
  void drop(std::map<uintptr_t, Entry>::iterator it);

  const IbvApi* api_;
  ibv_pd* pd_;
  size_t max_entries_;
  std::map<uintptr_t, Entry> by_start_;  // page-aligned start -> entry
  uint64_t clock_ = 0, hits_ = 0, misses_ = 0;
};

}  // namespace mycoll
