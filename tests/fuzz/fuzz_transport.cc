// The wire fuzz target's inputs for the transports' connection messages
// (fuzz_wire.h, kSocketEndpoint..kPeerInfo): what a socket, UCX, ibverbs or
// shm peer, a GPU proxy or any rank at init sends, through each decoder.
// Besides the sanitizers' checks it asserts what the callers rely on: a
// decoded rank, length, index or counter within its bound; valid encodings
// decoded back to themselves; run-time counters that keep every access of
// the simulated ring inside it (the rings are heap blocks of exactly their
// size, so ASan sees one byte too far); every refusal a RemoteError (or the
// documented code) with a reason.
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/proxy_wire.h"
#include "fuzz_wire.h"
#include "transports/ibverbs/ib_wire.h"
#include "transports/shm/shm_wire.h"
#include "transports/socket/socket_wire.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"

namespace mycoll_fuzz {
namespace {

using namespace mycoll;

void require(bool ok) {
  if (!ok) std::abort();
}

// A refusal: the code the decoder documents and a reason.
void refused(mycollResult_t rc, const std::string& why, bool usage_ok = false) {
  require(rc == mycollRemoteError || (usage_ok && rc == mycollInvalidUsage));
  require(!why.empty());
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void socket_endpoint(uint8_t param, const uint8_t* p, size_t n) {
  bool listens = false;
  net::SockAddr addr;
  std::string why;
  const mycollResult_t rc = sockwire::decode_endpoint(p, n, param, &listens, &addr, &why);
  if (rc != mycollSuccess) return refused(rc, why);
  require(n == sizeof(sockwire::Endpoint));
  if (!listens) return;
  require(addr.family() == AF_INET || addr.family() == AF_INET6);
  require(addr.port() != 0);
  // Encoded again, it decodes to the same address.
  const sockwire::Endpoint e = sockwire::encode_endpoint(&addr);
  net::SockAddr again;
  bool listens_again = false;
  require(sockwire::decode_endpoint(&e, sizeof(e), param, &listens_again, &again, &why) ==
              mycollSuccess &&
          listens_again && again.str() == addr.str() && again.len == addr.len);
}

void socket_announce(uint8_t param, const uint8_t* p, size_t n) {
  const int nranks = announce_nranks(param), self = announce_self(param);
  int rank = -1;
  std::string why;
  const mycollResult_t rc = sockwire::decode_announce(p, n, nranks, self, &rank, &why);
  if (rc != mycollSuccess) return refused(rc, why);
  require(rank >= 0 && rank < nranks && rank != self);
  const sockwire::Announce a = sockwire::encode_announce(rank);
  require(n == sizeof(a) && std::memcmp(&a, p, n) == 0);
}

void ucx_addr_info(uint8_t param, const uint8_t* p, size_t n) {
  const size_t entries = n / sizeof(ucxwire::AddrInfo);
  if (entries == 0) return;
  const int nranks = ucx_nranks(param), me = (param % 8) % nranks;
  std::vector<ucxwire::AddrInfo> info(nranks);
  for (int r = 0; r < nranks; ++r)
    info[r] = load<ucxwire::AddrInfo>(p + (r % entries) * sizeof(ucxwire::AddrInfo));
  uint64_t max_len = 0;
  std::string why;
  const mycollResult_t rc = ucxwire::check_addr_lengths(info.data(), nranks, &max_len, &why);
  if (rc != mycollSuccess) return refused(rc, why, true);
  // The table the caller allocates is bounded before any address arrives.
  require(max_len <= ucxwire::kMaxAddressBytes &&
          max_len * nranks <= ucxwire::kMaxAddressTableBytes);
  for (const auto& a : info) require(a.len <= max_len);
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer == me) continue;
    const mycollResult_t prc = ucxwire::check_peer_addr(info[peer], peer, me, info[me].chunk, &why);
    if (prc == mycollSuccess)
      require(info[peer].len > 0 && info[peer].chunk == info[me].chunk);
    else
      require(prc == mycollInvalidUsage && !why.empty());
  }
}

void ucx_hello(uint8_t param, const uint8_t* p, size_t n) {
  const int peer = param & 7, me = (param >> 3) & 7;
  std::string why;
  const mycollResult_t rc = ucxwire::check_hello(p, n, kUcxTag, peer, me, &why);
  if (rc != mycollSuccess) return refused(rc, why);
  uint64_t h[2];
  ucxwire::encode_hello(kUcxTag, peer, h);
  require(n == sizeof(h) && std::memcmp(h, p, n) == 0);
}

void ib_conn_info(uint8_t param, const uint8_t* p, size_t n) {
  ibwire::ConnInfo w;
  std::memset(&w, 0, sizeof(w));
  std::memcpy(&w, p, std::min(n, sizeof(w)));
  const bool roce = param & 1;
  std::string why;
  const mycollResult_t rc = ibwire::check_conn_info(w, 1, 0, roce, &why);
  if (rc != mycollSuccess) return refused(rc, why, true);
  // What connect_to and the data path use as they are.
  require(w.valid == 1 && w.failed == 0);
  require(w.qpn >= 2 && w.qpn <= 0xffffff && w.psn <= 0xffffff);
  require(w.mtu >= 1 && w.mtu <= 5 && static_cast<bool>(w.roce) == roce);
  require(roce || (w.lid > 0 && w.lid < 0xc000));
  require(w.ring_bytes >= ibwire::kMinRingBytes && w.ring_bytes <= ibwire::kMaxRingBytes);
  require(w.ring_addr + w.ring_bytes > w.ring_addr &&
          w.ctrl_addr + ibwire::kCtrlBytes > w.ctrl_addr);
  // The boot id is read with strnlen: never past its array.
  require(strnlen(w.boot_id, sizeof(w.boot_id)) <= sizeof(w.boot_id));
}

// A receiver of immediates and a sender of credits over a ring of R bytes.
void ib_run(uint8_t param, const uint8_t* p, size_t n) {
  const uint64_t R = ib_ring_bytes(param);
  auto ring = std::make_unique<uint8_t[]>(R);
  uint64_t arrived = 0, consumed = 0;  // receive side
  uint64_t sent = 0, seen = 0;         // send side: bytes written, the peer's last credit
  std::string why;
  for (size_t at = 0; at + 5 <= n; at += 5) {
    const uint32_t v = load<uint32_t>(p + at + 1);
    switch (static_cast<IbOp>(p[at] % 3)) {
      case kIbArrive: {
        const mycollResult_t rc = ibwire::check_arrival(arrived, consumed, R, v, 1, &why);
        if (rc != mycollSuccess) return refused(rc, why);
        arrived += v;
        require(arrived - consumed <= R);
        // peek: the readable run in place, inside the ring.
        const uint64_t off = consumed % R;
        const uint64_t k = std::min(arrived - consumed, R - off);
        if (k) require(ring[off + k - 1] == 0);
        break;
      }
      case kIbConsume: consumed += v % (arrived - consumed + 1); break;
      case kIbCredit: {
        // The sender first writes what the ring has room for (send_some),
        // then reads a credit moved by a signed 16-bit step.
        sent += std::min<uint64_t>(v >> 16, R - (sent - seen));
        const uint64_t now = seen + static_cast<uint64_t>(static_cast<int16_t>(v & 0xffff));
        const mycollResult_t rc = ibwire::check_credit(seen, now, sent, 1, &why);
        if (rc != mycollSuccess) return refused(rc, why);
        if (now > seen) seen = now;  // the connection keeps the largest credit
        require(sent - seen <= R);   // so R - (sent - seen) never wraps
        break;
      }
    }
  }
}

// Both ends of one UCX direction pair as ucx_connection.cc drives them: the sender
// posts what the window allows (send_room), credit words arrive at the head
// of data messages and alone in credit messages (a signed 16-bit step from
// the last credit, so old, current, future and wild counts all come), and
// the reader tells its consumed count when credit_due says so. Asserted:
// the credit only grows and never passes what was sent, the sender stays
// within a window of it, and the reader never leaves a window untold.
void ucx_run(uint8_t param, const uint8_t* p, size_t n) {
  const int window = ucx_window(param);
  const uint64_t W = static_cast<uint64_t>(window);
  uint64_t sent = 0, credit = 0;                 // send side
  uint64_t arrived = 0, consumed = 0, told = 0;  // receive side
  std::string why;
  auto credit_word = [&](uint32_t v) {
    const uint64_t c = credit + static_cast<uint64_t>(static_cast<int16_t>(v & 0xffff));
    uint8_t w[ucxwire::kCreditBytes];
    std::memcpy(w, &c, sizeof(w));
    const uint64_t before = credit;
    const mycollResult_t rc = ucxwire::take_credit(w, sent, &credit, &why);
    if (rc != mycollSuccess) {
      require(credit == before);  // a refused credit changes nothing
      refused(rc, why);
      return false;
    }
    require(credit >= before && credit <= sent && credit == std::max(before, c));
    return true;
  };
  for (size_t at = 0; at + 5 <= n; at += 5) {
    const uint32_t v = load<uint32_t>(p + at + 1);
    switch (static_cast<UcxOp>(p[at] % 4)) {
      case kUcxSend: {
        const uint64_t room = ucxwire::send_room(sent, credit, window);
        require(room <= W && sent - credit + room == W);
        sent += std::min<uint64_t>(v & 0xff, room);
        require(sent - credit <= W);
        break;
      }
      case kUcxData: {
        const uint64_t len = v >> 16;
        const mycollResult_t rc = ucxwire::check_data_message(arrived, len, &why);
        if (rc != mycollSuccess) {
          require(len <= ucxwire::kCreditBytes);
          return refused(rc, why);
        }
        if (!credit_word(v)) return;
        ++arrived;
        break;
      }
      case kUcxCreditMsg: {
        const uint64_t len = v >> 24;
        const mycollResult_t rc = ucxwire::check_credit_message(len, &why);
        if (rc != mycollSuccess) {
          require(len != ucxwire::kCreditBytes);
          return refused(rc, why);
        }
        if (!credit_word(v)) return;
        break;
      }
      case kUcxConsume:
        if (consumed < arrived) ++consumed;
        if (ucxwire::credit_due(consumed, told, window)) told = consumed;
        require(consumed - told < static_cast<uint64_t>(std::max(1, window - window / 4)));
        break;
    }
  }
}

void shm_fifo(const uint8_t* p, size_t n) {
  if (n < 40) return;
  shm::FifoGeometry g;
  g.magic = load<uint64_t>(p);
  g.capacity = load<uint64_t>(p + 8);
  g.rec_slots = load<uint32_t>(p + 16);
  g.rec_slot_bytes = load<uint32_t>(p + 20);
  g.rec_offset = load<uint64_t>(p + 24);
  const uint64_t map_bytes = load<uint64_t>(p + 32) % (1u << 20);
  std::string why;
  const mycollResult_t rc = shm::check_fifo_geometry(g, map_bytes, &why);
  if (rc != mycollSuccess) {
    require(rc == mycollSystemError && !why.empty());
    return;
  }
  // Touch the data ring's ends and every slot word, as the connection does,
  // in a block of exactly map_bytes.
  auto map = std::make_unique<uint8_t[]>(map_bytes);
  map[shm::kFifoDataOffset] = 1;
  map[shm::kFifoDataOffset + g.capacity - 1] = 1;
  if (g.rec_slots == 0) return;
  require((g.rec_slots & (g.rec_slots - 1)) == 0 && g.rec_slot_bytes >= 64);
  require(g.rec_offset >= shm::kFifoDataOffset + g.capacity);
  for (uint64_t i = 0; i < g.rec_slots; ++i) {
    uint8_t* slot = map.get() + g.rec_offset + i * g.rec_slot_bytes;
    std::memset(slot, 0, shm::kRecWord);
    slot[g.rec_slot_bytes - 1] = 1;  // the largest record's last byte
  }
}

// A reader and a writer of one FIFO; every counter and record word the
// peer could have written comes from the input.
void shm_run(uint8_t param, const uint8_t* p, size_t n) {
  const uint64_t C = shm_capacity(param);
  const uint32_t S = shm_slots(param), B = shm_slot_bytes(param);
  auto data = std::make_unique<uint8_t[]>(C);
  auto records = std::make_unique<uint8_t[]>(uint64_t{S} * B);
  uint64_t tail = 0, head_seen = 0, rec_tail = 0;  // reader
  uint64_t head = 0, tail_seen = 0;                // writer
  std::string why;
  for (size_t at = 0; at + 9 <= n; at += 9) {
    const uint64_t v = load<uint64_t>(p + at + 1);
    mycollResult_t rc = mycollSuccess;
    switch (static_cast<ShmOp>(p[at] % 5)) {
      case kShmHead: {
        rc = shm::check_peer_counter("head", head_seen, v, tail + C, 1, &why);
        if (rc != mycollSuccess) break;
        head_seen = v;
        require(head_seen - tail <= C);
        // peek: the readable run in place.
        const uint64_t pos = tail % C;
        const uint64_t k = std::min(head_seen - tail, C - pos);
        if (k) require(data[pos + k - 1] == 0);
        break;
      }
      case kShmConsume: tail += v % (head_seen - tail + 1); break;
      case kShmRecordWord: {
        size_t len = 0;
        rc = shm::decode_record_word(v, rec_tail, S, B, &len, 1, &why);
        if (rc != mycollSuccess || len == 0) break;
        require(len <= B - shm::kRecWord);
        const uint8_t* body = records.get() + (rec_tail & (S - 1)) * B + shm::kRecWord;
        require(body[len - 1] == 0);
        ++rec_tail;
        break;
      }
      case kShmWrite: {
        require(head - tail_seen <= C);
        const uint64_t k = v % (C - (head - tail_seen) + 1);
        const uint64_t pos = head % C, first = std::min(k, C - pos);
        if (first) data[pos + first - 1] = 0;
        if (k > first) data[k - first - 1] = 0;
        head += k;
        break;
      }
      case kShmTail:
        rc = shm::check_peer_counter("tail", tail_seen, v, head, 1, &why);
        if (rc != mycollSuccess) break;
        tail_seen = v;
        require(head - tail_seen <= C);
        break;
    }
    if (rc != mycollSuccess) return refused(rc, why);
  }
}

// GpuProxy::rx over a byte stream (data, credits incl. poisoned ones, size
// and call frames): headers decoded and checked, payloads
// written into their slot of an exact-size ring; the kernel consumes every
// slot delivered when the next header arrives, or (bit 4 of the input's
// first byte) never. The sender had sent 16 slots per channel (the bound
// of credits).
void proxy_stream(uint8_t param, const uint8_t* p, size_t n) {
  if (n == 0) return;
  const int nch = proxy_nch(param), nslots = proxy_nslots(param);
  const uint64_t slot = proxy_slot_bytes(param);
  const size_t piece = 1 + (p[0] & 15);
  const bool kernel_stalls = p[0] & 0x10;
  ++p;
  --n;
  auto ring = std::make_unique<uint8_t[]>(nch * nslots * slot);
  std::vector<uint64_t> delivered(nch), consumed(nch), freed(nch), sent(nch, 16);
  proxywire::Frame in{};
  uint8_t hdr[proxywire::kFrameBytes];
  uint64_t done = 0;
  bool in_header = true;
  std::string why;
  size_t at = 0;
  while (at < n) {
    const size_t want = in_header ? proxywire::kFrameBytes - done : in.value - done;
    const size_t k = std::min({piece, n - at, want});
    if (in_header) {
      std::memcpy(hdr + done, p + at, k);
    } else {
      uint8_t* dst = ring.get() + (in.channel * nslots + delivered[in.channel] % nslots) * slot;
      std::memcpy(dst + done, p + at, k);
    }
    at += k;
    done += k;
    if (done < (in_header ? proxywire::kFrameBytes : in.value)) continue;
    done = 0;
    if (!in_header) {
      ++delivered[in.channel];
      in_header = true;
      continue;
    }
    mycollResult_t rc = proxywire::decode_frame(hdr, sizeof(hdr), nch, &in, &why);
    if (rc != mycollSuccess) return refused(rc, why);
    require(in.channel < static_cast<uint32_t>(nch));
    const int c = static_cast<int>(in.channel);
    if (in.type == proxywire::kCall) {  // a call line: any signature, channel 0
      require(c == 0);
      continue;
    }
    if (in.type == proxywire::kSize) continue;  // a size line: any byte count
    if (in.type == proxywire::kCredit) {
      rc = proxywire::check_credit(in.value, freed[c], sent[c], &why);
      if (rc != mycollSuccess) return refused(rc, why);
      if (in.value & proxywire::kCreditPoison) continue;  // a refused message: the count stays
      require(in.value >= freed[c] && in.value <= sent[c]);
      freed[c] = in.value;
      continue;
    }
    require(in.type == proxywire::kData);
    if (!kernel_stalls)
      for (int ch = 0; ch < nch; ++ch) consumed[ch] = delivered[ch];
    rc = proxywire::check_data(in.value, slot, nslots, delivered[c], consumed[c], &why);
    if (rc != mycollSuccess) return refused(rc, why);
    require(in.value <= slot && delivered[c] - consumed[c] < static_cast<uint64_t>(nslots));
    if (in.value == 0)
      ++delivered[c];
    else
      in_header = false;
  }
}

void peer_info(uint8_t param, const uint8_t* p, size_t n) {
  auto info = std::make_unique<PeerInfo>();  // on the heap: ASan sees a string run past it
  std::memcpy(info.get(), p, std::min(n, sizeof(PeerInfo)));
  std::string why;
  if (!check_peer_info(*info, param, &why)) {
    require(!why.empty());
    return;
  }
  require(info->rank == param && info->cuda_device >= -1 && info->pid >= 0);
  // The topology and the transports read them as C strings.
  require(strnlen(info->host_id, sizeof(info->host_id)) < sizeof(info->host_id));
  require(strnlen(info->hostname, sizeof(info->hostname)) < sizeof(info->hostname));
  require(strnlen(info->ip, sizeof(info->ip)) < sizeof(info->ip));
}

}  // namespace

void fuzz_transport(Target t, uint8_t param, const uint8_t* p, size_t n) {
  switch (t) {
    case kSocketEndpoint: socket_endpoint(param, p, n); break;
    case kSocketAnnounce: socket_announce(param, p, n); break;
    case kUcxAddrInfo: ucx_addr_info(param, p, n); break;
    case kUcxHello: ucx_hello(param, p, n); break;
    case kIbConnInfo: ib_conn_info(param, p, n); break;
    case kIbRun: ib_run(param, p, n); break;
    case kShmFifo: shm_fifo(p, n); break;
    case kShmRun: shm_run(param, p, n); break;
    case kProxyStream: proxy_stream(param, p, n); break;
    case kPeerInfo: peer_info(param, p, n); break;
    case kUcxRun: ucx_run(param, p, n); break;
    default: break;
  }
}

}  // namespace mycoll_fuzz
