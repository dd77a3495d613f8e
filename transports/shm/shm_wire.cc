// Decoders of what the shm transport reads from shared memory (shm_wire.h).
#include "transports/shm/shm_wire.h"

namespace mycoll {
namespace shm {

mycollResult_t check_fifo_geometry(const FifoGeometry& g, uint64_t map_bytes, std::string* why) {
  auto bad = [&](const std::string& what) {
    *why =
        "not an initialised mycoll FIFO of " + std::to_string(map_bytes) + " bytes (" + what + ")";
    return mycollSystemError;
  };
  if (g.magic != kFifoMagic) return bad("bad magic");
  if (map_bytes < kFifoDataOffset) return bad("too small");
  if (g.capacity == 0 || g.capacity % 4096 != 0 || g.capacity > map_bytes - kFifoDataOffset)
    return bad("data ring of " + std::to_string(g.capacity) + " bytes");
  if (g.rec_slots == 0) return mycollSuccess;
  if ((g.rec_slots & (g.rec_slots - 1)) != 0)
    return bad(std::to_string(g.rec_slots) + " record slots, not a power of two");
  if (g.rec_slot_bytes < 64 || g.rec_slot_bytes % 64 != 0 || g.rec_slot_bytes > kMaxRecSlotBytes)
    return bad("record slots of " + std::to_string(g.rec_slot_bytes) + " bytes");
  const uint64_t area = uint64_t{g.rec_slots} * g.rec_slot_bytes;  // < 2^48
  if (g.rec_offset % 64 != 0 || g.rec_offset < kFifoDataOffset + g.capacity ||
      g.rec_offset > map_bytes || area > map_bytes - g.rec_offset)
    return bad("record slots at offset " + std::to_string(g.rec_offset) + ", " +
               std::to_string(area) + " bytes");
  return mycollSuccess;
}

mycollResult_t peer_counter_error(const char* what, uint64_t seen, uint64_t now, uint64_t limit,
                                  int peer, std::string* why) {
  *why = std::string("shm: corrupt FIFO from rank ") + std::to_string(peer) + ": its " + what +
         " reads " + std::to_string(now) + (now < seen ? ", back from " : ", beyond ") +
         std::to_string(now < seen ? seen : limit);
  return mycollRemoteError;
}

mycollResult_t record_word_error(uint64_t word, uint64_t seq, uint32_t slots, uint32_t slot_bytes,
                                 int peer, std::string* why) {
  constexpr uint64_t kSeqMask = (1ull << 48) - 1;
  const uint64_t got = word >> 16;
  const size_t n = word & 0xffff;
  if (got == ((seq + 1) & kSeqMask)) {
    *why = "shm: corrupt record " + std::to_string(seq) + " from rank " + std::to_string(peer) +
           " (length " + std::to_string(n) + ", slots of " + std::to_string(slot_bytes) + " bytes)";
    return mycollRemoteError;
  }
  const uint64_t before = seq >= slots ? ((seq + 1 - slots) & kSeqMask) : 0;
  *why = "shm: corrupt record slot from rank " + std::to_string(peer) +
         " (its word holds sequence " + std::to_string(got) + "; record " + std::to_string(seq) +
         " would be " + std::to_string((seq + 1) & kSeqMask) + ", the slot's previous lap " +
         std::to_string(before) + ")";
  return mycollRemoteError;
}

}  // namespace shm
}  // namespace mycoll
