// Bootstrap wire format (private). Integers travel in host byte order: all
// ranks of a communicator are assumed to share one architecture.
//
// Root rendezvous, per rank:
//   rank -> root   authentication (role kRoleRoot), then RankHello
//   root -> rank   frames: kRootStatus {arrived, nranks} (progress, at most
//                  once a second), then kRootTable {tag, nranks, addr[nranks]}
//                  or kRootError {code, text}; then the root closes.
// Peer links (ring + lazy p2p), one per direction and pair:
//   sender -> receiver  authentication (role kRolePeer), then PeerHello,
//                       then frames kColl / kP2p {payload} or kAbort
//                       {ReportHeader, waits_for[nwait], also[nalso], text}.
// After the handshake every message on these links is authenticated with
// the connection's session key (FrameMac below): a hello is followed by a
// 16-byte tag, and so is every frame (header, payload, tag). A byte changed,
// a frame dropped, replayed, reordered or injected by anyone on the path
// fails the receiver's check and ends the link.
// The receiving side's I/O thread reads every frame eagerly into queues, so
// a send never waits on the receiver calling recv (no send/send deadlock).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/socket_util.h"

namespace mycoll {
namespace bswire {

constexpr uint32_t kIdMagic = 0x4c43594d;  // "MYCL" in mycollUniqueId
constexpr uint32_t kIdVersion = 1;
constexpr uint32_t kHelloMagic = 0x4852594d;  // "MYRH"
constexpr uint32_t kPeerMagic = 0x4850594d;   // "MYPH"
constexpr uint32_t kFrameMagic = 0x4642594d;  // "MYBF"

constexpr const char* kRoleRoot = "mycoll-bootstrap-root";
constexpr const char* kRolePeer = "mycoll-bootstrap-peer";

// Upper bounds that make a corrupted length harmless. Payloads are
// allocated as their bytes arrive, never from the declared length alone.
constexpr int32_t kMaxRanks = 1 << 20;
constexpr uint64_t kMaxFrameBytes = 1ull << 32;  // kColl / kP2p (setup-time data)
constexpr uint64_t kMaxTextBytes = 64 * 1024;    // kRootError / kAbort text
constexpr uint32_t kMaxReportWaits = 8;          // kAbort: ranks a report says it waited for

// Time a freshly accepted connection gets to authenticate and announce
// itself: net::kPreAuthSeconds (bootstrap/admission.h).

enum FrameKind : uint32_t {
  kRootStatus = 1,
  kRootTable = 2,
  kRootError = 3,
  kColl = 10,    // allgather / barrier traffic
  kP2p = 11,     // Bootstrap::send / recv
  kAbort = 12,   // a rank failed or aborted: a failure report (ReportHeader ...)
  kRescue = 13,  // Bootstrap::send_rescue: the one frame of a rescue link
};

struct FrameHeader {
  uint32_t magic;
  uint32_t kind;
  uint64_t len;  // payload bytes that follow
};
static_assert(sizeof(FrameHeader) == 16, "layout");

struct RankHello {
  uint32_t magic;
  uint32_t version;
  int32_t rank;
  int32_t nranks;
  uint8_t addr[net::kAddrBytes];  // this rank's peer listener
  uint32_t pad;
};
static_assert(sizeof(RankHello) == 48, "layout");

struct PeerHello {
  uint32_t magic;
  int32_t rank;
  int32_t nranks;
  uint32_t flags;  // 0: the rank's peer link; kHelloRescue: a rescue link
};
// A rescue link carries one kRescue frame, also after a failure (beside the
// rank's peer link, which may have ended): Bootstrap::send_rescue.
constexpr uint32_t kHelloRescue = 1;
constexpr uint64_t kMaxRescueBytes = 4096;
static_assert(sizeof(PeerHello) == 16, "layout");

// The most payload a frame of `kind` may declare (0: unknown kind).
constexpr uint64_t max_frame_bytes(uint32_t kind, int nranks);

struct StatusMsg {
  int32_t arrived;
  int32_t nranks;
};

// kRootTable payload: TableHeader then nranks entries of kAddrBytes.
struct TableHeader {
  uint64_t tag;
  int32_t nranks;
  uint32_t pad;
};

// kAbort payload: ReportHeader, then nwait int32 ranks (whom the failed rank
// was waiting for: a peer that made no progress, or whose connection
// ended), then nalso int32 ranks (where that was a connection that ended:
// the peers of the other unfinished transfers; bootstrap.h's Waits), then
// the text. Relayed reports keep their origin.
struct ReportHeader {
  int32_t origin;  // the rank whose failure this is
  uint16_t nwait;  // at most kMaxReportWaits
  uint16_t nalso;  // at most kMaxReportWaits
};

// kRootError payload: ErrorHeader then the message text.
struct ErrorHeader {
  int32_t code;  // mycollResult_t
  uint32_t pad;
};

constexpr uint64_t max_frame_bytes(uint32_t kind, int nranks) {
  switch (kind) {
    case kRootStatus: return sizeof(StatusMsg);
    case kRootTable:
      return sizeof(TableHeader) + static_cast<uint64_t>(nranks > 0 ? nranks : 0) * net::kAddrBytes;
    case kRootError: return sizeof(ErrorHeader) + kMaxTextBytes;
    case kAbort:
      return sizeof(ReportHeader) + 2 * kMaxReportWaits * sizeof(int32_t) + kMaxTextBytes;
    case kColl:
    case kP2p: return kMaxFrameBytes;
    case kRescue: return kMaxRescueBytes;
    default: return 0;
  }
}

// ---- Frame authentication. Each direction of a link counts its messages
// from 0 (the client's hello is its message 0); a message's tag is the
// first 16 bytes of HMAC(session key, direction | count | bytes), so a tag
// is good for one place in one stream only.
constexpr size_t kTagBytes = 16;
using Tag = std::array<uint8_t, kTagBytes>;
enum class Dir : uint8_t {
  kFromClient = 'c',  // the side that connected (and authenticated as client)
  kFromServer = 's',  // the side that accepted
};

class FrameMac {
 public:
  FrameMac() = default;  // off: no tags (tests and fuzzing of untagged streams)
  FrameMac(const net::SessionKey& key, Dir dir) : on_(true), key_(key), dir_(dir) {}
  bool on() const { return on_; }
  // The tag of the next message (the concatenation a | b); counts it.
  Tag next(const void* a, size_t alen, const void* b = nullptr, size_t blen = 0);
  // Whether tag is the next message's (constant time); counts it either way.
  bool check(const uint8_t* tag, const void* a, size_t alen, const void* b = nullptr,
             size_t blen = 0);

 private:
  bool on_ = false;
  net::SessionKey key_{};
  Dir dir_ = Dir::kFromClient;
  uint64_t count_ = 0;
};

// A whole frame as it goes on the wire: header, payload, and the tag when
// mac is on.
std::vector<uint8_t> seal_frame(FrameMac& mac, uint32_t kind, const void* payload, size_t len);

// A hello (fixed size) followed by its tag: what the client announces.
template <typename Hello>
std::vector<uint8_t> seal_hello(FrameMac& mac, const Hello& h) {
  std::vector<uint8_t> out(sizeof(h) + kTagBytes);
  std::memcpy(out.data(), &h, sizeof(h));
  const Tag t = mac.next(&h, sizeof(h));
  std::memcpy(out.data() + sizeof(h), t.data(), kTagBytes);
  return out;
}

// ---- Decoders. Everything the bootstrap reads from a socket goes through
// these pure functions (no I/O, never trusting a length or an index before
// it is checked); tests/fuzz/fuzz_wire.cc runs them on arbitrary bytes.

// Which kinds of frame a link carries.
enum class Link {
  kFromRoot,  // root -> rank: kRootStatus, kRootTable, kRootError
  kPeer,      // an incoming peer link: kColl, kP2p, kAbort
  kWayBack,   // the way back of an outgoing peer link: kAbort only
  kRescue,    // a rescue link (PeerHello kHelloRescue): kRescue only
};

// Whether h may arrive on `link` of a communicator of nranks ranks: the
// frame magic, a kind that link carries, at most that kind's bound.
bool frame_header_ok(const FrameHeader& h, Link link, int nranks);

// Reassembles the frames of one link from its byte stream, cut wherever
// recv() cuts it. The payload is grown as its bytes arrive (at most
// kReadChunk at a time), never to the declared length up front. Usage:
//   for (;;) { size_t max; uint8_t* p = r.buffer(&max); n = recv(fd, p, max);
//              switch (r.advance(n)) { kFrame: use header()/take_payload(); ... } }
class FrameReader {
 public:
  static constexpr size_t kReadChunk = 64 * 1024;
  enum class Status { kMore, kFrame, kCorrupt, kForged };

  // mac on: every frame ends with its tag, checked before the frame is
  // handed over.
  FrameReader(Link link, int nranks, FrameMac mac = {}) : link_(link), nranks_(nranks), mac_(mac) {}

  // Where the next bytes of the stream go, and at most how many (> 0).
  uint8_t* buffer(size_t* max);
  // n (1..max) bytes were written at buffer(). kFrame: a whole frame is
  // here (header(), take_payload()); kCorrupt: the header broke the rules
  // of frame_header_ok; kForged: the frame's tag is wrong (changed,
  // replayed, reordered or injected). After either the link must be
  // dropped; the reader is spent.
  Status advance(size_t n);
  // The last frame (after kFrame).
  const FrameHeader& header() const { return hdr_; }
  // Hands over the last frame's payload (header().len bytes) and gets
  // ready for the next frame.
  std::vector<uint8_t> take_payload();
  // Whether part of a frame has arrived (a close now cuts a message).
  bool mid_frame() const { return hdr_have_ > 0 && !complete_; }

 private:
  Link link_;
  int nranks_;
  FrameMac mac_;
  FrameHeader hdr_{};
  size_t hdr_have_ = 0;
  std::vector<uint8_t> payload_;
  size_t have_ = 0;
  Tag tag_{};
  size_t tag_have_ = 0;
  bool complete_ = false;
};

// A frame from the root, decoded (Link::kFromRoot; the header passed
// frame_header_ok).
struct RootMessage {
  enum class Kind { kStatus, kTable, kError, kMalformed };
  Kind kind = Kind::kMalformed;
  StatusMsg status{};                       // kStatus
  mycollResult_t code = mycollRemoteError;  // kError: always a failure code
  std::string text;                         // kError: the root's message
  uint64_t tag = 0;                         // kTable
  std::vector<net::SockAddr> table;         // kTable: nranks listener addresses
  std::string why;                          // kMalformed: what is wrong
};
RootMessage parse_root_message(uint32_t kind, const uint8_t* payload, size_t len, int nranks);

// A rank's hello to the root. root_nranks: the communicator's size, or -1
// while the root does not know it. On failure returns false with the reason
// the rank is told in *why.
bool parse_rank_hello(const uint8_t* p, size_t len, int root_nranks, RankHello* out,
                      std::string* why);
// A hello followed by its tag (seal_hello): the hello's bytes in *hello when
// the length and the tag are right.
bool open_hello(FrameMac& mac, const uint8_t* p, size_t len, size_t hello_bytes,
                std::vector<uint8_t>* hello);

// A peer's hello on a link to rank `self` of nranks. On failure returns
// false with the reason in *why.
bool parse_peer_hello(const uint8_t* p, size_t len, int nranks, int self, PeerHello* out,
                      std::string* why);

// A failure report (kAbort), decoded.
struct Report {
  int origin = -1;
  std::vector<int> waits_for;  // distinct ranks other than origin
  std::string text;
  std::vector<int> also;  // distinct ranks other than origin, none in waits_for
};
// kAbort's payload for r (waits_for and also cut to kMaxReportWaits each,
// text to kMaxTextBytes).
std::vector<uint8_t> encode_report(const Report& r);
// A kAbort payload on a link of a communicator of nranks. On failure
// returns false with the reason in *why.
bool parse_report(const uint8_t* p, size_t len, int nranks, Report* out, std::string* why);

}  // namespace bswire
}  // namespace mycoll
