#include "engine/gpu_proxy.h"

#include <time.h>

#include <chrono>
#include <exception>

#include "base/error.h"
#include "base/log.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;
using proxywire::kCall;
using proxywire::kCredit;
using proxywire::kCreditPoison;
using proxywire::kData;
using proxywire::kSize;
constexpr uint64_t kHeader = proxywire::kFrameBytes;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

GpuProxy::GpuProxy(int rank, ProxyLayout layout, std::vector<Peer> peers, FailFn fail)
    : rank_(rank), L_(layout), fail_(std::move(fail)) {
  if (L_.slot_bytes == 0 || L_.slot_bytes % 8 != 0)
    throw_error(mycollInternalError, "gpu proxy: slot size " + std::to_string(L_.slot_bytes) +
                                         " is not a multiple of 8 (flags would be misaligned)");
  for (Peer& p : peers) {
    PeerState s;
    s.p = p;
    s.sent.assign(L_.nch, 0);
    s.freed.assign(L_.nch, 0);
    s.credited.assign(L_.nch, 0);
    s.sized.assign(L_.nch, 0);
    s.refused.assign(L_.nch, 0);
    s.delivered.assign(L_.nch, 0);
    s.refusing.assign(L_.nch, 0);
    peers_.push_back(std::move(s));
  }
  discard_.resize(L_.slot_bytes);
  thread_ = std::thread([this] { loop(); });
}

GpuProxy::~GpuProxy() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

uint64_t* GpuProxy::flag(const PeerState& s, uint64_t base, int ch, int which) const {
  return reinterpret_cast<uint64_t*>(s.p.region + base + uint64_t(ch) * 384 + which * 128);
}

bool GpuProxy::drain(double timeout_s) {
  const auto t0 = Clock::now();
  for (;;) {
    if (failed_.load()) return false;
    bool pending = false;
    for (const PeerState& s : peers_) {
      // Slots published and not handed over, unless the peer refused the
      // channel's message (the poisoned credit in the tail: they stay).
      for (int c = 0; c < L_.nch && !pending; ++c) {
        const uint64_t tail = proxy_load(flag(s, L_.tx_flags(), c, 1));
        pending = !(tail & kCreditPoison) && proxy_load(flag(s, L_.tx_flags(), c, 0)) != tail;
      }
      uint64_t sig;
      pending = pending || call_waiting(s, &sig);
    }
    if (!pending) return true;
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) return false;
    std::this_thread::yield();
  }
}

bool GpuProxy::call_waiting(const PeerState& s, uint64_t* sig) const {
  const uint64_t k = proxy_load(reinterpret_cast<const uint64_t*>(s.p.region + L_.call_count()));
  return proxy_load_line(s.p.region + L_.tx_call_line(k), uint32_t(k + 1), sig);
}

// Chooses the next frame for an idle connection: credits first (they
// unblock the peer's kernel), then call lines (the peer's call check waits
// on them), then data slots round-robin over channels, a point-to-point
// message's size line going as a size frame just before its first slot.
bool GpuProxy::next_frame(PeerState& s) {
  for (int c = 0; c < L_.nch; ++c) {
    // Poisoned (top bit): this kernel refused a message of another size;
    // the credit tells the sender's kernel (its bytes below the bit), and
    // what the peer still sends on this channel is dropped.
    const uint64_t consumed = proxy_load(flag(s, L_.rx_flags(), c, 1));
    if (consumed > s.credited[c]) {
      if (consumed & kCreditPoison) s.refusing[c] = 1;
      s.out = Frame{kCredit, uint32_t(c), consumed};
      s.out_payload = nullptr;
      s.credited[c] = consumed;
      return true;
    }
  }
  uint64_t sig;
  if (call_waiting(s, &sig)) {
    s.out = Frame{kCall, 0, sig};
    s.out_payload = nullptr;
    return true;
  }
  for (int j = 0; j < L_.nch; ++j) {
    const int c = (s.next_ch + j) % L_.nch;
    const uint64_t head = proxy_load(flag(s, L_.tx_flags(), c, 0));
    if (s.refused[c] || head == s.sent[c] || s.sent[c] - s.freed[c] >= uint64_t(L_.nslots))
      continue;
    const uint64_t q = s.sent[c], slot = q % L_.nslots;
    uint64_t bytes;
    if (s.sized[c] <= q &&
        proxy_load_line(s.p.region + L_.tx_size_line(c, q), uint32_t(q + 1), &bytes)) {
      s.sized[c] = q + 1;
      s.out = Frame{kSize, uint32_t(c), bytes};
      s.out_payload = nullptr;
      return true;
    }
    const uint32_t* len = reinterpret_cast<const uint32_t*>(s.p.region + L_.tx_len());
    bytes = __atomic_load_n(&len[uint64_t(c) * L_.nslots + slot], __ATOMIC_ACQUIRE);
    if (bytes > L_.slot_bytes)
      throw_error(mycollInternalError, "GPU proxy: the kernel published a slot of " +
                                           std::to_string(bytes) + " bytes for rank " +
                                           std::to_string(s.p.rank));
    s.out = Frame{kData, uint32_t(c), bytes};
    s.out_payload =
        s.p.region + L_.tx_data() + uint64_t(c) * L_.ring_bytes() + slot * L_.slot_bytes;
    s.next_ch = (c + 1) % L_.nch;
    return true;
  }
  return false;
}

// Puts at most one frame at a time on the connection.
bool GpuProxy::tx(PeerState& s) {
  bool moved = false;
  if (!s.out_busy) s.out_busy = next_frame(s);
  while (s.out_busy) {
    const uint64_t total = kHeader + (s.out.type == kData ? s.out.value : 0);
    size_t n;
    if (s.out_done < kHeader)
      n = s.p.conn->send_some(reinterpret_cast<const char*>(&s.out) + s.out_done,
                              kHeader - s.out_done);
    else
      n = s.p.conn->send_some(s.out_payload + (s.out_done - kHeader), total - s.out_done);
    if (n == 0) break;
    moved = true;
    s.out_done += n;
    if (s.out_done < total) continue;
    if (s.out.type == kData) {
      const int c = int(s.out.channel);
      ++s.sent[c];
      if (!s.refused[c])
        proxy_store(flag(s, L_.tx_flags(), c, 1), s.sent[c]);  // the kernel may reuse the slot
    } else if (s.out.type == kCall) {
      uint64_t* count = reinterpret_cast<uint64_t*>(s.p.region + L_.call_count());
      proxy_store(count, proxy_load(count) + 1);
    }
    s.out_busy = false;
    s.out_done = 0;
  }
  return moved;
}

bool GpuProxy::rx(PeerState& s) {
  bool moved = false;
  for (;;) {
    if (s.in_header) {
      size_t n =
          s.p.conn->recv_some(reinterpret_cast<char*>(&s.in) + s.in_done, kHeader - s.in_done);
      if (n == 0) return moved;
      moved = true;
      s.in_done += n;
      if (s.in_done < kHeader) continue;
      std::string why;
      auto fail = [&](int channel) {  // channel -1: not known
        throw_error(mycollRemoteError,
                    "GPU proxy on rank " + std::to_string(rank_) + ": rank " +
                        std::to_string(s.p.rank) + " sent " + why +
                        (channel >= 0 ? " on channel " + std::to_string(channel) : ""));
      };
      Frame f{};
      if (proxywire::decode_frame(&s.in, kHeader, L_.nch, &f, &why) != mycollSuccess) fail(-1);
      const int c = int(f.channel);
      s.in_done = 0;
      if (f.type == kCredit) {
        if (proxywire::check_credit(f.value, s.freed[c], s.sent[c], &why) != mycollSuccess) fail(c);
        if (f.value & kCreditPoison) {
          // The peer's kernel refused our message: our kernel, waiting for
          // room or at its next send here, reads the poison as its credit
          // and reports the mismatch; nothing more goes out on the channel.
          if (!s.refused[c]) proxy_store(flag(s, L_.tx_flags(), c, 1), f.value);
          s.refused[c] = 1;
        } else if (!s.refused[c]) {
          s.freed[c] = f.value;
        }
        continue;
      }
      if (f.type == kCall) {  // the peer's call line k, into slot k mod kCallLines
        const uint64_t k = s.calls_in++;
        proxy_store_line(s.p.region + L_.rx_call_line(k), f.value, uint32_t(k + 1));
        continue;
      }
      if (f.type == kSize) {  // the size line of the channel's next slot
        const uint64_t q = s.delivered[c];
        if (!s.refusing[c])
          proxy_store_line(s.p.region + L_.rx_size_line(c, q), f.value, uint32_t(q + 1));
        continue;
      }
      uint64_t consumed = proxy_load(flag(s, L_.rx_flags(), c, 1));
      if (consumed & kCreditPoison) s.refusing[c] = 1;
      if (s.refusing[c]) consumed = s.delivered[c];  // dropped: no slot needed
      if (proxywire::check_data(f.value, L_.slot_bytes, L_.nslots, s.delivered[c], consumed,
                                &why) != mycollSuccess)
        fail(c);
      s.in_header = false;
      if (f.value == 0) {
        if (!s.refusing[c]) proxy_store(flag(s, L_.rx_flags(), c, 0), ++s.delivered[c]);
        s.in_header = true;
      }
      continue;
    }
    const int c = int(s.in.channel);
    char* dst = s.refusing[c] ? discard_.data()
                              : s.p.region + L_.rx_data() + uint64_t(c) * L_.ring_bytes() +
                                    (s.delivered[c] % L_.nslots) * L_.slot_bytes;
    size_t n = s.p.conn->recv_some(dst + s.in_done, s.in.value - s.in_done);
    if (n == 0) return moved;
    moved = true;
    s.in_done += n;
    if (s.in_done < s.in.value) continue;
    if (!s.refusing[c])
      proxy_store(flag(s, L_.rx_flags(), c, 0), ++s.delivered[c]);  // the kernel may read it
    s.in_done = 0;
    s.in_header = true;
  }
}

// Spins while slots move; after 2 ms without traffic it naps between passes
// (a GPU proxy thread per process, like NCCL's, but not burning a core when
// the communicator is idle).
void GpuProxy::loop() {
  auto last = Clock::now();
  auto last_check = last;
  try {
    while (!stop_.load(std::memory_order_relaxed)) {
      bool moved = false;
      for (PeerState& s : peers_) {
        moved |= rx(s);
        moved |= tx(s);
      }
      // Transports get their own progress call only when nothing moved (as
      // in the host engine): a socket would otherwise buffer what recv_some
      // can read straight into the FIFO.
      if (!moved)
        for (PeerState& s : peers_) moved |= s.p.conn->progress();
      if (moved) {
        last = Clock::now();
        continue;
      }
      const auto now = Clock::now();
      if (now - last_check > std::chrono::milliseconds(5)) {
        for (PeerState& s : peers_) s.p.conn->check_alive();
        last_check = now;
      }
      if (now - last < std::chrono::milliseconds(2)) {
        cpu_relax();
      } else {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  } catch (const Error& e) {
    failed_.store(true);
    if (!stop_.load() && !closing_.load()) fail_(e.code(), e.what());
  } catch (const std::exception& e) {
    failed_.store(true);
    if (!stop_.load() && !closing_.load())
      fail_(mycollInternalError, std::string("GPU proxy: ") + e.what());
  }
}

}  // namespace mycoll
