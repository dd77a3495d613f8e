// Flight recorder: per communicator, a ring of the last N operations
// (MYCOLL_FLIGHT_RECORDER=N; 0 = off, the default, and then nothing is
// allocated and each call costs one null check). Each entry: sequence
// number, collective, count, dtype, op, root, algorithm, engine, state
// (enqueued / started / done / failed), timestamps, and the peer the rank
// was waiting on. Dumped as JSON per rank (MYCOLL_FLIGHT_RECORDER_FILE):
// when a collective fails (timeout, dead peer), at mycollCommAbort, on
// mycollCommDump, and on a signal the user opts into
// (MYCOLL_FLIGHT_RECORDER_SIGNAL). tools/flight/mycoll-flight reads every
// rank's dump and names the rank that is behind.
//
// Threading: the communicator's calling thread records; a dump may run on
// another thread (signal, abort), so the ring has a mutex (uncontended on
// the hot path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/task.h"

struct mycollComm;

namespace mycoll {

enum class FrState : uint8_t { Enqueued, Started, Done, Failed };

struct FrEntry {
  uint64_t seq = 0;
  Coll coll = Coll::AllReduce;
  mycollDataType_t dtype = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  size_t count = 0;
  int root = -1;
  Algo algo = Algo::Ring;
  bool device = false;  // device engine: the host sees only the enqueue
  FrState state = FrState::Enqueued;
  int64_t enqueued_us = 0, started_us = 0, done_us = 0;  // unix time, 0 = not yet
  int waiting_peer = -1;  // the first peer this rank still waited on (host engine)
  bool waiting_send = false;
  size_t waiting_done = 0, waiting_bytes = 0;
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity) : ring_(capacity) {}
  // Records task t as sequence number seq (the communicator's op counter).
  void enqueued(const Task& t, uint64_t seq, bool device);
  void started(uint64_t seq);
  void done(uint64_t seq);
  // The op is waiting on / failed while waiting on peer (send or receive,
  // bytes done of bytes).
  void waiting(uint64_t seq, int peer, bool send, size_t done, size_t bytes);
  void failed(uint64_t seq);
  // The entries, oldest first.
  std::vector<FrEntry> snapshot() const;
  size_t capacity() const { return ring_.size(); }
  // Operations recorded since the communicator was made: every one issued,
  // as the recorder is on from init (the fast paths step aside for it).
  // Safe from any thread, unlike the communicator's own op counter.
  uint64_t recorded() const;

 private:
  FrEntry* find(uint64_t seq);  // null when overwritten
  mutable std::mutex mu_;
  std::vector<FrEntry> ring_;
  uint64_t count_ = 0;  // entries ever recorded
};

// The JSON document of comm's recorder (why: "request", "abort", the error).
std::string flight_json(const mycollComm& c, const std::string& why);

// Writes it to `pattern` (%h host, %p pid, %r rank, %c comm id; empty:
// MYCOLL_FLIGHT_RECORDER_FILE as read at init). Returns the path; throws
// Error(SystemError) when the file cannot be written.
std::string flight_dump(const mycollComm& c, const std::string& why,
                        const std::string& pattern = "");

// At communicator init / destruction: keeps the list the signal dumps, and
// installs the signal handler once (MYCOLL_FLIGHT_RECORDER_SIGNAL).
void flight_register(mycollComm* c);
void flight_unregister(mycollComm* c);

}  // namespace mycoll
