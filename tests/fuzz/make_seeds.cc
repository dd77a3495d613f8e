// Writes the seed corpus of the wire fuzz target: a few valid inputs per
// decoder, in the format of fuzz_wire.h. The output is committed
// (tests/fuzz/corpus/wire); run again when a wire format changes:
//   build/tests/fuzz/mycoll_fuzz_seeds tests/fuzz/corpus/wire
#include <netinet/in.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/wire.h"
#include "engine/proxy_wire.h"
#include "fuzz_wire.h"
#include "transports/ibverbs/ib_wire.h"
#include "transports/shm/shm.h"
#include "transports/socket/socket_wire.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"

namespace {

using namespace mycoll;
using namespace mycoll::bswire;
using namespace mycoll_fuzz;
using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(v));
}

void put_frame(Bytes& b, uint32_t kind, const Bytes& payload) {
  put(b, FrameHeader{kFrameMagic, kind, payload.size()});
  b.insert(b.end(), payload.begin(), payload.end());
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

// 127.0.0.1:port as the wire carries it.
Bytes addr(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Bytes b(net::kAddrBytes, 0);
  std::memcpy(b.data(), &a, sizeof(a));
  return b;
}

Bytes input(Target t, uint8_t param, const Bytes& data) {
  Bytes b{static_cast<uint8_t>(t), param};
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// param for a stream of nranks ranks cut into pieces of `piece` bytes.
uint8_t stream_param(int nranks, size_t piece) {
  return static_cast<uint8_t>((nranks - 1) | ((piece - 1) << 3));
}

// An IbOp / ShmOp record of kIbRun / kShmRun.
void put_op(Bytes& b, uint8_t op, uint32_t v) {
  b.push_back(op);
  put(b, v);
}
void put_op(Bytes& b, uint8_t op, uint64_t v) {
  b.push_back(op);
  put(b, v);
}

void put_proxy_frame(Bytes& b, uint32_t type, uint32_t channel, uint64_t value, uint8_t fill = 0) {
  put(b, proxywire::Frame{type, channel, value});
  if (type == proxywire::kData) b.insert(b.end(), value, fill);
}

bool write(const std::string& dir, const std::string& name, const Bytes& b) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

// The transports' connection messages, valid (fuzz_transport.cc).
void transport_seeds(std::vector<std::pair<std::string, Bytes>>& seeds) {
  {  // socket: rank 1 listens on 127.0.0.1:40001; rank 2 has no socket peers.
    const net::SockAddr a = net::SockAddr::from_ip("127.0.0.1", 40001);
    Bytes b;
    put(b, sockwire::encode_endpoint(&a));
    seeds.emplace_back("socket-endpoint", input(kSocketEndpoint, 1, b));
    Bytes none;
    put(none, sockwire::encode_endpoint(nullptr));
    seeds.emplace_back("socket-endpoint-none", input(kSocketEndpoint, 2, none));
    Bytes ann;
    put(ann, sockwire::encode_announce(2));
    seeds.emplace_back("socket-announce", input(kSocketAnnounce, 3, ann));  // nranks 4, self 0
  }
  {  // ucx: 4 ranks, one without UCX peers; 64 KiB chunks.
    Bytes b;
    for (uint64_t len : {212, 0, 236, 212}) put(b, ucxwire::AddrInfo{len, 65536});
    seeds.emplace_back("ucx-addr-info", input(kUcxAddrInfo, 3, b));  // nranks 4, me 3
    uint64_t h[2];
    ucxwire::encode_hello(kUcxTag, 1, h);
    Bytes hello;
    put(hello, h);
    seeds.emplace_back("ucx-hello", input(kUcxHello, 1, hello));  // from rank 1 to rank 0
  }
  for (bool roce : {true, false}) {  // ibverbs: one QP's info, RoCE and InfiniBand
    ibwire::ConnInfo w;
    std::memset(&w, 0, sizeof(w));
    w.valid = 1;
    w.qpn = 0x1a2b;
    w.psn = 0x3c4d5e;
    w.lid = roce ? 0 : 7;
    w.roce = roce;
    w.mtu = 3;  // 1024
    for (int i = 0; i < 16; ++i) w.gid[i] = static_cast<uint8_t>(i);
    w.ring_addr = 0x7f0000000000ull;
    w.ring_bytes = 4u << 20;
    w.ctrl_addr = 0x7f0000800000ull;
    w.ring_rkey = 0x1111;
    w.ctrl_rkey = 0x2222;
    w.pidns = 4026531836ull;
    w.pid = 4242;
    std::snprintf(w.boot_id, sizeof(w.boot_id), "%s", "5b1f0d3e-0c4a-4e43-9d0e-6f1c2a7b8e90");
    Bytes b;
    put(b, w);
    seeds.emplace_back(roce ? "ib-conn-info-roce" : "ib-conn-info-ib",
                       input(kIbConnInfo, roce ? 1 : 0, b));
  }
  {  // ibverbs at run time, ring of 8 KiB: writes land, are read, credits return.
    Bytes b;
    put_op(b, kIbArrive, uint32_t{4096});
    put_op(b, kIbArrive, uint32_t{2048});
    put_op(b, kIbConsume, uint32_t{5000});
    put_op(b, kIbCredit, uint32_t{6000u << 16 | 1000});
    put_op(b, kIbArrive, uint32_t{3000});
    put_op(b, kIbCredit, uint32_t{2000u << 16 | 4000});
    put_op(b, kIbConsume, uint32_t{4000});
    seeds.emplace_back("ib-run", input(kIbRun, 1, b));
  }
  {  // shm: a FIFO header as Fifo::create writes it, with its mapping's size.
    const uint64_t cap = 16384;
    const shm::RecordGeometry geo = shm::record_geometry(cap);
    const uint64_t offset = shm::kFifoDataOffset + cap;
    Bytes b;
    put(b, shm::kFifoMagic);
    put(b, cap);
    put(b, geo.slots);
    put(b, geo.slot_bytes);
    put(b, offset);
    put(b, offset + uint64_t{geo.slots} * geo.slot_bytes);
    seeds.emplace_back("shm-fifo", input(kShmFifo, 0, b));
  }
  {  // shm at run time: 8 KiB ring, 8 record slots of 128 bytes (param 0x29).
    Bytes b;
    put_op(b, kShmWrite, uint64_t{5000});
    put_op(b, kShmHead, uint64_t{5000});
    put_op(b, kShmConsume, uint64_t{3000});
    put_op(b, kShmTail, uint64_t{3000});
    put_op(b, kShmWrite, uint64_t{6000});
    put_op(b, kShmHead, uint64_t{11000});
    put_op(b, kShmConsume, uint64_t{8000});
    put_op(b, kShmTail, uint64_t{11000});
    for (uint64_t i = 0; i < 10; ++i) put_op(b, kShmRecordWord, shm::record_word(i, 40 + 8 * i));
    seeds.emplace_back("shm-run", input(kShmRun, 0x29, b));
  }
  {  // ucx at run time, a window of 8: sends, data with credits, a credit message.
    Bytes b;
    put_op(b, kUcxSend, uint32_t{8});
    put_op(b, kUcxData, uint32_t{100u << 16 | 3});     // 100 bytes, credit 0 + 3
    put_op(b, kUcxSend, uint32_t{8});                  // room for 3
    put_op(b, kUcxCreditMsg, uint32_t{8u << 24 | 4});  // credit 3 + 4
    for (int i = 0; i < 7; ++i) put_op(b, kUcxConsume, uint32_t{0});
    put_op(b, kUcxData, uint32_t{9u << 16 | 0});  // 9 bytes, credit unchanged
    seeds.emplace_back("ucx-run", input(kUcxRun, 7, b));
  }
  {  // GPU proxy: 2 channels, 4 slots of 32 bytes (param 0x6d); pieces of 6.
    Bytes b{5};
    put_proxy_frame(b, proxywire::kData, 0, 32, 0xa1);
    put_proxy_frame(b, proxywire::kData, 1, 7, 0xb2);
    put_proxy_frame(b, proxywire::kCredit, 0, 1);
    put_proxy_frame(b, proxywire::kData, 0, 0);
    put_proxy_frame(b, proxywire::kCredit, 1, 3);
    put_proxy_frame(b, proxywire::kCall, 0, 0x0102030405060708ull);
    put_proxy_frame(b, proxywire::kSize, 1, 4004);
    put_proxy_frame(b, proxywire::kData, 1, 32, 0xc3);
    put_proxy_frame(b, proxywire::kCredit, 0, proxywire::kCreditPoison | 4004);
    seeds.emplace_back("proxy-stream", input(kProxyStream, 0x6d, b));
  }
  {
    PeerInfo p;
    p.rank = 2;
    p.pid = 4242;
    std::snprintf(p.host_id, sizeof(p.host_id), "%s", "node7/5b1f0d3e-0c4a-4e43-9d0e-6f1c2a7b8e90");
    std::snprintf(p.hostname, sizeof(p.hostname), "%s", "node7");
    std::snprintf(p.ip, sizeof(p.ip), "%s", "10.0.0.7");
    Bytes b;
    put(b, p);
    seeds.emplace_back("peer-info", input(kPeerInfo, 2, b));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, Bytes>> seeds;

  {  // A peer link: the ring's empty kColl, allgather data, p2p, an abort.
    Bytes s;
    put_frame(s, kColl, {});
    put_frame(s, kColl, {1, 2, 3, 4, 5, 6, 7, 8});
    put_frame(s, kP2p, text("point-to-point payload"));
    put_frame(s, kAbort, encode_report(Report{2, {}, "rank 2 aborted"}));
    seeds.emplace_back("peer-stream", input(kPeerStream, stream_param(4, 32), s));
    seeds.emplace_back("peer-stream-bytewise", input(kPeerStream, stream_param(4, 1), s));
  }
  {  // The same link after a handshake: every frame tagged (kTaggedPeer's key).
    net::SessionKey key;
    key.fill(kTagKeyByte);
    FrameMac mac(key, Dir::kFromClient);
    Bytes s;
    for (const auto& [kind, payload] : std::vector<std::pair<uint32_t, Bytes>>{
             {kColl, {}},
             {kColl, {1, 2, 3, 4, 5, 6, 7, 8}},
             {kP2p, text("point-to-point payload")},
             {kAbort, encode_report(Report{2, {}, "rank 2 aborted"})}}) {
      const Bytes f = seal_frame(mac, kind, payload.data(), payload.size());
      s.insert(s.end(), f.begin(), f.end());
    }
    seeds.emplace_back("tagged-peer-stream", input(kTaggedPeer, stream_param(4, 13), s));
  }
  {
    Bytes s;
    put_frame(s, kAbort, encode_report(Report{1, {2}, "rank 1: peer rank 2 (pid 41) is gone"}));
    seeds.emplace_back("way-back-abort", input(kWayBack, stream_param(3, 7), s));
  }
  {  // The root: progress, then the table of 3 ranks.
    Bytes s;
    put_frame(s, kRootStatus, [] {
      Bytes b;
      put(b, StatusMsg{2, 3});
      return b;
    }());
    Bytes table;
    put(table, TableHeader{0x1234567890abcdefull, 3, 0});
    for (int r = 0; r < 3; ++r) {
      Bytes a = addr(40000 + r);
      table.insert(table.end(), a.begin(), a.end());
    }
    put_frame(s, kRootTable, table);
    seeds.emplace_back("root-status-table", input(kRootStream, stream_param(3, 16), s));
  }
  {  // The root gives up.
    Bytes err;
    put(err, ErrorHeader{mycollTimeout, 0});
    Bytes t = text("bootstrap: timed out after 3.0 s: 2 of 3 ranks arrived (missing ranks: 2)");
    err.insert(err.end(), t.begin(), t.end());
    Bytes s;
    put_frame(s, kRootError, err);
    seeds.emplace_back("root-error", input(kRootStream, stream_param(3, 32), s));
  }
  {
    RankHello h{};
    h.magic = kHelloMagic;
    h.version = kIdVersion;
    h.rank = 1;
    h.nranks = 3;
    Bytes a = addr(40001);
    std::memcpy(h.addr, a.data(), sizeof(h.addr));
    Bytes b;
    put(b, h);
    seeds.emplace_back("rank-hello", input(kRankHello, 2, b));  // root knows nranks 3
  }
  {
    Bytes b;
    put(b, PeerHello{kPeerMagic, 1, 3, 0});
    seeds.emplace_back("peer-hello", input(kPeerHello, 2, b));  // nranks 3, self 0
  }
  {  // A ServerHello (magic "MYUA", version 1, nonce), a ClientProof ("MYUP").
    Bytes hello;
    put(hello, uint32_t{0x4155594d});
    put(hello, uint32_t{1});
    hello.insert(hello.end(), 16, kAuthNonceByte);
    seeds.emplace_back("auth-server-hello", input(kAuth, 0, hello));
    Bytes proof;
    put(proof, uint32_t{0x5055594d});
    proof.insert(proof.end(), 16 + 32, 0x11);
    seeds.emplace_back("auth-client-proof", input(kAuth, 0, proof));
  }
  {
    UniqueIdData d;
    d.magic = kIdMagic;
    d.version = kIdVersion;
    Bytes a = addr(29500);
    std::memcpy(d.addr, a.data(), sizeof(d.addr));
    d.secret.fill(7);
    d.tag = 42;
    Bytes b(MYCOLL_UNIQUE_ID_BYTES, 0);
    std::memcpy(b.data(), &d, sizeof(d));
    seeds.emplace_back("unique-id", input(kUniqueId, 0, b));
  }
  // Header records: payload inline, streamed, left in the sender's memory.
  for (uint8_t param : {uint8_t{0x00}, uint8_t{0x81}, uint8_t{0x88}}) {
    const MsgHeader want = expected_header(param);
    const char* name = param == 0      ? "record-inline"
                       : param == 0x81 ? "record-streamed"
                                       : "record-remote";
    MsgHeader h = want;
    Bytes b;
    if (param == 0x88) {
      h.pad = kPayloadRemote;
      put(b, h);
      put(b, uint64_t{0x7f0000001000});
    } else {
      put(b, h);
      if (param == 0) b.insert(b.end(), want.bytes, 0x3c);
    }
    seeds.emplace_back(name, input(kMsgRecord, param, b));
  }

  transport_seeds(seeds);

  for (const auto& [name, bytes] : seeds)
    if (!write(dir, name, bytes)) {
      std::perror((dir + "/" + name).c_str());
      return 1;
    }
  std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
  return 0;
}
