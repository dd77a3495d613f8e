// Shared-memory transport (see shm.h for the design and the FIFO layout).
//
// Threading (as the other transports): the send side (send_some) and the
// receive side (peek, consume, recv_some, check_alive) of one connection may
// run on two different threads, each side on one thread at a time;
// shutdown() may be called from any thread.
#include "transports/shm/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"

namespace mycoll {
namespace shm {
namespace {

constexpr size_t kPage = 4096;
// Publish / release granularity: the writer makes data visible (and the
// reader frees space) at least every this many bytes, so both sides stream
// instead of taking turns over the whole ring; it also keeps a peeked block
// cache-sized for the reduction that reads it.
#ifndef MYCOLL_SHM_MAX_SLICE  // compile-time override for benchmarking only
#define MYCOLL_SHM_MAX_SLICE (256 * 1024)
#endif
constexpr size_t kMaxSlice = MYCOLL_SHM_MAX_SLICE;
// The word a reader reads from the writer's process to probe remote reads.
constexpr uint64_t kProbeValue = 0x45424f5250434d59ull;  // "YMCPROBE"
const volatile uint64_t g_probe_word = kProbeValue;

// A record slot's lines sit in the reader's cache until the writer takes
// them back, and a store asks for its line only when it reaches the head of
// the store buffer: a record of two lines cost two cross-core round trips,
// one after the other. Asking for every line first (PREFETCHW) overlaps
// them (docs/performance.md, "Session 46: records of several lines").
// Without PREFETCHW (or off x86-64) the compiler's write prefetch stands in.
#if defined(__x86_64__)
bool cpu_has_prefetchw() {
  unsigned a = 0, b = 0, c = 0, d = 0;  // CPUID 0x80000001 ECX bit 8: PRFCHW
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
}
const bool g_prefetchw = cpu_has_prefetchw();
#endif
void prefetch_lines_for_write(const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
#if defined(__x86_64__)
  if (g_prefetchw) {
    for (size_t off = 0; off < n; off += 64) asm volatile("prefetchw %0" ::"m"(c[off]));
    return;
  }
#endif
  for (size_t off = 0; off < n; off += 64) __builtin_prefetch(c + off, 1, 3);
}

// How much of a record, word first, send_record asks for up front; past it
// the copy's own stores stream (asking for a whole 4 KiB record measured
// slower, same section).
constexpr size_t kRecPrefetchWriteBytes = 1024;

// Minimum time between two liveness checks of the peer's pid.
constexpr auto kPidCheckInterval = std::chrono::milliseconds(20);

uint64_t own_pidns() {
  static const uint64_t ino = [] {
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  }();
  return ino;
}

// True when pid no longer runs: it does not exist, or it is a zombie (a
// dead child its parent has not reaped yet; kill() still succeeds on it).
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return errno == ENOENT;
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* close_paren = std::strrchr(buf, ')');  // the command name may hold ')'
  if (!close_paren || close_paren[1] != ' ') return false;
  const char state = close_paren[2];
  return state == 'Z' || state == 'X';
}

size_t slice_of(uint64_t capacity) {
  return std::min<size_t>(kMaxSlice, std::max<size_t>(kPage, capacity / 4));
}

std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] void fail_sys(const std::string& what, int e) {
  throw_error(mycollSystemError, what + ": " + errno_text(e));
}

// The word of record i's slot in a slot area.
std::atomic<uint64_t>* slot_word(uint8_t* area, uint32_t slot_bytes, uint32_t slots, uint64_t i) {
  return reinterpret_cast<std::atomic<uint64_t>*>(area + (i & (slots - 1)) * slot_bytes);
}
const std::atomic<uint64_t>* slot_word(const uint8_t* area, uint32_t slot_bytes, uint32_t slots,
                                       uint64_t i) {
  return reinterpret_cast<const std::atomic<uint64_t>*>(area + (i & (slots - 1)) * slot_bytes);
}

class ShmConnection final : public Connection {
 public:
  ShmConnection(int peer, std::unique_ptr<Fifo> out, std::unique_ptr<Fifo> in)
      : peer_(peer),
        out_(std::move(out)),
        in_(std::move(in)),
        oh_(out_->header()),
        ih_(in_->header()),
        odata_(out_->data()),
        idata_(in_->data()),
        ocap_(out_->capacity()),
        icap_(in_->capacity()),
        oslice_(slice_of(ocap_)),
        islice_(slice_of(icap_)),
        my_pid_(getpid()),
        orec_(out_->records()),
        irec_(in_->records()),
        orec_slots_(orec_ ? out_->rec_slots() : 0),
        orec_bytes_(orec_ ? out_->rec_slot_bytes() : 0),
        irec_slots_(irec_ ? in_->rec_slots() : 0),
        irec_bytes_(irec_ ? in_->rec_slot_bytes() : 0),
        remote_ok_(oh_->remote_read_ok.load(std::memory_order_acquire) == 1),
        rec_max_(orec_slots_ && irec_slots_ ? std::min<size_t>(orec_bytes_, irec_bytes_) - kRecWord
                                            : 0) {
    // Resume from the counters in case the FIFOs were used before (they
    // are fresh after connect; this keeps the object honest anyway).
    head_ = oh_->head.load(std::memory_order_relaxed);
    tail_seen_ = oh_->tail.load(std::memory_order_acquire);
    tail_ = ih_->tail.load(std::memory_order_relaxed);
    head_seen_ = ih_->head.load(std::memory_order_acquire);
    std::string why;
    if (check_peer_counter("head", tail_, head_seen_, tail_ + icap_, peer_, &why) !=
            mycollSuccess ||
        check_peer_counter("tail", head_ - std::min(head_, ocap_), tail_seen_, head_, peer_,
                           &why) != mycollSuccess)
      throw_error(mycollRemoteError, why);
    // Records: the writer's count is the reader's tail plus what is in
    // flight, which the slots' words say; fresh FIFOs start at 0.
    rec_tail_ = ih_->rec_tail.load(std::memory_order_relaxed);
    rec_tail_seen_ = oh_->rec_tail.load(std::memory_order_acquire);
    rec_head_ = rec_tail_seen_;
    while (
        orec_slots_ > 0 && rec_head_ - rec_tail_seen_ < orec_slots_ &&
        (slot_word(orec_, orec_bytes_, orec_slots_, rec_head_)->load(std::memory_order_acquire) >>
         16) == rec_head_ + 1)
      ++rec_head_;
  }

  ~ShmConnection() override = default;

  size_t send_some(const void* data, size_t n) override {
    const uint8_t* src = static_cast<const uint8_t*>(data);
    size_t sent = 0;
    while (sent < n) {
      const size_t want = std::min(n - sent, oslice_);
      uint64_t free = ocap_ - (head_ - tail_seen_);
      if (free < want) {
        observe_tail();
        free = ocap_ - (head_ - tail_seen_);
        if (free == 0) break;
      }
      const size_t k = std::min<uint64_t>(want, free);
      const size_t pos = head_ % ocap_;
      const size_t first = std::min<uint64_t>(k, ocap_ - pos);
      std::memcpy(odata_ + pos, src + sent, first);
      if (k > first) std::memcpy(odata_, src + sent + first, k - first);
      head_ += k;
      oh_->head.store(head_, std::memory_order_release);
      sent += k;
    }
    return sent;
  }

  size_t peek(const void** data, size_t max) override {
    const size_t want = std::min(max, islice_);
    if (want == 0) return 0;
    uint64_t avail = head_seen_ - tail_;
    if (avail < want) {
      observe_head();
      avail = head_seen_ - tail_;
      if (avail == 0) return 0;
    }
    const size_t pos = tail_ % icap_;
    const size_t k = std::min<uint64_t>(std::min<uint64_t>(avail, want), icap_ - pos);
    *data = idata_ + pos;
    return k;
  }

  void consume(size_t n) override {
    if (n > head_seen_ - tail_)
      throw_error(mycollInternalError, "shm: consume(" + std::to_string(n) + ") from rank " +
                                           std::to_string(peer_) + " beyond the " +
                                           std::to_string(head_seen_ - tail_) + " bytes peeked");
    tail_ += n;
    ih_->tail.store(tail_, std::memory_order_release);
  }

  size_t recv_some(void* dst, size_t n) override {
    uint8_t* out = static_cast<uint8_t*>(dst);
    size_t got = 0;
    while (got < n) {
      const void* p = nullptr;
      const size_t k = peek(&p, n - got);
      if (k == 0) break;
      std::memcpy(out + got, p, k);
      got += k;
      tail_ += k;
      ih_->tail.store(tail_, std::memory_order_release);
    }
    return got;
  }

  // The smaller of the two directions' records, so both ends of a pair
  // agree on which messages fit.
  size_t record_max() const override { return rec_max_; }

  bool remote_read_ok() const override { return remote_ok_; }
  uint64_t expose() override { return ++exposed_; }
  bool exposed_done(uint64_t ticket) override {
    return oh_->remote_released.load(std::memory_order_acquire) >= ticket;
  }

  size_t read_remote(void* dst, uint64_t src, size_t n) override {
    const pid_t pid = ih_->writer_pid.load(std::memory_order_relaxed);
    struct iovec local {
      dst, n
    };
    struct iovec remote {
      reinterpret_cast<void*>(static_cast<uintptr_t>(src)), n
    };
    const ssize_t k = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (k <= 0)
      throw_error(mycollRemoteError,
                  "shm: cannot read " + std::to_string(n) + " bytes from rank " +
                      std::to_string(peer_) + " (pid " + std::to_string(pid) +
                      ") with process_vm_readv: " + (k < 0 ? errno_text(errno) : "nothing read"));
    return static_cast<size_t>(k);
  }

  void release_remote() override { ih_->remote_released.fetch_add(1, std::memory_order_release); }

  bool send_record(const void* hdr, size_t hn, const void* data, size_t n) override {
    const size_t len = hn + n;
    if (len == 0 || len > record_max())
      throw_error(mycollInternalError, "shm: record of " + std::to_string(len) + " bytes to rank " +
                                           std::to_string(peer_) + " (1.." +
                                           std::to_string(record_max()) + " allowed)");
    if (rec_head_ - rec_tail_seen_ >= orec_slots_) {
      const uint64_t now = oh_->rec_tail.load(std::memory_order_acquire);
      std::string why;
      if (check_peer_counter("record tail", rec_tail_seen_, now, rec_head_, peer_, &why) !=
          mycollSuccess)
        throw_error(mycollRemoteError, why);
      rec_tail_seen_ = now;
      if (rec_head_ - rec_tail_seen_ >= orec_slots_) return false;
    }
    std::atomic<uint64_t>* w = slot_word(orec_, orec_bytes_, orec_slots_, rec_head_);
    uint8_t* body = reinterpret_cast<uint8_t*>(w) + kRecWord;
    if (kRecWord + len > 64)  // one line: its first store asks for it anyway
      prefetch_lines_for_write(w, std::min<size_t>(kRecWord + len, kRecPrefetchWriteBytes));
    std::memcpy(body, hdr, hn);
    if (n) std::memcpy(body + hn, data, n);
    w->store(record_word(rec_head_, len), std::memory_order_release);
    ++rec_head_;
    return true;
  }

  size_t peek_record(const void** data) override {
    if (irec_slots_ == 0) return 0;
    const std::atomic<uint64_t>* w = slot_word(irec_, irec_bytes_, irec_slots_, rec_tail_);
    size_t len = 0;
    std::string why;
    if (decode_record_word(w->load(std::memory_order_acquire), rec_tail_, irec_slots_, irec_bytes_,
                           &len, peer_, &why) != mycollSuccess)
      throw_error(mycollRemoteError, why);
    if (len) *data = reinterpret_cast<const uint8_t*>(w) + kRecWord;
    return len;
  }

  void prefetch_record() const override {
    if (irec_slots_ == 0) return;
    const uint8_t* w =
        reinterpret_cast<const uint8_t*>(slot_word(irec_, irec_bytes_, irec_slots_, rec_tail_));
    __builtin_prefetch(w);
    if (irec_bytes_ > 64) __builtin_prefetch(w + 64);  // the header's end, a small payload
  }

  void consume_record() override {
    ++rec_tail_;
    ih_->rec_tail.store(rec_tail_, std::memory_order_release);
  }

  void check_alive() override {
    if (local_closed_.load(std::memory_order_acquire))
      throw_error(mycollRemoteError, "shm channel to peer rank " + std::to_string(peer_) +
                                         " was shut down by this rank");
    std::string why;
    if ((ih_->closed.load(std::memory_order_acquire) & kWriterClosed) ||
        (oh_->closed.load(std::memory_order_acquire) & kReaderClosed)) {
      why = "peer rank " + std::to_string(peer_) + " closed the shm channel";
    } else if (!gone_.empty()) {
      why = gone_;
    } else {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_pid_check_ >= kPidCheckInterval) {
        last_pid_check_ = now;
        pid_t pid = ih_->writer_pid.load(std::memory_order_relaxed);
        uint64_t ns = ih_->writer_pidns.load(std::memory_order_relaxed);
        if (pid <= 0) {
          pid = oh_->reader_pid.load(std::memory_order_relaxed);
          ns = oh_->reader_pidns.load(std::memory_order_relaxed);
        }
        // Only a pid in our own pid namespace means anything to kill().
        if (pid > 0 && pid != my_pid_ && ns != 0 && ns == own_pidns() && process_gone(pid)) {
          gone_ =
              "peer rank " + std::to_string(peer_) + " (pid " + std::to_string(pid) + ") is gone";
          why = gone_;
        }
      }
    }
    if (why.empty()) return;
    // Bytes the peer wrote before it went away may still be unread (it may
    // have sent its last message and exited): give the engine one more
    // pass to take them; if it does not move the tail, report the peer.
    const uint64_t head = ih_->head.load(std::memory_order_acquire);
    const void* rec = nullptr;
    const bool unread = head != tail_ || peek_record(&rec) > 0;
    if (unread && tail_ + rec_tail_ != deferred_tail_) {
      deferred_tail_ = tail_ + rec_tail_;
      return;
    }
    throw_error(mycollRemoteError, why);
  }

  void shutdown() noexcept override {
    local_closed_.store(true, std::memory_order_release);
    oh_->closed.fetch_or(kWriterClosed, std::memory_order_acq_rel);
    ih_->closed.fetch_or(kReaderClosed, std::memory_order_acq_rel);
  }

  std::string describe() const override { return "shm"; }

 private:
  // Reads the counters the peer publishes, checked (shm_wire.h).
  void observe_head() {
    const uint64_t now = ih_->head.load(std::memory_order_acquire);
    std::string why;
    if (check_peer_counter("head", head_seen_, now, tail_ + icap_, peer_, &why) != mycollSuccess)
      throw_error(mycollRemoteError, why);
    head_seen_ = now;
  }
  void observe_tail() {
    const uint64_t now = oh_->tail.load(std::memory_order_acquire);
    std::string why;
    if (check_peer_counter("tail", tail_seen_, now, head_, peer_, &why) != mycollSuccess)
      throw_error(mycollRemoteError, why);
    tail_seen_ = now;
  }

  const int peer_;
  std::unique_ptr<Fifo> out_, in_;
  FifoHeader* const oh_;
  FifoHeader* const ih_;
  uint8_t* const odata_;
  const uint8_t* const idata_;
  const uint64_t ocap_, icap_;
  const size_t oslice_, islice_;
  const pid_t my_pid_;
  uint8_t* const orec_;
  const uint8_t* const irec_;
  const uint32_t orec_slots_, orec_bytes_;
  const uint32_t irec_slots_, irec_bytes_;
  const bool remote_ok_;
  const size_t rec_max_;
  uint64_t exposed_ = 0;  // buffers exposed to the peer (tickets handed out)

  // Records, send side: records written; last rec_tail read from the peer.
  uint64_t rec_head_ = 0;
  uint64_t rec_tail_seen_ = 0;
  // Records, receive side: records consumed.
  uint64_t rec_tail_ = 0;

  // Send side.
  uint64_t head_ = 0;       // our copy of out head (we are its only writer)
  uint64_t tail_seen_ = 0;  // last out tail read from the peer

  // Receive side.
  uint64_t tail_ = 0;       // our copy of in tail
  uint64_t head_seen_ = 0;  // last in head read from the peer
  std::chrono::steady_clock::time_point last_pid_check_{};
  std::string gone_;
  uint64_t deferred_tail_ = UINT64_MAX;

  std::atomic<bool> local_closed_{false};
};

// Unlinks the names it holds when it goes out of scope.
struct UnlinkGuard {
  std::vector<std::string> names;
  ~UnlinkGuard() {
    for (const auto& n : names) unlink_fifo(n);
  }
};

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }

  bool can_connect(const PeerInfo& me, const PeerInfo& peer) const override {
    return me.host_id[0] != 0 && std::strncmp(me.host_id, peer.host_id, sizeof(me.host_id)) == 0;
  }

  std::vector<std::unique_ptr<Connection>> connect(Bootstrap& bs, const std::vector<PeerInfo>& all,
                                                   const std::vector<int>& peers,
                                                   const Config& cfg) override {
    const int me = bs.rank();
    const int n = bs.nranks();
    const uint64_t tag = bs.tag();
    const size_t np = peers.size();
    std::vector<std::unique_ptr<Fifo>> in(np), out(np);
    UnlinkGuard created;

    // Phase 1: create the FIFOs this rank reads from.
    std::exception_ptr err;
    size_t cap = 0;
    try {
      cap = cfg.shm_fifo_bytes;  // parsed once, by Config::from_env
      check_arg(cap >= kPage,
                "MYCOLL_SHM_FIFO_BYTES must be at least 4K, got " + std::to_string(cap));
      for (size_t i = 0; i < np; ++i) {
        const int p = peers[i];
        check_arg(p >= 0 && p < n && p != me && static_cast<size_t>(p) < all.size() &&
                      static_cast<size_t>(me) < all.size(),
                  "shm connect: bad peer rank " + std::to_string(p) + " on rank " +
                      std::to_string(me) + " of " + std::to_string(n));
        check_arg(can_connect(all[me], all[p]), "shm connect: rank " + std::to_string(p) +
                                                    " is on another host (" + all[p].host_id +
                                                    ") than rank " + std::to_string(me) + " (" +
                                                    all[me].host_id + ")");
        const std::string name = fifo_name(tag, p, me);
        in[i] = Fifo::create(name, cap);
        created.names.push_back(name);
      }
    } catch (...) {
      err = std::current_exception();
    }
    sync(bs, err, "create");

    // Phase 2: open the FIFOs this rank writes to.
    try {
      for (size_t i = 0; i < np; ++i) out[i] = Fifo::open(fifo_name(tag, me, peers[i]));
    } catch (...) {
      err = std::current_exception();
    }
    sync(bs, err, "open");
    // Everybody has mapped everything: drop the names now (the guard would
    // do it too; doing it here keeps /dev/shm clean before we return).
    for (const auto& name : created.names) unlink_fifo(name);
    created.names.clear();

    // Phase 3: can this rank read each writer's memory (single-copy large
    // messages)? The answers are in the headers before any writer looks.
    size_t readable = 0;
    for (size_t i = 0; i < np; ++i) readable += probe_remote_read(*in[i]) ? 1 : 0;
    sync(bs, err, "probe");

    std::vector<std::unique_ptr<Connection>> conns;
    conns.reserve(np);
    for (size_t i = 0; i < np; ++i)
      conns.push_back(make_connection(peers[i], std::move(out[i]), std::move(in[i])));
    if (np > 0)
      log_info(Subsys::Transport,
               "shm: rank {} connected to {} peer(s), FIFO {} bytes each way, single-copy reads "
               "from {} of them{}",
               me, np, cap, readable,
               cfg.shm_read_bytes == 0
                   ? (cfg.shm_read_bytes_set ? " (off: MYCOLL_SHM_READ_BYTES=0)"
                                             : " (off: slower than the FIFO on this host)")
                   : " (messages of " + std::to_string(cfg.shm_read_bytes) +
                         " B and more that do not reduce" +
                         (cfg.shm_read_bytes_set ? "" : ", but not a gather's") +
                         ", MYCOLL_SHM_READ_BYTES)");
    return conns;
  }

 private:
  // Collective status exchange (also the barrier between phases): every
  // rank learns whether any rank failed, so all fail together instead of
  // waiting for each other until the bootstrap timeout.
  static void sync(Bootstrap& bs, std::exception_ptr& err, const char* phase) {
    std::vector<int32_t> ok(bs.nranks(), 1);
    ok[bs.rank()] = err ? 0 : 1;
    bs.allgather(ok.data(), sizeof(int32_t));
    if (err) std::rethrow_exception(err);
    for (int r = 0; r < bs.nranks(); ++r)
      if (!ok[r])
        throw_error(mycollRemoteError, std::string("shm connect: rank ") + std::to_string(r) +
                                           " failed to " + phase + " its shared-memory FIFOs");
  }
};

}  // namespace

// ---- Fifo --------------------------------------------------------------------

Fifo::Fifo(std::string name, void* base, size_t map_bytes, const FifoGeometry& geo)
    : name_(std::move(name)),
      base_(base),
      map_bytes_(map_bytes),
      header_(static_cast<FifoHeader*>(base)),
      data_(static_cast<uint8_t*>(base) + kFifoDataOffset),
      records_(geo.rec_slots ? static_cast<uint8_t*>(base) + geo.rec_offset : nullptr),
      geo_(geo) {}

RecordGeometry record_geometry(uint64_t capacity) {
  // Powers of two: the slot of record i is i & (slots - 1).
  uint64_t area = 8 * 1024;
  while (area < 256 * 1024 && area * 2 <= capacity / 4) area *= 2;
  const uint64_t slot = std::min<uint64_t>(4096, area / 16);
  return RecordGeometry{static_cast<uint32_t>(area / slot), static_cast<uint32_t>(slot)};
}

Fifo::~Fifo() {
  if (base_) munmap(base_, map_bytes_);
}

// Touches every page of a FIFO mapping once, with a write that changes
// nothing (an atomic add of 0 to its first word). MAP_POPULATE fills this
// process' page tables, but under a hypervisor that shadows them (the
// 2-core VMs these tables are measured on) each page's first access from
// each process still exits to the hypervisor: the first lap through a
// FIFO took 10-20x a warm one (2 ranks, 32 KiB all-reduce: ~100 us per call
// instead of 5 for the first 4 MiB of data per FIFO; docs/performance.md,
// "Session 20"). Touching at create and open moves that cost into
// connect, where nothing else waits for it; on bare metal it is a few
// microseconds. Safe while the FIFO is quiet: the creator (its reader)
// touches before anyone else can map it; the opener (its writer) before it
// writes anything, while the reader only stores the header's atomics.
namespace {
void touch_pages(void* base, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kPage)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(static_cast<char*>(base) + off), 0,
                       __ATOMIC_RELAXED);
}
}  // namespace

std::unique_ptr<Fifo> Fifo::create(const std::string& name, size_t capacity) {
  const uint64_t cap = (static_cast<uint64_t>(capacity) + kPage - 1) / kPage * kPage;
  const RecordGeometry geo = record_geometry(cap);
  const size_t total = kFifoDataOffset + cap + static_cast<size_t>(geo.slots) * geo.slot_bytes;
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) fail_sys("shm: cannot create FIFO " + name, errno);
  auto cleanup = [&](int e, const std::string& what) {
    close(fd);
    shm_unlink(name.c_str());
    std::string msg =
        "shm: cannot " + what + " FIFO " + name + " (" + std::to_string(total) + " bytes)";
    if (e == ENOSPC || e == ENOMEM)
      msg += " - /dev/shm is too small for the FIFOs; enlarge it or lower MYCOLL_SHM_FIFO_BYTES";
    fail_sys(msg, e);
  };
  if (ftruncate(fd, static_cast<off_t>(total)) != 0) cleanup(errno, "size");
  // Reserve the pages now (tmpfs allocates lazily; a full /dev/shm would
  // otherwise surface as SIGBUS on first write).
  const int rc = posix_fallocate(fd, 0, static_cast<off_t>(total));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) cleanup(rc, "allocate");
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) cleanup(errno, "map");
  close(fd);
  touch_pages(base, total);
  auto* h = new (base) FifoHeader();
  h->capacity = cap;
  h->rec_slots = geo.slots;
  h->rec_slot_bytes = geo.slot_bytes;
  h->rec_offset = kFifoDataOffset + cap;
  h->rec_tail.store(0, std::memory_order_relaxed);
  h->writer_probe_addr.store(0, std::memory_order_relaxed);
  h->remote_read_ok.store(0, std::memory_order_relaxed);
  h->remote_released.store(0, std::memory_order_relaxed);
  h->head.store(0, std::memory_order_relaxed);
  h->tail.store(0, std::memory_order_relaxed);
  h->closed.store(0, std::memory_order_relaxed);
  h->writer_pid.store(0, std::memory_order_relaxed);
  h->writer_pidns.store(0, std::memory_order_relaxed);
  h->reader_pid.store(getpid(), std::memory_order_relaxed);
  h->reader_pidns.store(own_pidns(), std::memory_order_relaxed);
  h->magic.store(kFifoMagic, std::memory_order_release);
  FifoGeometry geo_copy;
  geo_copy.magic = kFifoMagic;
  geo_copy.capacity = cap;
  geo_copy.rec_slots = geo.slots;
  geo_copy.rec_slot_bytes = geo.slot_bytes;
  geo_copy.rec_offset = h->rec_offset;
  return std::unique_ptr<Fifo>(new Fifo(name, base, total, geo_copy));
}

std::unique_ptr<Fifo> Fifo::open(const std::string& name) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) fail_sys("shm: cannot open FIFO " + name, errno);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    fail_sys("shm: cannot stat FIFO " + name, e);
  }
  const size_t total = static_cast<size_t>(st.st_size);
  if (total < kFifoDataOffset + kPage) {
    close(fd);
    throw_error(mycollSystemError, "shm: FIFO " + name + " has size " + std::to_string(total) +
                                       ", too small to be a mycoll FIFO");
  }
  void* base = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int e = errno;
  close(fd);
  if (base == MAP_FAILED) fail_sys("shm: cannot map FIFO " + name, e);
  touch_pages(base, total);
  auto* h = static_cast<FifoHeader*>(base);
  // One copy of the geometry, checked and then used: the creator could
  // change the header after the check.
  FifoGeometry geo;
  geo.magic = h->magic.load(std::memory_order_acquire);
  geo.capacity = h->capacity;
  geo.rec_slots = h->rec_slots;
  geo.rec_slot_bytes = h->rec_slot_bytes;
  geo.rec_offset = h->rec_offset;
  std::string why;
  if (check_fifo_geometry(geo, total, &why) != mycollSuccess) {
    munmap(base, total);
    throw_error(mycollSystemError, "shm: " + name + " is " + why);
  }
  h->writer_pid.store(getpid(), std::memory_order_relaxed);
  h->writer_pidns.store(own_pidns(), std::memory_order_relaxed);
  h->writer_probe_addr.store(reinterpret_cast<uintptr_t>(&g_probe_word), std::memory_order_release);
  return std::unique_ptr<Fifo>(new Fifo(name, base, total, geo));
}

std::string fifo_name(uint64_t tag, int from, int to) {
  char buf[80];
  std::snprintf(buf, sizeof(buf), "/mycoll-%016" PRIx64 "-%d-%d", tag, from, to);
  return buf;
}

void unlink_fifo(const std::string& name) noexcept {
  // Errors other than ENOENT leave the segment until reboot; nothing better to do.
  shm_unlink(name.c_str());
}

bool probe_remote_read(Fifo& in) noexcept {
  FifoHeader* h = in.header();
  const pid_t pid = h->writer_pid.load(std::memory_order_relaxed);
  const uint64_t addr = h->writer_probe_addr.load(std::memory_order_acquire);
  const uint64_t ns = h->writer_pidns.load(std::memory_order_relaxed);
  bool ok = false;
  if (pid > 0 && addr != 0 && ns != 0 && ns == own_pidns()) {
    uint64_t got = 0;
    struct iovec local {
      &got, sizeof(got)
    };
    struct iovec remote {
      reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof(got)
    };
    ok = process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof(got)) &&
         got == kProbeValue;
  }
  h->remote_read_ok.store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

std::unique_ptr<Connection> make_connection(int peer_rank, std::unique_ptr<Fifo> out,
                                            std::unique_ptr<Fifo> in) {
  check_arg(out && in, "shm make_connection: missing FIFO");
  return std::make_unique<ShmConnection>(peer_rank, std::move(out), std::move(in));
}

}  // namespace shm

std::unique_ptr<Transport> make_shm_transport() { return std::make_unique<shm::ShmTransport>(); }

// 256 KiB, a size that stays in a core's L2 on both hosts measured, so the
// ratio is process_vm_readv's cost against a cached memcpy's and not two
// readings of memory bandwidth, which other tenants move. Both buffers are
// page-aligned, in one mapping of their own: memcpy's speed moved by 1.6x
// with the heap's placement of the two (at 256 KiB on a 2-core AMD VM: 118
// GB/s fresh, 75 with heap buffers the allocator had reused), and with it
// the ratio. Measured at 1 MiB in heap buffers, that VM (where single copy
// lost) read 0.37-0.52 and a 16-core Intel host (where it won) 0.56-0.64;
// at 256 KiB page-aligned, 0.24-0.28 and 0.45-0.55, 8 checks at once alike
// (docs/performance.md, "Session 61").
double shm_read_speed_ratio() noexcept {
  static const double ratio = [] {
    constexpr size_t kBytes = 256u << 10;
    constexpr int kRounds = 9;
    void* map =
        mmap(nullptr, 2 * kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return -1.0;
    struct Unmap {
      void* p;
      ~Unmap() { munmap(p, 2 * kBytes); }
    } unmap{map};
    uint8_t* const src = static_cast<uint8_t*>(map);
    uint8_t* const dst = src + kBytes;
    std::memset(src, 0x5a, kBytes);  // fault both in before timing
    std::memset(dst, 0, kBytes);
    using Clock = std::chrono::steady_clock;
    double best_read = 1e30, best_copy = 1e30;
    const pid_t self = getpid();
    for (int i = 0; i < kRounds; ++i) {
      struct iovec local {
        dst, kBytes
      };
      struct iovec remote {
        src, kBytes
      };
      const auto t0 = Clock::now();
      if (process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(kBytes))
        return -1.0;
      const auto t1 = Clock::now();
      std::memcpy(dst, src, kBytes);
      const auto t2 = Clock::now();
      best_read = std::min(best_read, std::chrono::duration<double>(t1 - t0).count());
      best_copy = std::min(best_copy, std::chrono::duration<double>(t2 - t1).count());
    }
    if (dst[kBytes - 1] != 0x5a || best_read <= 0) return -1.0;
    return best_copy / best_read;
  }();
  return ratio;
}

}  // namespace mycoll
