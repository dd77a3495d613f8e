// UCX transport: the UCX probe, the worker, and connect() (the model:
// ucx_impl.h).
#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/config.h"
#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "transports/ucx/ucx_impl.h"

namespace mycoll {
namespace {

using namespace ucximpl;

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
    std::vector<std::unique_ptr<Connection>> conns;
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
        conns.push_back(make_connection(w, std::move(ps), cfg.timeout_s));
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
