// libFuzzer target over every decoder of bytes that come off the network:
// the bootstrap's frame streams (peer links and the way back with their
// failure reports, the root's replies), its hellos, the authentication handshake's messages, the
// unique id, and the host engine's message header records. Input format in fuzz_wire.h. Besides the
// sanitizers' checks it asserts what the callers rely on: a frame is whole and within its kind's
// bound, the payload is never allocated ahead of its bytes, a decoded table has nranks entries.
//
// Also linked into the unit tests (tests/unit/test_wire.cc), which run it on
// the committed corpus: a crash once found stays a test.
#include "fuzz_wire.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "bootstrap/wire.h"

namespace mycoll_fuzz {
namespace {

using namespace mycoll;
using namespace mycoll::bswire;

void require(bool ok) {
  if (!ok) std::abort();
}

// Feeds the stream to a FrameReader in pieces of `piece` bytes (as recv()
// might cut it). Returns the frames in order.
std::vector<std::pair<FrameHeader, std::vector<uint8_t>>> read_frames(Link link, int nranks,
                                                                      size_t piece,
                                                                      const uint8_t* p, size_t n,
                                                                      FrameMac mac = {}) {
  std::vector<std::pair<FrameHeader, std::vector<uint8_t>>> frames;
  const bool tagged = mac.on();
  FrameReader r(link, nranks, mac);
  size_t at = 0;
  while (at < n) {
    size_t max = 0;
    uint8_t* dst = r.buffer(&max);
    require(max > 0 && max <= std::max(sizeof(FrameHeader), FrameReader::kReadChunk));
    const size_t k = std::min({max, piece, n - at});
    std::memcpy(dst, p + at, k);
    at += k;
    const FrameReader::Status st = r.advance(k);
    if (st == FrameReader::Status::kCorrupt) {
      require(!frame_header_ok(r.header(), link, nranks));
      break;
    }
    if (st == FrameReader::Status::kForged) {
      require(tagged && frame_header_ok(r.header(), link, nranks));
      break;
    }
    if (st == FrameReader::Status::kMore) continue;
    const FrameHeader h = r.header();
    require(frame_header_ok(h, link, nranks));
    std::vector<uint8_t> payload = r.take_payload();
    require(payload.size() == h.len);
    require(!r.mid_frame());
    frames.emplace_back(h, std::move(payload));
  }
  return frames;
}

// A peer link or a way back: its failure reports decoded as the I/O thread
// decodes them (origin and awaited ranks in range, distinct, not the origin).
void peer_stream(Link link, uint8_t param, const uint8_t* p, size_t n) {
  const int nranks = stream_nranks(param);
  for (auto& [h, payload] : read_frames(link, nranks, stream_piece(param), p, n)) {
    if (h.kind != kAbort) continue;
    Report r;
    std::string why;
    if (!parse_report(payload.data(), payload.size(), nranks, &r, &why)) {
      require(!why.empty());
      continue;
    }
    require(r.origin >= 0 && r.origin < nranks && r.waits_for.size() <= kMaxReportWaits);
    for (size_t i = 0; i < r.waits_for.size(); ++i) {
      require(r.waits_for[i] >= 0 && r.waits_for[i] < nranks && r.waits_for[i] != r.origin);
      for (size_t j = 0; j < i; ++j) require(r.waits_for[i] != r.waits_for[j]);
    }
    require(encode_report(r) == payload);
  }
}

void root_stream(uint8_t param, const uint8_t* p, size_t n) {
  const int nranks = stream_nranks(param);
  for (auto& [h, payload] : read_frames(Link::kFromRoot, nranks, stream_piece(param), p, n)) {
    RootMessage m = parse_root_message(h.kind, payload.data(), payload.size(), nranks);
    switch (m.kind) {
      case RootMessage::Kind::kTable: require(m.table.size() == static_cast<size_t>(nranks)); break;
      case RootMessage::Kind::kError:
        require(m.code > mycollSuccess && m.code < mycollNumResults);
        break;
      case RootMessage::Kind::kMalformed: require(!m.why.empty()); break;
      case RootMessage::Kind::kStatus: break;
    }
  }
}

void hellos(Target t, uint8_t param, const uint8_t* p, size_t n) {
  std::string why;
  if (t == kRankHello) {
    RankHello h;
    const int root_nranks = hello_nranks(param);
    if (parse_rank_hello(p, n, root_nranks, &h, &why)) {
      require(h.rank >= 0 && h.rank < h.nranks && h.nranks <= kMaxRanks);
      require(root_nranks < 0 || h.nranks == root_nranks);
    } else {
      require(!why.empty());
    }
    return;
  }
  PeerHello h;
  const int nranks = stream_nranks(param), self = peer_self(param);
  if (parse_peer_hello(p, n, nranks, self, &h, &why))
    require(h.rank >= 0 && h.rank < nranks && h.rank != self);
  else
    require(!why.empty());
}

void auth(const uint8_t* p, size_t n) {
  const uint8_t* nonce = nullptr;
  if (net::parse_server_hello(p, n, &nonce)) require(nonce == p + 8);
  Secret secret;
  secret.fill(kAuthSecretByte);
  uint8_t nonce_s[16];
  std::memset(nonce_s, kAuthNonceByte, sizeof(nonce_s));
  (void)net::check_client_proof(p, n, secret, kAuthRole, nonce_s);
}

void unique_id(const uint8_t* p, size_t n) {
  mycollUniqueId id;
  std::memset(&id, 0, sizeof(id));
  std::memcpy(id.internal, p, std::min(n, sizeof(id.internal)));
  try {
    UniqueIdData d = unpack_unique_id(id);
    require(d.magic == kIdMagic);
  } catch (const Error& e) {
    require(e.code() == mycollInvalidArgument);
  }
}

void msg_record(uint8_t param, const uint8_t* p, size_t n) {
  const MsgHeader want = expected_header(param);
  MsgRecord r;
  const RecordError e = parse_msg_record(p, n, want, remote_ok(param), &r);
  if (e == RecordError::kNone) {
    require(header_matches(r.hdr, want));
    if (r.payload == MsgRecord::Payload::kInline)
      require(r.data == reinterpret_cast<const char*>(p) + sizeof(MsgHeader) &&
              n == sizeof(MsgHeader) + want.bytes);
    if (r.payload == MsgRecord::Payload::kRemote) require(remote_ok(param));
    return;
  }
  // The error a receiver throws, message and all.
  try {
    throw_record_error(e, r, n, want, 3, "fuzz");
  } catch (const Error& err) {
    require(err.code() == (e == RecordError::kMismatch && r.hdr.magic == kMsgMagic
                               ? mycollInvalidUsage
                               : mycollRemoteError));
  }
}

}  // namespace
}  // namespace mycoll_fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mycoll_fuzz;
  if (size < 2) return 0;
  const auto target = static_cast<Target>(data[0] % kNumTargets);
  const uint8_t param = data[1];
  const uint8_t* p = data + 2;
  const size_t n = size - 2;
  switch (target) {
    case kPeerStream:
    case kWayBack:
      peer_stream(
          target == kPeerStream ? mycoll::bswire::Link::kPeer : mycoll::bswire::Link::kWayBack,
          param, p, n);
      break;
    case kRootStream: root_stream(param, p, n); break;
    case kRankHello:
    case kPeerHello: hellos(target, param, p, n); break;
    case kAuth: auth(p, n); break;
    case kUniqueId: unique_id(p, n); break;
    case kMsgRecord: msg_record(param, p, n); break;
    case kTaggedPeer: {
      mycoll::net::SessionKey key;
      key.fill(kTagKeyByte);
      read_frames(mycoll::bswire::Link::kPeer, stream_nranks(param), stream_piece(param), p, n,
                  mycoll::bswire::FrameMac(key, mycoll::bswire::Dir::kFromClient));
      break;
    }
    case kSocketEndpoint:
    case kSocketAnnounce:
    case kUcxAddrInfo:
    case kUcxHello:
    case kIbConnInfo:
    case kIbRun:
    case kShmFifo:
    case kShmRun:
    case kProxyStream:
    case kPeerInfo: fuzz_transport(target, param, p, n); break;
    case kNumTargets: break;
  }
  return 0;
}
