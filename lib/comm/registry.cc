#include "comm/registry.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "comm/comm.h"
#include "comm/retire.h"

namespace mycoll {
namespace {

// Slot word: [generation:32 | flags | pins:24].
constexpr uint64_t kPinMask = (uint64_t(1) << 24) - 1;
constexpr uint64_t kBusy = uint64_t(1) << 24;    // an exclusive pin is held
constexpr uint64_t kDead = uint64_t(1) << 25;    // destroy/abort started: no new pins
constexpr uint64_t kOrphan = uint64_t(1) << 26;  // the last pin to leave frees it
constexpr uint64_t kLive = uint64_t(1) << 27;    // the slot holds a communicator
// The communicator failed or was aborted (mycollComm::fail, interrupt):
// pins still succeed (the call then reports the sticky error), calls of
// count 0 take the pinned path (registry_idle_nranks).
constexpr uint64_t kUnusable = uint64_t(1) << 28;
constexpr unsigned kSlots = 1u << 16;

// Handle: bit 63 set (never a user-space address: a stray dereference
// faults instead of reading someone's memory), generation in bits 24..55,
// slot in bits 0..23.
constexpr uint64_t kHandleTag = uint64_t(1) << 63;

struct Slot {
  std::atomic<uint64_t> state{0};
  std::atomic<mycollComm*> comm{nullptr};
  std::atomic<int> nranks{0};  // the communicator's, for registry_idle_nranks
};

Slot g_slots[kSlots];
std::mutex g_free_mu;
std::vector<unsigned> g_free;  // guarded by g_free_mu
unsigned g_next_fresh = 0;     // guarded by g_free_mu
std::atomic<int> g_live{0};

uint32_t gen_of(uint64_t s) { return static_cast<uint32_t>(s >> 32); }

mycollComm_t encode(unsigned slot, uint32_t gen) {
  return reinterpret_cast<mycollComm_t>(kHandleTag | (uint64_t(gen) << 24) | slot);
}

bool decode(mycollComm_t h, unsigned* slot, uint32_t* gen) {
  uint64_t v = reinterpret_cast<uintptr_t>(h);
  if ((v & kHandleTag) == 0 || ((v >> 56) & 0x7f) != 0) return false;
  *slot = static_cast<unsigned>(v & 0xffffff);
  *gen = static_cast<uint32_t>((v >> 24) & 0xffffffffu);
  return *slot < kSlots;
}

// Frees the communicator of a dead slot with no pins (free_comm: its GPU
// memory maybe later, comm/retire.h) and recycles the slot under the next
// generation.
void free_slot(unsigned i) {
  Slot& s = g_slots[i];
  mycollComm* c = s.comm.exchange(nullptr, std::memory_order_acq_rel);
  const uint32_t gen = gen_of(s.state.load(std::memory_order_acquire));
  free_comm(c);
  s.state.store(uint64_t(gen + 1) << 32, std::memory_order_release);
  g_live.fetch_sub(1);
  std::lock_guard<std::mutex> g(g_free_mu);
  g_free.push_back(i);
}

}  // namespace

void CommPin::unpin() noexcept {
  comm_ = nullptr;
  const uint64_t dec = 1 + (mode_ == PinMode::kExclusive ? kBusy : 0);
  uint64_t now = g_slots[slot_].state.fetch_sub(dec, std::memory_order_acq_rel) - dec;
  if ((now & kOrphan) && (now & kPinMask) == 0) free_slot(slot_);
}

mycollComm_t registry_add(std::unique_ptr<mycollComm> c) {
  unsigned i;
  {
    std::lock_guard<std::mutex> g(g_free_mu);
    if (!g_free.empty()) {
      i = g_free.back();
      g_free.pop_back();
    } else if (g_next_fresh < kSlots) {
      i = g_next_fresh++;
    } else {
      throw_error(mycollInvalidUsage, "more than " + std::to_string(kSlots) +
                                          " communicators alive at once (destroy unused ones)");
    }
  }
  Slot& s = g_slots[i];
  const uint32_t gen = gen_of(s.state.load(std::memory_order_acquire));
  mycollComm_t h = encode(i, gen);
  c->handle = h;
  mycollComm* comm = c.release();
  s.comm.store(comm, std::memory_order_release);
  s.nranks.store(comm->nranks, std::memory_order_release);
  g_live.fetch_add(1);
  s.state.store((uint64_t(gen) << 32) | kLive);
  // A failure before the slot was live (a watch thread of the new
  // communicator) found it not live and left the flag to this line: the
  // failure's flag store and this load are ordered (both sequentially
  // consistent), so one of the two sets it.
  if (comm->aborted.load() || comm->async_error.load() != mycollSuccess)
    registry_mark_unusable(comm);
  return h;
}

void registry_mark_unusable(const mycollComm* c) {
  unsigned i = 0;
  uint32_t gen = 0;
  const mycollComm_t h = c->handle.load();
  if (!h || !decode(h, &i, &gen)) return;  // not registered yet: registry_add sets it
  Slot& s = g_slots[i];
  uint64_t v = s.state.load();
  do {
    if (gen_of(v) != gen || !(v & kLive) || (v & kUnusable)) return;
  } while (!s.state.compare_exchange_weak(v, v | kUnusable));
}

int registry_idle_nranks(mycollComm_t h) {
  unsigned i = 0;
  uint32_t gen = 0;
  if (!decode(h, &i, &gen)) return 0;
  const Slot& s = g_slots[i];
  const uint64_t mask = (~uint64_t(0) << 32) | kLive | kDead | kBusy | kUnusable;
  const uint64_t want = (uint64_t(gen) << 32) | kLive;
  if ((s.state.load(std::memory_order_acquire) & mask) != want) return 0;
  // Acquire: a count stored for the slot's next communicator comes after
  // the slot word left this generation, so the second look sees it left.
  const int n = s.nranks.load(std::memory_order_acquire);
  if ((s.state.load(std::memory_order_relaxed) & mask) != want) return 0;
  return n;
}

namespace {

// Why h cannot be pinned (v: its slot word as last seen, 0 when h names no
// slot). The checks in their order: NULL, not a live communicator, busy
// (exclusive pins only), pin count full.
[[noreturn]] void throw_pin_error(mycollComm_t h, uint64_t v, PinMode mode, const char* fn) {
  check_arg(h != nullptr, [&] { return std::string(fn) + ": comm is NULL"; });
  unsigned i = 0;
  uint32_t gen = 0;
  if (!decode(h, &i, &gen) || gen_of(v) != gen || !(v & kLive) || (v & kDead))
    throw_error(mycollInvalidArgument,
                std::string(fn) + ": comm is not a valid communicator (destroyed?)");
  if (mode == PinMode::kExclusive && (v & kBusy))
    throw_error(mycollInvalidUsage,
                std::string(fn) +
                    ": the communicator is in use by another thread at the same time (a "
                    "communicator takes one call at a time; use one per thread or serialize)");
  throw_error(mycollInternalError, "communicator pin overflow");
}

}  // namespace

CommPin pin_comm(mycollComm_t h, PinMode mode, const char* fn) {
  unsigned i = 0;
  uint32_t gen = 0;
  if (h == nullptr || !decode(h, &i, &gen)) throw_pin_error(h, 0, mode, fn);
  Slot& s = g_slots[i];
  // Pinnable: the handle's generation, live, not dead, not busy (exclusive
  // pins only), pin count not full: one mask and one compare.
  const uint64_t busy = mode == PinMode::kExclusive ? kBusy : 0;
  const uint64_t mask = (~uint64_t(0) << 32) | kLive | kDead | busy;
  const uint64_t want = (uint64_t(gen) << 32) | kLive;
  uint64_t v = s.state.load(std::memory_order_acquire);
  do {
    if ((v & mask) != want || (v & kPinMask) == kPinMask) throw_pin_error(h, v, mode, fn);
  } while (!s.state.compare_exchange_weak(v, (v + 1) | busy, std::memory_order_acq_rel,
                                          std::memory_order_acquire));
  return CommPin(s.comm.load(std::memory_order_acquire), i, mode);
}

mycollComm* registry_peek(mycollComm_t h) {
  unsigned i = 0;
  uint32_t gen = 0;
  if (!h || !decode(h, &i, &gen)) return nullptr;
  uint64_t v = g_slots[i].state.load(std::memory_order_acquire);
  if (gen_of(v) != gen || !(v & kLive) || (v & kDead)) return nullptr;
  return g_slots[i].comm.load(std::memory_order_acquire);
}

bool registry_retire(CommPin pin, double wait_s) {
  if (!pin.get()) return false;
  const unsigned i = pin.slot_;
  Slot& s = g_slots[i];
  uint64_t v = s.state.load(std::memory_order_acquire);
  do {
    if (v & kDead) return false;  // pin released by its destructor
  } while (!s.state.compare_exchange_weak(v, v | kDead, std::memory_order_acq_rel,
                                          std::memory_order_acquire));
  pin.release();
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while ((s.state.load(std::memory_order_acquire) & kPinMask) != 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  v = s.state.load(std::memory_order_acquire);
  for (;;) {
    if ((v & kPinMask) == 0) {
      free_slot(i);
      return true;
    }
    if (s.state.compare_exchange_weak(v, v | kOrphan, std::memory_order_acq_rel,
                                      std::memory_order_acquire))
      return true;  // the last call to leave frees it
  }
}

int registry_live_count() { return g_live.load(); }

}  // namespace mycoll
