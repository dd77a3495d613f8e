// GPU <-> network proxy: a host thread that moves FIFO slots between a
// collective kernel and the host transports (shm, socket, ib, ucx) of peers
// that CUDA IPC cannot reach, while the kernel runs.
//
// For each such peer and channel the kernel sees a pair of FIFOs in pinned,
// host-mapped memory, with the same counters it uses with NVLink peers:
//   tx: the kernel fills slots and publishes `head` (slots written) and the
//       byte count of each slot; the proxy frames each slot onto the peer's
//       connection and publishes `tail` (slots the kernel may reuse) once
//       the transport has taken the bytes.
//   rx: the proxy writes arriving slots in place and publishes `head`; the
//       kernel consumes them and publishes `tail`; the proxy returns the
//       freed slots to the sending proxy as credits.
// A sender never has more slots on the wire than the receiver has free, so
// the proxy always has room for what arrives and channels sharing one
// connection never block each other. No kernel launch per chunk, no stream
// synchronisation: the kernel and the proxy hand slots over through the
// counters alone.
//
// Plain host code (no CUDA): the unit tests drive it with host threads in
// the kernel's place.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/proxy_wire.h"
#include "transports/transport.h"

namespace mycoll {

// Byte layout of one peer's proxy region (host memory, one allocation):
//   [tx data: nch rings][rx data: nch rings][tx flags][rx flags][tx lengths]
//   [tx size lines][rx size lines][tx call lines][rx call lines][call count]
// Flag lines are 384 bytes per channel: head at +0, tail at +128 (the
// strides the kernel uses for NVLink peers, see FifoGeom). slot_bytes is a
// multiple of 8, so that the flags (8-byte atomics) and the length words
// after the rings are aligned (GpuProxy refuses another layout). The size
// lines (16-byte LL lines, nslots per channel, as FifoGeom::size_off) and
// the call lines (kCallLines slots, as FifoGeom::call_hdr_off) are the
// kernel's size and call checks (kernels/prims/p2p_size.cuh, call_check.cuh)
// for this peer: the kernel writes tx lines, the proxy forwards them as
// size and call frames and writes what arrives into the rx lines. The call
// count is the proxy's: call lines forwarded so far.
struct ProxyLayout {
  int nch = 1;
  int nslots = 8;
  uint64_t slot_bytes = 32768;

  uint64_t ring_bytes() const { return uint64_t(nslots) * slot_bytes; }
  uint64_t tx_data() const { return 0; }
  uint64_t rx_data() const { return uint64_t(nch) * ring_bytes(); }
  uint64_t tx_flags() const { return 2 * uint64_t(nch) * ring_bytes(); }
  uint64_t rx_flags() const { return tx_flags() + uint64_t(nch) * 384; }
  uint64_t tx_len() const { return rx_flags() + uint64_t(nch) * 384; }
  uint64_t size_bytes() const { return uint64_t(nslots) * 16; }  // one channel's size lines
  uint64_t tx_size() const { return (tx_len() + uint64_t(nch) * nslots * 4 + 63) / 64 * 64; }
  uint64_t rx_size() const { return tx_size() + uint64_t(nch) * size_bytes(); }
  uint64_t tx_call() const { return rx_size() + uint64_t(nch) * size_bytes(); }
  uint64_t rx_call() const { return tx_call() + 64; }
  uint64_t call_count() const { return rx_call() + 64; }
  // The size line of channel c's slot sequence q, and call k's line.
  uint64_t tx_size_line(int c, uint64_t q) const {
    return tx_size() + c * size_bytes() + q % nslots * 16;
  }
  uint64_t rx_size_line(int c, uint64_t q) const {
    return rx_size() + c * size_bytes() + q % nslots * 16;
  }
  static_assert(kCallLines * 16 <= 64, "the call lines fit their 64 bytes");
  uint64_t tx_call_line(uint64_t k) const { return tx_call() + 16 * (k % kCallLines); }
  uint64_t rx_call_line(uint64_t k) const { return rx_call() + 16 * (k % kCallLines); }
  uint64_t total_bytes() const { return call_count() + 64; }
};

// Counters are read and written with acquire/release atomics on the host
// side; the kernel uses volatile accesses and system-scope fences.
inline uint64_t proxy_load(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void proxy_store(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// The kernel's 16-byte LL line {data_lo32, flag32, data_hi32, flag32}
// (kernels/prims/ll.cuh) from the host: two 8-byte atomic halves, each
// carrying the flag, so a reader that sees the flag in both has both data
// halves whichever half landed first.
inline void proxy_store_line(char* p, uint64_t v, uint32_t flag) {
  auto* w = reinterpret_cast<uint64_t*>(p);
  __atomic_store_n(&w[0], (v & 0xffffffffu) | (uint64_t(flag) << 32), __ATOMIC_RELEASE);
  __atomic_store_n(&w[1], (v >> 32) | (uint64_t(flag) << 32), __ATOMIC_RELEASE);
}
// True (and the data in *v) once both halves carry `flag`.
inline bool proxy_load_line(const char* p, uint32_t flag, uint64_t* v) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  const uint64_t a = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE);
  const uint64_t b = __atomic_load_n(&w[1], __ATOMIC_ACQUIRE);
  if (uint32_t(a >> 32) != flag || uint32_t(b >> 32) != flag) return false;
  *v = (a & 0xffffffffu) | (b << 32);
  return true;
}

class GpuProxy {
 public:
  struct Peer {
    int rank = -1;
    Connection* conn = nullptr;
    char* region = nullptr;  // host address of the ProxyLayout region
  };
  // Called once, from the proxy thread, when a connection fails or a peer
  // breaks the protocol; the proxy thread then ends.
  using FailFn = std::function<void(int code, const std::string& reason)>;

  GpuProxy(int rank, ProxyLayout layout, std::vector<Peer> peers, FailFn fail);
  ~GpuProxy();  // stops the thread (see drain())

  // Waits (bounded by timeout_s) until every slot the kernel published has
  // been handed to its transport. False on timeout or after a failure.
  bool drain(double timeout_s);
  // From now on a failing connection ends the thread quietly (the
  // communicator is being destroyed and peers close their ends).
  void closing() { closing_.store(true); }

 private:
  using Frame = proxywire::Frame;  // on the wire: 16-byte header, then data (proxy_wire.h)
  struct PeerState {
    Peer p;
    // tx
    std::vector<uint64_t> sent;      // per channel: slots fully handed over
    std::vector<uint64_t> freed;     // per channel: slots the receiver consumed
    std::vector<uint64_t> credited;  // per channel: consumed count announced to the peer
    std::vector<uint64_t> sized;     // per channel: size frames sent (for slot sized - 1)
    std::vector<uint8_t> refused;    // per channel: the peer's kernel refused a message
    Frame out{};
    const char* out_payload = nullptr;
    uint64_t out_done = 0;  // bytes of header + payload accepted
    bool out_busy = false;
    int next_ch = 0;
    // rx
    std::vector<uint64_t> delivered;  // per channel
    std::vector<uint8_t> refusing;    // per channel: this kernel refused a message (data dropped)
    uint64_t calls_in = 0;            // call frames received
    Frame in{};
    uint64_t in_done = 0;
    bool in_header = true;
  };

  void loop();
  bool tx(PeerState& s);
  bool rx(PeerState& s);
  uint64_t* flag(const PeerState& s, uint64_t base, int ch, int which) const;
  bool next_frame(PeerState& s);
  // The kernel's call line not forwarded yet, if written (its signature in *sig).
  bool call_waiting(const PeerState& s, uint64_t* sig) const;

  int rank_;
  ProxyLayout L_;
  std::vector<PeerState> peers_;
  FailFn fail_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::atomic<bool> closing_{false};
  std::vector<char> discard_;  // payload of slots for a kernel that refused its message
  std::thread thread_;
};

}  // namespace mycoll
