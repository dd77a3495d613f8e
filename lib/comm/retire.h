// Freeing communicators whose ranks must meet before their memory goes.
//
// A GPU communicator with peers in other processes (or with a proxy serving
// peers) keeps its inbox until every peer is done writing into it: its
// ranks meet in a barrier first (DeviceComm::meet). Ranks that destroy
// several such communicators in different orders would each wait in a
// different barrier for the others until MYCOLL_TIMEOUT. PyTorch does this
// at every exit: each rank destroys its own set of groups (subgroups, the
// two-rank communicators of send/recv) in the order its map holds them.
//
// So the meeting runs on a thread of its own: destroy waits for it at most
// kMeetInlineS (the ranks of a job that destroys in one order meet well
// within that, and destroy returns with everything freed, as before), then
// returns; the thread frees the communicator once its peers arrive, or
// their link ends, or MYCOLL_TIMEOUT passes. The process waits at exit for
// the threads still running (each is bounded by MYCOLL_TIMEOUT).
#pragma once

#include <functional>

struct mycollComm;

namespace mycoll {

// How long destroy waits for the ranks' meeting before it goes on without.
inline constexpr double kMeetInlineS = 1.0;

// Frees c (from the registry, once no call holds it): at once when it needs
// no meeting, else as described above. Never throws.
void free_comm(mycollComm* c) noexcept;

// The mechanism, apart from communicators (and for the unit tests): runs job
// on a thread of its own and waits at most wait_s for it to end. Returns
// true when it ended within that time; else the job goes on alone, and the
// process waits for it at exit. Where no thread can be started, runs job
// here. job must not throw.
bool run_behind(std::function<void()> job, double wait_s) noexcept;
// Waits at most max_s for every job left running by run_behind; returns how
// many still run.
int wait_behind(double max_s) noexcept;

}  // namespace mycoll
