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
#include "fuzz_wire.h"

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

bool write(const std::string& dir, const std::string& name, const Bytes& b) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
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
    put_frame(s, kAbort, text("rank 2 aborted"));
    seeds.emplace_back("peer-stream", input(kPeerStream, stream_param(4, 32), s));
    seeds.emplace_back("peer-stream-bytewise", input(kPeerStream, stream_param(4, 1), s));
  }
  {  // The same link after a handshake: every frame tagged (kTaggedPeer's key).
    net::SessionKey key;
    key.fill(kTagKeyByte);
    FrameMac mac(key, Dir::kFromClient);
    Bytes s;
    for (const auto& [kind, payload] :
         std::vector<std::pair<uint32_t, Bytes>>{{kColl, {}},
                                                 {kColl, {1, 2, 3, 4, 5, 6, 7, 8}},
                                                 {kP2p, text("point-to-point payload")},
                                                 {kAbort, text("rank 2 aborted")}}) {
      const Bytes f = seal_frame(mac, kind, payload.data(), payload.size());
      s.insert(s.end(), f.begin(), f.end());
    }
    seeds.emplace_back("tagged-peer-stream", input(kTaggedPeer, stream_param(4, 13), s));
  }
  {
    Bytes s;
    put_frame(s, kAbort, text("rank 1: peer rank 2 (pid 41) is gone"));
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

  for (const auto& [name, bytes] : seeds)
    if (!write(dir, name, bytes)) {
      std::perror((dir + "/" + name).c_str());
      return 1;
    }
  std::printf("%zu seeds in %s\n", seeds.size(), dir.c_str());
  return 0;
}
