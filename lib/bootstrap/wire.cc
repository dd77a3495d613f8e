// Decoders of what the bootstrap reads from the network (wire.h), and of
// the unique id (which travels through the user's own channel).
#include "bootstrap/wire.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace mycoll {
namespace bswire {

bool frame_header_ok(const FrameHeader& h, Link link, int nranks) {
  if (h.magic != kFrameMagic) return false;
  bool carried = false;
  switch (link) {
    case Link::kFromRoot:
      carried = h.kind == kRootStatus || h.kind == kRootTable || h.kind == kRootError;
      break;
    case Link::kPeer: carried = h.kind == kColl || h.kind == kP2p || h.kind == kAbort; break;
    case Link::kWayBack: carried = h.kind == kAbort; break;
  }
  return carried && h.len <= max_frame_bytes(h.kind, nranks);
}

uint8_t* FrameReader::buffer(size_t* max) {
  if (hdr_have_ < sizeof(hdr_)) {
    *max = sizeof(hdr_) - hdr_have_;
    return reinterpret_cast<uint8_t*>(&hdr_) + hdr_have_;
  }
  // Header done, payload incomplete (advance() ends a frame as soon as its
  // last byte is in, so here have_ < hdr_.len).
  const size_t want = std::min<uint64_t>(hdr_.len - have_, kReadChunk);
  if (payload_.size() < have_ + want) payload_.resize(have_ + want);
  *max = want;
  return payload_.data() + have_;
}

FrameReader::Status FrameReader::advance(size_t n) {
  if (hdr_have_ < sizeof(hdr_)) {
    hdr_have_ += n;
    if (hdr_have_ < sizeof(hdr_)) return Status::kMore;
    if (!frame_header_ok(hdr_, link_, nranks_)) return Status::kCorrupt;
    payload_.clear();
    have_ = 0;
  } else {
    have_ += n;
  }
  if (have_ < hdr_.len) return Status::kMore;
  payload_.resize(have_);
  complete_ = true;
  return Status::kFrame;
}

std::vector<uint8_t> FrameReader::take_payload() {
  std::vector<uint8_t> p = std::move(payload_);
  payload_ = {};
  hdr_have_ = 0;
  have_ = 0;
  complete_ = false;
  return p;
}

RootMessage parse_root_message(uint32_t kind, const uint8_t* p, size_t len, int nranks) {
  RootMessage m;
  if (kind == kRootStatus) {
    if (len != sizeof(StatusMsg)) {
      m.why = "a status of " + std::to_string(len) + " bytes";
      return m;
    }
    std::memcpy(&m.status, p, sizeof(m.status));
    m.kind = RootMessage::Kind::kStatus;
    return m;
  }
  if (kind == kRootError) {
    if (len < sizeof(ErrorHeader)) {
      m.why = "an error report of " + std::to_string(len) + " bytes";
      return m;
    }
    ErrorHeader eh;
    std::memcpy(&eh, p, sizeof(eh));
    // Checked as an integer: a value outside the enum is not a result code.
    m.code = eh.code > mycollSuccess && eh.code < mycollNumResults
                 ? static_cast<mycollResult_t>(eh.code)
                 : mycollRemoteError;
    m.text.assign(reinterpret_cast<const char*>(p) + sizeof(eh), len - sizeof(eh));
    m.kind = RootMessage::Kind::kError;
    return m;
  }
  if (kind == kRootTable) {
    TableHeader th;
    if (len < sizeof(th)) {
      m.why = "a malformed address table";
      return m;
    }
    std::memcpy(&th, p, sizeof(th));
    if (nranks < 1 || th.nranks != nranks ||
        len != sizeof(th) + static_cast<size_t>(nranks) * net::kAddrBytes) {
      m.why = "a malformed address table";
      return m;
    }
    try {
      m.table.reserve(static_cast<size_t>(nranks));
      for (int r = 0; r < nranks; ++r)
        m.table.push_back(net::SockAddr::from_bytes(p + sizeof(th) + r * net::kAddrBytes));
    } catch (const Error& e) {
      m.table.clear();
      m.why = std::string("an address table with a bad address: ") + e.what();
      return m;
    }
    m.tag = th.tag;
    m.kind = RootMessage::Kind::kTable;
    return m;
  }
  m.why = "an unexpected frame (kind " + std::to_string(kind) + ")";
  return m;
}

bool parse_rank_hello(const uint8_t* p, size_t len, int root_nranks, RankHello* out,
                      std::string* why) {
  RankHello h;
  if (len != sizeof(h)) {
    *why = "bad hello (" + std::to_string(len) + " bytes)";
    return false;
  }
  std::memcpy(&h, p, sizeof(h));
  if (h.magic != kHelloMagic || h.version != kIdVersion) {
    *why = "bad hello (different mycoll version?)";
    return false;
  }
  if (h.nranks < 1 || h.nranks > kMaxRanks || h.rank < 0 || h.rank >= h.nranks) {
    *why = "bootstrap: rank " + std::to_string(h.rank) + " / nranks " + std::to_string(h.nranks) +
           " out of range";
    return false;
  }
  if (root_nranks > 0 && h.nranks != root_nranks) {
    *why = "bootstrap: rank " + std::to_string(h.rank) +
           " says nranks=" + std::to_string(h.nranks) +
           " but the communicator has nranks=" + std::to_string(root_nranks);
    return false;
  }
  try {
    net::SockAddr::from_bytes(h.addr);
  } catch (const Error& e) {
    *why = std::string("bootstrap: bad listener address: ") + e.what();
    return false;
  }
  *out = h;
  return true;
}

bool parse_peer_hello(const uint8_t* p, size_t len, int nranks, int self, PeerHello* out,
                      std::string* why) {
  PeerHello h;
  if (len != sizeof(h)) {
    *why = "bad peer hello (" + std::to_string(len) + " bytes)";
    return false;
  }
  std::memcpy(&h, p, sizeof(h));
  if (h.magic != kPeerMagic) {
    *why = "bad peer hello";
    return false;
  }
  if (h.nranks != nranks) {
    *why = "peer says nranks=" + std::to_string(h.nranks);
    return false;
  }
  if (h.rank < 0 || h.rank >= nranks || h.rank == self) {
    *why = "peer claims rank " + std::to_string(h.rank);
    return false;
  }
  *out = h;
  return true;
}

}  // namespace bswire

UniqueIdData unpack_unique_id(const mycollUniqueId& id) {
  UniqueIdData d;
  std::memcpy(&d, id.internal, sizeof(d));
  if (d.magic != bswire::kIdMagic || d.version != bswire::kIdVersion)
    throw_error(mycollInvalidArgument,
                "not a mycoll unique id (bad magic/version; was it made by mycollGetUniqueId "
                "of this mycoll version?)");
  try {
    net::SockAddr::from_bytes(d.addr);
  } catch (const Error& e) {
    throw_error(mycollInvalidArgument, std::string("not a mycoll unique id: ") + e.what());
  }
  return d;
}

}  // namespace mycoll
