// Shared-memory transport: ranks as threads stream data to every peer in
// both directions at once (send_some, send_some2 / peek / consume / recv_some), checked
// byte for byte; shutdown and dead peers become RemoteError; no names are
// left in /dev/shm; a forked process killed with SIGKILL is reported.
#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/config.h"
#include "base/error.h"
#include "thread_bootstrap.h"
#include "transports/shm/shm.h"
#include "transports/transport.h"

namespace mycoll {
namespace {

using Clock = std::chrono::steady_clock;

// The stream src -> dst is a random pattern of odd period kPeriod repeated:
// a dropped, repeated or misplaced block shows unless it is a multiple of
// the period long (never a FIFO size, which is a multiple of 4096).
constexpr size_t kPeriod = 1000003;
constexpr size_t kMaxChunk = (1u << 20) + 5;

std::vector<uint8_t> make_pattern(int src, int dst) {
  std::vector<uint8_t> p(kPeriod + kMaxChunk);
  std::mt19937_64 rng(uint64_t(src) * 1000003 + uint64_t(dst) * 7 + 11);
  for (size_t i = 0; i < kPeriod; ++i) p[i] = static_cast<uint8_t>(rng() >> 24);
  for (size_t i = kPeriod; i < p.size(); ++i)
    p[i] = p[i - kPeriod];  // lets a chunk run past the period
  return p;
}

std::vector<PeerInfo> same_host_peers(int n) {
  std::vector<PeerInfo> all(n);
  for (int r = 0; r < n; ++r) {
    all[r].rank = r;
    all[r].pid = getpid();
    std::snprintf(all[r].host_id, sizeof(all[r].host_id), "unit-test-host");
  }
  return all;
}

std::vector<std::string> shm_entries_with_tag(uint64_t tag) {
  char prefix[40];
  std::snprintf(prefix, sizeof(prefix), "mycoll-%016" PRIx64 "-", tag);
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) found.push_back(e->d_name);
    closedir(d);
  }
  return found;
}

// Inside rank threads: a failed check throws, so run_ranks aborts the other
// ranks at once and rethrows it in the test's thread (a plain ASSERT would
// only end this rank and leave the others waiting).
void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

struct ConnectedRank {
  std::vector<int> peers;
  std::vector<std::unique_ptr<Connection>> conns;
};

ConnectedRank connect_all(Bootstrap& bs, size_t fifo_bytes) {
  ConnectedRank c;
  const int n = bs.nranks();
  for (int r = 0; r < n; ++r)
    if (r != bs.rank()) c.peers.push_back(r);
  Config cfg;
  cfg.shm_fifo_bytes = fifo_bytes;
  auto t = make_shm_transport();
  EXPECT_STREQ(t->name(), "shm");
  c.conns = t->connect(bs, same_host_peers(n), c.peers, cfg);
  return c;
}

// Every ordered pair streams `total` bytes; both directions and all peers
// progress in one loop per rank. Sizes and the receive call vary.
void stream_all_pairs(int n, size_t total, size_t fifo_bytes) {
  run_ranks(n, [&](Bootstrap& bs) {
    const int me = bs.rank();
    ConnectedRank c = connect_all(bs, fifo_bytes);
    require(c.conns.size() == size_t(n - 1), "wrong number of connections");
    bs.barrier();  // every rank has unlinked what it created
    EXPECT_TRUE(shm_entries_with_tag(bs.tag()).empty()) << "names left in /dev/shm";

    struct Peer {
      std::vector<uint8_t> out, in;  // patterns me -> peer, peer -> me
      size_t sent = 0, got = 0;
    };
    std::vector<Peer> ps(c.peers.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      ps[i].out = make_pattern(me, c.peers[i]);
      ps[i].in = make_pattern(c.peers[i], me);
      EXPECT_EQ(c.conns[i]->describe(), "shm");
    }
    // Sizes and modes are random (seeded per rank), and a side sometimes
    // skips its turn, so the ring is seen full, empty and everything in
    // between, and reads and writes meet the wrap at every offset.
    std::mt19937_64 rng(1000 + me);
    auto random_size = [&rng]() -> size_t {
      switch (rng() % 4) {
        case 0: return 1 + rng() % 16;
        case 1: return 1 + rng() % 5000;
        case 2: return 1 + rng() % 300000;
        default: return kMaxChunk;
      }
    };
    std::vector<uint8_t> buf(kMaxChunk);
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    bool done = false;
    while (!done) {
      done = true;
      bool moved = false;
      for (size_t i = 0; i < ps.size(); ++i) {
        Peer& p = ps[i];
        Connection& conn = *c.conns[i];
        const std::string where =
            "rank " + std::to_string(me) + " <-> " + std::to_string(c.peers[i]) + ": ";
        if (p.sent < total && rng() % 8 != 0) {
          size_t want = std::min(random_size(), total - p.sent);
          const uint8_t* from = p.out.data() + p.sent % kPeriod;
          size_t k = 0;
          if (rng() % 2) {
            k = conn.send_some(from, want);
          } else {  // two parts: Connection::send_some2's default
            const size_t an = rng() % (want + 1);
            k = conn.send_some2(from, an, from + an, want - an);
          }
          require(k <= want, where + "send_some returned more than asked");
          p.sent += k;
          moved |= k > 0;
        }
        if (p.got < total && rng() % 8 != 0) {
          const size_t want = std::min(random_size(), total - p.got);
          size_t k = 0;
          const unsigned mode = rng() % 3;
          if (mode == 0) {
            k = conn.recv_some(buf.data(), want);
            require(k <= want, where + "recv_some returned more than asked");
            require(std::memcmp(buf.data(), p.in.data() + p.got % kPeriod, k) == 0,
                    where + "recv_some data differs in bytes [" + std::to_string(p.got) + ", +" +
                        std::to_string(k) + ")");
          } else {
            const void* data = nullptr;
            k = conn.peek(&data, want);
            require(k <= want, where + "peek returned more than asked");
            if (k > 0) {
              require(std::memcmp(data, p.in.data() + p.got % kPeriod, k) == 0,
                      where + "peeked data differs in bytes [" + std::to_string(p.got) + ", +" +
                          std::to_string(k) + ")");
              if (mode == 2) k = 1 + rng() % k;  // release only part of it
              conn.consume(k);
            }
          }
          p.got += k;
          moved |= k > 0;
        }
        if (p.sent < total || p.got < total) done = false;
      }
      if (!moved) {
        for (auto& conn : c.conns) conn->check_alive();
        std::this_thread::yield();
      }
      require(Clock::now() < deadline, "rank " + std::to_string(me) + " stuck");
    }
    // Nothing extra arrived.
    bs.barrier();
    for (auto& conn : c.conns) {
      const void* data = nullptr;
      EXPECT_EQ(conn->peek(&data, 1), 0u);
      EXPECT_NO_THROW(conn->check_alive());
    }
    bs.barrier();  // nobody unmaps while a peer still checks
  });
}

TEST(ShmTransport, TwoRanksStream64MiB) { stream_all_pairs(2, (64u << 20) + 12345, 4u << 20); }
TEST(ShmTransport, ThreeRanksStream64MiB) { stream_all_pairs(3, (64u << 20) + 777, 1u << 20); }
TEST(ShmTransport, FourRanksStream64MiBSmallFifo) {
  stream_all_pairs(4, (64u << 20) + 4099, 64u << 10);
}

TEST(ShmTransport, EmptyPeerListStillCollective) {
  run_ranks(3, [](Bootstrap& bs) {
    Config cfg;
    cfg.shm_fifo_bytes = 1 << 16;
    // Rank 0 has no shm peers; ranks 1 and 2 talk to each other.
    std::vector<int> peers;
    if (bs.rank() == 1) peers = {2};
    if (bs.rank() == 2) peers = {1};
    auto conns = make_shm_transport()->connect(bs, same_host_peers(3), peers, cfg);
    EXPECT_EQ(conns.size(), peers.size());
    if (bs.rank() == 1) {
      const char msg[] = "hello";
      EXPECT_EQ(conns[0]->send_some(msg, sizeof(msg)), sizeof(msg));
    }
    if (bs.rank() == 2) {
      char got[6] = {};
      size_t n = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while (n < sizeof(got) && Clock::now() < deadline) n += conns[0]->recv_some(got + n, 6 - n);
      EXPECT_STREQ(got, "hello");
    }
    bs.barrier();
  });
}

TEST(ShmTransport, CanConnectOnlySameHost) {
  auto t = make_shm_transport();
  PeerInfo a, b, c, empty;
  std::snprintf(a.host_id, sizeof(a.host_id), "hostA-boot1");
  std::snprintf(b.host_id, sizeof(b.host_id), "hostA-boot1");
  std::snprintf(c.host_id, sizeof(c.host_id), "hostB-boot1");
  EXPECT_TRUE(t->can_connect(a, b));
  EXPECT_FALSE(t->can_connect(a, c));
  EXPECT_FALSE(t->can_connect(empty, empty));
}

TEST(ShmTransport, ShutdownIsSeenByPeer) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    Connection& conn = *c.conns[0];
    EXPECT_NO_THROW(conn.check_alive());
    bs.barrier();
    if (bs.rank() == 0) conn.shutdown();
    bs.barrier();
    try {
      conn.check_alive();
      ADD_FAILURE() << "rank " << bs.rank() << ": check_alive did not throw after shutdown";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollRemoteError);
      if (bs.rank() == 1)
        EXPECT_NE(std::string(e.what()).find("peer rank 0 closed the shm channel"),
                  std::string::npos)
            << e.what();
      else
        EXPECT_NE(std::string(e.what()).find("shut down by this rank"), std::string::npos)
            << e.what();
    }
    conn.shutdown();  // idempotent
    bs.barrier();
  });
}

TEST(ShmTransport, UnreadDataIsDrainedBeforePeerLossIsReported) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    Connection& conn = *c.conns[0];
    if (bs.rank() == 0) {
      std::vector<uint8_t> msg(100, 0x5a);
      EXPECT_EQ(conn.send_some(msg.data(), msg.size()), msg.size());
      conn.shutdown();
    }
    bs.barrier();
    if (bs.rank() == 1) {
      uint8_t buf[100];
      EXPECT_NO_THROW(conn.check_alive()) << "100 unread bytes: first check defers";
      EXPECT_EQ(conn.recv_some(buf, 50), 50u);
      EXPECT_NO_THROW(conn.check_alive()) << "the engine is draining: defer again";
      EXPECT_THROW(conn.check_alive(), Error) << "no progress since the last check";
      EXPECT_EQ(conn.recv_some(buf + 50, 50), 50u);
      EXPECT_EQ(buf[99], 0x5a);
      EXPECT_THROW(conn.check_alive(), Error) << "drained";
    }
    bs.barrier();
  });
}

TEST(ShmTransport, ConsumeBeyondPeekIsAnError) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    Connection& conn = *c.conns[0];
    if (bs.rank() == 0) {
      const char msg[4] = {1, 2, 3, 4};
      EXPECT_EQ(conn.send_some(msg, 4), 4u);
    }
    bs.barrier();
    if (bs.rank() == 1) {
      const void* p = nullptr;
      EXPECT_EQ(conn.peek(&p, 100), 4u);
      EXPECT_EQ(static_cast<const char*>(p)[3], 4);
      EXPECT_THROW(conn.consume(5), Error);
      conn.consume(4);
      EXPECT_EQ(conn.peek(&p, 100), 0u);
    }
    bs.barrier();
  });
}

TEST(ShmTransport, FullFifoAcceptsNothingUntilRead) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 8192);
    Connection& conn = *c.conns[0];
    if (bs.rank() == 0) {
      std::vector<uint8_t> big(20000);
      for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7);
      EXPECT_EQ(conn.send_some(big.data(), big.size()), 8192u);
      EXPECT_EQ(conn.send_some(big.data(), big.size()), 0u);
      bs.barrier();  // rank 1 reads 5000
      bs.barrier();
      EXPECT_EQ(conn.send_some(big.data() + 8192, big.size() - 8192), 5000u);
    } else {
      bs.barrier();
      std::vector<uint8_t> got(5000);
      EXPECT_EQ(conn.recv_some(got.data(), got.size()), 5000u);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], uint8_t(i * 7)) << i;
      bs.barrier();
    }
    bs.barrier();
  });
}

// Records beside the byte stream: every ordered pair sends `count` records
// of random length (1..record_max) and interleaves stream bytes; every
// record and byte is compared with what the sender's generator produced, so
// a lost, repeated, reordered or torn record shows. The slot ring laps many
// times and is seen full.
void records_all_pairs(int n, int count, size_t fifo_bytes) {
  run_ranks(n, [&](Bootstrap& bs) {
    const int me = bs.rank();
    ConnectedRank c = connect_all(bs, fifo_bytes);
    const size_t np = c.peers.size();
    // Record k from a to b: length and bytes from a generator seeded by
    // (a, b, k), computed independently by the receiver.
    auto record_of = [](int from, int to, int k, size_t max, std::vector<uint8_t>* out) {
      std::mt19937_64 g(uint64_t(from) * 1000003 + uint64_t(to) * 7919 + uint64_t(k) * 31 + 5);
      const size_t len = g() % 4 == 0 ? max : 1 + g() % max;  // full slots too
      out->resize(len);
      for (auto& b : *out) b = static_cast<uint8_t>(g() >> 40);
    };
    struct Peer {
      int sent = 0, got = 0;
      size_t stream_sent = 0, stream_got = 0;
    };
    std::vector<Peer> ps(np);
    std::vector<uint8_t> rec, want, sbuf(3000), rbuf(3000);
    std::mt19937_64 rng(77 + me);
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    const size_t stream_total = size_t(count) * 100;
    bool done = false;
    while (!done) {
      done = true;
      for (size_t i = 0; i < np; ++i) {
        Peer& p = ps[i];
        Connection& conn = *c.conns[i];
        const int peer = c.peers[i];
        const std::string where = "rank " + std::to_string(me) + " <-> " + std::to_string(peer);
        const size_t max = conn.record_max();
        require(max >= 64, where + ": record_max " + std::to_string(max));
        // Send a burst (the receiver sometimes lags, so slots run out).
        for (int b = 0, burst = int(rng() % 70); b < burst && p.sent < count; ++b) {
          record_of(me, peer, p.sent, max, &rec);
          const size_t split = rng() % (rec.size() + 1);  // header / body split is the caller's
          if (!conn.send_record(rec.data(), split, rec.data() + split, rec.size() - split)) break;
          ++p.sent;
        }
        if (p.stream_sent < stream_total) {
          const size_t k = std::min<size_t>(1 + rng() % sbuf.size(), stream_total - p.stream_sent);
          for (size_t j = 0; j < k; ++j) sbuf[j] = uint8_t((p.stream_sent + j) * 13 + me);
          p.stream_sent += conn.send_some(sbuf.data(), k);
        }
        if (rng() % 3 != 0) {
          for (int b = 0, burst = int(rng() % 70); b < burst && p.got < count; ++b) {
            const void* data = nullptr;
            const size_t len = conn.peek_record(&data);
            if (len == 0) break;
            record_of(peer, me, p.got, max, &want);
            require(len == want.size() && std::memcmp(data, want.data(), len) == 0,
                    where + ": record " + std::to_string(p.got) + " differs (length " +
                        std::to_string(len) + ", expected " + std::to_string(want.size()) + ")");
            const void* again = nullptr;
            require(conn.peek_record(&again) == len && again == data,
                    where + ": peek_record is not stable until consume_record");
            conn.consume_record();
            ++p.got;
          }
        }
        if (p.stream_got < stream_total) {
          const size_t k =
              conn.recv_some(rbuf.data(), std::min(rbuf.size(), stream_total - p.stream_got));
          for (size_t j = 0; j < k; ++j)
            require(rbuf[j] == uint8_t((p.stream_got + j) * 13 + peer),
                    where + ": stream byte " + std::to_string(p.stream_got + j) + " differs");
          p.stream_got += k;
        }
        if (p.sent < count || p.got < count || p.stream_sent < stream_total ||
            p.stream_got < stream_total)
          done = false;
      }
      require(Clock::now() < deadline, "rank " + std::to_string(me) + " stuck");
    }
    bs.barrier();
    for (size_t i = 0; i < np; ++i) {
      const void* data = nullptr;
      EXPECT_EQ(c.conns[i]->peek_record(&data), 0u) << "an extra record arrived";
      EXPECT_THROW(c.conns[i]->send_record(rec.data(), c.conns[i]->record_max() + 1, nullptr, 0),
                   Error);
    }
    // A full slot ring, for certain (the loop above sees one only when the
    // receiver happens to lag): every rank sends to every peer until
    // send_record refuses while nobody reads, then each drains what its
    // peers sent, record by record, and finds exactly their counts.
    bs.barrier();  // every rank has checked for extra records
    const int n = bs.nranks();
    std::vector<int32_t> filled(size_t(n) * n, 0);
    for (size_t i = 0; i < np; ++i) {
      int32_t k = 0;
      for (;;) {
        record_of(me, c.peers[i], count + k, c.conns[i]->record_max(), &rec);
        if (!c.conns[i]->send_record(rec.data(), rec.size(), nullptr, 0)) break;
        ++k;
        require(k < (1 << 20), "send_record never refused");
      }
      EXPECT_GT(k, 0) << "not even one record fitted";
      filled[size_t(me) * n + c.peers[i]] = k;
    }
    bs.allgather(filled.data(), sizeof(int32_t) * n);
    for (size_t i = 0; i < np; ++i) {
      const int peer = c.peers[i];
      const int32_t expect = filled[size_t(peer) * n + me];
      for (int32_t k = 0; k < expect; ++k) {
        const void* data = nullptr;
        const size_t len = c.conns[i]->peek_record(&data);
        record_of(peer, me, count + k, c.conns[i]->record_max(), &want);
        ASSERT_EQ(len, want.size()) << "record " << k << " of the full ring from " << peer;
        ASSERT_EQ(std::memcmp(data, want.data(), len), 0) << "record " << k << " from " << peer;
        c.conns[i]->consume_record();
      }
      const void* data = nullptr;
      EXPECT_EQ(c.conns[i]->peek_record(&data), 0u) << "more records than " << peer << " sent";
    }
    bs.barrier();  // nobody unmaps while a peer still reads
  });
}

TEST(ShmTransport, TwoRanksRecordsBesideTheStream) { records_all_pairs(2, 20000, 4u << 20); }
TEST(ShmTransport, ThreeRanksRecordsSmallFifo) { records_all_pairs(3, 5000, 4096); }

// Remote reads: rank 0 exposes buffers (address in a record), rank 1 reads
// them in odd pieces and releases them; rank 0 sees each ticket done only
// after the release, and every byte read is the one exposed.
TEST(ShmTransport, RemoteReadsCopyTheExposedBuffer) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    Connection& conn = *c.conns[0];
    require(conn.remote_read_ok(), "the connect-time probe failed between threads of one process");
    constexpr int kBuffers = 5;
    if (bs.rank() == 0) {
      std::vector<std::vector<uint8_t>> bufs(kBuffers);
      std::vector<uint64_t> tickets;
      for (int b = 0; b < kBuffers; ++b) {
        bufs[b].resize(100000 + 777 * b);
        for (size_t i = 0; i < bufs[b].size(); ++i) bufs[b][i] = uint8_t(i * 31 + b);
        const uint64_t addr = reinterpret_cast<uintptr_t>(bufs[b].data());
        const uint64_t len = bufs[b].size();
        require(conn.send_record(&addr, sizeof(addr), &len, sizeof(len)), "record slot");
        tickets.push_back(conn.expose());
        require(tickets.back() == uint64_t(b + 1), "tickets count from 1");
      }
      EXPECT_FALSE(conn.exposed_done(tickets[0])) << "done before the reader released it";
      bs.barrier();  // rank 1 reads everything
      bs.barrier();
      for (uint64_t t : tickets) EXPECT_TRUE(conn.exposed_done(t)) << t;
      EXPECT_FALSE(conn.exposed_done(kBuffers + 1));
    } else {
      bs.barrier();
      for (int b = 0; b < kBuffers; ++b) {
        const void* p = nullptr;
        ASSERT_EQ(conn.peek_record(&p), 16u);
        uint64_t addr = 0, len = 0;
        std::memcpy(&addr, p, 8);
        std::memcpy(&len, static_cast<const char*>(p) + 8, 8);
        conn.consume_record();
        std::vector<uint8_t> got(len);
        size_t done = 0;
        for (size_t piece = 1; done < len; piece = piece * 3 + 1) {
          const size_t k =
              conn.read_remote(got.data() + done, addr + done, std::min(piece, len - done));
          ASSERT_GT(k, 0u);
          done += k;
        }
        for (size_t i = 0; i < len; ++i) ASSERT_EQ(got[i], uint8_t(i * 31 + b)) << b << " " << i;
        conn.release_remote();
      }
      bs.barrier();
    }
    bs.barrier();
  });
}

TEST(ShmTransport, RemoteReadOfAnUnmappedAddressIsARemoteError) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    if (bs.rank() == 1) {
      uint8_t b[16];
      try {
        c.conns[0]->read_remote(b, 8, sizeof(b));  // page 0 is never mapped
        ADD_FAILURE() << "read_remote of address 8 did not throw";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), mycollRemoteError);
        EXPECT_NE(std::string(e.what()).find("process_vm_readv"), std::string::npos) << e.what();
      }
    }
    bs.barrier();
  });
}

TEST(ShmTransport, RecordGeometryIsPowersOfTwo) {
  for (uint64_t cap : {uint64_t(4096), uint64_t(65536), uint64_t(100000), uint64_t(1) << 20,
                       uint64_t(3) << 20, uint64_t(4) << 20, uint64_t(1) << 30}) {
    const shm::RecordGeometry g = shm::record_geometry(cap);
    EXPECT_EQ(g.slots & (g.slots - 1), 0u) << cap;
    EXPECT_EQ(g.slot_bytes % 64, 0u) << cap;
    EXPECT_GE(g.slots, 16u) << cap;
    EXPECT_LE(g.slot_bytes, 4096u) << cap;
    EXPECT_LE(uint64_t(g.slots) * g.slot_bytes, std::max<uint64_t>(8192, cap / 4)) << cap;
    if (cap >= (uint64_t(1) << 20)) {  // the default ring and larger: the full record area
      EXPECT_EQ(g.slots, 64u) << cap;
      EXPECT_EQ(g.slot_bytes, 4096u) << cap;
    }
  }
}

TEST(ShmTransport, UnreadRecordIsDrainedBeforePeerLossIsReported) {
  run_ranks(2, [](Bootstrap& bs) {
    ConnectedRank c = connect_all(bs, 1 << 16);
    Connection& conn = *c.conns[0];
    if (bs.rank() == 0) {
      const char msg[3] = {7, 8, 9};
      EXPECT_TRUE(conn.send_record(msg, 1, msg + 1, 2));
      conn.shutdown();
    }
    bs.barrier();
    if (bs.rank() == 1) {
      EXPECT_NO_THROW(conn.check_alive()) << "an unread record: first check defers";
      EXPECT_THROW(conn.check_alive(), Error) << "no progress since the last check";
      const void* p = nullptr;
      ASSERT_EQ(conn.peek_record(&p), 3u);
      EXPECT_EQ(static_cast<const char*>(p)[2], 9);
      conn.consume_record();
      EXPECT_THROW(conn.check_alive(), Error) << "drained";
    }
    bs.barrier();
  });
}

TEST(ShmFifo, CreateTwiceIsAnErrorNamingTheSegment) {
  const std::string name = shm::fifo_name(std::random_device{}(), 5, 6);
  auto a = shm::Fifo::create(name, 4096);
  try {
    shm::Fifo::create(name, 4096);
    ADD_FAILURE() << "second create did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollSystemError);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(EEXIST)), std::string::npos) << e.what();
  }
  shm::unlink_fifo(name);
  EXPECT_THROW(shm::Fifo::open(name), Error);
}

TEST(ShmFifo, NoSpaceIsAnErrorAndLeavesNothing) {
  struct statvfs vfs;
  ASSERT_EQ(statvfs("/dev/shm", &vfs), 0);
  const uint64_t fs_bytes = uint64_t(vfs.f_blocks) * vfs.f_frsize;
  // tmpfs refuses at once a fallocate larger than the whole file system; on
  // an unlimited one it would try to allocate it, so skip there.
  if (vfs.f_blocks == 0 || fs_bytes > (uint64_t(1) << 44)) GTEST_SKIP() << "/dev/shm unlimited";
  const uint64_t tag = std::random_device{}();
  const std::string name = shm::fifo_name(tag, 0, 1);
  try {
    shm::Fifo::create(name, static_cast<size_t>(fs_bytes * 2));
    ADD_FAILURE() << "create larger than /dev/shm did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollSystemError);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  EXPECT_TRUE(shm_entries_with_tag(tag).empty());
}

TEST(ShmFifo, NameFormat) {
  EXPECT_EQ(shm::fifo_name(0xabcdef, 3, 12), "/mycoll-0000000000abcdef-3-12");
}

// Real processes: the child streams to the parent, then is killed; the
// parent's check_alive names the dead pid (first as an unreaped zombie).
TEST(ShmFifo, ForkedPeerKilledIsReported) {
  const uint64_t tag = (uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  const std::string to_parent = shm::fifo_name(tag, 1, 0), to_child = shm::fifo_name(tag, 0, 1);
  constexpr size_t kChildBytes = (8u << 20) + 3, kParentBytes = (1u << 20) + 1;
  auto in = shm::Fifo::create(to_parent, 1 << 18);
  int c2p[2], p2c[2];
  ASSERT_EQ(pipe(c2p), 0);
  ASSERT_EQ(pipe(p2c), 0);
  fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Child: no gtest here; report failure by exit code.
    int rc = 0;
    try {
      auto cin = shm::Fifo::create(to_child, 1 << 18);
      char x = 'c';
      if (write(c2p[1], &x, 1) != 1) _exit(3);
      if (read(p2c[0], &x, 1) != 1) _exit(4);
      auto conn = shm::make_connection(0, shm::Fifo::open(to_parent), std::move(cin));
      const auto out = make_pattern(1, 0), expect = make_pattern(0, 1);
      std::vector<uint8_t> buf(kMaxChunk);
      size_t sent = 0, got = 0;
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      while ((sent < kChildBytes || got < kParentBytes) && Clock::now() < deadline) {
        if (sent < kChildBytes)
          sent += conn->send_some(out.data() + sent % kPeriod,
                                  std::min<size_t>(300007, kChildBytes - sent));
        if (got < kParentBytes) {
          size_t k = conn->recv_some(buf.data(), std::min<size_t>(65537, kParentBytes - got));
          if (std::memcmp(buf.data(), expect.data() + got % kPeriod, k) != 0) _exit(5);
          got += k;
        }
      }
      if (sent < kChildBytes || got < kParentBytes) _exit(6);
      x = 'd';
      if (write(c2p[1], &x, 1) != 1) _exit(7);
      for (;;) pause();  // until killed
    } catch (...) {
      rc = 2;
    }
    _exit(rc);
  }
  char x = 0;
  ASSERT_EQ(read(c2p[0], &x, 1), 1);
  auto out = shm::Fifo::open(to_child);
  ASSERT_EQ(write(p2c[1], &x, 1), 1);
  auto conn = shm::make_connection(1, std::move(out), std::move(in));
  const auto send_pat = make_pattern(0, 1), want = make_pattern(1, 0);
  std::vector<uint8_t> buf(kMaxChunk);
  size_t sent = 0, got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((sent < kParentBytes || got < kChildBytes) && Clock::now() < deadline) {
    if (sent < kParentBytes)
      sent += conn->send_some(send_pat.data() + sent % kPeriod,
                              std::min<size_t>(40009, kParentBytes - sent));
    const void* p = nullptr;
    size_t k = conn->peek(&p, std::min<size_t>(kMaxChunk, kChildBytes - got));
    if (k) {
      ASSERT_EQ(0, std::memcmp(p, want.data() + got % kPeriod, k)) << "at byte " << got;
      conn->consume(k);
      got += k;
    }
  }
  EXPECT_EQ(sent, kParentBytes);
  EXPECT_EQ(got, kChildBytes);
  ASSERT_EQ(read(c2p[0], &x, 1), 1);  // child done and waiting
  EXPECT_EQ(x, 'd');
  shm::unlink_fifo(to_parent);
  shm::unlink_fifo(to_child);
  EXPECT_NO_THROW(conn->check_alive());

  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Not reaped yet: the child is a zombie, which must count as gone.
  std::string what;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (what.empty() && Clock::now() < until) {
    try {
      conn->check_alive();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollRemoteError);
      what = e.what();
    }
  }
  EXPECT_NE(what.find("peer rank 1 (pid " + std::to_string(child) + ") is gone"), std::string::npos)
      << "got: '" << what << "'";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "child status " << status;
  EXPECT_THROW(conn->check_alive(), Error);  // stays reported once reaped
  for (int fd : {c2p[0], c2p[1], p2c[0], p2c[1]}) close(fd);
  EXPECT_TRUE(shm_entries_with_tag(tag).empty());
}

}  // namespace
}  // namespace mycoll
