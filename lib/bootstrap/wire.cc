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
    case Link::kRescue: carried = h.kind == kRescue; break;
  }
  return carried && h.len <= max_frame_bytes(h.kind, nranks);
}

Tag FrameMac::next(const void* a, size_t alen, const void* b, size_t blen) {
  Tag t{};
  if (!on_) return t;
  const uint8_t dir = static_cast<uint8_t>(dir_);
  const uint64_t count = count_++;
  const net::ByteSpan parts[4] = {{&dir, 1}, {&count, sizeof(count)}, {a, alen}, {b, blen}};
  const std::array<uint8_t, 32> mac = net::hmac_sha256_parts(key_.data(), key_.size(), parts, 4);
  std::memcpy(t.data(), mac.data(), kTagBytes);
  return t;
}

bool FrameMac::check(const uint8_t* tag, const void* a, size_t alen, const void* b, size_t blen) {
  const Tag want = next(a, alen, b, blen);
  uint8_t diff = 0;
  for (size_t i = 0; i < kTagBytes; ++i) diff |= want[i] ^ tag[i];
  return diff == 0;
}

std::vector<uint8_t> seal_frame(FrameMac& mac, uint32_t kind, const void* payload, size_t len) {
  const FrameHeader h{kFrameMagic, kind, len};
  std::vector<uint8_t> out(sizeof(h) + len + (mac.on() ? kTagBytes : 0));
  std::memcpy(out.data(), &h, sizeof(h));
  if (len > 0) std::memcpy(out.data() + sizeof(h), payload, len);
  if (mac.on()) {
    const Tag t = mac.next(out.data(), sizeof(h) + len);
    std::memcpy(out.data() + sizeof(h) + len, t.data(), kTagBytes);
  }
  return out;
}

bool open_hello(FrameMac& mac, const uint8_t* p, size_t len, size_t hello_bytes,
                std::vector<uint8_t>* hello) {
  if (len != hello_bytes + kTagBytes) return false;
  if (!mac.check(p + hello_bytes, p, hello_bytes)) return false;
  hello->assign(p, p + hello_bytes);
  return true;
}

uint8_t* FrameReader::buffer(size_t* max) {
  if (hdr_have_ < sizeof(hdr_)) {
    *max = sizeof(hdr_) - hdr_have_;
    return reinterpret_cast<uint8_t*>(&hdr_) + hdr_have_;
  }
  if (have_ < hdr_.len) {
    const size_t want = std::min<uint64_t>(hdr_.len - have_, kReadChunk);
    if (payload_.size() < have_ + want) payload_.resize(have_ + want);
    *max = want;
    return payload_.data() + have_;
  }
  // Payload done, tag incomplete (advance() ends a frame as soon as its
  // last byte is in).
  *max = kTagBytes - tag_have_;
  return tag_.data() + tag_have_;
}

FrameReader::Status FrameReader::advance(size_t n) {
  if (hdr_have_ < sizeof(hdr_)) {
    hdr_have_ += n;
    if (hdr_have_ < sizeof(hdr_)) return Status::kMore;
    if (!frame_header_ok(hdr_, link_, nranks_)) return Status::kCorrupt;
    payload_.clear();
    have_ = 0;
    tag_have_ = 0;
  } else if (have_ < hdr_.len) {
    have_ += n;
  } else {
    tag_have_ += n;
  }
  if (have_ < hdr_.len) return Status::kMore;
  if (mac_.on()) {
    if (tag_have_ < kTagBytes) return Status::kMore;
    if (!mac_.check(tag_.data(), &hdr_, sizeof(hdr_), payload_.data(), have_))
      return Status::kForged;
  }
  payload_.resize(have_);
  complete_ = true;
  return Status::kFrame;
}

std::vector<uint8_t> FrameReader::take_payload() {
  std::vector<uint8_t> p = std::move(payload_);
  payload_ = {};
  hdr_have_ = 0;
  have_ = 0;
  tag_have_ = 0;
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
  if (h.flags != 0 && h.flags != kHelloRescue) {
    *why = "bad peer hello flags " + std::to_string(h.flags);
    return false;
  }
  *out = h;
  return true;
}

std::vector<uint8_t> encode_report(const Report& r) {
  ReportHeader h{r.origin,
                 static_cast<uint16_t>(std::min<size_t>(r.waits_for.size(), kMaxReportWaits)),
                 static_cast<uint16_t>(std::min<size_t>(r.also.size(), kMaxReportWaits))};
  const size_t text = std::min<size_t>(r.text.size(), kMaxTextBytes);
  const size_t ranks = size_t(h.nwait) + h.nalso;
  std::vector<uint8_t> out(sizeof(h) + ranks * sizeof(int32_t) + text);
  std::memcpy(out.data(), &h, sizeof(h));
  for (size_t i = 0; i < ranks; ++i) {
    const int32_t w = i < h.nwait ? r.waits_for[i] : r.also[i - h.nwait];
    std::memcpy(out.data() + sizeof(h) + i * sizeof(w), &w, sizeof(w));
  }
  if (text > 0) std::memcpy(out.data() + sizeof(h) + ranks * sizeof(int32_t), r.text.data(), text);
  return out;
}

bool parse_report(const uint8_t* p, size_t len, int nranks, Report* out, std::string* why) {
  ReportHeader h;
  if (len < sizeof(h)) {
    *why = "a failure report of " + std::to_string(len) + " bytes";
    return false;
  }
  std::memcpy(&h, p, sizeof(h));
  if (h.origin < 0 || h.origin >= nranks) {
    *why =
        "a failure report from rank " + std::to_string(h.origin) + " of " + std::to_string(nranks);
    return false;
  }
  const size_t ranks = size_t(h.nwait) + h.nalso;
  if (h.nwait > kMaxReportWaits || h.nalso > kMaxReportWaits ||
      len - sizeof(h) < ranks * sizeof(int32_t)) {
    *why = "a failure report naming " + std::to_string(ranks) + " awaited ranks in " +
           std::to_string(len) + " bytes";
    return false;
  }
  Report r;
  r.origin = h.origin;
  for (size_t i = 0; i < ranks; ++i) {
    int32_t w;
    std::memcpy(&w, p + sizeof(h) + i * sizeof(w), sizeof(w));
    if (w < 0 || w >= nranks || w == h.origin ||
        std::find(r.waits_for.begin(), r.waits_for.end(), w) != r.waits_for.end() ||
        std::find(r.also.begin(), r.also.end(), w) != r.also.end()) {
      *why = "a failure report from rank " + std::to_string(h.origin) + " waiting for rank " +
             std::to_string(w);
      return false;
    }
    (i < h.nwait ? r.waits_for : r.also).push_back(w);
  }
  const size_t at = sizeof(h) + ranks * sizeof(int32_t);
  if (len - at > kMaxTextBytes) {
    *why = "a failure report with " + std::to_string(len - at) + " bytes of text";
    return false;
  }
  r.text.assign(reinterpret_cast<const char*>(p) + at, len - at);
  *out = std::move(r);
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
