// RDMA verbs transport: one reliable-connected QP per peer.
//
// Data path (per direction): the receiver owns a registered ring buffer
// (MYCOLL_IB_BUFFER_BYTES); the sender copies bytes into a registered staging
// ring and RDMA-WRITEs them WITH_IMM (imm = byte count) to the same stream
// offset in the receiver's ring. Writes on one RC QP land in order, so the
// receiver learns how many bytes arrived from the immediates it polls and
// exposes them in place (peek/consume). Consumed bytes go back to the sender
// as a credit: a 16-byte RDMA WRITE of the receiver's total consumed count and
// its seal into the sender's control block (one in flight at a time, the
// newest value follows when it completes; a read that catches the write
// halfway fails the seal and is ignored, ib_wire.h). The sender never has
// more than ring-size bytes unconsumed, nor more unconsumed writes than the
// receiver pre-posted receives, so neither the ring nor the receive queue
// can overflow.
//
// Liveness: any error completion marks the connection broken (check_alive
// and send_some then throw RemoteError naming the peer and the
// ibv_wc_status_str); while waiting, check_alive posts a zero-byte RDMA WRITE
// probe at most once a second, so a dead peer is noticed after the transport
// retries (MYCOLL_IB_TIMEOUT x MYCOLL_IB_RETRY_CNT). shutdown() writes a
// "closed" flag into the peer's control block, then moves the QP to ERROR.
//
// Threading: the send side (send_some) and the receive side (peek, consume,
// check_alive, progress) may run on two threads; everything touching the
// send queue and its completion queue is under sq_mu_.
#include "transports/ibverbs/ib_transport.h"

#include <arpa/inet.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "transports/ibverbs/ib_device.h"
#include "transports/ibverbs/ib_wire.h"
#include "transports/transport.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSendDepth = 256;  // send WRs (data writes + control writes)
constexpr int kRecvDepth = 256;  // pre-posted receives (one per WRITE_WITH_IMM)
constexpr int kCtrlReserve = 4;  // send WRs kept free for credit/probe/close
constexpr size_t kMaxWrite = ibwire::kMaxWriteBytes;

enum WrKind : uint64_t { kData = 0, kCredit = 1, kProbe = 2, kClose = 3 };
uint64_t wr_id(WrKind k, uint64_t bytes = 0) { return bytes << 2 | k; }

// Control block, one page, registered for remote writes by the peer.
struct Ctrl {
  volatile uint64_t peer_credit[2];  // written by the peer: bytes it consumed, sealed
  volatile uint64_t peer_closed;     // written by the peer's shutdown()
  uint64_t closed_src;               // source of our close write (1)
  uint64_t credit_src[2];            // source of our credit writes (count, seal)
};

// What one rank tells another about their connection (allgathered;
// checked by ibwire::check_conn_info before use).
using Wire = ibwire::ConnInfo;
static_assert(sizeof(Ctrl) <= ibwire::kCtrlBytes, "control block larger than peers check");

uint64_t pid_namespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string boot_id() {
  FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f) return "";
  char buf[64] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string id(buf, n);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

// Whether a process of this OS instance has ended (gone, or a zombie that
// its parent has not reaped).
bool exited(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  char buf[256] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* p = static_cast<const char*>(memrchr(buf, ')', n));  // comm may contain ')'
  return p && p + 2 < buf + n && (p[2] == 'Z' || p[2] == 'X');
}

// Page-aligned anonymous memory (zeroed), registered through the cache.
struct Region {
  void* p = nullptr;
  size_t bytes = 0;
  ibv_mr* mr = nullptr;
  void alloc(IbDevice& d, size_t n, int access) {
    bytes = (n + 4095) & ~size_t(4095);
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      p = nullptr;
      throw_system("ibverbs transport: mmap of " + std::to_string(bytes) + " bytes");
    }
    std::lock_guard<std::mutex> g(d.reg_mu);
    mr = d.regs->get(p, bytes, access);
  }
  void release(IbDevice& d) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> g(d.reg_mu);
      if (mr) d.regs->put(mr);
      d.regs->invalidate(p, bytes);
    }
    munmap(p, bytes);
    p = nullptr;
  }
};

class IbConnection final : public Connection {
 public:
  IbConnection(std::shared_ptr<IbDevice> dev, int me, int peer, const IbConfig& s)
      : dev_(std::move(dev)), me_(me), peer_(peer), s_(s) {}

  ~IbConnection() override {
    const IbvApi* api = dev_->api;
    if (qp_) api->destroy_qp(qp_);
    if (scq_) api->destroy_cq(scq_);
    if (rcq_) api->destroy_cq(rcq_);
    ring_.release(*dev_);
    stage_.release(*dev_);
    ctrl_.release(*dev_);
  }

  // Creates CQs, QP (INIT), buffers and posts the receives; fills w.
  void setup(Wire* w) {
    const IbvApi* api = dev_->api;
    IbDevice& d = *dev_;
    const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ring_.alloc(d, s_.buffer_bytes, rw);
    stage_.alloc(d, s_.buffer_bytes, IBV_ACCESS_LOCAL_WRITE);
    ctrl_.alloc(d, sizeof(Ctrl), rw);
    ring_bytes_ = ring_.bytes;
    ctrl_ptr_ = static_cast<Ctrl*>(ctrl_.p);
    scq_ = api->create_cq(d.ctx, kSendDepth + 8, nullptr, nullptr, 0);
    rcq_ = api->create_cq(d.ctx, kRecvDepth + 8, nullptr, nullptr, 0);
    if (!scq_ || !rcq_) throw_system(what("ibv_create_cq"));
    ibv_qp_init_attr qa{};
    qa.send_cq = scq_;
    qa.recv_cq = rcq_;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = kSendDepth;
    qa.cap.max_recv_wr = kRecvDepth;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qp_ = api->create_qp(d.pd, &qa);
    if (!qp_) throw_system(what("ibv_create_qp"));
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = static_cast<uint8_t>(d.port);
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    modify(&a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
    post_recvs(kRecvDepth);
    std::random_device rd;
    psn_ = rd() & 0xffffff;
    std::memset(w, 0, sizeof(*w));
    w->valid = 1;
    w->qpn = qp_->qp_num;
    w->psn = psn_;
    w->lid = d.lid;
    w->roce = d.roce;
    w->mtu = static_cast<uint8_t>(d.mtu);
    std::memcpy(w->gid, d.gid.raw, 16);
    w->ring_addr = reinterpret_cast<uintptr_t>(ring_.p);
    w->ring_bytes = ring_.bytes;
    w->ring_rkey = ring_.mr->rkey;
    w->ctrl_addr = reinterpret_cast<uintptr_t>(ctrl_.p);
    w->ctrl_rkey = ctrl_.mr->rkey;
    w->pidns = pid_namespace();
    w->pid = static_cast<int32_t>(getpid());
    std::snprintf(w->boot_id, sizeof(w->boot_id), "%s", boot_id().c_str());
  }

  bool roce() const { return dev_->roce; }

  // INIT -> RTR -> RTS towards the peer's QP (r passed check_conn_info).
  void connect_to(const Wire& r) {
    IbDevice& d = *dev_;
    remote_ = r;
    // A peer in this OS instance (same boot and pid namespace) can be
    // checked by pid, which is faster than transport retries.
    const std::string boot = boot_id();
    local_peer_pid_ = (r.pid > 0 && r.pidns != 0 && r.pidns == pid_namespace() && !boot.empty() &&
                       boot == std::string(r.boot_id, strnlen(r.boot_id, sizeof(r.boot_id))))
                          ? r.pid
                          : 0;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = std::min(d.mtu, static_cast<ibv_mtu>(r.mtu));
    mtu_ = a.path_mtu;
    a.dest_qp_num = r.qpn;
    a.rq_psn = r.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(d.port);
    a.ah_attr.dlid = r.lid;
    if (d.roce) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, r.gid, 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(d.gid_index);
      a.ah_attr.grh.hop_limit = 64;
    }
    modify(&a,
           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
           "RTR");
    ibv_qp_attr b{};
    b.qp_state = IBV_QPS_RTS;
    b.timeout = static_cast<uint8_t>(s_.timeout);
    b.retry_cnt = static_cast<uint8_t>(s_.retry_cnt);
    b.rnr_retry = 7;
    b.sq_psn = psn_;
    b.max_rd_atomic = 1;
    modify(&b,
           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
               IBV_QP_MAX_QP_RD_ATOMIC,
           "RTS");
    last_probe_ = Clock::now();
  }

  int mtu_bytes() const { return 128 << static_cast<int>(mtu_); }

  size_t send_some(const void* data, size_t n) override {
    if (n == 0) return 0;
    if (shut_.load(std::memory_order_relaxed) || broken_.load()) throw_broken();
    std::lock_guard<std::mutex> g(sq_mu_);
    poll_send_cq();
    if (broken_.load()) throw_broken();
    {
      // The credit's two words as they are now; a mix of two writes fails
      // the seal and the last credit accepted stands (ib_wire.h).
      const uint64_t count = ctrl_ptr_->peer_credit[0];
      const uint64_t seal = ctrl_ptr_->peer_credit[1];
      if (ibwire::unseal_credit(count, seal)) {
        std::string why;
        if (ibwire::check_credit(credit_seen_, count, sent_, peer_, &why) != mycollSuccess) {
          mark_broken(why);
          throw_broken();
        }
        if (count > credit_seen_) credit_seen_ = count;
      }
    }
    const uint64_t peer_consumed = credit_seen_;
    while (!unacked_ends_.empty() && unacked_ends_.front() <= peer_consumed)
      unacked_ends_.pop_front();
    if (sq_outstanding_ >= kSendDepth - kCtrlReserve) return 0;
    if (static_cast<int>(unacked_ends_.size()) >= kRecvDepth) return 0;
    const uint64_t R = remote_.ring_bytes, S = stage_.bytes;
    const uint64_t remote_free = R - (sent_ - peer_consumed);
    const uint64_t stage_free = S - (sent_ - completed_);
    size_t k =
        std::min<uint64_t>({n, remote_free, stage_free, R - sent_ % R, S - sent_ % S, kMaxWrite});
    if (k == 0) return 0;
    uint8_t* src = static_cast<uint8_t*>(stage_.p) + sent_ % S;
    std::memcpy(src, data, k);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src), static_cast<uint32_t>(k), stage_.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id(kData, k);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(k));
    wr.wr.rdma.remote_addr = remote_.ring_addr + sent_ % R;
    wr.wr.rdma.rkey = remote_.ring_rkey;
    post(&wr, "RDMA write of data");
    sent_ += k;
    unacked_ends_.push_back(sent_);
    return k;
  }

  size_t peek(const void** data, size_t max) override {
    poll_recv_cq();
    flush_credit_if_due();
    const uint64_t avail = arrived_ - consumed_;
    const uint64_t off = consumed_ % ring_bytes_;
    *data = static_cast<uint8_t*>(ring_.p) + off;
    return static_cast<size_t>(std::min<uint64_t>({avail, ring_bytes_ - off, max}));
  }

  void consume(size_t n) override {
    if (n > arrived_ - consumed_)
      throw_error(mycollInternalError, describe() + ": consume(" + std::to_string(n) +
                                           ") beyond the " + std::to_string(arrived_ - consumed_) +
                                           " bytes received");
    consumed_ += n;
    std::lock_guard<std::mutex> g(sq_mu_);
    credit_due_ = true;
    poll_send_cq();
    flush_credit_locked();
  }

  bool progress() override {
    uint64_t before = arrived_;
    poll_recv_cq();
    flush_credit_if_due();
    return arrived_ != before;
  }

  void check_alive() override {
    if (shut_.load()) throw_broken();
    poll_recv_cq();
    {
      std::lock_guard<std::mutex> g(sq_mu_);
      poll_send_cq();
      flush_credit_locked();
      // Probe the peer (zero-byte write) at most once a second while waiting.
      if (!broken_.load() && !probe_inflight_ && sq_outstanding_ < kSendDepth &&
          Clock::now() - last_probe_ > std::chrono::seconds(1)) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id(kProbe);
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = remote_.ring_addr;
        wr.wr.rdma.rkey = remote_.ring_rkey;
        if (try_post(&wr)) probe_inflight_ = true;
        log_trace(Subsys::Transport, "ib: probe to rank {} posted (outstanding {})", peer_,
                  sq_outstanding_);
        last_probe_ = Clock::now();
      }
    }
    if (broken_.load()) throw_broken();
    if (ctrl_ptr_->peer_closed) throw_broken();
    if (local_peer_pid_ > 0 && Clock::now() - last_pid_check_ > std::chrono::milliseconds(50)) {
      last_pid_check_ = Clock::now();
      if (exited(local_peer_pid_)) {
        mark_broken("its process (pid " + std::to_string(local_peer_pid_) +
                    " on this host) exited");
        throw_broken();
      }
    }
  }

  void shutdown() noexcept override {
    if (shut_.exchange(true)) return;
    try {
      std::lock_guard<std::mutex> g(sq_mu_);
      if (!broken_.load() && qp_) {
        // Tell the peer first (bounded wait for the write), then stop.
        ctrl_ptr_->closed_src = 1;
        ibv_sge sge{reinterpret_cast<uintptr_t>(&ctrl_ptr_->closed_src), 8, ctrl_.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id(kClose);
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = remote_.ctrl_addr + offsetof(Ctrl, peer_closed);
        wr.wr.rdma.rkey = remote_.ctrl_rkey;
        if (sq_outstanding_ < kSendDepth && try_post(&wr)) {
          auto until = Clock::now() + std::chrono::milliseconds(200);
          while (!close_done_ && !broken_.load() && Clock::now() < until) poll_send_cq();
        }
      }
    } catch (...) {}
    to_error();
  }

  std::string describe() const override {
    return "ib " + dev_->name + ":" + std::to_string(dev_->port) + " gid " +
           std::to_string(dev_->gid_index) + " (" +
           (dev_->roce ? (dev_->roce_v2 ? "RoCE v2" : "RoCE v1") : "IB") + ")";
  }

  void force_error() {
    std::lock_guard<std::mutex> g(sq_mu_);
    to_error();
  }

 private:
  std::string what(const std::string& call) const {
    return "ibverbs transport: " + call + " for rank " + std::to_string(peer_) + " on " +
           dev_->describe();
  }

  void modify(ibv_qp_attr* a, int mask, const char* state) {
    int rc = dev_->api->modify_qp(qp_, a, mask);
    if (rc != 0)
      throw_error(mycollSystemError, what(std::string("ibv_modify_qp to ") + state) + ": " +
                                         std::strerror(rc > 0 ? rc : errno));
  }

  void to_error() noexcept {
    if (!qp_ || in_error_) return;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    dev_->api->modify_qp(qp_, &a, IBV_QP_STATE);
    in_error_ = true;
  }

  void post_recvs(int n) {
    ibv_recv_wr wrs[32];
    while (n > 0) {
      int k = std::min(n, 32);
      for (int i = 0; i < k; ++i) {
        wrs[i] = ibv_recv_wr{};
        wrs[i].wr_id = 0;
        wrs[i].num_sge = 0;
        wrs[i].next = i + 1 < k ? &wrs[i + 1] : nullptr;
      }
      ibv_recv_wr* bad = nullptr;
      int rc = ibv_post_recv(qp_, wrs, &bad);
      if (rc != 0) {
        mark_broken(std::string("ibv_post_recv: ") + std::strerror(rc));
        return;
      }
      n -= k;
    }
  }

  // Caller holds sq_mu_.
  bool try_post(ibv_send_wr* wr) {
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(qp_, wr, &bad);
    if (rc != 0) {
      mark_broken(std::string("ibv_post_send: ") + std::strerror(rc));
      return false;
    }
    ++sq_outstanding_;
    return true;
  }
  void post(ibv_send_wr* wr, const char* what_for) {
    if (!try_post(wr)) throw_broken();
    (void)what_for;
  }

  void mark_broken(const std::string& why) {
    {
      std::lock_guard<std::mutex> g(err_mu_);
      if (error_.empty()) error_ = why;
    }
    broken_.store(true);
  }

  void on_wc_error(const ibv_wc& wc, const char* queue) {
    const char* kinds[] = {"data write", "credit write", "probe", "close write"};
    std::string why = std::string(dev_->api->wc_status_str(wc.status)) + " (status " +
                      std::to_string(wc.status) + ", vendor_err " + std::to_string(wc.vendor_err) +
                      ") on " + queue;
    if (std::string(queue) == "send queue") why += std::string(" (") + kinds[wc.wr_id & 3] + ")";
    if (wc.status == IBV_WC_RETRY_EXC_ERR || wc.status == IBV_WC_RNR_RETRY_EXC_ERR)
      why +=
          ": the peer stopped answering (died, aborted, or the network is down; retries per "
          "MYCOLL_IB_TIMEOUT/MYCOLL_IB_RETRY_CNT)";
    mark_broken(why);
  }

  // Caller holds sq_mu_.
  void poll_send_cq() {
    ibv_wc wc[16];
    for (;;) {
      int k = ibv_poll_cq(scq_, 16, wc);
      if (k <= 0) break;
      for (int i = 0; i < k; ++i) {
        --sq_outstanding_;
        if (wc[i].status != IBV_WC_SUCCESS) {
          on_wc_error(wc[i], "send queue");
          continue;
        }
        switch (wc[i].wr_id & 3) {
          case kData: completed_ += wc[i].wr_id >> 2; break;
          case kCredit: credit_inflight_ = false; break;
          case kProbe:
            probe_inflight_ = false;
            log_trace(Subsys::Transport, "ib: probe to rank {} completed", peer_);
            break;
          case kClose: close_done_ = true; break;
        }
      }
      if (k < 16) break;
    }
  }

  // Receive side only.
  void poll_recv_cq() {
    ibv_wc wc[32];
    for (;;) {
      int k = ibv_poll_cq(rcq_, 32, wc);
      if (k <= 0) break;
      int ok = 0;
      for (int i = 0; i < k; ++i) {
        if (wc[i].status != IBV_WC_SUCCESS) {
          on_wc_error(wc[i], "receive queue");
          continue;
        }
        if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          const uint32_t imm = ntohl(wc[i].imm_data);
          std::string why;
          if (ibwire::check_arrival(arrived_, consumed_, ring_bytes_, imm, peer_, &why) !=
              mycollSuccess) {
            mark_broken(why);
            continue;
          }
          arrived_ += imm;
        }
        ++ok;
      }
      if (ok && !broken_.load()) post_recvs(ok);
      if (k < 32) break;
    }
  }

  // Receive side: completes control writes and sends a pending credit.
  void flush_credit_if_due() {
    std::lock_guard<std::mutex> g(sq_mu_);
    poll_send_cq();
    flush_credit_locked();
  }

  // Posts the newest consumed count if no credit write is in flight.
  void flush_credit_locked() {
    if (!credit_due_ || credit_inflight_ || broken_.load() || in_error_) return;
    if (sq_outstanding_ >= kSendDepth) return;
    const ibwire::SealedCredit c = ibwire::seal_credit(consumed_);
    ctrl_ptr_->credit_src[0] = c.count;
    ctrl_ptr_->credit_src[1] = c.seal;
    ibv_sge sge{reinterpret_cast<uintptr_t>(ctrl_ptr_->credit_src), sizeof ctrl_ptr_->credit_src,
                ctrl_.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id(kCredit);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_.ctrl_addr + offsetof(Ctrl, peer_credit);
    wr.wr.rdma.rkey = remote_.ctrl_rkey;
    if (try_post(&wr)) {
      credit_inflight_ = true;
      credit_due_ = false;
    }
  }

  [[noreturn]] void throw_broken() const {
    std::string who = "ib connection to rank " + std::to_string(peer_) + " (" + describe() + ")";
    std::string why;
    {
      std::lock_guard<std::mutex> g(err_mu_);
      why = error_;
    }
    if (shut_.load()) throw_error(mycollRemoteError, who + " shut down (communicator aborted)");
    if (!why.empty()) throw_error(mycollRemoteError, who + ": " + why);
    if (ctrl_ptr_ && ctrl_ptr_->peer_closed)
      throw_error(mycollRemoteError, who + " closed by peer (it aborted or failed)");
    throw_error(mycollRemoteError, who + " is broken");
  }

  std::shared_ptr<IbDevice> dev_;
  int me_, peer_;
  IbConfig s_;
  ibv_cq* scq_ = nullptr;
  ibv_cq* rcq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  ibv_mtu mtu_ = IBV_MTU_1024;
  Region ring_, stage_, ctrl_;
  Ctrl* ctrl_ptr_ = nullptr;
  uint64_t ring_bytes_ = 0;
  Wire remote_{};

  // Send side (sq_mu_).
  std::mutex sq_mu_;
  uint64_t sent_ = 0, completed_ = 0;
  uint64_t credit_seen_ = 0;  // the largest credit the peer reported (checked: <= sent_)
  std::deque<uint64_t> unacked_ends_;
  int sq_outstanding_ = 0;
  bool credit_due_ = false, credit_inflight_ = false, probe_inflight_ = false, close_done_ = false;
  bool in_error_ = false;
  Clock::time_point last_probe_;

  // Receive side.
  uint64_t arrived_ = 0, consumed_ = 0;
  pid_t local_peer_pid_ = 0;
  Clock::time_point last_pid_check_;

  std::atomic<bool> shut_{false};
  std::atomic<bool> broken_{false};
  mutable std::mutex err_mu_;
  std::string error_;
};

class IbTransport final : public Transport {
 public:
  const char* name() const override { return "ib"; }
  bool can_connect(const PeerInfo&, const PeerInfo&) const override { return true; }

  std::vector<std::unique_ptr<Connection>> connect(Bootstrap& bs,
                                                   const std::vector<PeerInfo>& /*all*/,
                                                   const std::vector<int>& peers,
                                                   const Config& cfg) override {
    const int me = bs.rank(), n = bs.nranks();
    check_peer_list("ibverbs", me, n, peers);
    // Set up locally, but always join the allgather so a failure here ends
    // every rank's connect promptly instead of in a bootstrap timeout.
    std::vector<Wire> table(static_cast<size_t>(n) * n);
    std::memset(table.data(), 0, table.size() * sizeof(Wire));
    std::vector<std::unique_ptr<IbConnection>> conns;
    std::string local_error;
    mycollResult_t local_code = mycollSuccess;
    if (!peers.empty()) {
      try {
        const IbConfig& s = cfg.ib;
        auto dev = IbDevice::open(s);
        for (int p : peers) {
          conns.push_back(std::make_unique<IbConnection>(dev, me, p, s));
          conns.back()->setup(&table[static_cast<size_t>(me) * n + p]);
        }
      } catch (const Error& e) {
        local_error = e.what();
        local_code = e.code();
        for (int p = 0; p < n; ++p) table[static_cast<size_t>(me) * n + p].failed = 1;
      }
    }
    bs.allgather(table.data(), static_cast<size_t>(n) * sizeof(Wire));
    if (!local_error.empty()) throw_error(local_code, local_error);
    for (size_t i = 0; i < peers.size(); ++i) {
      std::string why;
      const mycollResult_t rc = ibwire::check_conn_info(
          table[static_cast<size_t>(peers[i]) * n + me], peers[i], me, conns[i]->roce(), &why);
      if (rc != mycollSuccess) throw_error(rc, why);
    }
    for (size_t i = 0; i < peers.size(); ++i)
      conns[i]->connect_to(table[static_cast<size_t>(peers[i]) * n + me]);
    // Every QP is at RTR before anyone writes.
    bs.barrier();
    std::vector<std::unique_ptr<Connection>> out;
    for (size_t i = 0; i < conns.size(); ++i) {
      log_info(Subsys::Transport, "ib: rank {} -> rank {} over {} MTU {}", me, peers[i],
               conns[i]->describe(), conns[i]->mtu_bytes());
      out.push_back(std::move(conns[i]));
    }
    (void)cfg;
    return out;
  }
};

}  // namespace

bool ib_force_qp_error(Connection* c) {
  auto* ib = dynamic_cast<IbConnection*>(c);
  if (!ib) return false;
  ib->force_error();
  return true;
}

std::unique_ptr<Transport> make_ib_transport() {
  std::string why;
  if (!ibv_api(&why)) throw_error(mycollInvalidUsage, "ibverbs transport: " + why);
  return std::make_unique<IbTransport>();
}

}  // namespace mycoll
