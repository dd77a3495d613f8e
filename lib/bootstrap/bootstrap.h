// Rendezvous and out-of-band collectives between the ranks of a communicator.
//
// mycollGetUniqueId starts a root listener in the calling process and packs
// its address plus a random 128-bit secret into the id. Every rank connects
// to the root, proves it knows the secret (challenge-response: HMAC-SHA256
// over fresh nonces, never the secret itself), and sends its own listening
// address; the root returns the full table. Ranks then link into a ring of
// authenticated TCP connections used for allgather/barrier/p2p.
// Connections that fail authentication, send garbage or close early are
// dropped without disturbing init.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mycoll.h"

namespace mycoll {

using Secret = std::array<uint8_t, 16>;

// Set (to true) by another thread to end an init that is still under way:
// ncclCommAbort of a non-blocking init. Shared, so that it outlives whoever
// set it.
using CancelFlag = std::shared_ptr<const std::atomic<bool>>;

// Whom a rank waited for when it failed, as its failure report carries it.
// on: the peers of the failed wait (a silent peer, a connection that ended,
// a peer that sent garbage). also: where `on` is a connection that ended,
// the peers of every other unfinished transfer; a peer's connection ends
// when that peer fails first (it shuts its links after its own report), so
// where the waits through `on` come back around, the root cause is reached
// through these (bootstrap/blame.h). A rank that failed only because
// another rank's report or ended link stopped it (the GPU path) reports no
// `on` and those ranks as `also`: the waits go on through them.
struct Waits {
  std::vector<int> on;
  std::vector<int> also;
};

// What mycollUniqueId holds (packed into its 128 bytes).
struct UniqueIdData {
  uint32_t magic = 0;
  uint32_t version = 0;
  uint8_t addr[28] = {};  // sockaddr_in or sockaddr_in6 of the root listener
  Secret secret{};
  uint64_t tag = 0;  // random, names per-communicator resources (shm)
};
static_assert(sizeof(UniqueIdData) <= MYCOLL_UNIQUE_ID_BYTES, "id too large");

// Creates the root listener thread in this process and fills id.
void create_unique_id(mycollUniqueId* id);
// Id for rank 0 listening on a given host:port (mycollCommInitFromEnv): the
// root is then started by rank 0 itself inside Bootstrap::init. The secret
// mixes MYCOLL_SECRET with the job identity (MYCOLL_JOB_ID or the launcher's
// job id) so that two jobs never pair; without MYCOLL_SECRET it WARNs that the
// rendezvous is unauthenticated, or throws InvalidUsage with
// MYCOLL_REQUIRE_SECRET=1.
UniqueIdData unique_id_from_address(const std::string& host, int port);
UniqueIdData unpack_unique_id(const mycollUniqueId& id);  // throws InvalidArgument on bad magic
// mycollCommInitFromEnv on rank 0: serves the rendezvous for id (from
// unique_id_from_address) on its port, on all interfaces, in a background
// thread that ends after the rendezvous or timeout_s.
// Throws Error(SystemError) when the port cannot be bound.
void start_root_listener(const UniqueIdData& id, int nranks, double timeout_s);
// Waits (at most max_s) while the root of `secret` running in this process,
// if any, sends its final failure report (timeout, or the root failed). A
// rank whose init fails on that report waits, so that the root has told
// every other rank before the call returns (and its caller, maybe, ends the
// process and the root with it).
void wait_for_local_root(const Secret& secret, double max_s);

class Bootstrap {
 public:
  // Joins the rendezvous: blocks until all nranks ranks are present or
  // timeout_s passes (Timeout naming the missing ranks' count).
  // cancel (may be null): once it reads true, the rendezvous and every later
  // wait fail within about 0.1 s, and the bootstrap is failed as by abort()
  // (the peers linked by then are told).
  static std::unique_ptr<Bootstrap> init(const UniqueIdData& id, int rank, int nranks,
                                         double timeout_s, const std::string& ifname_spec,
                                         CancelFlag cancel = {});
  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const Secret& secret() const = 0;
  virtual uint64_t tag() const = 0;
  // IP address (text) of the interface this rank's listener is bound to.
  virtual std::string local_ip() const = 0;

  // data holds nranks * bytes; this rank's slot (rank * bytes) is filled in.
  virtual void allgather(void* data, size_t bytes) = 0;
  virtual void barrier() = 0;
  // Point-to-point over bootstrap links (setup-time only; not fast).
  virtual void send(int peer, const void* data, size_t bytes) = 0;
  virtual void recv(int peer, void* data, size_t bytes) = 0;
  // One small message (at most 4 KiB) on a link of its own, which works
  // after a failure or abort made the calls above unusable: a shrink after
  // a rank died hands the survivors their new rendezvous this way. Both
  // wait at most MYCOLL_TIMEOUT; the base versions are send and recv.
  virtual void send_rescue(int peer, const void* data, size_t bytes) { send(peer, data, bytes); }
  virtual void recv_rescue(int peer, void* data, size_t bytes) { recv(peer, data, bytes); }

  // Makes every blocked and future call fail promptly (RemoteError).
  virtual void abort() = 0;

  // Root cause propagation: like abort(), with `reason` sent to every rank
  // this one has a link with (who pass it on), so a rank that learns of a
  // failure from a neighbour can report what happened first.
  // waits: the ranks this one was waiting for when it failed (a peer
  // that made no progress, or whose connection ended), if any.
  virtual void fail_with(const std::string& reason, const Waits& waits = {}) {
    (void)reason;
    (void)waits;
    abort();
  }
  // Failure reports received from other ranks ("; "-joined, first first),
  // waiting up to wait_s for one to arrive. "" when none came.
  virtual std::string remote_failure(double wait_s) {
    (void)wait_s;
    return "";
  }
  // The origins of the failure reports received, first first.
  virtual std::vector<int> report_origins() { return {}; }
  // After fail_with: why this rank's wait for `waits.on` failed, found by
  // following the waits through the reports received (bootstrap/blame.h),
  // waiting up to wait_s for the answer to settle; and the reports received
  // besides. With no waits.on: no root, the reports, waiting up to wait_s
  // for one.
  struct Cause {
    std::string root;     // "" none found
    std::string reports;  // the other reports, "; "-joined, first first
  };
  virtual Cause root_cause(const Waits& waits, double wait_s) {
    (void)waits;
    return Cause{"", remote_failure(wait_s)};
  }
  // What a communicator that is busy on the GPU, with no host call waiting
  // on any link, watches for (lib/engine/peer_watch.h): failure reports
  // from other ranks, or the link from a rank in `watched` ending (its
  // process exited or was killed). Waits up to wait_s for either.
  struct PeerTrouble {
    std::string reports;     // "; "-joined, first first ("" none)
    int closed = -1;         // a watched rank whose link ended (-1 none)
    std::string closed_why;  // "closed (process exited or aborted?)", ...
    bool any() const { return !reports.empty() || closed >= 0; }
  };
  virtual PeerTrouble peer_trouble(double wait_s, const std::vector<bool>& watched) {
    (void)watched;
    PeerTrouble t;
    t.reports = remote_failure(wait_s);
    return t;
  }
};

// Network helpers shared with the socket transport.
namespace net {
// Picks the interface address: MYCOLL_SOCKET_IFNAME prefix list (e.g.
// "eth,ens"; "^docker" excludes; "=eth0" exact) else first non-loopback up
// interface else loopback. Returns a textual IP.
std::string pick_interface_ip(const std::string& ifname_spec);

// Challenge-response on a connected, blocking socket. Both sides prove
// knowledge of the secret to each other (mutual). `role_tag` separates uses
// (bootstrap, socket transport). Returns false (never throws) on any failure
// or timeout so listeners can drop bad clients.
// On success *key (when given) holds the session key both sides derive from
// the secret and both nonces (bootstrap links authenticate every later frame
// with it: bootstrap/wire.h, FrameMac).
using SessionKey = std::array<uint8_t, 32>;
bool authenticate_server(int fd, const Secret& secret, const char* role_tag, double timeout_s);
bool authenticate_client(int fd, const Secret& secret, const char* role_tag, double timeout_s,
                         SessionKey* key = nullptr);

// HMAC-SHA256 (exposed for unit tests).
std::array<uint8_t, 32> hmac_sha256(const uint8_t* key, size_t key_len, const uint8_t* msg,
                                    size_t msg_len);
// The same over a message given in pieces (their concatenation).
struct ByteSpan {
  const void* data;
  size_t len;
};
std::array<uint8_t, 32> hmac_sha256_parts(const uint8_t* key, size_t key_len, const ByteSpan* parts,
                                          size_t nparts);
std::array<uint8_t, 32> sha256(const uint8_t* msg, size_t len);
}  // namespace net

}  // namespace mycoll
