// Input format of the wire fuzz target (tests/fuzz/fuzz_wire.cc), shared with
// the seed generator (make_seeds.cc):
//   byte 0  which decoder (Target, modulo kNumTargets)
//   byte 1  a parameter: nranks, the size of the pieces a stream arrives in,
//           or which message is expected (see each target)
//   rest    the bytes as they came off the network
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/host_wire.h"

namespace mycoll_fuzz {

enum Target : uint8_t {
  kPeerStream,  // bootstrap peer link: FrameReader(Link::kPeer)
  kWayBack,     // the way back of an outgoing link: FrameReader(Link::kWayBack)
  kRootStream,  // root -> rank: FrameReader(Link::kFromRoot) + parse_root_message
  kRankHello,   // rank -> root announcement: parse_rank_hello
  kPeerHello,   // peer link announcement: parse_peer_hello
  kAuth,        // handshake: parse_server_hello, check_client_proof
  kUniqueId,    // mycollUniqueId bytes: unpack_unique_id
  kMsgRecord,   // host engine header record: parse_msg_record
  kTaggedPeer,  // peer link after the handshake: FrameReader(Link::kPeer, a FrameMac of
                // kTagKeyByte, client direction)
  kNumTargets
};

// Streams: nranks 1..8 and pieces of 1..32 bytes (the last one shorter).
inline int stream_nranks(uint8_t param) { return 1 + (param & 7); }
inline size_t stream_piece(uint8_t param) { return 1 + (param >> 3); }

// kRankHello: the root's nranks (-1: not known yet). kPeerHello: nranks and self.
inline int hello_nranks(uint8_t param) { return (param & 8) ? -1 : 1 + (param & 7); }
inline int peer_self(uint8_t param) { return (param >> 4) % stream_nranks(param); }

// kMsgRecord: the message the receiver expects, from param; bit 7 says
// whether the receive may take a remote-read message.
inline mycoll::MsgHeader expected_header(uint8_t param) {
  const auto coll = static_cast<mycoll::Coll>((param & 0x7f) % mycoll::kNumColls);
  return mycoll::collective_header(coll, mycollFloat32, mycollSum, 1, 16, 64, 7 + (param & 3));
}
inline bool remote_ok(uint8_t param) { return (param & 0x80) != 0; }

// kTaggedPeer: the session key (every byte this value).
constexpr uint8_t kTagKeyByte = 0x3c;

// kAuth: the server's secret, nonce and role are fixed.
constexpr uint8_t kAuthSecretByte = 0x5a;
constexpr uint8_t kAuthNonceByte = 0xa5;
constexpr const char* kAuthRole = "mycoll-bootstrap-peer";

}  // namespace mycoll_fuzz
