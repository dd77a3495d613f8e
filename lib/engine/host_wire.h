// What the host engine puts on the wire in front of every message, and the
// pieces of waiting shared by its general loop (host_engine.cc) and its
// small-message path (host_fast.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.h"
#include "base/config.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "mycoll.h"

struct mycollComm;

namespace mycoll {

// Every message starts with this header: the call it belongs to travels
// with the data and is checked on arrival, so a peer that made a different
// call (collective, count, type, op, root) or is a call ahead or behind
// (sequence) is an InvalidUsage error naming it, never silent corruption.
// Fields that do not apply to a call are sent as kNone / -1; padding is 0.
// On connections with records (shm) the header is a record and a payload
// that fits travels inside it; elsewhere it precedes the payload on the
// byte stream.
struct MsgHeader {
  uint32_t magic;
  uint8_t coll;
  uint8_t dtype;
  uint8_t op;  // reducing collectives; else kNone
  uint8_t pad;
  int32_t root;  // rooted collectives; else -1
  uint32_t pad2;
  uint64_t count;  // the call's count (point-to-point: this message's bytes)
  uint64_t bytes;  // payload of this message
  // Collectives: the call's number on the communicator. Point-to-point: the
  // message's number from sender to receiver.
  uint64_t seq;
};
static_assert(sizeof(MsgHeader) == 40, "header layout");
constexpr uint32_t kMsgMagic = 0x324d434dU;  // "MCM2"
constexpr uint8_t kNone = 0xff;

// MsgHeader::pad says how the payload travels (records only; the check of
// a header ignores it): inline or streamed (by the record's length), or
// left in the sender's memory for the receiver to read (the record then
// holds the header and the 8-byte address; Connection::expose).
constexpr uint8_t kPayloadInlineOrStream = 0;
constexpr uint8_t kPayloadRemote = 1;
// Messages of at least single_copy_min_bytes (below) go as remote reads
// where the connection offers them: one copy instead of two through the
// ring.
// Largest single remote read (the loop moves other transfers in between).
constexpr size_t kRemoteReadChunkBytes = 4 * 1024 * 1024;
// Stream messages of at most this many payload bytes are sent in one write
// with their header (Connection::send_some2), and received with the header
// taken through Connection::peek (one socket recv for header and payload,
// the payload then copied out of the transport's buffer). Larger payloads
// are written after the header and read straight into the destination.
constexpr size_t kStreamPeekBytes = 32 * 1024;

// Whether a header's collective (MsgHeader::coll, any byte) reduces what
// arrives: coll_reduces (algorithms/plan.h) for a valid collective.
bool header_coll_reduces(uint8_t c);

// The smallest message of a header's collective (any byte) that a sender
// offers as a remote read, 0 = never: reductions never (they read the
// payload once either way); a gather's Config::shm_read_bytes_gather (its
// root receives from every rank); an all-to-all's
// cfg.shm_read_bytes_alltoall (lower where ranks crowd the CPUs); the
// others' (and point-to-point's) cfg.shm_read_bytes. The thresholds are
// the communicator's, set at init (Config::shm_read_bytes_for,
// shm_read_bytes_alltoall_for).
size_t single_copy_min_bytes(const Config& cfg, uint8_t coll);

// The header of a collective's message (seq = the call number).
MsgHeader collective_header(Coll coll, mycollDataType_t dtype, mycollRedOp_t op, int root,
                            size_t count, size_t bytes, uint64_t seq);

// Whether `got` is the message `want` describes.
inline bool header_matches(const MsgHeader& got, const MsgHeader& want) {
  return got.magic == want.magic && got.coll == want.coll && got.dtype == want.dtype &&
         got.op == want.op && got.root == want.root && got.count == want.count &&
         got.seq == want.seq && got.bytes == want.bytes;
}

// Throws the error for a header that does not match: RemoteError for
// garbage (bad magic), InvalidUsage naming every differing field for a peer
// that made another call. `where` names this rank's operation.
[[noreturn]] void throw_header_mismatch(const MsgHeader& got, const MsgHeader& want, int peer,
                                        const std::string& where);
// The InvalidUsage message of throw_header_mismatch for a header with the
// right magic.
std::string header_mismatch_message(const MsgHeader& got, const MsgHeader& want, int peer,
                                    const std::string& where);

// The message of a GPU point-to-point size mismatch
// (kernels/prims/p2p_size.cuh): this rank's receive from `peer` found the
// sender's message bytes `theirs` against its own `mine`, or (send) this
// rank's send of `mine` bytes (0: seen by a collective kernel) learned that
// the peer's receive of `theirs` bytes did not match.
std::string p2p_size_mismatch_message(int rank, int peer, bool send, uint64_t mine,
                                      uint64_t theirs);

// The GPU path's header: what the collective kernels compare with every
// peer's before they count a call done (kernels/prims/call_check.cuh), the
// fields of a collective's MsgHeader that every rank's call shares, packed
// in 64 bits: count (its low 32 bits) | root (16 bits, 0xffff none) << 32 |
// op (8 bits) << 48 | collective (4 bits) << 56 | datatype (4 bits) << 60.
// Never 0 for a collective (0 means unchecked to the kernels): a call
// without a root carries 0xffff, a rooted call that does not reduce carries
// op kNone, and the rooted reducing one (reduce) is collective 2.
uint64_t gpu_call_sig(const MsgHeader& h);
// The header a signature stands for (count as its low 32 bits; magic set,
// bytes and seq 0), for header_mismatch_message.
MsgHeader gpu_call_header(uint64_t sig);

// A header record as it arrived (connections with records), decoded by
// parse_msg_record: the header and how the payload travels.
struct MsgRecord {
  enum class Payload : uint8_t {
    kInline,    // inside the record: `data`, hdr.bytes of them (also for 0 bytes)
    kStreamed,  // follows on the byte stream (the record is the header alone)
    kRemote,    // left in the sender's memory at `remote_addr`
  };
  MsgHeader hdr;
  Payload payload = Payload::kInline;
  const char* data = nullptr;
  uint64_t remote_addr = 0;
};

// What is wrong with a record.
enum class RecordError : uint8_t {
  kNone,
  kShort,         // shorter than a header
  kMismatch,      // a header other than the one expected (or bad magic)
  kRemoteHere,    // a remote-read message where there cannot be one
  kPayloadMode,   // an unknown MsgHeader::pad
  kPayloadBytes,  // neither the whole payload nor none of it
};

// Decodes a record of len bytes at p that should carry the message `want`
// (pure; no byte of p is trusted before it is checked; tests/fuzz runs it on
// arbitrary bytes). remote_ok: this receive may take a remote-read message.
// On kNone *out holds the record; otherwise out->hdr holds what could be read.
RecordError parse_msg_record(const void* p, size_t len, const MsgHeader& want, bool remote_ok,
                             MsgRecord* out);

// Throws the error for a record parse_msg_record refused (RemoteError for
// garbage, InvalidUsage for a mismatch, as throw_header_mismatch).
[[noreturn]] void throw_record_error(RecordError e, const MsgRecord& got, size_t len,
                                     const MsgHeader& want, int peer, const std::string& where);

// The idle policy of both loops: pause for the first 64 idle passes, then
// yield, then sleep 50 us per pass past 20000. `crowded` (more ranks on this
// host than CPUs): yield from the second idle pass, since the peer being
// waited for may need this very CPU.
void backoff(unsigned idle_passes, bool crowded);

// How often (in idle passes) the loops look at the clock, the abort flag
// and the peers: every 256th idle pass, and every pass once sleeping.
inline bool idle_check_due(unsigned idle_passes) {
  return (idle_passes & 255) == 0 || idle_passes > 20000;
}

// A connection's peer makes no progress for this long: ask the transport
// whether it is alive (each check may cost a syscall).
constexpr double kCheckAliveAfterS = 0.005;

// Marks comm broken with e and returns the error to report: for a lost or
// silent peer, with the root cause found by following the waits from
// waits (the peers the failed operation waited for) through the other
// ranks' reports (a rank that failed first says why, and whom it waited
// for, before closing its connections, so the messenger is not blamed).
Error host_fail(mycollComm* comm, const Error& e, const Waits& waits);

}  // namespace mycoll
