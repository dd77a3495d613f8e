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
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"
#include "transports/ucx/ucxwrap.h"

namespace mycoll {
namespace {

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

uint64_t data_tag(int src, uint64_t seq) {
  return (static_cast<uint64_t>(src) << kSrcShift) | (seq & kSeqMask);
}
uint64_t ctrl_tag(int src, uint64_t kind) {
  return (static_cast<uint64_t>(src) << kSrcShift) | kCtrlBit | kind;
}

double seconds_since(Clock::time_point t) {
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

void on_send_done(void* /*request*/, ucs_status_t status, void* user) {
  auto* s = static_cast<Slot*>(user);
  s->status = status;
  s->done = true;
}

void on_recv_done(void* /*request*/, ucs_status_t status, const ucp_tag_recv_info_t* info,
                  void* user) {
  auto* s = static_cast<Slot*>(user);
  s->status = status;
  if (status == UCS_OK && info) s->len = info->length;
  s->done = true;
}

// What a non-blocking tag operation returned: done at once (status
// `immediate`), failed, or in flight (its callback completes s).
ucs_status_t track(Slot* s, ucs_status_ptr_t r, ucs_status_t immediate) {
  if (r == nullptr) {
    s->done = true;
    s->status = immediate;
  } else if (UCS_PTR_IS_ERR(r)) {
    s->done = true;
    s->status = UCS_PTR_STATUS(r);
  } else {
    s->req = r;
  }
  return s->done ? s->status : UCS_INPROGRESS;
}

// Posts a send of s->buf[0, n) with `tag`; s->done tells completion.
ucs_status_t post_send(ucp_ep_h ep, Slot* s, size_t n, uint64_t tag) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = on_send_done;
  p.user_data = s;
  s->busy = true;
  s->done = false;
  s->len = n;
  return track(s, ucx().tag_send_nbx(ep, s->buf, n, tag, &p), UCS_OK);
}

// Posts a receive of up to cap bytes into s->buf matching `tag` exactly.
// Always completes through the callback (UCX 1.13 leaves recv_info unset on
// an immediate completion, so the length would be unknown).
ucs_status_t post_recv(ucp_worker_h w, Slot* s, size_t cap, uint64_t tag) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = on_recv_done;
  p.user_data = s;
  s->busy = true;
  s->done = false;
  s->len = s->off = 0;
  // An immediate completion is not expected with NO_IMM_CMPL.
  return track(s, ucx().tag_recv_nbx(w, s->buf, cap, tag, kFullMask, &p), UCS_ERR_NO_MESSAGE);
}

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

void on_ep_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  static_cast<PeerState*>(arg)->fail(status);
}

// "tcp/eth0,self/memory" from ucp_ep_print_info's lane lines.
std::string lanes_summary(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return "?";
  ucx().ep_print_info(ep, f);
  std::fclose(f);
  std::string all(text ? text : "", size);
  std::free(text);
  std::vector<std::string> tls;
  size_t pos = 0;
  while ((pos = all.find("lane[", pos)) != std::string::npos) {
    size_t eol = all.find('\n', pos);
    std::string line = all.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? all.size() : eol;
    // "lane[0]:  8:tcp/eth0.0 md[4] ..." : the word after the second ':'.
    size_t c = line.find(':');
    if (c == std::string::npos) continue;
    size_t c2 = line.find(':', c + 1);
    if (c2 == std::string::npos) continue;
    size_t e = line.find_first_of(" \t", c2 + 1);
    std::string tl = line.substr(c2 + 1, e == std::string::npos ? std::string::npos : e - c2 - 1);
    size_t dot = tl.rfind('.');  // strip the lane's path index
    if (dot != std::string::npos && tl.find('/') != std::string::npos && dot > tl.find('/'))
      tl.resize(dot);
    if (!tl.empty() && std::find(tls.begin(), tls.end(), tl) == tls.end()) tls.push_back(tl);
  }
  std::string out;
  for (auto& t : tls) out += (out.empty() ? "" : ",") + t;
  return out.empty() ? "?" : out;
}

class UcxConnection;

// The live connections of this process, for the at-exit hook (see the file
// comment). Never destroyed: the hook runs while the process exits.
struct LiveConnections {
  std::mutex mu;
  std::vector<UcxConnection*> conns;
};
LiveConnections& live_connections() {
  static auto* l = new LiveConnections;
  return *l;
}

void close_live_at_exit();

// Registered after UCX is loaded, so the hook runs before UCX's library
// destructors. A fork() child does not own its parent's UCX state: its list
// starts empty.
void register_exit_hook_once() {
  static const bool once = [] {
    std::atexit(close_live_at_exit);
    pthread_atfork([] { live_connections().mu.lock(); }, [] { live_connections().mu.unlock(); },
                   [] {
                     live_connections().conns.clear();
                     live_connections().mu.unlock();
                   });
    return true;
  }();
  (void)once;
}

class UcxConnection final : public Connection {
 public:
  UcxConnection(std::shared_ptr<Worker> w, std::unique_ptr<PeerState> ps, double timeout_s)
      : w_(std::move(w)), ps_(std::move(ps)), timeout_s_(timeout_s) {
    std::lock_guard<std::mutex> g(live_connections().mu);
    live_connections().conns.push_back(this);
  }

  ~UcxConnection() override {
    {
      std::lock_guard<std::mutex> g(live_connections().mu);
      auto& v = live_connections().conns;
      v.erase(std::remove(v.begin(), v.end(), this), v.end());
    }
    {
      std::lock_guard<std::mutex> g(w_->mu);
      close_locked();
    }
    if (leaked_) (void)ps_.release();  // UCX may still call back into it
  }

  // At process exit: closed as by the destructor, and shut down.
  void close_at_exit() {
    std::lock_guard<std::mutex> g(w_->mu);
    close_locked();
    shut_ = true;
  }
  const std::shared_ptr<Worker>& worker() const { return w_; }

  // Bytes count as accepted once UCX completed their send (see the file
  // comment); until then the engine offers them again, which keeps this
  // side progressing. data[0] is stream position p.reported: the first
  // p.posted - p.reported bytes of data are already in flight.
  size_t send_some(const void* data, size_t n) override {
    if (n == 0) return 0;
    std::lock_guard<std::mutex> g(w_->mu);
    if (shut_) throw_broken("shut down (communicator aborted)");
    PeerState& p = *ps_;
    w_->progress();
    reclaim_sends();
    take_credits();
    if (p.ep_error) throw_broken(ep_reason());
    if (p.close_rx.done && p.close_rx.status == UCS_OK)
      throw_broken("closed by peer (its communicator aborted)");
    const uint64_t ahead = p.posted - p.reported;
    if (ahead > n)
      throw_error(mycollInternalError, describe() + ": send_some offered " + std::to_string(n) +
                                           " bytes, fewer than the " + std::to_string(ahead) +
                                           " already in flight");
    auto* src = static_cast<const uint8_t*>(data);
    for (size_t pos = ahead; pos < n;) {
      if (p.send_seq - p.send_oldest >= static_cast<uint64_t>(p.window)) break;
      if (ucxwire::send_room(p.send_seq, p.credit, p.window) == 0) break;  // no receive posted
      Slot& s = p.send[p.send_seq % p.window];
      size_t k = std::min(n - pos, p.chunk);
      std::memcpy(s.buf, &p.recv_seq, kPrefix);  // the credit it carries
      p.credit_told = p.recv_seq;
      std::memcpy(s.buf + kPrefix, src + pos, k);
      ucs_status_t st = post_send(p.ep, &s, kPrefix + k, data_tag(p.me, p.send_seq));
      ++p.send_seq;
      p.posted += k;
      pos += k;
      if (st != UCS_OK && st != UCS_INPROGRESS)
        throw_broken(std::string("send failed: ") + ucx().status_string(st));
    }
    reclaim_sends();
    size_t r = static_cast<size_t>(std::min<uint64_t>(p.completed - p.reported, n));
    p.reported += r;
    return r;
  }

  size_t peek(const void** data, size_t max) override {
    std::lock_guard<std::mutex> g(w_->mu);
    PeerState& p = *ps_;
    Slot& s = p.recv[p.recv_seq % p.window];
    if (!s.done && !shut_) w_->progress();
    if (!s.done) {
      *data = nullptr;
      return 0;
    }
    if (s.status != UCS_OK) {
      if (p.close_rx.done && p.close_rx.status == UCS_OK)
        throw_broken("closed by peer (its communicator aborted)");
      throw_broken(std::string("receive failed: ") + ucx().status_string(s.status) +
                   (s.status == UCS_ERR_MESSAGE_TRUNCATED
                        ? " (peer's MYCOLL_UCX_CHUNK_BYTES is larger than this rank's)"
                        : " (peer died or aborted?)"));
    }
    std::string why;
    if (ucxwire::check_data_message(p.recv_seq, s.len, &why) != mycollSuccess) throw_broken(why);
    *data = s.buf + kPrefix + s.off;
    return std::min(s.len - kPrefix - s.off, max);
  }

  void consume(size_t n) override {
    std::lock_guard<std::mutex> g(w_->mu);
    PeerState& p = *ps_;
    Slot& s = p.recv[p.recv_seq % p.window];
    if (!s.done || s.status != UCS_OK || s.len <= kPrefix || n > s.len - kPrefix - s.off)
      throw_error(mycollInternalError,
                  describe() + ": consume(" + std::to_string(n) + ") beyond the bytes peeked");
    s.off += n;
    if (s.off < s.len - kPrefix) return;
    take_credit(s);  // before the slot is reused
    s.release();
    if (!shut_) {
      ucs_status_t st =
          post_recv(w_->worker, &s, kPrefix + p.chunk, data_tag(p.peer, p.recv_seq + p.window));
      if (st != UCS_OK && st != UCS_INPROGRESS)
        throw_broken(std::string("posting a receive failed: ") + ucx().status_string(st));
    }
    ++p.recv_seq;
    if (!shut_ && ucxwire::credit_due(p.recv_seq, p.credit_told, p.window)) send_credit();
  }

  bool progress() override {
    std::lock_guard<std::mutex> g(w_->mu);
    if (shut_) return false;
    return ucx().worker_progress(w_->worker) != 0;
  }

  void check_alive() override {
    std::lock_guard<std::mutex> g(w_->mu);
    PeerState& p = *ps_;
    if (shut_) throw_broken("shut down (communicator aborted)");
    w_->progress();
    take_credits();
    if (p.close_rx.done && p.close_rx.status == UCS_OK)
      throw_broken("closed by peer (its communicator aborted)");
    // Bytes already received stay readable after the peer went away.
    if (p.recv[p.recv_seq % p.window].done) return;
    if (p.ep_error) throw_broken(ep_reason());
    if (p.peer_local && p.peer_pid > 0 && ::kill(p.peer_pid, 0) != 0 && errno == ESRCH)
      throw_broken("process " + std::to_string(p.peer_pid) + " is gone (peer died)");
  }

  void shutdown() noexcept override {
    std::lock_guard<std::mutex> g(w_->mu);
    if (shut_) return;
    shut_ = true;
    PeerState& p = *ps_;
    if (!p.ep) return;
    if (!p.ep_error) {
      // Best effort: tell the peer, so its waits end now, not at its timeout.
      p.close_tx_buf = static_cast<uint64_t>(p.me);
      p.close_tx.buf = reinterpret_cast<uint8_t*>(&p.close_tx_buf);
      post_send(p.ep, &p.close_tx, sizeof(p.close_tx_buf), ctrl_tag(p.me, kClose));
      wait_locked([&] { return p.close_tx.done || p.ep_error; }, 0.5);
    }
    close_ep_locked(true);
  }

  std::string describe() const override { return "ucx " + ps_->tls; }

 private:
  [[noreturn]] void throw_broken(const std::string& why) const {
    throw_error(mycollRemoteError, "ucx connection to rank " + std::to_string(ps_->peer) + " (" +
                                       ps_->tls + "): " + why);
  }
  std::string ep_reason() const {
    return std::string(ucx().status_string(ps_->ep_status)) + " (peer died or aborted?)";
  }

  // Send side: takes the credits that arrived, in the data messages
  // received and not yet read and in credit messages (each carries the
  // peer's consumed count; the largest stands), and reposts the credit
  // receive.
  void take_credits() {
    PeerState& p = *ps_;
    for (uint64_t k = p.recv_seq; k < p.recv_seq + static_cast<uint64_t>(p.window); ++k) {
      const Slot& s = p.recv[k % p.window];
      if (!s.done) break;
      take_credit(s);
    }
    while (p.credit_rx.done && !shut_) {
      const ucs_status_t st = p.credit_rx.status;
      const uint64_t count = p.credit_rx_buf;
      const size_t len = p.credit_rx.len;
      p.credit_rx.release();
      if (st != UCS_OK) {  // the endpoint failed or the receive was cancelled
        if (st != UCS_ERR_CANCELED) p.fail(st);
        return;
      }
      std::string why;
      if (ucxwire::check_credit_message(len, &why) != mycollSuccess ||
          ucxwire::take_credit(&count, p.send_seq, &p.credit, &why) != mycollSuccess)
        throw_broken(why);
      p.credit_rx.buf = reinterpret_cast<uint8_t*>(&p.credit_rx_buf);
      const ucs_status_t rs =
          post_recv(w_->worker, &p.credit_rx, sizeof(p.credit_rx_buf), ctrl_tag(p.peer, kCredit));
      if (rs != UCS_OK && rs != UCS_INPROGRESS)
        throw_broken(std::string("posting a credit receive failed: ") + ucx().status_string(rs));
      w_->progress();  // the next credit may be waiting already
    }
  }

  // The credit at the head of a received data message (ucxwire::take_credit:
  // a count beyond the messages sent is a protocol violation).
  void take_credit(const Slot& s) {
    if (s.status != UCS_OK || s.len < kPrefix) return;  // peek reports these
    std::string why;
    if (ucxwire::take_credit(s.buf, ps_->send_seq, &ps_->credit, &why) != mycollSuccess)
      throw_broken(why);
  }

  // Receive side: reports recv_seq (messages consumed, receives reposted)
  // to the peer. No callback: the request is released at once and UCX
  // completes it; a late copy of credit_tx_buf reads a newer count.
  void send_credit() {
    PeerState& p = *ps_;
    if (!p.ep || p.ep_error) return;
    p.credit_tx_buf = p.recv_seq;
    p.credit_told = p.recv_seq;
    ucp_request_param_t prm{};
    ucs_status_ptr_t r = ucx().tag_send_nbx(p.ep, &p.credit_tx_buf, sizeof(p.credit_tx_buf),
                                            ctrl_tag(p.me, kCredit), &prm);
    if (UCS_PTR_IS_ERR(r))
      p.fail(UCS_PTR_STATUS(r));
    else if (r != nullptr)
      ucx().request_free(r);
  }

  // Frees completed sends, oldest first (slots are reused in order).
  void reclaim_sends() {
    PeerState& p = *ps_;
    while (p.send_oldest < p.send_seq) {
      Slot& s = p.send[p.send_oldest % p.window];
      if (!s.done) break;
      ucs_status_t st = s.status;
      p.completed += s.len - kPrefix;
      s.release();
      ++p.send_oldest;
      if (st != UCS_OK && st != UCS_ERR_CANCELED) p.fail(st);
    }
  }

  template <typename Pred>
  bool wait_locked(Pred done, double seconds) {
    auto t0 = Clock::now();
    while (!done()) {
      if (seconds_since(t0) > seconds) return false;
      if (ucx().worker_progress(w_->worker) == 0) std::this_thread::yield();
    }
    return true;
  }

  void close_ep_locked(bool force) {
    PeerState& p = *ps_;
    if (!p.ep) return;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = ucx().ep_close_nbx(p.ep, &prm);
    p.ep = nullptr;
    if (r == nullptr || UCS_PTR_IS_ERR(r)) return;
    bool ok = wait_locked([&] { return ucx().request_check_status(r) != UCS_INPROGRESS; },
                          force ? 5.0 : std::min(timeout_s_, 30.0));
    if (ok) {
      ucx().request_free(r);
    } else {
      w_->leak = true;  // UCX still owns state pointing at ps_: never free it
      leaked_ = true;
    }
  }

  // Teardown (destructor, or process exit; once): drain sends, cancel
  // receives, close the endpoint.
  void close_locked() {
    if (closed_) return;
    closed_ = true;
    PeerState& p = *ps_;
    bool force = shut_ || p.ep_error || (p.close_rx.done && p.close_rx.status == UCS_OK);
    if (p.ep && !force) {
      // Bytes accepted by send_some must reach the peer (bounded wait).
      auto peer_gone = [&] {
        return p.ep_error || (p.close_rx.done && p.close_rx.status == UCS_OK) ||
               (p.peer_local && p.peer_pid > 0 && ::kill(p.peer_pid, 0) != 0 && errno == ESRCH);
      };
      bool drained = wait_locked(
          [&] {
            reclaim_sends();
            return p.send_oldest == p.send_seq || peer_gone();
          },
          timeout_s_);
      if (!drained || p.send_oldest != p.send_seq) {
        log_warn(Subsys::Transport,
                 "ucx: rank {} closes its connection to rank {} with {} "
                 "message(s) undelivered",
                 p.me, p.peer, p.send_seq - p.send_oldest);
        force = true;
      }
      force |= p.ep_error;
    }
    // Cancel the pre-posted receives and wait for their callbacks.
    std::vector<Slot*> rx;
    for (auto& s : p.recv) rx.push_back(&s);
    rx.push_back(&p.close_rx);
    rx.push_back(&p.hello_rx);
    rx.push_back(&p.credit_rx);
    for (Slot* s : rx)
      if (s->busy && !s->done && s->req) ucx().request_cancel(w_->worker, s->req);
    wait_locked(
        [&] {
          for (Slot* s : rx)
            if (s->busy && !s->done && s->req) return false;
          return true;
        },
        2.0);
    close_ep_locked(force);
    if (leaked_) return;
    // After the close every request has completed: free them.
    for (Slot* s : rx)
      if (s->done) s->release();
    for (auto& s : p.send)
      if (s.done) s.release();
    for (Slot* s : {&p.close_tx, &p.hello_tx})
      if (s->done) s->release();
    bool pending = false;
    for (auto& s : p.send) pending |= s.busy;
    for (Slot* s : rx) pending |= s->busy;
    for (Slot* s : {&p.close_tx, &p.hello_tx}) pending |= s->busy;
    if (pending) {
      w_->leak = true;
      leaked_ = true;
    }
  }

  std::shared_ptr<Worker> w_;
  std::unique_ptr<PeerState> ps_;
  double timeout_s_;
  bool shut_ = false;    // guarded by w_->mu
  bool closed_ = false;  // guarded by w_->mu
  bool leaked_ = false;  // UCX may still call back into ps_: never free it
};

void close_live_at_exit() {
  std::lock_guard<std::mutex> g(live_connections().mu);
  std::vector<std::shared_ptr<Worker>> workers;
  for (UcxConnection* c : live_connections().conns) {
    c->close_at_exit();
    if (std::find(workers.begin(), workers.end(), c->worker()) == workers.end())
      workers.push_back(c->worker());
  }
  for (auto& w : workers) {
    w->stop_pusher();
    std::lock_guard<std::mutex> wg(w->mu);
    w->release_locked();
  }
}

// Process-wide: whether ucp_init works here (checked once).
bool probe_ucx(std::string* why) {
  static std::once_flag once;
  static bool ok = false;
  static std::string reason;
  std::call_once(once, [] {
    if (!ucx_api(&reason)) return;
    ucp_config_t* config = nullptr;
    ucs_status_t st = ucx().config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) {
      reason = std::string("UCX configuration could not be read: ") + ucx().status_string(st);
      return;
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    ucp_context_h ctx = nullptr;
    st = ucx().init(&params, config, &ctx);
    ucx().config_release(config);
    if (st != UCS_OK) {
      reason = std::string("ucp_init failed: ") + ucx().status_string(st) +
               " (check UCX_TLS / UCX_NET_DEVICES)";
      return;
    }
    ucx().cleanup(ctx);
    ok = true;
  });
  if (why) *why = reason;
  return ok;
}

std::shared_ptr<Worker> make_worker(int me, size_t npeers) {
  register_exit_hook_once();
  auto w = std::make_shared<Worker>();
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucx().config_read(nullptr, nullptr, &config);
  if (st != UCS_OK)
    throw_error(mycollSystemError, std::string("ucx: ucp_config_read: ") + ucx().status_string(st));
  // Eager protocol for every size unless the user chose: a send then
  // completes without the receiver's progress (rendezvous would need the
  // peer's engine to be polling this connection at that moment).
  // And buffer-copy sends for every size unless the user chose: UCX 1.13's
  // zero-copy active messages over tcp complete a request twice when the
  // peer's connection fails mid-send (assertion `comp->count > 0` in
  // ucp_proto_am_zcopy_completion aborts the surviving rank; seen in CI
  // when a broadcast root's peer exited mid-transfer). Our chunks are
  // private copies already (send_some). With tcp's default 64 KiB segments
  // buffer copy cost 30-45 % of all-reduce bandwidth at 64 KiB-1 MiB;
  // segments of a whole default chunk (256 KiB) bring it level with zero
  // copy or above, except a 64 KiB broadcast (docs/performance.md, "UCX").
  // (TX_SEG_SIZE / RX_SEG_SIZE exist only in tcp's configuration.)
  auto set_default = [&](const char* name, const char* user_env, const char* value) {
    if (std::getenv(user_env)) return;  // the user's choice
    const ucs_status_t s = ucx().config_modify(config, name, value);
    if (s != UCS_OK)
      log_warn(Subsys::Transport, "ucx: setting {}={} failed: {}", name, value,
               ucx().status_string(s));
  };
  set_default("RNDV_THRESH", "UCX_RNDV_THRESH", "inf");
  set_default("ZCOPY_THRESH", "UCX_ZCOPY_THRESH", "inf");
  // Both segment sizes or neither (tcp refuses a send segment larger than
  // the receive segment).
  if (!std::getenv("UCX_TCP_TX_SEG_SIZE") && !std::getenv("UCX_TCP_RX_SEG_SIZE")) {
    set_default("TX_SEG_SIZE", "UCX_TCP_TX_SEG_SIZE", "256k");
    set_default("RX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE", "256k");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED |
                      UCP_PARAM_FIELD_ESTIMATED_NUM_EPS | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_TAG;
  params.mt_workers_shared = 0;
  params.estimated_num_eps = npeers;
  params.name = "mycoll";
  st = ucx().init(&params, config, &w->ctx);
  ucx().config_release(config);
  if (st != UCS_OK)
    throw_error(mycollSystemError,
                "ucx: ucp_init on rank " + std::to_string(me) + ": " + ucx().status_string(st));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucx().worker_create(w->ctx, &wp, &w->worker);
  if (st != UCS_OK)
    throw_error(mycollSystemError, "ucx: ucp_worker_create on rank " + std::to_string(me) + ": " +
                                       ucx().status_string(st));
  w->start_pusher();
  return w;
}

class UcxTransport final : public Transport {
 public:
  const char* name() const override { return "ucx"; }
  bool can_connect(const PeerInfo&, const PeerInfo&) const override { return true; }

  std::vector<std::unique_ptr<Connection>> connect(Bootstrap& bs, const std::vector<PeerInfo>& all,
                                                   const std::vector<int>& peers,
                                                   const Config& cfg) override {
    const int me = bs.rank(), n = bs.nranks();
    check_peer_list("ucx", me, n, peers);
    check_arg(n < (1 << 23), "ucx transport: at most 2^23 ranks");
    // Parsed and range-checked once, by Config::from_env at communicator init.
    const size_t chunk = cfg.ucx.chunk_bytes;
    const long long window = cfg.ucx.window;
    const bool peer_failure = cfg.ucx.peer_error_mode;

    // 1. Worker addresses round the bootstrap.
    std::shared_ptr<Worker> w;
    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    std::vector<AddrInfo> info(n, AddrInfo{0, 0});
    if (!peers.empty()) {
      w = make_worker(me, peers.size());
      ucs_status_t st = ucx().worker_get_address(w->worker, &addr, &addr_len);
      if (st != UCS_OK)
        throw_error(mycollSystemError,
                    std::string("ucx: ucp_worker_get_address: ") + ucx().status_string(st));
      info[me] = AddrInfo{addr_len, chunk};
    }
    bs.allgather(info.data(), sizeof(AddrInfo));
    // Every rank sees the same lengths, so all refuse together (before the
    // table is gathered); the peer checks below may differ per rank and
    // come after the last collective step.
    uint64_t max_len = 0;
    std::string why;
    const mycollResult_t rc = ucxwire::check_addr_lengths(info.data(), n, &max_len, &why);
    if (rc != mycollSuccess) {
      if (addr) ucx().worker_release_address(w->worker, addr);
      throw_error(rc, why);
    }
    if (max_len == 0) return {};
    std::vector<uint8_t> blob(max_len * n, 0);
    if (addr) {
      std::memcpy(blob.data() + max_len * me, addr, addr_len);
      ucx().worker_release_address(w->worker, addr);
    }
    bs.allgather(blob.data(), max_len);
    if (peers.empty()) return {};

    for (int p : peers)
      if (ucxwire::check_peer_addr(info[p], p, me, chunk, &why) != mycollSuccess)
        throw_error(mycollInvalidUsage, why);

    // 2. Endpoints, pre-posted receives, hello both ways.
    std::vector<std::unique_ptr<UcxConnection>> conns;
    std::vector<PeerState*> states;
    try {
      for (int p : peers) {
        auto ps = std::make_unique<PeerState>();
        ps->me = me;
        ps->peer = p;
        ps->chunk = chunk;
        ps->window = static_cast<int>(window);
        ps->peer_pid = all[p].pid;
        ps->peer_local = std::strncmp(all[p].host_id, all[me].host_id, sizeof(all[p].host_id)) == 0;
        // Slots 8-byte aligned (the credit word at their head).
        const size_t slot_words = (kPrefix + chunk + 7) / 8;
        ps->mem.reset(new uint64_t[2 * window * slot_words]);
        ps->send.resize(window);
        ps->recv.resize(window);
        for (long long i = 0; i < window; ++i) {
          ps->send[i].buf = reinterpret_cast<uint8_t*>(ps->mem.get() + i * slot_words);
          ps->recv[i].buf = reinterpret_cast<uint8_t*>(ps->mem.get() + (window + i) * slot_words);
        }
        PeerState* raw = ps.get();
        {  // (the connection is made outside the worker lock: it registers itself)
          std::lock_guard<std::mutex> g(w->mu);
          ucp_ep_params_t ep{};
          ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                          UCP_EP_PARAM_FIELD_ERR_HANDLER;
          ep.address = reinterpret_cast<const ucp_address_t*>(blob.data() + max_len * p);
          ep.err_mode = peer_failure ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
          ep.err_handler.cb = on_ep_error;
          ep.err_handler.arg = raw;
          ucs_status_t st = ucx().ep_create(w->worker, &ep, &raw->ep);
          if (st != UCS_OK)
            throw_error(mycollRemoteError,
                        "ucx: rank " + std::to_string(me) + " cannot create an endpoint to rank " +
                            std::to_string(p) + ": " + ucx().status_string(st) +
                            " (no UCX transport reaches it: check UCX_TLS / UCX_NET_DEVICES" +
                            (peer_failure ? "; shared-memory transports need "
                                            "MYCOLL_UCX_ERROR_MODE=none)"
                                          : ")"));
          for (long long i = 0; i < window; ++i)
            post_recv(w->worker, &raw->recv[i], kPrefix + chunk, data_tag(p, i));
          raw->credit_rx.buf = reinterpret_cast<uint8_t*>(&raw->credit_rx_buf);
          post_recv(w->worker, &raw->credit_rx, sizeof(raw->credit_rx_buf), ctrl_tag(p, kCredit));
          raw->close_rx.buf = reinterpret_cast<uint8_t*>(&raw->close_rx_buf);
          post_recv(w->worker, &raw->close_rx, sizeof(raw->close_rx_buf), ctrl_tag(p, kClose));
          raw->hello_rx.buf = reinterpret_cast<uint8_t*>(raw->hello_rx_buf);
          post_recv(w->worker, &raw->hello_rx, sizeof(raw->hello_rx_buf), ctrl_tag(p, kHello));
          ucxwire::encode_hello(bs.tag(), me, raw->hello_tx_buf);
          raw->hello_tx.buf = reinterpret_cast<uint8_t*>(raw->hello_tx_buf);
          post_send(raw->ep, &raw->hello_tx, sizeof(raw->hello_tx_buf), ctrl_tag(me, kHello));
        }
        states.push_back(raw);
        conns.push_back(std::make_unique<UcxConnection>(w, std::move(ps), cfg.timeout_s));
      }
      wait_hellos(*w, states, bs.tag(), cfg.timeout_s);
    } catch (...) {
      for (auto& c : conns) c->shutdown();  // tells the peers, so they fail fast too
      throw;
    }

    std::vector<std::unique_ptr<Connection>> out;
    {
      std::lock_guard<std::mutex> g(w->mu);
      for (PeerState* ps : states) {
        ps->tls = lanes_summary(ps->ep);
        log_info(Subsys::Transport, "ucx: rank {} -> rank {}: lanes {}", me, ps->peer, ps->tls);
      }
    }
    for (auto& c : conns) out.push_back(std::move(c));
    log_info(Subsys::Transport, "ucx: rank {} connected to {} peer(s) (chunk {} B, window {})", me,
             peers.size(), chunk, window);
    return out;
  }

 private:
  // Waits until every peer's hello arrived and ours left; checks the hello.
  static void wait_hellos(Worker& w, const std::vector<PeerState*>& states, uint64_t bs_tag,
                          double timeout_s) {
    std::lock_guard<std::mutex> g(w.mu);
    auto t0 = Clock::now();
    for (;;) {
      if (ucx().worker_progress(w.worker) == 0) std::this_thread::yield();
      std::string missing;
      for (PeerState* ps : states) {
        // A peer whose hello arrived got through its own setup up to
        // sending it; it finishes once ours arrives and may then destroy
        // its communicator (destroy is local) before our send completed
        // here, which fails our endpoint ("Endpoint timeout" with UCX 1.13
        // over TCP, about 1 in 10 three-rank inits that destroy at once on
        // a loaded host). So an endpoint failure after the peer's hello is
        // no setup failure: the connection reports it on first use, like
        // any later loss of the peer.
        const bool peer_spoke = ps->hello_rx.done && ps->hello_rx.status == UCS_OK;
        if (ps->ep_error && !peer_spoke)
          throw_error(mycollRemoteError,
                      "ucx: rank " + std::to_string(ps->me) + " lost its endpoint to rank " +
                          std::to_string(ps->peer) +
                          " during setup: " + ucx().status_string(ps->ep_status));
        for (Slot* s : {&ps->hello_rx, &ps->hello_tx})
          if (s->done && s->status != UCS_OK && !(s == &ps->hello_tx && ps->ep_error && peer_spoke))
            throw_error(mycollRemoteError, "ucx: hello with rank " + std::to_string(ps->peer) +
                                               " failed on rank " + std::to_string(ps->me) + ": " +
                                               ucx().status_string(s->status));
        std::string why;
        if (peer_spoke && ucxwire::check_hello(ps->hello_rx_buf, ps->hello_rx.len, bs_tag, ps->peer,
                                               ps->me, &why) != mycollSuccess)
          throw_error(mycollRemoteError, why);
        if (!peer_spoke || !(ps->hello_tx.done || ps->ep_error))
          missing += (missing.empty() ? "" : ", ") + std::to_string(ps->peer);
      }
      if (missing.empty()) break;
      if (seconds_since(t0) > timeout_s)
        throw_error(mycollTimeout, "ucx: rank " + std::to_string(states[0]->me) +
                                       " timed out after " + std::to_string(timeout_s) +
                                       " s connecting to rank(s) " + missing +
                                       " (check UCX_TLS / UCX_NET_DEVICES)");
    }
    for (PeerState* ps : states) {
      ps->hello_rx.release();
      ps->hello_tx.release();
    }
  }
};

}  // namespace

bool ucx_available(std::string* why) { return probe_ucx(why); }

std::unique_ptr<Transport> make_ucx_transport() {
  std::string why;
  if (!ucx_available(&why)) throw_error(mycollInvalidUsage, "UCX transport unavailable: " + why);
  return std::make_unique<UcxTransport>();
}

}  // namespace mycoll
