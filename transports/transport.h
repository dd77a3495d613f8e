// Transports move bytes between two ranks. One interface, one folder each.
//
// A Connection is a reliable, ordered byte stream to one peer in both
// directions. Every call is non-blocking (returns at once); the engine polls
// and owns all waiting and timeouts. Framing (message boundaries) is the
// engine's business, not the transport's.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mycoll {

class Bootstrap;
struct Config;

// What a rank tells the others about itself at init (fixed size, POD so it
// goes through Bootstrap::allgather).
struct PeerInfo {
  int32_t rank = 0;
  int32_t pid = 0;
  int32_t cuda_device = -1;       // -1: host-only communicator
  uint32_t pad = 0;
  char host_id[128] = {};         // hostname + boot id (or MYCOLL_HOST_ID)
  char hostname[64] = {};
  char ip[48] = {};               // bootstrap interface address (text)
  uint64_t gpu_bus_id = 0;        // PCI bus id of cuda_device (0 if none)
};

class Connection {
 public:
  virtual ~Connection() = default;

  // Queues up to n bytes for the peer; returns how many were accepted
  // (0 when the channel is full). Never blocks.
  virtual size_t send_some(const void* data, size_t n) = 0;

  // Exposes received bytes in place: sets *data and returns how many
  // contiguous bytes (<= max) are readable there (0 if none yet). The bytes
  // stay valid and unchanged until consume(). Never blocks.
  virtual size_t peek(const void** data, size_t max) = 0;
  // Releases the first n bytes exposed by peek().
  virtual void consume(size_t n) = 0;

  // Copies up to n received bytes to dst; returns the count. Default is
  // peek + memcpy + consume; transports may read straight into dst.
  virtual size_t recv_some(void* dst, size_t n);

  // Pushes queued data and pulls incoming data; true if anything moved.
  // The engine calls it when it has nothing else to do on this peer.
  virtual bool progress() { return false; }

  // Throws Error(RemoteError, ...) when the peer is known to be gone
  // (closed socket, dead process, connection marked broken).
  virtual void check_alive() = 0;

  // Marks the connection broken on both sides so the peer's waits end
  // promptly (used by abort and on errors). Idempotent, never throws.
  virtual void shutdown() noexcept = 0;

  // "shm", "socket 10.1.2.3:4567", ... for logs and error messages.
  virtual std::string describe() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Whether this transport can serve the pair (me, peer).
  virtual bool can_connect(const PeerInfo& me, const PeerInfo& peer) const = 0;
  // Collective over every rank of bs: all ranks call it, also with an empty
  // `peers`. Returns one connection per entry of peers, in the same order.
  // peers must be symmetric (if a lists b then b lists a). Throws Error on
  // failure; bounded by cfg.timeout_s.
  virtual std::vector<std::unique_ptr<Connection>> connect(Bootstrap& bs,
                                                           const std::vector<PeerInfo>& all,
                                                           const std::vector<int>& peers,
                                                           const Config& cfg) = 0;
};

std::unique_ptr<Transport> make_shm_transport();
std::unique_ptr<Transport> make_socket_transport();
// Network transports that depend on optional system libraries (loaded at run
// time). make_* throws Error(InvalidUsage) naming why when unavailable;
// *_available() says so without throwing (why gets the reason).
// ib_available: whether a port that hca_spec (MYCOLL_IB_HCA syntax, Config::ib.hca)
// allows is active; probed once per spec and process.
std::unique_ptr<Transport> make_ib_transport();
std::unique_ptr<Transport> make_ucx_transport();
bool ib_available(const std::string& hca_spec, std::string* why);
bool ucx_available(std::string* why);

}  // namespace mycoll
