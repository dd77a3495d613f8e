// The decoders of network bytes (bootstrap/wire.h, the handshake's, the host
// engine's header records): valid input, and each rule that refuses input.
// Also replays the wire fuzz target's committed corpus (tests/fuzz).
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/error.h"
#include "bootstrap/wire.h"
#include "engine/host_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace mycoll {
namespace {

using namespace bswire;
using Bytes = std::vector<uint8_t>;

template <typename T>
void put(Bytes& b, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + sizeof(v));
}

Bytes frame(uint32_t kind, const Bytes& payload, uint32_t magic = kFrameMagic) {
  Bytes b;
  put(b, FrameHeader{magic, kind, payload.size()});
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes v4_addr(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Bytes b(net::kAddrBytes, 0);
  std::memcpy(b.data(), &a, sizeof(a));
  return b;
}

// Feeds s to r in pieces; the frames before the first refusal and that
// refusal (kMore when none).
std::vector<Bytes> feed_tagged(FrameReader& r, const Bytes& s, size_t piece,
                               FrameReader::Status* refused) {
  std::vector<Bytes> out;
  *refused = FrameReader::Status::kMore;
  for (size_t at = 0; at < s.size();) {
    size_t max = 0;
    uint8_t* dst = r.buffer(&max);
    const size_t k = std::min({max, piece, s.size() - at});
    std::memcpy(dst, s.data() + at, k);
    at += k;
    const FrameReader::Status st = r.advance(k);
    if (st == FrameReader::Status::kCorrupt || st == FrameReader::Status::kForged) {
      *refused = st;
      break;
    }
    if (st == FrameReader::Status::kFrame) out.push_back(r.take_payload());
  }
  return out;
}

// The same for untagged streams: *corrupt when the reader refused a header.
std::vector<Bytes> feed(FrameReader& r, const Bytes& s, size_t piece, bool* corrupt) {
  FrameReader::Status refused;
  std::vector<Bytes> out = feed_tagged(r, s, piece, &refused);
  *corrupt = refused == FrameReader::Status::kCorrupt;
  return out;
}

TEST(WireFrames, ReassembledWhereverTheStreamIsCut) {
  Bytes s = frame(kColl, {});
  for (const Bytes& f :
       {frame(kP2p, {1, 2, 3}), frame(kAbort, {'x'}), frame(kColl, Bytes(70000, 9))})
    s.insert(s.end(), f.begin(), f.end());
  for (size_t piece : {size_t{1}, size_t{5}, size_t{16}, size_t{4096}, s.size()}) {
    FrameReader r(Link::kPeer, 4);
    bool corrupt = false;
    std::vector<Bytes> got = feed(r, s, piece, &corrupt);
    EXPECT_FALSE(corrupt);
    ASSERT_EQ(got.size(), 4u) << "piece " << piece;
    EXPECT_TRUE(got[0].empty());
    EXPECT_EQ(got[1], (Bytes{1, 2, 3}));
    EXPECT_EQ(got[3], Bytes(70000, 9));
    EXPECT_FALSE(r.mid_frame());
  }
}

TEST(WireFrames, MidFrameWhileAFrameIsIncomplete) {
  FrameReader r(Link::kPeer, 2);
  Bytes s = frame(kP2p, {1, 2, 3, 4});
  bool corrupt = false;
  EXPECT_TRUE(feed(r, Bytes(s.begin(), s.begin() + 3), 3, &corrupt).empty());
  EXPECT_TRUE(r.mid_frame());
  EXPECT_EQ(feed(r, Bytes(s.begin() + 3, s.end()), 64, &corrupt).size(), 1u);
  EXPECT_FALSE(r.mid_frame());
}

TEST(WireFrames, PayloadGrowsWithItsBytesNotWithTheDeclaredLength) {
  // A peer declares the largest kColl frame (4 GiB) and sends 10 bytes.
  FrameReader r(Link::kPeer, 2);
  Bytes s;
  put(s, FrameHeader{kFrameMagic, kColl, kMaxFrameBytes});
  s.insert(s.end(), 10, 0);
  bool corrupt = false;
  EXPECT_TRUE(feed(r, s, 64, &corrupt).empty());
  EXPECT_FALSE(corrupt);
  size_t max = 0;
  r.buffer(&max);
  EXPECT_EQ(max, FrameReader::kReadChunk);
}

TEST(WireFrames, EachLinkCarriesOnlyItsKindsWithinTheirBounds) {
  struct Case {
    Link link;
    uint32_t kind;
    uint64_t len;
    uint32_t magic;
    bool ok;
  };
  const int n = 3;
  const uint64_t table = sizeof(TableHeader) + n * net::kAddrBytes;
  const uint64_t report_max = sizeof(ReportHeader) + 2 * kMaxReportWaits * 4 + kMaxTextBytes;
  for (const Case& c : std::vector<Case>{
           {Link::kPeer, kColl, 100, kFrameMagic, true},
           {Link::kPeer, kP2p, kMaxFrameBytes, kFrameMagic, true},
           {Link::kPeer, kP2p, kMaxFrameBytes + 1, kFrameMagic, false},
           {Link::kPeer, kAbort, report_max, kFrameMagic, true},
           {Link::kPeer, kAbort, report_max + 1, kFrameMagic, false},
           {Link::kPeer, kRootTable, 0, kFrameMagic, false},
           {Link::kPeer, kColl, 0, kFrameMagic + 1, false},
           {Link::kPeer, 999, 0, kFrameMagic, false},
           {Link::kWayBack, kAbort, 10, kFrameMagic, true},
           {Link::kWayBack, kColl, 0, kFrameMagic, false},
           {Link::kRescue, kRescue, kMaxRescueBytes, kFrameMagic, true},
           {Link::kRescue, kRescue, kMaxRescueBytes + 1, kFrameMagic, false},
           {Link::kRescue, kP2p, 8, kFrameMagic, false},
           {Link::kRescue, kAbort, 10, kFrameMagic, false},
           {Link::kPeer, kRescue, 8, kFrameMagic, false},
           {Link::kFromRoot, kRootStatus, sizeof(StatusMsg), kFrameMagic, true},
           {Link::kFromRoot, kRootStatus, sizeof(StatusMsg) + 1, kFrameMagic, false},
           {Link::kFromRoot, kRootTable, table, kFrameMagic, true},
           {Link::kFromRoot, kRootTable, table + 1, kFrameMagic, false},
           {Link::kFromRoot, kRootError, sizeof(ErrorHeader) + kMaxTextBytes, kFrameMagic, true},
           {Link::kFromRoot, kAbort, 0, kFrameMagic, false},
           {Link::kFromRoot, kColl, 0, kFrameMagic, false},
       }) {
    EXPECT_EQ(frame_header_ok(FrameHeader{c.magic, c.kind, c.len}, c.link, n), c.ok)
        << "link " << static_cast<int>(c.link) << " kind " << c.kind << " len " << c.len;
    FrameReader r(c.link, n);
    bool corrupt = false;
    Bytes s;
    put(s, FrameHeader{c.magic, c.kind, c.len});
    feed(r, s, 16, &corrupt);
    EXPECT_EQ(corrupt, !c.ok);
  }
}

Bytes table_payload(uint64_t tag, int32_t declared, int entries, int family = AF_INET) {
  Bytes p;
  put(p, TableHeader{tag, declared, 0});
  for (int r = 0; r < entries; ++r) {
    Bytes a = v4_addr(5000 + r);
    reinterpret_cast<sockaddr_in*>(a.data())->sin_family = static_cast<sa_family_t>(family);
    p.insert(p.end(), a.begin(), a.end());
  }
  return p;
}

TEST(WireRoot, Table) {
  Bytes p = table_payload(77, 3, 3);
  RootMessage m = parse_root_message(kRootTable, p.data(), p.size(), 3);
  ASSERT_EQ(m.kind, RootMessage::Kind::kTable) << m.why;
  EXPECT_EQ(m.tag, 77u);
  ASSERT_EQ(m.table.size(), 3u);
  EXPECT_EQ(m.table[2].str(), "127.0.0.1:5002");
  for (const Bytes& bad : {table_payload(77, 4, 3), table_payload(77, 3, 2),
                           table_payload(77, 3, 3, 12345), Bytes(3, 0)}) {
    m = parse_root_message(kRootTable, bad.data(), bad.size(), 3);
    EXPECT_EQ(m.kind, RootMessage::Kind::kMalformed);
    EXPECT_NE(m.why, "");
    EXPECT_TRUE(m.table.empty());
  }
}

TEST(WireRoot, ErrorCodeOutsideTheEnumIsARemoteError) {
  for (int32_t code : {int32_t{mycollTimeout}, int32_t{0}, int32_t{-1}, int32_t{mycollNumResults},
                       int32_t{0x7fffffff}}) {
    Bytes p;
    put(p, ErrorHeader{code, 0});
    p.push_back('!');
    RootMessage m = parse_root_message(kRootError, p.data(), p.size(), 3);
    ASSERT_EQ(m.kind, RootMessage::Kind::kError);
    EXPECT_EQ(m.code, code == mycollTimeout ? mycollTimeout : mycollRemoteError) << code;
    EXPECT_EQ(m.text, "!");
  }
  Bytes tiny(4, 0);
  EXPECT_EQ(parse_root_message(kRootError, tiny.data(), tiny.size(), 3).kind,
            RootMessage::Kind::kMalformed);
}

TEST(WireRoot, StatusAndUnknownKinds) {
  Bytes p;
  put(p, StatusMsg{2, 3});
  RootMessage m = parse_root_message(kRootStatus, p.data(), p.size(), 3);
  ASSERT_EQ(m.kind, RootMessage::Kind::kStatus);
  EXPECT_EQ(m.status.arrived, 2);
  EXPECT_EQ(parse_root_message(kRootStatus, p.data(), p.size() - 1, 3).kind,
            RootMessage::Kind::kMalformed);
  EXPECT_EQ(parse_root_message(kColl, p.data(), p.size(), 3).kind, RootMessage::Kind::kMalformed);
}

RankHello rank_hello(int rank, int nranks) {
  RankHello h{};
  h.magic = kHelloMagic;
  h.version = kIdVersion;
  h.rank = rank;
  h.nranks = nranks;
  Bytes a = v4_addr(6000);
  std::memcpy(h.addr, a.data(), sizeof(h.addr));
  return h;
}

bool rank_hello_ok(const RankHello& h, int root_nranks, std::string* why) {
  RankHello out;
  return parse_rank_hello(reinterpret_cast<const uint8_t*>(&h), sizeof(h), root_nranks, &out, why);
}

// ---- Tagged frames (FrameMac): what the bootstrap's links carry after the
// handshake.

net::SessionKey key_of(uint8_t v) {
  net::SessionKey k;
  k.fill(v);
  return k;
}

// A stream of tagged frames as a sender with `mac` writes it.
Bytes sealed(FrameMac& mac, const std::vector<std::pair<uint32_t, Bytes>>& frames) {
  Bytes s;
  for (const auto& [kind, payload] : frames) {
    Bytes f = seal_frame(mac, kind, payload.data(), payload.size());
    s.insert(s.end(), f.begin(), f.end());
  }
  return s;
}

const std::vector<std::pair<uint32_t, Bytes>> kTaggedFrames = {
    {kColl, {}}, {kP2p, {1, 2, 3}}, {kAbort, {'x'}}, {kColl, Bytes(70000, 9)}};

TEST(WireTags, TaggedFramesReassembledWhereverTheStreamIsCut) {
  for (size_t piece : {size_t{1}, size_t{7}, size_t{16}, size_t{4096}, size_t{1} << 20}) {
    FrameMac send(key_of(5), Dir::kFromClient);
    const Bytes s = sealed(send, kTaggedFrames);
    EXPECT_EQ(s.size(), 4 * (sizeof(FrameHeader) + kTagBytes) + 3 + 1 + 70000);
    FrameReader r(Link::kPeer, 4, FrameMac(key_of(5), Dir::kFromClient));
    FrameReader::Status refused;
    std::vector<Bytes> got = feed_tagged(r, s, piece, &refused);
    EXPECT_EQ(refused, FrameReader::Status::kMore) << "piece " << piece;
    ASSERT_EQ(got.size(), 4u) << "piece " << piece;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], kTaggedFrames[i].second) << i;
    EXPECT_FALSE(r.mid_frame());
  }
}

TEST(WireTags, AnyChangedByteIsRefused) {
  FrameMac send(key_of(5), Dir::kFromClient);
  const Bytes s = sealed(send, {{kP2p, {1, 2, 3, 4, 5}}, {kColl, {6, 7}}});
  const size_t first = sizeof(FrameHeader) + 5 + kTagBytes;
  for (size_t i = 0; i < s.size(); ++i) {
    Bytes bad = s;
    bad[i] ^= 0x20;
    FrameReader r(Link::kPeer, 4, FrameMac(key_of(5), Dir::kFromClient));
    FrameReader::Status refused;
    std::vector<Bytes> got = feed_tagged(r, bad, 3, &refused);
    // A changed header may also be refused as corrupt (a bad magic, kind or
    // length) or wait for bytes that never come (a longer length): never a
    // frame with the changed byte.
    const bool in_first = i < first;
    EXPECT_EQ(got.size(), in_first ? 0u : 1u) << "byte " << i;
    if (!got.empty()) EXPECT_EQ(got[0], (Bytes{1, 2, 3, 4, 5}));
    const bool hdr = (in_first ? i : i - first) < sizeof(FrameHeader);
    if (!hdr) EXPECT_EQ(refused, FrameReader::Status::kForged) << "byte " << i;
  }
}

TEST(WireTags, ReplayedDroppedReorderedOrForeignFramesAreRefused) {
  FrameMac send(key_of(5), Dir::kFromClient);
  std::vector<Bytes> f;
  for (const auto& [kind, payload] : kTaggedFrames)
    f.push_back(seal_frame(send, kind, payload.data(), payload.size()));
  auto run = [](const std::vector<Bytes>& frames, FrameMac mac, size_t* delivered) {
    Bytes s;
    for (const Bytes& x : frames) s.insert(s.end(), x.begin(), x.end());
    FrameReader r(Link::kPeer, 4, mac);
    FrameReader::Status refused;
    *delivered = feed_tagged(r, s, 4096, &refused).size();
    return refused;
  };
  const FrameMac reader(key_of(5), Dir::kFromClient);
  size_t n = 0;
  EXPECT_EQ(run({f[0], f[1], f[1]}, reader, &n), FrameReader::Status::kForged);  // replay
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(run({f[0], f[2]}, reader, &n), FrameReader::Status::kForged);  // dropped
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(run({f[1], f[0]}, reader, &n), FrameReader::Status::kForged);  // reordered
  EXPECT_EQ(n, 0u);
  // Another connection's key, or this key's other direction (reflection).
  EXPECT_EQ(run({f[0]}, FrameMac(key_of(6), Dir::kFromClient), &n), FrameReader::Status::kForged);
  EXPECT_EQ(run({f[0]}, FrameMac(key_of(5), Dir::kFromServer), &n), FrameReader::Status::kForged);
  // An untagged frame injected between tagged ones: the next frame's first
  // 16 bytes are read as its tag.
  Bytes plain = frame(kP2p, Bytes(40, 1));
  EXPECT_EQ(run({f[0], plain, f[1]}, reader, &n), FrameReader::Status::kForged);
  EXPECT_EQ(n, 1u);
}

TEST(WireTags, HelloOpensOnlyWithItsTag) {
  FrameMac c(key_of(7), Dir::kFromClient);
  const PeerHello h{kPeerMagic, 1, 3, 0};
  const Bytes sent = seal_hello(c, h);
  ASSERT_EQ(sent.size(), sizeof(h) + kTagBytes);
  Bytes hello;
  FrameMac s(key_of(7), Dir::kFromClient);
  ASSERT_TRUE(open_hello(s, sent.data(), sent.size(), sizeof(h), &hello));
  EXPECT_EQ(0, std::memcmp(hello.data(), &h, sizeof(h)));
  // The hello was message 0: the client's first frame is checked as message 1.
  FrameReader r(Link::kPeer, 3, s);
  const Bytes f = seal_frame(c, kP2p, "ab", 2);
  FrameReader::Status refused;
  EXPECT_EQ(feed_tagged(r, f, 64, &refused).size(), 1u);
  for (size_t i = 0; i < sent.size(); ++i) {
    Bytes bad = sent;
    bad[i] ^= 1;
    FrameMac fresh(key_of(7), Dir::kFromClient);
    EXPECT_FALSE(open_hello(fresh, bad.data(), bad.size(), sizeof(h), &hello)) << i;
  }
  FrameMac fresh(key_of(7), Dir::kFromClient);
  EXPECT_FALSE(open_hello(fresh, sent.data(), sent.size() - 1, sizeof(h), &hello));
}

TEST(WireHello, RankHello) {
  std::string why;
  EXPECT_TRUE(rank_hello_ok(rank_hello(1, 3), -1, &why)) << why;
  EXPECT_TRUE(rank_hello_ok(rank_hello(1, 3), 3, &why)) << why;
  RankHello h = rank_hello(1, 3);
  h.version = 9;
  EXPECT_FALSE(rank_hello_ok(h, 3, &why));
  EXPECT_NE(why.find("different mycoll version"), std::string::npos);
  EXPECT_FALSE(rank_hello_ok(rank_hello(3, 3), 3, &why));
  EXPECT_FALSE(rank_hello_ok(rank_hello(-1, 3), 3, &why));
  EXPECT_FALSE(rank_hello_ok(rank_hello(0, kMaxRanks + 1), -1, &why));
  EXPECT_FALSE(rank_hello_ok(rank_hello(1, 4), 3, &why));
  EXPECT_NE(why.find("nranks=4"), std::string::npos) << why;
  h = rank_hello(1, 3);
  h.addr[0] = h.addr[1] = 0x77;  // family neither IPv4 nor IPv6
  EXPECT_FALSE(rank_hello_ok(h, 3, &why));
  EXPECT_NE(why.find("listener address"), std::string::npos) << why;
  RankHello out;
  EXPECT_FALSE(
      parse_rank_hello(reinterpret_cast<const uint8_t*>(&h), sizeof(h) - 1, 3, &out, &why));
}

TEST(WireHello, PeerHello) {
  auto ok = [](PeerHello h, int nranks, int self, std::string* why) {
    PeerHello out;
    return parse_peer_hello(reinterpret_cast<const uint8_t*>(&h), sizeof(h), nranks, self, &out,
                            why);
  };
  std::string why;
  EXPECT_TRUE(ok(PeerHello{kPeerMagic, 1, 3, 0}, 3, 0, &why)) << why;
  EXPECT_FALSE(ok(PeerHello{kPeerMagic, 0, 3, 0}, 3, 0, &why));  // claims to be self
  EXPECT_FALSE(ok(PeerHello{kPeerMagic, 3, 3, 0}, 3, 0, &why));
  EXPECT_FALSE(ok(PeerHello{kPeerMagic, 1, 4, 0}, 3, 0, &why));
  EXPECT_FALSE(ok(PeerHello{kHelloMagic, 1, 3, 0}, 3, 0, &why));
  EXPECT_TRUE(ok(PeerHello{kPeerMagic, 1, 3, kHelloRescue}, 3, 0, &why)) << why;
  EXPECT_FALSE(ok(PeerHello{kPeerMagic, 1, 3, 2}, 3, 0, &why));  // no such flag
}

TEST(WireReport, RoundTripsAndRefusesWhatNoRankSends) {
  Report r;
  r.origin = 2;
  r.waits_for = {0, 3};
  r.text = "rank 2: no progress for 4 s (MYCOLL_TIMEOUT) while receiving from rank 3";
  Bytes b = encode_report(r);
  Report out;
  std::string why;
  ASSERT_TRUE(parse_report(b.data(), b.size(), 4, &out, &why)) << why;
  EXPECT_EQ(out.origin, 2);
  EXPECT_EQ(out.waits_for, (std::vector<int>{0, 3}));
  EXPECT_TRUE(out.also.empty());
  EXPECT_EQ(out.text, r.text);
  // A lost connection's report: the other unfinished transfers apart.
  r.waits_for = {0};
  r.also = {3, 1};
  r.text = "rank 2: connection to rank 0 closed";
  b = encode_report(r);
  ASSERT_TRUE(parse_report(b.data(), b.size(), 4, &out, &why)) << why;
  EXPECT_EQ(out.waits_for, (std::vector<int>{0}));
  EXPECT_EQ(out.also, (std::vector<int>{3, 1}));
  EXPECT_EQ(out.text, r.text);
  r.also.clear();
  // No waits, no text.
  r.waits_for.clear();
  r.text.clear();
  b = encode_report(r);
  ASSERT_TRUE(parse_report(b.data(), b.size(), 4, &out, &why)) << why;
  EXPECT_TRUE(out.waits_for.empty() && out.text.empty());
  // Each refused with a reason: short, origin out of range, a wait out of
  // range, on itself, twice, more waits than allowed or than bytes.
  auto refused = [&](const Bytes& bad, int nranks) {
    why.clear();
    const bool ok = parse_report(bad.data(), bad.size(), nranks, &out, &why);
    return !ok && !why.empty();
  };
  auto with = [](int32_t origin, std::vector<int32_t> waits, size_t nwait, size_t nalso = 0) {
    Bytes p;
    put(p, ReportHeader{origin, static_cast<uint16_t>(nwait), static_cast<uint16_t>(nalso)});
    for (int32_t w : waits) put(p, w);
    return p;
  };
  EXPECT_TRUE(refused(Bytes(sizeof(ReportHeader) - 1, 0), 4));
  EXPECT_TRUE(refused(with(4, {}, 0), 4));
  EXPECT_TRUE(refused(with(-1, {}, 0), 4));
  EXPECT_TRUE(refused(with(1, {4}, 1), 4));
  EXPECT_TRUE(refused(with(1, {1}, 1), 4));
  EXPECT_TRUE(refused(with(1, {2, 2}, 2), 4));
  EXPECT_TRUE(refused(with(1, {2}, 2), 4));
  EXPECT_TRUE(
      refused(with(1, std::vector<int32_t>(kMaxReportWaits + 1, 0), kMaxReportWaits + 1), 1 << 10));
  EXPECT_FALSE(refused(with(1, {0, 2}, 2), 4));
  // The other waits: valid, distinct, none of the waits, at most as many.
  EXPECT_FALSE(refused(with(1, {0, 2, 3}, 1, 2), 4));
  EXPECT_TRUE(refused(with(1, {0, 0}, 1, 1), 4));
  EXPECT_TRUE(refused(with(1, {0, 1}, 1, 1), 4));
  EXPECT_TRUE(refused(with(1, {0, 4}, 1, 1), 4));
  EXPECT_TRUE(refused(with(1, {0, 2}, 1, 2), 4));
  EXPECT_TRUE(refused(with(1, std::vector<int32_t>(kMaxReportWaits + 1, 0), 0, kMaxReportWaits + 1),
                      1 << 10));
}

TEST(WireAuth, ServerHelloAndClientProof) {
  Bytes hello;
  put(hello, uint32_t{0x4155594d});
  put(hello, uint32_t{1});
  hello.insert(hello.end(), 16, 3);
  const uint8_t* nonce = nullptr;
  EXPECT_TRUE(net::parse_server_hello(hello.data(), hello.size(), &nonce));
  EXPECT_EQ(nonce, hello.data() + 8);
  hello[4] = 2;  // version
  EXPECT_FALSE(net::parse_server_hello(hello.data(), hello.size(), &nonce));
  EXPECT_FALSE(net::parse_server_hello(hello.data(), hello.size() - 1, &nonce));

  Secret secret;
  secret.fill(1);
  uint8_t nonce_s[16] = {};
  Bytes proof;
  put(proof, uint32_t{0x5055594d});
  proof.insert(proof.end(), 48, 0);
  EXPECT_EQ(net::check_client_proof(proof.data(), proof.size(), secret, "r", nonce_s),
            net::ProofCheck::kWrongSecret);
  proof[0] ^= 1;
  EXPECT_EQ(net::check_client_proof(proof.data(), proof.size(), secret, "r", nonce_s),
            net::ProofCheck::kGarbage);
  EXPECT_EQ(net::check_client_proof(proof.data(), 3, secret, "r", nonce_s),
            net::ProofCheck::kGarbage);
}

TEST(WireUniqueId, GarbageIsAnInvalidArgument) {
  mycollUniqueId id;
  std::memset(&id, 0x41, sizeof(id));
  try {
    unpack_unique_id(id);
    FAIL() << "accepted garbage";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidArgument);
  }
}

// ---- host engine header records

MsgHeader want_header() {
  return collective_header(Coll::AllReduce, mycollFloat32, mycollSum, 0, 4, 16, 5);
}

Bytes record(const MsgHeader& h, const Bytes& payload) {
  Bytes b;
  put(b, h);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

TEST(WireRecord, InlineStreamedRemote) {
  const MsgHeader want = want_header();
  MsgRecord r;
  Bytes b = record(want, Bytes(16, 1));
  ASSERT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kNone);
  EXPECT_EQ(r.payload, MsgRecord::Payload::kInline);
  EXPECT_EQ(r.data, reinterpret_cast<const char*>(b.data()) + sizeof(MsgHeader));
  b = record(want, {});
  ASSERT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kNone);
  EXPECT_EQ(r.payload, MsgRecord::Payload::kStreamed);
  MsgHeader h = want;
  h.pad = kPayloadRemote;
  Bytes addr;
  put(addr, uint64_t{0x1000});
  b = record(h, addr);
  ASSERT_EQ(parse_msg_record(b.data(), b.size(), want, true, &r), RecordError::kNone);
  EXPECT_EQ(r.payload, MsgRecord::Payload::kRemote);
  EXPECT_EQ(r.remote_addr, 0x1000u);
  EXPECT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kRemoteHere);
}

TEST(WireRecord, Refused) {
  const MsgHeader want = want_header();
  MsgRecord r;
  Bytes b = record(want, Bytes(15, 1));
  EXPECT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kPayloadBytes);
  EXPECT_EQ(parse_msg_record(b.data(), sizeof(MsgHeader) - 1, want, false, &r),
            RecordError::kShort);
  MsgHeader h = want;
  h.pad = 7;
  b = record(h, {});
  EXPECT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kPayloadMode);
  h = want;
  h.op = mycollMax;
  b = record(h, {});
  ASSERT_EQ(parse_msg_record(b.data(), b.size(), want, false, &r), RecordError::kMismatch);
  try {
    throw_record_error(RecordError::kMismatch, r, b.size(), want, 1, "allreduce on rank 0");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("op max (this rank: sum)"), std::string::npos) << e.what();
  }
  try {
    throw_record_error(RecordError::kPayloadBytes, r, sizeof(MsgHeader) + 15, want, 1, "x");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollRemoteError);
    EXPECT_NE(std::string(e.what()).find("15 payload bytes for a message of 16"), std::string::npos)
        << e.what();
  }
}

// ---- the collective header's fields per collective

// A header carries the op only where the collective reduces and the root
// only where it is rooted (written out here, not taken from plan.h), and
// the engine's check of a received header's collective byte says "reduces"
// for exactly the three reducing collectives, whatever byte arrives.
TEST(WireHeader, OpAndRootOnlyWhereTheCollectiveHasThem) {
  const Coll reducing[] = {Coll::AllReduce, Coll::Reduce, Coll::ReduceScatter};
  const Coll rooted[] = {Coll::Broadcast, Coll::Reduce, Coll::Scatter, Coll::Gather};
  auto in = [](Coll c, const auto& set) {
    return std::find(std::begin(set), std::end(set), c) != std::end(set);
  };
  for (int b = 0; b < kNumColls; ++b) {
    const Coll c = static_cast<Coll>(b);
    const MsgHeader h = collective_header(c, mycollFloat32, mycollMax, 3, 7, 28, 9);
    EXPECT_EQ(h.op, in(c, reducing) ? static_cast<uint8_t>(mycollMax) : kNone) << coll_name(c);
    EXPECT_EQ(h.root, in(c, rooted) ? 3 : -1) << coll_name(c);
    EXPECT_EQ(h.coll, b);
    EXPECT_EQ(h.count, 7u);
    EXPECT_EQ(h.bytes, 28u);
    EXPECT_EQ(h.seq, 9u);
  }
  for (int b = 0; b < 256; ++b) {
    const bool want = b < kNumColls && in(static_cast<Coll>(b), reducing);
    EXPECT_EQ(header_coll_reduces(static_cast<uint8_t>(b)), want) << "byte " << b;
  }
}

// Which messages a sender offers as remote reads, from what size: never a
// reduction's, a gather's only with MYCOLL_SHM_READ_BYTES given, an
// all-to-all's from its own threshold, the rest (send/recv's too, and
// bytes that name no collective) from shm_read_bytes.
TEST(Wire, SingleCopyThresholdPerCollective) {
  Config cfg;
  cfg.shm_read_bytes = 1u << 20;
  cfg.shm_read_bytes_alltoall = 128u << 10;
  for (bool given : {false, true}) {
    cfg.shm_read_bytes_set = given;
    for (int b = 0; b < 256; ++b) {
      const auto c = static_cast<Coll>(b);
      size_t want = cfg.shm_read_bytes;
      if (b < kNumColls && coll_reduces(c))
        want = 0;
      else if (b < kNumColls && c == Coll::Gather)
        want = given ? cfg.shm_read_bytes : 0;
      else if (b < kNumColls && c == Coll::AllToAll)
        want = cfg.shm_read_bytes_alltoall;
      EXPECT_EQ(single_copy_min_bytes(cfg, static_cast<uint8_t>(b)), want)
          << "byte " << b << (given ? ", given" : "");
    }
  }
}

// ---- the GPU path's call signature (kernels/prims/call_check.cuh)

// Every collective's signature round-trips to the fields the kernels
// compare, is never 0 (0 = unchecked), and any one field changed changes it.
TEST(GpuCallSig, RoundTripsNeverZeroAndSeesEveryField) {
  const Coll colls[] = {Coll::AllReduce,     Coll::Broadcast, Coll::Reduce,  Coll::AllGather,
                        Coll::ReduceScatter, Coll::AllToAll,  Coll::Scatter, Coll::Gather};
  int checked = 0;
  for (Coll c : colls)
    for (int t = 0; t < mycollNumTypes; ++t)
      for (int op = 0; op < mycollNumOps; ++op)
        for (int root : {0, 5, 65534})
          for (size_t count : {size_t(1), size_t(1001), size_t(1) << 31, (size_t(1) << 32) - 1}) {
            const auto dt = static_cast<mycollDataType_t>(t);
            const auto o = static_cast<mycollRedOp_t>(op);
            const MsgHeader h = collective_header(c, dt, o, root, count, 0, 0);
            const uint64_t sig = gpu_call_sig(h);
            ASSERT_NE(sig, 0u) << coll_name(c);
            const MsgHeader back = gpu_call_header(sig);
            EXPECT_TRUE(header_matches(back, h)) << coll_name(c) << " " << t << " " << op;
            // One field different: another signature.
            EXPECT_NE(gpu_call_sig(collective_header(c, dt, o, root, count + 1, 0, 0)), sig);
            EXPECT_NE(gpu_call_sig(collective_header(
                          c, static_cast<mycollDataType_t>((t + 1) % mycollNumTypes), o, root,
                          count, 0, 0)),
                      sig);
            if (coll_reduces(c))
              EXPECT_NE(gpu_call_sig(collective_header(
                            c, dt, static_cast<mycollRedOp_t>((op + 1) % mycollNumOps), root, count,
                            0, 0)),
                        sig);
            if (coll_is_rooted(c))
              EXPECT_NE(gpu_call_sig(collective_header(c, dt, o, root + 1, count, 0, 0)), sig);
            for (Coll d : colls)
              if (d != c)
                EXPECT_NE(gpu_call_sig(collective_header(d, dt, o, root, count, 0, 0)), sig);
            ++checked;
          }
  EXPECT_EQ(checked, 8 * mycollNumTypes * mycollNumOps * 3 * 4);
}

// What the host says when a kernel recorded a mismatch: both calls, the
// field that differs, the peer.
TEST(GpuCallSig, MismatchMessageNamesPeerAndField) {
  // The message through the signatures, from the two calls' fields.
  auto message = [](Coll c, mycollDataType_t t, mycollRedOp_t theirs_op, int theirs_root,
                    mycollRedOp_t mine_op, int mine_root, size_t count, int peer) {
    const uint64_t theirs =
        gpu_call_sig(collective_header(c, t, theirs_op, theirs_root, count, 0, 0));
    const uint64_t mine = gpu_call_sig(collective_header(c, t, mine_op, mine_root, count, 0, 0));
    return header_mismatch_message(gpu_call_header(theirs), gpu_call_header(mine), peer,
                                   "rank 0: GPU");
  };
  const std::string m =
      message(Coll::AllReduce, mycollFloat32, mycollMax, 0, mycollSum, 0, 1001, 3);
  EXPECT_NE(m.find("mismatch with rank 3"), std::string::npos) << m;
  EXPECT_NE(m.find("op max (this rank: sum)"), std::string::npos) << m;
  EXPECT_EQ(m.find("count"), std::string::npos) << m;
  const std::string r = message(Coll::Broadcast, mycollInt8, mycollSum, 1, mycollSum, 0, 7, 1);
  EXPECT_NE(r.find("root 1 (this rank: 0)"), std::string::npos) << r;
}

// A GPU send/recv size mismatch (kernels/prims/p2p_size.cuh): the
// receiver names the sender and both sizes; the sender names the receiver,
// its receive's size and its own send where it knows it.
TEST(GpuP2pSize, MismatchMessageNamesPeerAndBothSizes) {
  const std::string r = p2p_size_mismatch_message(1, 0, false, 4000, 8000);
  EXPECT_EQ(r.rfind("rank 1: GPU receive from rank 0: mismatch with rank 0,", 0), 0u) << r;
  EXPECT_NE(r.find("message bytes 8000 (this rank: 4000)"), std::string::npos) << r;
  const std::string s = p2p_size_mismatch_message(0, 1, true, 8000, 4000);
  EXPECT_EQ(s.rfind("rank 0: GPU send of 8000 bytes to rank 1: mismatch with rank 1,", 0), 0u) << s;
  EXPECT_NE(s.find("receive of message bytes 4000"), std::string::npos) << s;
  const std::string k = p2p_size_mismatch_message(2, 3, true, 0, 12);
  EXPECT_EQ(k.rfind("rank 2: GPU kernel sending to rank 3: mismatch with rank 3,", 0), 0u) << k;
  EXPECT_EQ(k.find("send of"), std::string::npos) << k;
}

// ---- the fuzz target's corpus

TEST(WireFuzzCorpus, EveryCommittedInputRunsClean) {
  const std::string dir = std::string(MYCOLL_SOURCE_DIR) + "/tests/fuzz/corpus/wire";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name, std::ios::binary);
    Bytes b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    SCOPED_TRACE(e->d_name);
    EXPECT_EQ(LLVMFuzzerTestOneInput(b.data(), b.size()), 0);
    ++n;
  }
  closedir(d);
  EXPECT_GE(n, 10);
}

}  // namespace
}  // namespace mycoll
