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
//                       then frames kColl / kP2p {payload} or kAbort {text}.
// The receiving side's I/O thread reads every frame eagerly into queues, so
// a send never waits on the receiver calling recv (no send/send deadlock).
#pragma once

#include <cstdint>

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

// Time a freshly accepted connection gets to authenticate and announce
// itself: net::kPreAuthSeconds (bootstrap/admission.h).

enum FrameKind : uint32_t {
  kRootStatus = 1,
  kRootTable = 2,
  kRootError = 3,
  kColl = 10,   // allgather / barrier traffic
  kP2p = 11,    // Bootstrap::send / recv
  kAbort = 12,  // sender failed or aborted; payload = reason text
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
  uint32_t pad;
};
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
    case kAbort: return kMaxTextBytes;
    case kColl:
    case kP2p: return kMaxFrameBytes;
    default: return 0;
  }
}

}  // namespace bswire
}  // namespace mycoll
