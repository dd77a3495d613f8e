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
  // The transports' connection messages (fuzz_transport.cc):
  kSocketEndpoint,  // socket: an allgathered endpoint, sockwire::decode_endpoint
  kSocketAnnounce,  // socket: a connector's announcement, sockwire::decode_announce
  kUcxAddrInfo,     // ucx: allgathered address lengths, check_addr_lengths + check_peer_addr
  kUcxHello,        // ucx: an endpoint's hello, ucxwire::check_hello
  kIbConnInfo,      // ibverbs: allgathered QP/ring info, ibwire::check_conn_info
  kIbRun,           // ibverbs: immediates and credits as they arrive (IbOp records)
  kShmFifo,         // shm: a FIFO header's geometry and mapping size, check_fifo_geometry
  kShmRun,          // shm: counters and record words read from the mapping (ShmOp records)
  kProxyStream,     // GPU proxy: its frames as a byte stream, proxywire::decode_frame & co
  kPeerInfo,        // the PeerInfo every rank allgathers, check_peer_info
  kUcxRun,          // ucx: data and credit messages as they arrive (UcxOp records),
                    // ucxwire::check_data_message & co
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

// kSocketEndpoint: param is the sender's rank. kSocketAnnounce: nranks
// 1..16 and self.
inline int announce_nranks(uint8_t param) { return 1 + (param & 15); }
inline int announce_self(uint8_t param) { return (param >> 4) % announce_nranks(param); }

// kUcxAddrInfo: nranks 1..256, the 16-byte entries of the input repeated
// to fill them; `me` is rank param % 8 (mod nranks). kUcxHello: the
// communicator's bootstrap tag, the hello's sender (param & 7) and receiver.
inline int ucx_nranks(uint8_t param) { return 1 + param; }
constexpr uint64_t kUcxTag = 0x0123456789abcdefull;

// kIbConnInfo: bit 0 of param says whether this rank's port is RoCE.
// kIbRun: a receive ring of 4 KiB x (1 + param & 15); input records of
// 5 bytes: an op (IbOp, modulo 3) and a 32-bit little-endian value.
enum IbOp : uint8_t { kIbArrive, kIbConsume, kIbCredit };

// kUcxRun: a window of 1 + (param & 15) messages; input records of 5
// bytes: an op (UcxOp, modulo 4) and a 32-bit little-endian value (see
// ucx_run in fuzz_transport.cc).
enum UcxOp : uint8_t { kUcxSend, kUcxData, kUcxCreditMsg, kUcxConsume };
inline int ucx_window(uint8_t param) { return 1 + (param & 15); }
inline uint64_t ib_ring_bytes(uint8_t param) { return 4096ull * (1 + (param & 15)); }

// kShmFifo: input: a FifoGeometry (magic, capacity, slots, slot bytes,
// offset; 32 bytes) then the mapping's size (8 bytes; mod 1 MiB).
// kShmRun: a FIFO of 4 KiB x (1 + param & 7), 1 << (2 + (param >> 3 & 3))
// record slots of 64 x (1 + param >> 5) bytes; input records of 9 bytes:
// an op (ShmOp, modulo 5) and a 64-bit little-endian value.
enum ShmOp : uint8_t { kShmHead, kShmConsume, kShmRecordWord, kShmWrite, kShmTail };
inline uint64_t shm_capacity(uint8_t param) { return 4096ull * (1 + (param & 7)); }
inline uint32_t shm_slots(uint8_t param) { return 1u << (2 + ((param >> 3) & 3)); }
inline uint32_t shm_slot_bytes(uint8_t param) { return 64u * (1 + (param >> 5)); }

// kProxyStream: channels 1..4, slots 1..8 of 8..64 bytes; stream cut in
// pieces of 1..16 bytes (byte 0 of the input's rest picks it).
inline int proxy_nch(uint8_t param) { return 1 + (param & 3); }
inline int proxy_nslots(uint8_t param) { return 1 + ((param >> 2) & 7); }
inline uint64_t proxy_slot_bytes(uint8_t param) { return 8ull * (1 + (param >> 5)); }

// kPeerInfo: param is the sender's rank.

// Runs the transports' targets (fuzz_transport.cc).
void fuzz_transport(Target t, uint8_t param, const uint8_t* p, size_t n);

// kAuth: the server's secret, nonce and role are fixed.
constexpr uint8_t kAuthSecretByte = 0x5a;
constexpr uint8_t kAuthNonceByte = 0xa5;
constexpr const char* kAuthRole = "mycoll-bootstrap-peer";

}  // namespace mycoll_fuzz
