// Live communicators. The handle a user holds (mycollComm_t) is not the
// communicator's address but a code naming a slot of a fixed table and the
// slot's generation, so a destroyed handle is recognised without touching
// freed memory, even when a new communicator took its place (the slot's
// generation moved on).
//
// Every API call pins the communicator for its duration: a slot word holds
// the generation, a DEAD flag, a BUSY flag and a pin count, changed with one
// CAS at entry and one atomic subtract at exit (what the old active-call
// counter cost). Calls that run communication pin exclusively (BUSY): a
// second thread doing so at the same time gets InvalidUsage instead of
// corrupting the first one's data. Destroy and abort mark the slot DEAD
// (new pins fail), then wait for the pins to drain before freeing; when
// they do not drain in time (abort: a call stuck past its bound), the last
// call to leave frees the communicator.
#pragma once

#include <memory>

#include "mycoll.h"

namespace mycoll {

class CommPin;
bool registry_retire(CommPin pin, double wait_s);

enum class PinMode { kShared, kExclusive };

// Owns a pin on a live communicator (move-only). get() is null when the
// pin failed (see pin_comm). Moves and the release of an empty pin are
// inline: every API call moves its pin at least once.
class CommPin {
 public:
  CommPin() = default;
  CommPin(CommPin&& o) noexcept : comm_(o.comm_), slot_(o.slot_), mode_(o.mode_) {
    o.comm_ = nullptr;
  }
  CommPin& operator=(CommPin&& o) noexcept {
    if (this != &o) {
      release();
      comm_ = o.comm_, slot_ = o.slot_, mode_ = o.mode_;
      o.comm_ = nullptr;
    }
    return *this;
  }
  CommPin(const CommPin&) = delete;
  CommPin& operator=(const CommPin&) = delete;
  ~CommPin() { release(); }

  mycollComm* get() const { return comm_; }
  mycollComm* operator->() const { return comm_; }
  void release() noexcept {
    if (comm_) unpin();
  }

 private:
  friend CommPin pin_comm(mycollComm_t h, PinMode mode, const char* fn);
  friend bool registry_retire(CommPin pin, double wait_s);
  CommPin(mycollComm* comm, unsigned slot, PinMode mode) : comm_(comm), slot_(slot), mode_(mode) {}
  void unpin() noexcept;  // release() of a held pin
  mycollComm* comm_ = nullptr;
  unsigned slot_ = 0;
  PinMode mode_ = PinMode::kShared;
};

// Registers a new communicator and returns its handle (the table takes
// ownership). Throws InvalidUsage when too many communicators are alive.
mycollComm_t registry_add(std::unique_ptr<mycollComm> c);

// Pins h. Throws InvalidArgument "<fn>: comm is NULL" / "<fn>: comm is not a
// valid communicator (destroyed?)", and for kExclusive InvalidUsage when
// another thread is inside a call on it.
CommPin pin_comm(mycollComm_t h, PinMode mode, const char* fn);

// The communicator behind a live handle, or null; no pin (for tests and
// messages only; never dereference across a possible destroy).
mycollComm* registry_peek(mycollComm_t h);

// Marks the communicator dead (new pins fail) and frees it once every pin
// is gone, waiting at most wait_s for them; past that the last pin to
// leave frees it. `pin` (shared or exclusive, on h) is released here.
// Returns false when another destroy/abort got there first.
bool registry_retire(CommPin pin, double wait_s);

// For a call that touches no buffer and no state (a collective of count 0):
// the rank count of the communicator h names when it is live, not being
// destroyed, not failed or aborted and not inside another thread's call;
// else 0, and the caller takes the pinned path, which says why. Nothing
// is pinned and nothing of the communicator is read (its slot keeps the
// count): two loads of the slot word around one of the count.
int registry_idle_nranks(mycollComm_t h);

// Flags c's slot failed or aborted (mycollComm::fail, interrupt; once set,
// never cleared): registry_idle_nranks says 0 from then on.
void registry_mark_unusable(const mycollComm* c);

// Live communicators (tests).
int registry_live_count();

}  // namespace mycoll
