// What the shm transport reads from memory its peer can write, and its pure
// decoders (no I/O; tests/fuzz runs them on arbitrary values). A FIFO's
// whole mapping is writable by both processes, so a misbehaving peer can
// change any of it at any time:
//   - the header's geometry (capacity, record slots and their offset),
//     read once when the writer opens the FIFO; the connection then uses
//     that checked copy, never the header again;
//   - the counters the peer publishes (the writer's head, the reader's
//     tail and record tail): each must move forward and stay within what
//     the other side's own counter allows;
//   - the word in front of every record (sequence and length).
// FIFO names are made locally (fifo_name) from the bootstrap's tag and
// ranks; pids are only compared and passed to kill/process_vm_readv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mycoll.h"

namespace mycoll {
namespace shm {

constexpr uint64_t kFifoMagic = 0x4f464946434d594dull;  // "MYCMFIFO"
constexpr size_t kFifoDataOffset = 4096;
// Bytes of a record slot's word (sequence << 16 | length) before its body.
constexpr size_t kRecWord = 8;
// Largest record slot (a record's length must fit the word's 16 bits).
constexpr uint32_t kMaxRecSlotBytes = 65536;

// The geometry fields of a FIFO header, read once.
struct FifoGeometry {
  uint64_t magic = 0;
  uint64_t capacity = 0;        // data ring bytes, a multiple of 4096
  uint32_t rec_slots = 0;       // 0 (no records) or a power of two
  uint32_t rec_slot_bytes = 0;  // multiple of 64, 64..kMaxRecSlotBytes
  uint64_t rec_offset = 0;      // 64-aligned, after the data ring
};

// Checks a FIFO's geometry against the size of its mapping: the data ring
// and the record slots lie inside it, apart. mycollSystemError (the
// segment is not a usable FIFO) and *why naming the field otherwise.
mycollResult_t check_fifo_geometry(const FifoGeometry& g, uint64_t map_bytes, std::string* why);

// A counter the peer publishes (`what`: "head", "tail", "record tail"),
// read as `now` after `seen` before: it may only move forward, and no
// further than `limit` (head: this reader's tail + capacity; tail: this
// writer's head; record tail: the records written). mycollRemoteError and
// *why naming the counter and the peer otherwise.
mycollResult_t peer_counter_error(const char* what, uint64_t seen, uint64_t now, uint64_t limit,
                                  int peer, std::string* why);
inline mycollResult_t check_peer_counter(const char* what, uint64_t seen, uint64_t now,
                                         uint64_t limit, int peer, std::string* why) {
  if (now >= seen && now <= limit) return mycollSuccess;
  return peer_counter_error(what, seen, now, limit, peer, why);
}

// The word of the slot where record `seq` (counted from 0) is expected, in
// a ring of `slots` slots (power of two) of slot_bytes. *len = 0: not
// written yet (the slot is empty or holds record seq - slots); otherwise
// the record's length (1..slot_bytes - kRecWord). A word naming any other
// record, or a length out of range, is mycollRemoteError and *why.
// (Inline: every peek of a record runs it; the refusals are formatted out
// of line.)
mycollResult_t record_word_error(uint64_t word, uint64_t seq, uint32_t slots, uint32_t slot_bytes,
                                 int peer, std::string* why);
inline mycollResult_t decode_record_word(uint64_t word, uint64_t seq, uint32_t slots,
                                         uint32_t slot_bytes, size_t* len, int peer,
                                         std::string* why) {
  constexpr uint64_t kSeqMask = (1ull << 48) - 1;  // the word's sequence field
  const uint64_t got = word >> 16;
  const size_t n = word & 0xffff;
  *len = 0;
  if (got == ((seq + 1) & kSeqMask)) {
    if (n == 0 || slot_bytes < kRecWord || n > slot_bytes - kRecWord)
      return record_word_error(word, seq, slots, slot_bytes, peer, why);
    *len = n;
    return mycollSuccess;
  }
  // Not written yet: the slot still holds its previous lap, or nothing.
  const uint64_t before = seq >= slots ? ((seq + 1 - slots) & kSeqMask) : 0;
  if (got == before && (before != 0 || word == 0)) return mycollSuccess;
  return record_word_error(word, seq, slots, slot_bytes, peer, why);
}
// The word of record seq of len bytes.
inline uint64_t record_word(uint64_t seq, size_t len) { return (seq + 1) << 16 | len; }

}  // namespace shm
}  // namespace mycoll
