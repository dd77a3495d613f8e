#include "engine/host_wire.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

#include "comm/comm.h"
#include "engine/reduce.h"

namespace mycoll {
bool header_coll_reduces(uint8_t c) { return c < kNumColls && coll_reduces(static_cast<Coll>(c)); }

size_t single_copy_min_bytes(const Config& cfg, uint8_t coll) {
  if (header_coll_reduces(coll)) return 0;
  if (coll == static_cast<uint8_t>(Coll::Gather)) return cfg.shm_read_bytes_gather();
  if (coll == static_cast<uint8_t>(Coll::AllToAll)) return cfg.shm_read_bytes_alltoall;
  return cfg.shm_read_bytes;
}

MsgHeader collective_header(Coll coll, mycollDataType_t dtype, mycollRedOp_t op, int root,
                            size_t count, size_t bytes, uint64_t seq) {
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.coll = static_cast<uint8_t>(coll);
  h.dtype = static_cast<uint8_t>(dtype);
  h.op = coll_reduces(coll) ? static_cast<uint8_t>(op) : kNone;
  h.root = coll_is_rooted(coll) ? root : -1;
  h.count = count;
  h.bytes = bytes;
  h.seq = seq;
  return h;
}

void throw_header_mismatch(const MsgHeader& h, const MsgHeader& e, int peer,
                           const std::string& where) {
  if (h.magic != kMsgMagic)
    throw_error(mycollRemoteError,
                where + ": garbage from rank " + std::to_string(peer) + " (bad message magic)");
  throw_error(mycollInvalidUsage, header_mismatch_message(h, e, peer, where));
}

std::string header_mismatch_message(const MsgHeader& h, const MsgHeader& e, int peer,
                                    const std::string& where) {
  const std::string from = "rank " + std::to_string(peer);
  auto coll = [](unsigned v) { return v < kNumColls ? coll_name(static_cast<Coll>(v)) : "?"; };
  auto dtype = [](unsigned v) {
    return v < mycollNumTypes ? dtype_name(static_cast<mycollDataType_t>(v)) : "?";
  };
  auto op = [](unsigned v) {
    return v == kNone ? "none" : v < mycollNumOps ? redop_name(static_cast<mycollRedOp_t>(v)) : "?";
  };
  std::string diff;
  auto add = [&](const std::string& what, const std::string& theirs, const std::string& mine) {
    diff += (diff.empty() ? "" : ", ") + what + " " + theirs + " (this rank: " + mine + ")";
  };
  const bool p2p = e.coll == static_cast<uint8_t>(Coll::SendRecv);
  if (h.coll != e.coll) add("collective", coll(h.coll), coll(e.coll));
  if (h.seq != e.seq)
    add(p2p ? "message number" : "call number", std::to_string(h.seq), std::to_string(e.seq));
  if (!p2p && h.count != e.count) add("count", std::to_string(h.count), std::to_string(e.count));
  if (h.dtype != e.dtype) add("datatype", dtype(h.dtype), dtype(e.dtype));
  if (h.op != e.op) add("op", op(h.op), op(e.op));
  if (h.root != e.root) add("root", std::to_string(h.root), std::to_string(e.root));
  if (h.bytes != e.bytes) add("message bytes", std::to_string(h.bytes), std::to_string(e.bytes));
  const char* hint = h.seq != e.seq && !p2p
                         ? ": a rank skipped or added a call (all ranks must make the same "
                           "calls in the same order)"
                     : p2p ? ": sends and receives between this pair do not match"
                           : ": ranks must make the same calls with the same arguments";
  return where + ": mismatch with " + from + ", which sent " + diff + hint;
}

std::string p2p_size_mismatch_message(int rank, int peer, bool send, uint64_t mine,
                                      uint64_t theirs) {
  const std::string me = "rank " + std::to_string(rank), them = "rank " + std::to_string(peer);
  const char* hint = ": sends and receives between this pair do not match";
  if (!send)
    return me + ": GPU receive from " + them + ": mismatch with " + them +
           ", which sent message bytes " + std::to_string(theirs) +
           " (this rank: " + std::to_string(mine) + ")" + hint;
  return me + ": GPU " +
         (mine ? "send of " + std::to_string(mine) + " bytes to " : "kernel sending to ") + them +
         ": mismatch with " + them + ", whose receive of message bytes " + std::to_string(theirs) +
         " did not match a send from this rank (this one or an earlier one)" + hint;
}

// The signature keeps 4 bits of collective and of datatype.
static_assert(kNumColls <= 16 && mycollNumTypes <= 16, "gpu_call_sig packs them in 4 bits");

uint64_t gpu_call_sig(const MsgHeader& h) {
  const uint64_t root = h.root < 0 ? 0xffff : uint64_t(h.root) & 0xffff;
  return (h.count & 0xffffffffull) | root << 32 | uint64_t(h.op) << 48 |
         uint64_t(h.coll & 0xf) << 56 | uint64_t(h.dtype & 0xf) << 60;
}

MsgHeader gpu_call_header(uint64_t sig) {
  MsgHeader h{};
  h.magic = kMsgMagic;
  h.count = sig & 0xffffffffull;
  const uint64_t root = (sig >> 32) & 0xffff;
  h.root = root == 0xffff ? -1 : int32_t(root);
  h.op = uint8_t(sig >> 48);
  h.coll = uint8_t((sig >> 56) & 0xf);
  h.dtype = uint8_t(sig >> 60);
  return h;
}

RecordError parse_msg_record(const void* p, size_t len, const MsgHeader& want, bool remote_ok,
                             MsgRecord* out) {
  if (len < sizeof(MsgHeader)) return RecordError::kShort;
  std::memcpy(&out->hdr, p, sizeof(MsgHeader));
  if (!header_matches(out->hdr, want)) return RecordError::kMismatch;
  // From here on out->hdr.bytes == want.bytes.
  const size_t payload = len - sizeof(MsgHeader);
  const char* after = static_cast<const char*>(p) + sizeof(MsgHeader);
  if (out->hdr.pad == kPayloadRemote) {
    if (!remote_ok || payload != sizeof(uint64_t)) return RecordError::kRemoteHere;
    std::memcpy(&out->remote_addr, after, sizeof(uint64_t));
    out->payload = MsgRecord::Payload::kRemote;
    return RecordError::kNone;
  }
  if (out->hdr.pad != kPayloadInlineOrStream) return RecordError::kPayloadMode;
  if (payload == want.bytes) {
    out->payload = MsgRecord::Payload::kInline;
    out->data = after;
  } else if (payload == 0) {
    out->payload = MsgRecord::Payload::kStreamed;
  } else {
    return RecordError::kPayloadBytes;
  }
  return RecordError::kNone;
}

void throw_record_error(RecordError e, const MsgRecord& got, size_t len, const MsgHeader& want,
                        int peer, const std::string& where) {
  const std::string garbage = where + ": garbage from rank " + std::to_string(peer);
  switch (e) {
    case RecordError::kMismatch: throw_header_mismatch(got.hdr, want, peer, where);
    case RecordError::kShort:
      throw_error(mycollRemoteError, garbage + " (a " + std::to_string(len) + "-byte record)");
    case RecordError::kRemoteHere:
      throw_error(mycollRemoteError, garbage + " (a remote-read message where it cannot be one)");
    case RecordError::kPayloadMode:
      throw_error(mycollRemoteError,
                  garbage + " (unknown payload mode " + std::to_string(got.hdr.pad) + ")");
    case RecordError::kPayloadBytes:
    case RecordError::kNone: break;
  }
  throw_error(mycollRemoteError, garbage + " (a record with " +
                                     std::to_string(len - std::min(len, sizeof(MsgHeader))) +
                                     " payload bytes for a message of " +
                                     std::to_string(want.bytes) + ")");
}

void backoff(unsigned idle_passes, bool crowded) {
  if (idle_passes < (crowded ? 2u : 64u)) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  } else if (idle_passes < 20000) {
    sched_yield();
  } else {
    struct timespec ts = {0, 50 * 1000};
    nanosleep(&ts, nullptr);
  }
}

Error host_fail(mycollComm* comm, const Error& e, const Waits& waits) {
  const bool waiting = e.code() == mycollRemoteError || e.code() == mycollTimeout;
  comm->fail(e.code(), e.what(), waiting ? waits : Waits{});
  // Aborted here: the cause is this rank's own abort, and no peer's report
  // is worth holding the call (and mycollCommAbort, which waits for it to
  // leave) for up to the settle time.
  if (!waiting || comm->aborted.load()) return e;
  // A peer that timed out at about the same time may report a moment
  // later; a closed connection's report is already on its way.
  double wait = e.code() == mycollTimeout ? std::min(3.0, 0.5 + comm->cfg.timeout_s / 4) : 1.0;
  return Error(e.code(), comm->with_remote_cause(e.what(), waits, wait));
}

}  // namespace mycoll
