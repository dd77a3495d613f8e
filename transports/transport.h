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
  int32_t cuda_device = -1;  // -1: host-only communicator
  uint32_t pad = 0;
  char host_id[128] = {};  // hostname + boot id (or MYCOLL_HOST_ID)
  char hostname[64] = {};
  char ip[48] = {};         // bootstrap interface address (text)
  uint64_t gpu_bus_id = 0;  // PCI bus id of cuda_device (0 if none)
};

// Checks the PeerInfo rank `rank` sent (through the bootstrap): its rank,
// a device index >= -1, a pid >= 0, and strings that end inside their
// arrays (the transports and the topology read them as C strings). Pure;
// tests/fuzz runs it on arbitrary bytes. Returns false with *why naming
// the field otherwise.
bool check_peer_info(const PeerInfo& p, int rank, std::string* why);

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

  // Queues the concatenation of a (an bytes) and b (bn bytes) as send_some
  // would; returns how many of its bytes were accepted. Sockets do it in
  // one sendmsg, so a message's header and payload cost one system call
  // instead of two. The default calls send_some on each part.
  virtual size_t send_some2(const void* a, size_t an, const void* b, size_t bn);

  // Pushes queued data and pulls incoming data; true if anything moved.
  // The engine calls it when it has nothing else to do on this peer.
  virtual bool progress() { return false; }

  // ---- Records (optional): small whole messages beside the byte stream ----
  // A record is up to record_max() bytes delivered as one unit, in order
  // with other records; it is published by a single flag store and polled
  // in place, so a small message costs one cache-line handoff. Records and
  // the byte stream are two independent ordered channels: a caller that
  // mixes them must order them itself (the host engine sends a message's
  // header as a record and, when the payload does not fit, the payload on
  // the stream right after). record_max() == 0: no records (the default).
  virtual size_t record_max() const { return 0; }
  // Sends hdr (hn bytes) followed by data (n bytes) as one record;
  // hn + n <= record_max(). Returns false, sending nothing, when no record
  // slot is free. Never blocks.
  virtual bool send_record(const void* hdr, size_t hn, const void* data, size_t n) {
    (void)hdr, (void)hn, (void)data, (void)n;
    return false;
  }
  // Exposes the next received record in place: returns its length and sets
  // *data, or returns 0 when none has arrived. The bytes stay valid and
  // unchanged until consume_record(). Never blocks.
  virtual size_t peek_record(const void** data) {
    (void)data;
    return 0;
  }
  // Releases the record exposed by peek_record().
  virtual void consume_record() {}
  // A hint that peek_record() comes soon: starts fetching the next record's
  // first cache lines, so that a caller about to receive from several peers
  // waits for their lines at once rather than one after another. Changes
  // nothing that arrives; never blocks.
  virtual void prefetch_record() const {}

  // ---- Remote reads (optional): the receiver copies out of the sender's memory ----
  // For large messages a sender may expose its buffer instead of streaming
  // it: it sends the buffer's address in a record (the caller's framing),
  // calls expose() for a ticket, and keeps the buffer unchanged until
  // exposed_done(ticket). The receiver copies with read_remote() (one copy,
  // no ring in between) and then calls release_remote(); buffers are
  // released in the order they were exposed.
  // remote_read_ok(): the peer can read this process's memory (agreed at
  // connect; false by default).
  virtual bool remote_read_ok() const { return false; }
  // Sender: the ticket (1, 2, ...) of the buffer just announced.
  virtual uint64_t expose() { return 0; }
  // Sender: whether the peer released the buffer of `ticket`. Never blocks.
  virtual bool exposed_done(uint64_t ticket) {
    (void)ticket;
    return false;
  }
  // Receiver: copies up to n bytes at address `src` of the peer into dst;
  // returns how many (> 0; 0 only where remote_read_ok() is false). Throws
  // Error(RemoteError) when the peer's memory cannot be read (peer gone,
  // address not mapped).
  virtual size_t read_remote(void* dst, uint64_t src, size_t n) {
    (void)dst, (void)src, (void)n;
    return 0;
  }
  // Receiver: the oldest exposed buffer is fully read.
  virtual void release_remote() {}

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

// Checks a connect() peer list: every entry a rank of [0, nranks) other than
// me, none twice. Throws InvalidArgument "<transport> transport: bad peer
// list on rank <me> (peer <p>)".
void check_peer_list(const char* transport, int me, int nranks, const std::vector<int>& peers);

std::unique_ptr<Transport> make_shm_transport();
// shm: how fast process_vm_readv copies on this machine, as a fraction of
// memcpy's speed (1 MiB, best of 5 each, interleaved; this process reads
// itself, which takes the kernel's path for a peer: pin the pages, copy
// them one by one). Measured at the first call (about 1 ms), then cached;
// -1 where process_vm_readv fails. The FIFO makes two memcpys, one on each
// side; single copy makes the reader do one process_vm_readv: where both
// sides are busy that wins only if this is above about 0.5. Never throws.
double shm_read_speed_ratio() noexcept;
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
