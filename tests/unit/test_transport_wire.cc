// The decoders of what transports receive from their peers (socket_wire.h,
// ucx_wire.h, ib_wire.h, shm_wire.h, proxy_wire.h, check_peer_info): valid
// input decoded, and each rule refusing a hand-made malformed message with
// its code and a reason naming what is wrong. Also checks that the wire
// fuzz target's committed corpus has a seed for every transport input.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "engine/proxy_wire.h"
#include "fuzz_wire.h"
#include "transports/ibverbs/ib_wire.h"
#include "transports/shm/shm.h"
#include "transports/socket/socket_wire.h"
#include "transports/transport.h"
#include "transports/ucx/ucx_wire.h"

namespace mycoll {
namespace {

// Expects `why` to contain `part`.
#define EXPECT_WHY(why, part) \
  EXPECT_NE((why).find(part), std::string::npos) << "reason: " << (why) << "\nexpected: " << (part)

// ---- socket

TEST(SocketWire, EndpointRoundTrip) {
  const net::SockAddr a = net::SockAddr::from_ip("127.0.0.1", 40001);
  const sockwire::Endpoint e = sockwire::encode_endpoint(&a);
  bool listens = false;
  net::SockAddr got;
  std::string why;
  ASSERT_EQ(sockwire::decode_endpoint(&e, sizeof(e), 1, &listens, &got, &why), mycollSuccess)
      << why;
  EXPECT_TRUE(listens);
  EXPECT_EQ(got.str(), "127.0.0.1:40001");

  const net::SockAddr v6 = net::SockAddr::from_ip("fd00::2", 5);
  const sockwire::Endpoint e6 = sockwire::encode_endpoint(&v6);
  ASSERT_EQ(sockwire::decode_endpoint(&e6, sizeof(e6), 1, &listens, &got, &why), mycollSuccess);
  EXPECT_EQ(got.str(), "[fd00::2]:5");

  const sockwire::Endpoint none = sockwire::encode_endpoint(nullptr);
  ASSERT_EQ(sockwire::decode_endpoint(&none, sizeof(none), 2, &listens, &got, &why), mycollSuccess);
  EXPECT_FALSE(listens);
}

TEST(SocketWire, EndpointRefusals) {
  const net::SockAddr a = net::SockAddr::from_ip("127.0.0.1", 40001);
  bool listens = false;
  net::SockAddr got;
  auto refuse = [&](const sockwire::Endpoint& e, size_t n, const std::string& part) {
    std::string why;
    EXPECT_EQ(sockwire::decode_endpoint(&e, n, 3, &listens, &got, &why), mycollRemoteError);
    EXPECT_WHY(why, "endpoint of rank 3");
    EXPECT_WHY(why, part);
  };
  sockwire::Endpoint e = sockwire::encode_endpoint(&a);
  refuse(e, sizeof(e) - 1,
         std::to_string(sizeof(e) - 1) + " bytes, not " + std::to_string(sizeof(e)));
  e.valid = 7;
  refuse(e, sizeof(e), "bad 'valid' flag 7");
  e = sockwire::encode_endpoint(&a);
  const uint16_t unix_family = AF_UNIX;
  std::memcpy(e.addr, &unix_family, sizeof(unix_family));
  refuse(e, sizeof(e), "address family 1 is neither IPv4 nor IPv6");
  const net::SockAddr zero = net::SockAddr::from_ip("127.0.0.1", 0);
  e = sockwire::encode_endpoint(&zero);
  refuse(e, sizeof(e), "has port 0");
}

TEST(SocketWire, AnnounceRoundTripAndRefusals) {
  int rank = -1;
  std::string why;
  sockwire::Announce a = sockwire::encode_announce(2);
  ASSERT_EQ(sockwire::decode_announce(&a, sizeof(a), 4, 0, &rank, &why), mycollSuccess) << why;
  EXPECT_EQ(rank, 2);

  EXPECT_EQ(sockwire::decode_announce(&a, 7, 4, 0, &rank, &why), mycollRemoteError);
  EXPECT_WHY(why, "announcement of 7 bytes, not 8");
  a.magic ^= 1;
  EXPECT_EQ(sockwire::decode_announce(&a, sizeof(a), 4, 0, &rank, &why), mycollRemoteError);
  EXPECT_WHY(why, "bad magic");
  for (int bad : {-1, 4, 1 << 30}) {
    a = sockwire::encode_announce(bad);
    EXPECT_EQ(sockwire::decode_announce(&a, sizeof(a), 4, 0, &rank, &why), mycollRemoteError);
    EXPECT_WHY(why, "claims rank " + std::to_string(bad) + " of 4");
  }
  a = sockwire::encode_announce(0);
  EXPECT_EQ(sockwire::decode_announce(&a, sizeof(a), 4, 0, &rank, &why), mycollRemoteError);
  EXPECT_WHY(why, "claims rank 0 (this rank's own)");
}

// ---- ucx

TEST(UcxWire, AddressLengths) {
  std::vector<ucxwire::AddrInfo> info{{212, 65536}, {0, 65536}, {300, 65536}};
  uint64_t max_len = 0;
  std::string why;
  ASSERT_EQ(ucxwire::check_addr_lengths(info.data(), 3, &max_len, &why), mycollSuccess) << why;
  EXPECT_EQ(max_len, 300u);

  info[1].len = ucxwire::kMaxAddressBytes + 1;
  EXPECT_EQ(ucxwire::check_addr_lengths(info.data(), 3, &max_len, &why), mycollRemoteError);
  EXPECT_WHY(why, "rank 1 announces a worker address of 65537 bytes (at most 65536)");
  info[1].len = ~0ull;  // would be a table of 2^64 x 3 bytes
  EXPECT_EQ(ucxwire::check_addr_lengths(info.data(), 3, &max_len, &why), mycollRemoteError);

  // Each length plausible, the table too large.
  std::vector<ucxwire::AddrInfo> many(1 << 15, ucxwire::AddrInfo{ucxwire::kMaxAddressBytes, 1});
  EXPECT_EQ(ucxwire::check_addr_lengths(many.data(), static_cast<int>(many.size()), &max_len, &why),
            mycollInvalidUsage);
  EXPECT_WHY(why, "worker address table of 32768 ranks x 65536 bytes exceeds");
}

TEST(UcxWire, PeerAddress) {
  std::string why;
  EXPECT_EQ(ucxwire::check_peer_addr({212, 65536}, 2, 0, 65536, &why), mycollSuccess);
  EXPECT_EQ(ucxwire::check_peer_addr({0, 65536}, 2, 0, 65536, &why), mycollInvalidUsage);
  EXPECT_WHY(why, "rank 0 lists rank 2 as a peer but that rank has no UCX peers");
  EXPECT_EQ(ucxwire::check_peer_addr({212, 4096}, 2, 0, 65536, &why), mycollInvalidUsage);
  EXPECT_WHY(why, "MYCOLL_UCX_CHUNK_BYTES differs: 65536 on rank 0, 4096 on rank 2");
}

TEST(UcxWire, Hello) {
  const uint64_t tag = 0xfeedull;
  uint64_t h[2];
  ucxwire::encode_hello(tag, 3, h);
  std::string why;
  EXPECT_EQ(ucxwire::check_hello(h, sizeof(h), tag, 3, 0, &why), mycollSuccess) << why;
  EXPECT_EQ(ucxwire::check_hello(h, 8, tag, 3, 0, &why), mycollRemoteError);
  EXPECT_WHY(why, "rank 0 got a bad hello from rank 3 (8 bytes, not 16)");
  EXPECT_EQ(ucxwire::check_hello(h, sizeof(h), tag, 2, 0, &why), mycollRemoteError);
  EXPECT_WHY(why, "(another communicator?)");
  EXPECT_EQ(ucxwire::check_hello(h, sizeof(h), tag + 1, 3, 0, &why), mycollRemoteError);
  h[0] = 0;
  EXPECT_EQ(ucxwire::check_hello(h, sizeof(h), tag, 3, 0, &why), mycollRemoteError);
  EXPECT_WHY(why, "(bad magic)");
}

TEST(UcxWire, DataAndCreditMessages) {
  std::string why;
  EXPECT_EQ(ucxwire::check_data_message(5, ucxwire::kCreditBytes + 1, &why), mycollSuccess);
  EXPECT_EQ(ucxwire::check_data_message(7, ucxwire::kCreditBytes, &why), mycollRemoteError);
  EXPECT_WHY(why, "message 7 of 8 bytes: no data after its credit (protocol violation)");
  EXPECT_EQ(ucxwire::check_data_message(9, 0, &why), mycollRemoteError);
  EXPECT_WHY(why, "message 9 of 0 bytes");
  EXPECT_EQ(ucxwire::check_credit_message(ucxwire::kCreditBytes, &why), mycollSuccess);
  for (uint64_t len : {0ull, 4ull, 9ull, 16ull}) {
    EXPECT_EQ(ucxwire::check_credit_message(len, &why), mycollRemoteError) << len;
    EXPECT_WHY(why, "credit message of " + std::to_string(len) + " bytes (protocol violation)");
  }
}

TEST(UcxWire, CreditsOnlyGrowAndNeverPassWhatWasSent) {
  std::string why;
  uint64_t credit = 3;
  auto take = [&](uint64_t count, uint64_t sent) {
    unsigned char word[ucxwire::kCreditBytes];
    std::memcpy(word, &count, sizeof(word));
    return ucxwire::take_credit(word, sent, &credit, &why);
  };
  EXPECT_EQ(take(5, 8), mycollSuccess);
  EXPECT_EQ(credit, 5u);
  EXPECT_EQ(take(4, 8), mycollSuccess);  // an older count, arriving late: ignored
  EXPECT_EQ(credit, 5u);
  EXPECT_EQ(take(8, 8), mycollSuccess);  // everything consumed
  EXPECT_EQ(credit, 8u);
  EXPECT_EQ(take(9, 8), mycollRemoteError);
  EXPECT_WHY(why, "credit of 9 messages consumed, of 8 sent (protocol violation)");
  EXPECT_EQ(credit, 8u);  // a refused credit changes nothing
  EXPECT_EQ(take(~0ull, 8), mycollRemoteError);
  EXPECT_EQ(credit, 8u);
}

TEST(UcxWire, SendRoomAndCreditDue) {
  // A window of 8: 8 messages in flight at most.
  EXPECT_EQ(ucxwire::send_room(0, 0, 8), 8u);
  EXPECT_EQ(ucxwire::send_room(5, 0, 8), 3u);
  EXPECT_EQ(ucxwire::send_room(8, 0, 8), 0u);
  EXPECT_EQ(ucxwire::send_room(12, 5, 8), 1u);
  EXPECT_EQ(ucxwire::send_room(13, 5, 8), 0u);
  // Counters past 2^64 wrap like the connection's: the difference counts.
  EXPECT_EQ(ucxwire::send_room(2, ~0ull - 1, 8), 4u);  // 4 in flight
  EXPECT_EQ(ucxwire::send_room(3, 3, 0), 0u);
  EXPECT_EQ(ucxwire::send_room(3, 3, -1), 0u);
  // A credit message after three quarters of a window untold (6 of 8).
  EXPECT_FALSE(ucxwire::credit_due(5, 0, 8));
  EXPECT_TRUE(ucxwire::credit_due(6, 0, 8));
  EXPECT_FALSE(ucxwire::credit_due(105, 100, 8));
  EXPECT_TRUE(ucxwire::credit_due(106, 100, 8));
  // A window of 1: after every message (at least one untold); of 2: after two.
  EXPECT_FALSE(ucxwire::credit_due(4, 4, 1));
  EXPECT_TRUE(ucxwire::credit_due(5, 4, 1));
  EXPECT_FALSE(ucxwire::credit_due(5, 4, 2));
  EXPECT_TRUE(ucxwire::credit_due(6, 4, 2));
}

// ---- ibverbs

ibwire::ConnInfo valid_conn_info(bool roce) {
  ibwire::ConnInfo w;
  std::memset(&w, 0, sizeof(w));
  w.valid = 1;
  w.qpn = 0x1a2b;
  w.psn = 0x3c4d5e;
  w.lid = roce ? 0 : 7;
  w.roce = roce;
  w.mtu = 3;
  w.ring_addr = 0x7f0000000000ull;
  w.ring_bytes = 4u << 20;
  w.ctrl_addr = 0x7f0000800000ull;
  w.pid = 4242;
  return w;
}

TEST(IbWire, ConnInfoValid) {
  std::string why;
  for (bool roce : {true, false})
    EXPECT_EQ(ibwire::check_conn_info(valid_conn_info(roce), 1, 0, roce, &why), mycollSuccess)
        << why;
  ibwire::ConnInfo w = valid_conn_info(true);
  std::memset(w.boot_id, 'x', sizeof(w.boot_id));  // no NUL: read with strnlen, fine
  EXPECT_EQ(ibwire::check_conn_info(w, 1, 0, true, &why), mycollSuccess);
}

TEST(IbWire, ConnInfoRefusals) {
  struct Case {
    const char* what;
    void (*change)(ibwire::ConnInfo&);
    mycollResult_t code;
    const char* why;
  };
  const Case cases[] = {
      {"failed", [](ibwire::ConnInfo& w) { w.failed = 1; }, mycollRemoteError,
       "rank 1 failed to set up its RDMA device"},
      {"failed flag", [](ibwire::ConnInfo& w) { w.failed = 9; }, mycollRemoteError,
       "failed flag 9"},
      {"no QP", [](ibwire::ConnInfo& w) { w.valid = 0; }, mycollInvalidUsage,
       "asymmetric peer lists"},
      {"valid flag", [](ibwire::ConnInfo& w) { w.valid = 2; }, mycollRemoteError, "valid flag 2"},
      {"QP 0", [](ibwire::ConnInfo& w) { w.qpn = 0; }, mycollRemoteError, "QP number 0"},
      {"QP 25 bits", [](ibwire::ConnInfo& w) { w.qpn = 1u << 24; }, mycollRemoteError,
       "QP number 16777216"},
      {"PSN", [](ibwire::ConnInfo& w) { w.psn = 1u << 24; }, mycollRemoteError, "PSN 16777216"},
      {"MTU 0", [](ibwire::ConnInfo& w) { w.mtu = 0; }, mycollRemoteError, "MTU code 0"},
      {"MTU 6", [](ibwire::ConnInfo& w) { w.mtu = 6; }, mycollRemoteError, "MTU code 6"},
      {"RoCE flag", [](ibwire::ConnInfo& w) { w.roce = 2; }, mycollRemoteError, "RoCE flag 2"},
      {"IB peer", [](ibwire::ConnInfo& w) { w.roce = 0; }, mycollInvalidUsage,
       "link layers differ"},
      {"empty ring", [](ibwire::ConnInfo& w) { w.ring_bytes = 0; }, mycollRemoteError,
       "ring of 0 bytes"},
      {"odd ring", [](ibwire::ConnInfo& w) { w.ring_bytes = 5000; }, mycollRemoteError,
       "ring of 5000 bytes"},
      {"huge ring", [](ibwire::ConnInfo& w) { w.ring_bytes = 1ull << 40; }, mycollRemoteError,
       "ring of 1099511627776 bytes"},
      {"ring wraps", [](ibwire::ConnInfo& w) { w.ring_addr = ~0ull - 4095; }, mycollRemoteError,
       "ring address"},
      {"no ring", [](ibwire::ConnInfo& w) { w.ring_addr = 0; }, mycollRemoteError,
       "ring address 0"},
      {"no control block", [](ibwire::ConnInfo& w) { w.ctrl_addr = 0; }, mycollRemoteError,
       "control block address 0"},
      {"pid", [](ibwire::ConnInfo& w) { w.pid = -5; }, mycollRemoteError, "pid -5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ibwire::ConnInfo w = valid_conn_info(true);
    c.change(w);
    std::string why;
    EXPECT_EQ(ibwire::check_conn_info(w, 1, 0, true, &why), c.code);
    EXPECT_WHY(why, c.why);
  }
  // InfiniBand needs a unicast LID.
  for (uint16_t lid : {0, 0xc000, 0xffff}) {
    ibwire::ConnInfo w = valid_conn_info(false);
    w.lid = lid;
    std::string why;
    EXPECT_EQ(ibwire::check_conn_info(w, 1, 0, false, &why), mycollRemoteError);
    EXPECT_WHY(why, "LID " + std::to_string(lid));
  }
}

TEST(IbWire, Arrivals) {
  const uint64_t R = 8192;
  std::string why;
  EXPECT_EQ(ibwire::check_arrival(0, 0, R, 8192, 1, &why), mycollSuccess);
  EXPECT_EQ(ibwire::check_arrival(8192, 4096, R, 4096, 1, &why), mycollSuccess);
  EXPECT_EQ(ibwire::check_arrival(8192, 4096, R, 4097, 1, &why), mycollRemoteError);
  EXPECT_WHY(why, "rank 1 wrote 4097 bytes into a ring of 8192 holding 4096 unread");
  // Larger than any write, whatever the ring.
  EXPECT_EQ(ibwire::check_arrival(0, 0, 1ull << 30, (256u << 10) + 1, 1, &why), mycollRemoteError);
  // The maximum immediate cannot wrap the count past the ring.
  EXPECT_EQ(ibwire::check_arrival(100, 0, R, 0xffffffffu, 1, &why), mycollRemoteError);
}

TEST(IbWire, Credits) {
  std::string why;
  EXPECT_EQ(ibwire::check_credit(0, 0, 0, 1, &why), mycollSuccess);
  EXPECT_EQ(ibwire::check_credit(100, 300, 300, 1, &why), mycollSuccess);
  EXPECT_EQ(ibwire::check_credit(100, 301, 300, 1, &why), mycollRemoteError);
  EXPECT_WHY(why, "rank 1 reports 301 bytes consumed, after 100, of 300 sent");
  EXPECT_WHY(why, "corrupt credit");
  // Below the last one seen: not a violation (the caller keeps the larger
  // credit); torn reads no longer get here, they fail the seal.
  EXPECT_EQ(ibwire::check_credit(100, 99, 300, 1, &why), mycollSuccess);
}

// Every byte-wise mix of two sealed credits (each of the 16 bytes from the
// old write or the new one, as a read racing the adapter can see them) that
// unseals is one of the two credits, never a third count: in particular never
// one larger than the new credit, which would let the sender overwrite bytes
// the receiver has not read.
TEST(IbWire, SealedCreditsRefuseEveryTornMix) {
  std::vector<std::pair<uint64_t, uint64_t>> pairs = {
      {0, 1},
      {0xff, 0x100},
      {0x6a0000, 0x6a8034},
      {6946816, 6979764},
      {0xffff, 0x10000},
      {(1ull << 32) - 1, 1ull << 32},
      {0x00ffffffffffffffull, 0x0100000000000000ull}};
  uint64_t x = 0x1234567;
  for (int i = 0; i < 40; ++i) {  // credits of a real run: growing by up to a ring
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t old_count = (x >> 20) & ((1ull << 40) - 1);
    pairs.push_back({old_count, old_count + 1 + (x & 0xfffff)});
  }
  size_t accepted_mixes = 0;
  for (const auto& [old_count, new_count] : pairs) {
    const ibwire::SealedCredit a = ibwire::seal_credit(old_count);
    const ibwire::SealedCredit b = ibwire::seal_credit(new_count);
    ASSERT_TRUE(ibwire::unseal_credit(a.count, a.seal));
    ASSERT_TRUE(ibwire::unseal_credit(b.count, b.seal));
    unsigned char ab[2][16];
    std::memcpy(ab[0], &a.count, 8), std::memcpy(ab[0] + 8, &a.seal, 8);
    std::memcpy(ab[1], &b.count, 8), std::memcpy(ab[1] + 8, &b.seal, 8);
    for (uint32_t pick = 0; pick < (1u << 16); ++pick) {
      unsigned char m[16];
      for (int j = 0; j < 16; ++j) m[j] = ab[(pick >> j) & 1][j];
      uint64_t count, seal;
      std::memcpy(&count, m, 8), std::memcpy(&seal, m + 8, 8);
      if (!ibwire::unseal_credit(count, seal)) continue;
      ++accepted_mixes;
      ASSERT_TRUE(count == old_count || count == new_count)
          << "mix " << pick << " of credits " << old_count << " and " << new_count
          << " unsealed as " << count;
    }
  }
  EXPECT_GE(accepted_mixes, 2 * pairs.size());  // at least the two whole credits
  // A control block nobody wrote yet (zeros) holds no credit.
  EXPECT_FALSE(ibwire::unseal_credit(0, 0));
}

// ---- shm

shm::FifoGeometry created_geometry(uint64_t cap, uint64_t* map_bytes) {
  const shm::RecordGeometry geo = shm::record_geometry(cap);
  shm::FifoGeometry g;
  g.magic = shm::kFifoMagic;
  g.capacity = cap;
  g.rec_slots = geo.slots;
  g.rec_slot_bytes = geo.slot_bytes;
  g.rec_offset = shm::kFifoDataOffset + cap;
  *map_bytes = g.rec_offset + uint64_t{geo.slots} * geo.slot_bytes;
  return g;
}

TEST(ShmWire, FifoGeometry) {
  uint64_t map = 0;
  const shm::FifoGeometry ok = created_geometry(1 << 20, &map);
  std::string why;
  ASSERT_EQ(shm::check_fifo_geometry(ok, map, &why), mycollSuccess) << why;
  shm::FifoGeometry no_records = ok;
  no_records.rec_slots = 0;
  EXPECT_EQ(shm::check_fifo_geometry(no_records, map, &why), mycollSuccess);

  struct Case {
    const char* what;
    void (*change)(shm::FifoGeometry&);
    const char* why;
  };
  const Case cases[] = {
      {"magic", [](shm::FifoGeometry& g) { g.magic = 0; }, "bad magic"},
      {"empty ring", [](shm::FifoGeometry& g) { g.capacity = 0; }, "data ring of 0 bytes"},
      {"odd ring", [](shm::FifoGeometry& g) { g.capacity = 5000; }, "data ring of 5000 bytes"},
      {"ring past the end", [](shm::FifoGeometry& g) { g.capacity = 1ull << 40; },
       "data ring of 1099511627776 bytes"},
      {"slots", [](shm::FifoGeometry& g) { g.rec_slots = 3; },
       "3 record slots, not a power of two"},
      {"small slots", [](shm::FifoGeometry& g) { g.rec_slot_bytes = 32; },
       "record slots of 32 bytes"},
      {"odd slots", [](shm::FifoGeometry& g) { g.rec_slot_bytes = 100; },
       "record slots of 100 bytes"},
      {"huge slots", [](shm::FifoGeometry& g) { g.rec_slot_bytes = 1u << 17; },
       "record slots of 131072 bytes"},
      {"slots in the ring", [](shm::FifoGeometry& g) { g.rec_offset = shm::kFifoDataOffset; },
       "record slots at offset 4096"},
      {"slots misaligned", [](shm::FifoGeometry& g) { g.rec_offset += 8; },
       "record slots at offset"},
      {"slots past the end", [](shm::FifoGeometry& g) { g.rec_slots *= 2; },
       "record slots at offset"},
      {"offset wraps", [](shm::FifoGeometry& g) { g.rec_offset = ~0ull - 63; },
       "record slots at offset"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    shm::FifoGeometry g = ok;
    c.change(g);
    EXPECT_EQ(shm::check_fifo_geometry(g, map, &why), mycollSystemError);
    EXPECT_WHY(why, "not an initialised mycoll FIFO");
    EXPECT_WHY(why, c.why);
  }
  EXPECT_EQ(shm::check_fifo_geometry(ok, 100, &why), mycollSystemError);
  EXPECT_WHY(why, "too small");
}

TEST(ShmWire, PeerCounters) {
  std::string why;
  EXPECT_EQ(shm::check_peer_counter("head", 10, 10, 20, 1, &why), mycollSuccess);
  EXPECT_EQ(shm::check_peer_counter("head", 10, 20, 20, 1, &why), mycollSuccess);
  EXPECT_EQ(shm::check_peer_counter("head", 10, 21, 20, 1, &why), mycollRemoteError);
  EXPECT_WHY(why, "shm: corrupt FIFO from rank 1: its head reads 21, beyond 20");
  EXPECT_EQ(shm::check_peer_counter("tail", 10, 9, 20, 1, &why), mycollRemoteError);
  EXPECT_WHY(why, "its tail reads 9, back from 10");
  EXPECT_EQ(shm::check_peer_counter("record tail", 0, ~0ull, 5, 1, &why), mycollRemoteError);
  EXPECT_WHY(why, "its record tail reads 18446744073709551615");
}

TEST(ShmWire, RecordWords) {
  const uint32_t S = 16, B = 512;
  size_t len = 99;
  std::string why;
  // Not yet: an empty slot, or the slot's previous lap.
  EXPECT_EQ(shm::decode_record_word(0, 3, S, B, &len, 1, &why), mycollSuccess);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(shm::decode_record_word(shm::record_word(4, 100), 20, S, B, &len, 1, &why),
            mycollSuccess);
  EXPECT_EQ(len, 0u);
  // The record expected.
  EXPECT_EQ(shm::decode_record_word(shm::record_word(20, 504), 20, S, B, &len, 1, &why),
            mycollSuccess);
  EXPECT_EQ(len, 504u);
  // Lengths out of range.
  EXPECT_EQ(shm::decode_record_word(shm::record_word(3, 0), 3, S, B, &len, 1, &why),
            mycollRemoteError);
  EXPECT_WHY(why, "shm: corrupt record 3 from rank 1 (length 0");
  EXPECT_EQ(shm::decode_record_word(shm::record_word(3, 505), 3, S, B, &len, 1, &why),
            mycollRemoteError);
  EXPECT_WHY(why, "(length 505, slots of 512 bytes)");
  // A word naming another record (a reader would have waited forever).
  EXPECT_EQ(shm::decode_record_word(shm::record_word(7, 10), 3, S, B, &len, 1, &why),
            mycollRemoteError);
  EXPECT_WHY(why, "corrupt record slot from rank 1 (its word holds sequence 8; record 3");
  EXPECT_EQ(shm::decode_record_word(5, 3, S, B, &len, 1, &why), mycollRemoteError);  // seq 0, len 5
  EXPECT_EQ(shm::decode_record_word(shm::record_word(3, 10), 20, S, B, &len, 1, &why),
            mycollRemoteError);  // two laps back
}

// A FIFO whose header the peer changed after creating it: the writer's
// open refuses it, and a connection never uses the header's later values.
TEST(ShmWire, OpenRefusesACorruptHeader) {
  const std::string name = shm::fifo_name(0x5eedf00dull ^ static_cast<uint64_t>(getpid()), 0, 1);
  shm::unlink_fifo(name);
  auto in = shm::Fifo::create(name, 8192);
  in->header()->rec_slots = 3;
  try {
    shm::Fifo::open(name);
    ADD_FAILURE() << "a FIFO with 3 record slots was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollSystemError);
    EXPECT_WHY(std::string(e.what()), "3 record slots, not a power of two");
  }
  in->header()->rec_slots = 16;
  auto out = shm::Fifo::open(name);
  EXPECT_EQ(out->rec_slots(), 16u);
  in->header()->rec_slots = 1u << 30;  // after the check: the copy stays
  EXPECT_EQ(out->rec_slots(), 16u);
  shm::unlink_fifo(name);
}

// ---- GPU proxy frames

TEST(ProxyWire, Frames) {
  proxywire::Frame f{proxywire::kData, 1, 32}, got{};
  std::string why;
  ASSERT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollSuccess) << why;
  EXPECT_EQ(std::memcmp(&f, &got, sizeof(f)), 0);
  EXPECT_EQ(proxywire::decode_frame(&f, 15, 2, &got, &why), mycollRemoteError);
  EXPECT_WHY(why, "a frame header of 15 bytes");
  f.channel = 2;
  EXPECT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollRemoteError);
  EXPECT_WHY(why, "a malformed frame (channel 2 of 2)");
  f = proxywire::Frame{0x12345678, 0, 0};
  EXPECT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollRemoteError);
  EXPECT_WHY(why, "a malformed frame (type 305419896)");
  // Size frames name a channel; call frames go on channel 0 only.
  f = proxywire::Frame{proxywire::kSize, 1, 4004};
  ASSERT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollSuccess) << why;
  EXPECT_EQ(got.type, proxywire::kSize);
  EXPECT_EQ(got.value, 4004u);
  f.channel = 2;
  EXPECT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollRemoteError);
  EXPECT_WHY(why, "a malformed frame (channel 2 of 2)");
  f = proxywire::Frame{proxywire::kCall, 0, 0xfeedfacecafebeefull};
  ASSERT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollSuccess) << why;
  EXPECT_EQ(got.value, 0xfeedfacecafebeefull);
  f.channel = 1;
  EXPECT_EQ(proxywire::decode_frame(&f, sizeof(f), 2, &got, &why), mycollRemoteError);
  EXPECT_WHY(why, "a malformed call frame (channel 1)");
}

TEST(ProxyWire, CreditsAndData) {
  std::string why;
  EXPECT_EQ(proxywire::check_credit(3, 2, 5, &why), mycollSuccess);
  EXPECT_EQ(proxywire::check_credit(1, 2, 5, &why), mycollRemoteError);
  EXPECT_WHY(why, "a credit of 1 slots after 2 (out of order)");
  EXPECT_EQ(proxywire::check_credit(6, 2, 5, &why), mycollRemoteError);
  EXPECT_WHY(why, "a credit of 6 slots for only 5 sent");
  // A poisoned credit (the receiver refused a message of another size)
  // passes whatever its count bits say: they carry the receiver's bytes.
  EXPECT_EQ(proxywire::check_credit(proxywire::kCreditPoison | 4004, 2, 5, &why), mycollSuccess);
  EXPECT_EQ(proxywire::check_credit(proxywire::kCreditPoison, 2, 5, &why), mycollSuccess);

  EXPECT_EQ(proxywire::check_data(64, 64, 4, 7, 4, &why), mycollSuccess);
  EXPECT_EQ(proxywire::check_data(65, 64, 4, 7, 4, &why), mycollRemoteError);
  EXPECT_WHY(why, "a slot of 65 bytes (slots hold 64)");
  EXPECT_EQ(proxywire::check_data(8, 64, 4, 8, 4, &why), mycollRemoteError);
  EXPECT_WHY(why, "without a free slot (4 of 4 unread: flow control broken)");
}

// ---- PeerInfo

TEST(PeerInfoWire, Checks) {
  PeerInfo p;
  p.rank = 2;
  p.pid = 10;
  std::snprintf(p.host_id, sizeof(p.host_id), "node/boot");
  std::string why;
  EXPECT_TRUE(check_peer_info(p, 2, &why)) << why;
  EXPECT_FALSE(check_peer_info(p, 3, &why));
  EXPECT_WHY(why, "the peer info of rank 3 names rank 2");
  PeerInfo q = p;
  q.cuda_device = -2;
  EXPECT_FALSE(check_peer_info(q, 2, &why));
  EXPECT_WHY(why, "CUDA device -2");
  q = p;
  q.pid = -1;
  EXPECT_FALSE(check_peer_info(q, 2, &why));
  EXPECT_WHY(why, "pid -1");
  q = p;
  std::memset(q.host_id, 'h', sizeof(q.host_id));
  EXPECT_FALSE(check_peer_info(q, 2, &why));
  EXPECT_WHY(why, "its host id does not end within 128 bytes");
  q = p;
  std::memset(q.hostname, 'h', sizeof(q.hostname));
  EXPECT_FALSE(check_peer_info(q, 2, &why));
  EXPECT_WHY(why, "its hostname does not end within 64 bytes");
  q = p;
  std::memset(q.ip, '1', sizeof(q.ip));
  EXPECT_FALSE(check_peer_info(q, 2, &why));
  EXPECT_WHY(why, "its address does not end within 48 bytes");
}

// ---- the fuzz corpus (replayed by WireFuzzCorpus.EveryCommittedInputRunsClean)

TEST(WireFuzzCorpus, EveryTransportInputHasASeed) {
  const std::string dir = std::string(MYCOLL_SOURCE_DIR) + "/tests/fuzz/corpus/wire";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  std::set<int> targets;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name, std::ios::binary);
    const int first = f.get();
    if (first >= 0) targets.insert(first % mycoll_fuzz::kNumTargets);
  }
  closedir(d);
  for (int t = mycoll_fuzz::kSocketEndpoint; t < mycoll_fuzz::kNumTargets; ++t)
    EXPECT_TRUE(targets.count(t)) << "no seed for fuzz input kind " << t;
}

}  // namespace
}  // namespace mycoll
