// Shared-memory transport: processes (or threads) of one host.
//
// Per ordered pair of ranks (from -> to) one single-producer/single-consumer
// byte ring in POSIX shared memory named "/mycoll-<tag hex>-<from>-<to>".
// The reader creates it (its memory is allocated on the reader's side and
// charged to it), every rank syncs, the writer opens it, every rank syncs
// again and the creator unlinks the name: nothing is left in /dev/shm after
// connect, even if a process dies later.
//
// Mapping layout (FifoHeader, then the data ring at kFifoDataOffset):
//   constant fields (magic, capacity), pids and pid namespaces of both ends,
//   `closed` bits; then `head` (bytes ever written, written by the writer)
//   and `tail` (bytes ever consumed, written by the reader) on their own
//   cache lines. Free space = capacity - (head - tail). Both counters are
//   64-bit and never wrap in practice. The writer publishes data with a
//   release store of head; the reader releases space with a release store
//   of tail; each side reads the other's counter with acquire.
//
// The data path has no locks and no syscalls: memcpy into the ring (at most
// two pieces at the wrap) and one atomic store per slice.
//
// This header exposes the pieces below the Transport so tests can build a
// connection between processes without a Bootstrap (e.g. after fork()).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transports/transport.h"

namespace mycoll {
namespace shm {

constexpr uint64_t kFifoMagic = 0x4f464946434d594dull;  // "MYCMFIFO"
constexpr size_t kFifoDataOffset = 4096;

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
  alignas(128) std::atomic<uint64_t> head;
  alignas(128) std::atomic<uint64_t> tail;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm FIFO needs lock-free 64-bit atomics");
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
  // checks it, records this process as the writer. Throws Error(SystemError).
  static std::unique_ptr<Fifo> open(const std::string& name);
  ~Fifo();
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;

  FifoHeader* header() const { return header_; }
  uint8_t* data() const { return data_; }
  uint64_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }

 private:
  Fifo(std::string name, void* base, size_t map_bytes);
  std::string name_;
  void* base_ = nullptr;
  size_t map_bytes_ = 0;
  FifoHeader* header_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;
};

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
