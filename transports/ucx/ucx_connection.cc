// UCX transport: one peer's connection (the model: ucx_impl.h).
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "transports/ucx/ucx_impl.h"

namespace mycoll {
namespace ucximpl {
namespace {

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

}  // namespace

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

void on_ep_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  static_cast<PeerState*>(arg)->fail(status);
}

namespace {

class UcxConnection;

// The live connections of this process, for the at-exit hook (ucx_impl.h's
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

}  // namespace

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

namespace {

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

}  // namespace

std::unique_ptr<Connection> make_connection(std::shared_ptr<Worker> w,
                                            std::unique_ptr<PeerState> ps, double timeout_s) {
  return std::make_unique<UcxConnection>(std::move(w), std::move(ps), timeout_s);
}

}  // namespace ucximpl
}  // namespace mycoll
