// UCX transport: one UCP context and worker per communicator, one endpoint
// per peer, bytes carried as tagged messages with sequence numbers.
//
// connect() (collective): every rank with UCX peers creates a context and a
// worker; the packed worker addresses go round Bootstrap::allgather (lengths,
// then contents); each rank creates an endpoint per peer from the peer's
// address (error handling mode PEER, so a dead peer is reported), and a
// hello message each way proves the pair works before connect() returns.
//
// Wire format: the byte stream to a peer is cut into messages of at most
// MYCOLL_UCX_CHUNK_BYTES. Message k from rank s carries tag
//   s << 40 | (k mod 2^39)                (data)
//   s << 40 | 1 << 39 | kind              (control: hello, close)
// so messages match in order whatever the transport reorders.
//
// Send side: send_some copies the offered bytes, a chunk per free send slot
// (MYCOLL_UCX_WINDOW slots), and posts ucp_tag_send_nbx; it never blocks.
// It reports bytes as accepted only once UCX completed their send, so the
// engine keeps calling it (and so progressing the worker) until the data
// has left: the host engine polls only connections it still waits on, and
// a UCX send left alone would never finish. Bytes offered again are known
// to be the same stream bytes (the engine re-offers what was not accepted),
// so slots already posted are not copied twice. Sends use the eager
// protocol (RNDV_THRESH=inf unless UCX_RNDV_THRESH is set), so completion
// never waits for the receiver's engine, in buffer-copy mode
// (ZCOPY_THRESH=inf unless UCX_ZCOPY_THRESH is set; see make_worker).
// Receive side: MYCOLL_UCX_WINDOW receives are pre-posted into receive
// slots, for the next sequence numbers; peek exposes the oldest completed
// slot in place, consume reposts it once read.
//
// Flow control (credits): a sender posts message k only while k < c + window,
// where c is the number of messages the receiver reported consumed. Every
// data message starts with an 8-byte word carrying the count its sender has
// consumed of the other direction (so traffic both ways carries the
// credits); a reader that has not told its count for three quarters of a
// window sends it in a control message "credit" instead (the sender keeps a
// quarter of a window to send while that credit travels). So every message
// lands in a receive the peer already posted: nothing waits in UCX's
// unexpected queue, a sender never runs more than a window ahead of its
// reader, and a sender whose reader died stops within a window and waits,
// where the engine's liveness checks find the dead peer. (A local completion
// says only that UCX took the bytes: with buffer-copy sends a broadcast root
// went on "sending" to a dead leaf for 100,000 calls.) Credit messages go
// without a completion callback (the request is released at once, UCX
// finishes it) from one word per peer that only grows, so a send UCX copies
// late carries a newer count, never a wrong one.
//
// Threading: the worker runs in UCS_THREAD_MODE_SERIALIZED and every call
// into UCX holds the communicator's worker mutex, so shutdown() from another
// thread (mycollCommAbort) is safe. UCX callbacks only set flags.
//
// Teardown: the destructor waits (bounded) until every queued send has
// completed, so bytes accepted by send_some reach the peer even when this
// rank destroys its communicator right after its last collective; then it
// cancels the pre-posted receives and closes the endpoint (flush mode, or
// force after an error). shutdown() tells the peer with a control "close"
// message so its waits end promptly, then force-closes the endpoint.
//
// Process exit with communicators alive (a program may end without
// destroying them): UCX's library destructors run after the at-exit hooks
// and free state that UCX's progress thread still reads while a worker
// lives, and a live worker's objects are referenced only from memory UCX
// maps itself (LeakSanitizer reports them as leaked). So an at-exit hook,
// registered once UCX is loaded, closes every live connection as its
// destructor would and releases the workers first; the connection objects
// stay, shut down, so a thread still running gets an error instead of
// reaching into UCX.
//
// Files: ucx_impl.h (this model and the state shared by the files),
// ucx_connection.cc (one peer's connection: send, receive, credits,
// teardown, the at-exit hook), ucx.cc (the UCX probe, the worker, and
// connect()).
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"
#include "transports/ucx/ucxwrap.h"

namespace mycoll {
namespace ucximpl {

using Clock = std::chrono::steady_clock;

constexpr int kSrcShift = 40;
constexpr uint64_t kCtrlBit = 1ull << 39;
constexpr uint64_t kSeqMask = kCtrlBit - 1;
constexpr uint64_t kFullMask = ~0ull;
constexpr uint64_t kHello = 1, kClose = 2, kCredit = 3;
// Every data message: the sender's consumed count of the other direction
// (a credit), then up to MYCOLL_UCX_CHUNK_BYTES of the byte stream.
constexpr size_t kPrefix = ucxwire::kCreditBytes;
using ucxwire::AddrInfo;

inline uint64_t data_tag(int src, uint64_t seq) {
  return (static_cast<uint64_t>(src) << kSrcShift) | (seq & kSeqMask);
}
inline uint64_t ctrl_tag(int src, uint64_t kind) {
  return (static_cast<uint64_t>(src) << kSrcShift) | kCtrlBit | kind;
}

inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The UCP context and worker of one communicator, shared by its connections.
//
// The pusher thread progresses the worker once a millisecond whenever
// nobody else holds it. A buffer-copy send completes once UCX packed it;
// over TCP its last fragment may still sit in UCX's transmit buffer behind
// a full socket, and only this worker's progress writes it out. The engine
// stops polling a connection once its sends completed, so without the
// pusher a rank that went on to wait on a shm peer (or back to the
// application) left a UCX peer 35,720 bytes short until MYCOLL_TIMEOUT
// (UcxMultiHost.ThreeHostsTwoRanksEach, 1 run in 3). It never blocks on the
// mutex (try_lock): the engine's own progress is not delayed.
struct Worker {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  std::mutex mu;      // serializes every use of worker and its endpoints
  bool leak = false;  // an endpoint close never finished: keep UCX objects
  bool released = false;
  std::atomic<bool> stop{false};
  std::unique_ptr<std::thread> pusher;
  pid_t owner = 0;  // the process that started the pusher

  ~Worker() {
    stop_pusher();
    std::lock_guard<std::mutex> g(mu);
    release_locked();
  }
  void start_pusher() {
    owner = ::getpid();
    pusher = std::make_unique<std::thread>([this] {
      while (!stop.load(std::memory_order_acquire)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::unique_lock<std::mutex> g(mu, std::try_to_lock);
        if (g.owns_lock() && !released && worker) ucx().worker_progress(worker);
      }
    });
  }
  // Ends the pusher (a fork child has none: its copy of the handle is let go).
  void stop_pusher() {
    stop.store(true, std::memory_order_release);
    if (!pusher) return;
    if (::getpid() == owner && pusher->joinable())
      pusher->join();
    else
      (void)pusher.release();
    pusher.reset();
  }
  // Destroys the worker and the context (once), unless an endpoint still
  // holds on to them.
  void release_locked() {
    if (released) return;
    released = true;
    if (leak) {
      log_warn(Subsys::Transport, "ucx: an endpoint did not close in time; worker left allocated");
      return;
    }
    if (worker) ucx().worker_destroy(worker);
    if (ctx) ucx().cleanup(ctx);
    worker = nullptr;
    ctx = nullptr;
  }
  void progress() {
    while (ucx().worker_progress(worker) != 0) {}
  }
};

// One UCX request we wait on; its callback fills it in.
struct Slot {
  uint8_t* buf = nullptr;
  void* req = nullptr;  // UCX request while pending or until freed
  bool busy = false;    // posted and not yet released by us
  bool done = false;    // completed (callback ran or immediate)
  ucs_status_t status = UCS_OK;
  size_t len = 0;  // bytes sent / received
  size_t off = 0;  // receive: bytes consumed

  void release() {
    if (req) ucx().request_free(req);
    req = nullptr;
    busy = done = false;
    len = off = 0;
    status = UCS_OK;
  }
};

// Everything about one peer. Owned through the connection; callbacks point
// at it, and it is freed only after its endpoint is closed (or leaked with
// the worker when a close never finished).
struct PeerState {
  int me = 0, peer = 0;
  pid_t peer_pid = 0;
  bool peer_local = false;  // same host: kill(pid, 0) tells whether it lives
  ucp_ep_h ep = nullptr;
  size_t chunk = 0;
  int window = 0;
  std::unique_ptr<uint64_t[]> mem;  // window send + window receive slots of kPrefix + chunk
  std::vector<Slot> send, recv;
  uint64_t send_seq = 0, send_oldest = 0;  // next to post, oldest in flight
  // Stream bytes: posted to UCX >= completed by UCX >= reported to the engine.
  uint64_t posted = 0, completed = 0, reported = 0;
  uint64_t recv_seq = 0;  // next to read
  // Credits (file comment): messages the peer reported consumed (send side),
  // and the count this rank last reported (receive side).
  uint64_t credit = 0, credit_told = 0;
  Slot close_rx, close_tx, hello_rx, hello_tx, credit_rx;
  uint64_t close_rx_buf = 0, close_tx_buf = 0, hello_rx_buf[2] = {}, hello_tx_buf[2] = {};
  uint64_t credit_rx_buf = 0, credit_tx_buf = 0;
  bool ep_error = false;
  ucs_status_t ep_status = UCS_OK;
  std::string tls = "?";

  // The endpoint failed with st (the first failure is the one reported).
  void fail(ucs_status_t st) {
    if (ep_error) return;
    ep_error = true;
    ep_status = st;
  }
};

// Posts a send of s->buf[0, n) with `tag`; s->done tells completion.
ucs_status_t post_send(ucp_ep_h ep, Slot* s, size_t n, uint64_t tag);
// Posts a receive of up to cap bytes into s->buf matching `tag` exactly;
// it always completes through its callback.
ucs_status_t post_recv(ucp_worker_h w, Slot* s, size_t cap, uint64_t tag);
// The endpoint error handler: arg is the PeerState.
void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
// Registers the at-exit hook (file comment) once; called when UCX is
// loaded, so that it runs before UCX's library destructors.
void register_exit_hook_once();
// The connection to ps->peer over ps's endpoint (its receives posted, its
// hello on the way), known to the at-exit hook while it lives.
std::unique_ptr<Connection> make_connection(std::shared_ptr<Worker> w,
                                            std::unique_ptr<PeerState> ps, double timeout_s);

}  // namespace ucximpl
}  // namespace mycoll
