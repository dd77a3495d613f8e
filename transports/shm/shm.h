// Shared-memory transport: processes (or threads) of one host.
//
// Per ordered pair of ranks (from -> to) one single-producer/single-consumer
// byte ring in POSIX shared memory named "/mycoll-<tag hex>-<from>-<to>".
// The reader creates it (its memory is allocated on the reader's side and
// charged to it), every rank syncs, the writer opens it, every rank syncs
// again and the creator unlinks the name: nothing is left in /dev/shm after
// connect, even if a process dies later.
//
// Mapping layout (FifoHeader, then the data ring at kFifoDataOffset, then
// the record slots at rec_offset):
//   constant fields (magic, capacity, record geometry), pids and pid
//   namespaces of both ends, `closed` bits; then `head` (bytes ever written,
//   written by the writer), `tail` (bytes ever consumed, written by the
//   reader) and `rec_tail` (records ever consumed, written by the reader) on
//   their own cache lines. Free space = capacity - (head - tail). The
//   counters are 64-bit and never wrap in practice. The writer publishes
//   data with a release store of head; the reader releases space with a
//   release store of tail; each side reads the other's counter with acquire.
//
// Records (Connection::send_record / peek_record): rec_slots (a power of
// two) slots of rec_slot_bytes each, 64-byte aligned. Slot i % rec_slots carries record
// i: a 64-bit word ((i + 1) << 16 | length) followed by the record's bytes.
// The writer fills the bytes, then release-stores the word; the reader
// polls the word of the slot it expects next (acquire) and reads the bytes
// in place, so a small message is one cache line moving from writer to
// reader: no head counter to read first, no copy. A slot's word from an
// earlier lap names an older record and never matches; the word is never
// user data. The writer reuses a slot only after rec_tail passed it.
//
// The data path has no locks and no syscalls: memcpy into the ring (at most
// two pieces at the wrap) and one atomic store per slice or record.
//
// Remote reads (Connection::expose / read_remote): where the connect-time
// probe succeeded, a large message can go in one copy: the receiver reads
// the sender's buffer with process_vm_readv and bumps remote_released; the
// sender keeps the buffer until remote_released reaches its ticket.
//
// This header exposes the pieces below the Transport so tests can build a
// connection between processes without a Bootstrap (e.g. after fork()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/shm/shm_wire.h"
#include "transports/transport.h"

namespace mycoll {
namespace shm {

// closed bits.
constexpr uint32_t kWriterClosed = 1;
constexpr uint32_t kReaderClosed = 2;

struct FifoHeader {
  std::atomic<uint64_t> magic;  // kFifoMagic, stored (release) once the rest is set
  uint64_t capacity;            // bytes in the data ring
  std::atomic<int32_t> writer_pid;
  std::atomic<int32_t> reader_pid;
  std::atomic<uint64_t> writer_pidns;  // inode of /proc/self/ns/pid (0: unknown)
  std::atomic<uint64_t> reader_pidns;
  std::atomic<uint32_t> closed;  // kWriterClosed | kReaderClosed
  uint32_t rec_slots;            // record slots (0: no records)
  uint32_t rec_slot_bytes;       // bytes per slot, word included (multiple of 64)
  uint64_t rec_offset;           // offset of slot 0 from the start of the mapping
  // Remote reads (single copy, Linux cross-memory attach): the writer
  // publishes the address of a known word in its process; at connect the
  // reader tries to read it with process_vm_readv and sets remote_read_ok
  // (1: the reader can read the writer's memory, so the writer may expose
  // buffers instead of streaming them).
  std::atomic<uint64_t> writer_probe_addr;
  std::atomic<uint32_t> remote_read_ok;
  alignas(128) std::atomic<uint64_t> head;
  alignas(128) std::atomic<uint64_t> tail;
  alignas(128) std::atomic<uint64_t> rec_tail;
  alignas(128) std::atomic<uint64_t> remote_released;  // exposed buffers the reader released
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "shm FIFO needs lock-free 64-bit atomics");
static_assert(sizeof(FifoHeader) <= kFifoDataOffset, "header too large");

// One process's mapping of one FIFO.
class Fifo {
 public:
  // Reader side: creates the named segment (fails if it exists), reserves
  // its memory (posix_fallocate, so a full /dev/shm is an error here rather
  // than a SIGBUS later), maps it and initialises the header. capacity is
  // rounded up to a multiple of 4096. Throws Error(SystemError) naming the
  // segment and the reason.
  static std::unique_ptr<Fifo> create(const std::string& name, size_t capacity);
  // Writer side: opens and maps an existing segment created by create(),
  // checks a copy of its geometry (check_fifo_geometry), records this
  // process as the writer. Throws Error(SystemError).
  static std::unique_ptr<Fifo> open(const std::string& name);
  ~Fifo();
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;

  FifoHeader* header() const { return header_; }
  uint8_t* data() const { return data_; }
  // Record slot area (rec_slots() slots), null when there is none.
  uint8_t* records() const { return records_; }
  // The geometry as created or checked at open: the header's copy may be
  // changed by the peer later and is never read again.
  uint64_t capacity() const { return geo_.capacity; }
  uint32_t rec_slots() const { return geo_.rec_slots; }
  uint32_t rec_slot_bytes() const { return geo_.rec_slot_bytes; }
  const std::string& name() const { return name_; }

 private:
  Fifo(std::string name, void* base, size_t map_bytes, const FifoGeometry& geo);
  std::string name_;
  void* base_ = nullptr;
  size_t map_bytes_ = 0;
  FifoHeader* header_ = nullptr;
  uint8_t* data_ = nullptr;
  uint8_t* records_ = nullptr;
  FifoGeometry geo_;
};

// Record geometry for a FIFO of `capacity` data bytes: up to a quarter of
// it (8 KiB..256 KiB, a power of two) in a power of two of slots of up to
// 4 KiB (16..64 slots). The default 1 MiB ring gets the full 64 slots: a
// root that only sends small messages runs up to 64 records ahead
// (docs/performance.md, "Session 22").
struct RecordGeometry {
  uint32_t slots;
  uint32_t slot_bytes;
};
RecordGeometry record_geometry(uint64_t capacity);

// Reader side, after the writer opened `in`: whether this process can
// read the writer's memory (process_vm_readv of the writer's probe word,
// same pid namespace); records the answer in the header for the writer.
// Never throws.
bool probe_remote_read(Fifo& in) noexcept;

// "/mycoll-<tag as 16 hex digits>-<from>-<to>".
std::string fifo_name(uint64_t tag, int from, int to);

// shm_unlink that ignores ENOENT; never throws.
void unlink_fifo(const std::string& name) noexcept;

// A connection to peer_rank: this process writes `out` (opened with
// Fifo::open) and reads `in` (made with Fifo::create). peer_rank is only
// used in messages.
std::unique_ptr<Connection> make_connection(int peer_rank, std::unique_ptr<Fifo> out,
                                            std::unique_ptr<Fifo> in);

}  // namespace shm
}  // namespace mycoll
