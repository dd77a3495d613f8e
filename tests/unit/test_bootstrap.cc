// Bootstrap: SHA-256/HMAC vectors, unique ids, rendezvous + ring
// collectives with ranks as threads, hostile clients, timeouts, failures.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/socket_util.h"
#include "bootstrap/wire.h"
#include "engine/peer_watch.h"
#include "thread_bootstrap.h"

namespace mycoll {
namespace {

std::string hex(const std::array<uint8_t, 32>& h) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t b : h) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

std::array<uint8_t, 32> sha(const std::string& s) {
  return net::sha256(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

std::array<uint8_t, 32> hmac(const std::vector<uint8_t>& key, const std::vector<uint8_t>& msg) {
  return net::hmac_sha256(key.data(), key.size(), msg.data(), msg.size());
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(hex(sha("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55/56/64 bytes: the padding boundary cases.
  EXPECT_EQ(hex(sha(std::string(55, 'a'))),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(hex(sha(std::string(56, 'a'))),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(hex(sha(std::string(64, 'a'))),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Hmac, Rfc4231Vectors) {
  // Test case 1
  EXPECT_EQ(hex(hmac(std::vector<uint8_t>(20, 0x0b), bytes("Hi There"))),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2
  EXPECT_EQ(hex(hmac(bytes("Jefe"), bytes("what do ya want for nothing?"))),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 3
  EXPECT_EQ(hex(hmac(std::vector<uint8_t>(20, 0xaa), std::vector<uint8_t>(50, 0xdd))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 4
  std::vector<uint8_t> key4;
  for (int i = 1; i <= 25; ++i) key4.push_back(static_cast<uint8_t>(i));
  EXPECT_EQ(hex(hmac(key4, std::vector<uint8_t>(50, 0xcd))),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 6: key longer than the block.
  EXPECT_EQ(hex(hmac(std::vector<uint8_t>(131, 0xaa),
                     bytes("Test Using Larger Than Block-Size Key - Hash Key First"))),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // Test case 7
  EXPECT_EQ(hex(hmac(std::vector<uint8_t>(131, 0xaa),
                     bytes("This is a test using a larger than block-size key and a larger "
                           "than block-size data. The key needs to be hashed before being "
                           "used by the HMAC algorithm."))),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

// ------------------------------------------------------------- helpers ----

void expect_all_ok(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

UniqueIdData new_id() {
  mycollUniqueId uid;
  create_unique_id(&uid);
  return unpack_unique_id(uid);
}

// Byte i of the payload rank `src` sends to `dst` in round `round`.
uint8_t pattern(int src, int dst, int round, size_t i) {
  uint64_t x = (uint64_t(src) << 40) ^ (uint64_t(dst) << 20) ^ (uint64_t(round) << 56) ^ i;
  x *= 0x9e3779b97f4a7c15ull;
  return static_cast<uint8_t>(x >> 56);
}

class BootEnv : public ::testing::Test {
 protected:
  void SetUp() override { setenv("MYCOLL_TIMEOUT", "30", 1); }
};

// n bootstraps of one fresh id, each rank joined from its own thread.
std::vector<std::unique_ptr<Bootstrap>> boot_ranks(int n) {
  UniqueIdData id = new_id();
  std::vector<std::unique_ptr<Bootstrap>> bs(n);
  expect_all_ok(run_rank_threads(n, [&](int r) { bs[r] = Bootstrap::init(id, r, n, 20, ""); }));
  return bs;
}

// ------------------------------------------------------------ unique id ----

TEST_F(BootEnv, BootUniqueIdPackUnpack) {
  mycollUniqueId a, b;
  create_unique_id(&a);
  create_unique_id(&b);
  UniqueIdData da = unpack_unique_id(a), db = unpack_unique_id(b);
  EXPECT_EQ(da.magic, bswire::kIdMagic);
  EXPECT_NE(std::memcmp(da.secret.data(), db.secret.data(), da.secret.size()), 0)
      << "two ids share a secret";
  EXPECT_NE(da.tag, db.tag);
  net::SockAddr addr = net::SockAddr::from_bytes(da.addr);
  EXPECT_GT(addr.port(), 0);
  // The listener really is there: a port scan (connect + close) succeeds.
  net::Fd fd = net::connect_to(addr, net::Deadline::after(5), "test", false);
  EXPECT_TRUE(fd.valid());

  mycollUniqueId bad = a;
  bad.internal[0] ^= 0x5a;
  try {
    unpack_unique_id(bad);
    FAIL() << "bad magic accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not a mycoll unique id"), std::string::npos) << e.what();
  }
  mycollUniqueId zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_THROW(unpack_unique_id(zero), Error);
}

TEST_F(BootEnv, BootIdFromAddressIsDeterministic) {
  unsetenv("MYCOLL_SECRET");
  UniqueIdData a = unique_id_from_address("127.0.0.1", 29500);
  UniqueIdData b = unique_id_from_address("127.0.0.1", 29500);
  UniqueIdData c = unique_id_from_address("127.0.0.1", 29501);
  EXPECT_EQ(a.secret, b.secret);
  EXPECT_NE(a.secret, c.secret);
  setenv("MYCOLL_SECRET", "s3cret", 1);
  UniqueIdData d = unique_id_from_address("127.0.0.1", 29500);
  unsetenv("MYCOLL_SECRET");
  EXPECT_NE(a.secret, d.secret);
  EXPECT_EQ(net::SockAddr::from_bytes(a.addr).str(), "127.0.0.1:29500");
  UniqueIdData e = unique_id_from_address("localhost", 29500);
  EXPECT_EQ(net::SockAddr::from_bytes(e.addr).port(), 29500);
  EXPECT_THROW(unique_id_from_address("no-such-host.invalid", 1), Error);
}

TEST(BootNet, PickInterface) {
  std::string auto_ip = net::pick_interface_ip("");
  EXPECT_NO_THROW(net::SockAddr::from_ip(auto_ip, 0));
  EXPECT_EQ(net::pick_interface_ip("=lo"), "127.0.0.1");
  EXPECT_EQ(net::pick_interface_ip("lo"), "127.0.0.1");
  EXPECT_NE(net::pick_interface_ip("^lo"), "127.0.0.1");
  EXPECT_THROW(net::pick_interface_ip("=nosuchif0"), Error);
}

// ----------------------------------------------------------- collectives ----

void check_collectives(int n) {
  UniqueIdData id = new_id();
  auto errors = run_rank_threads(n, [&](int r) {
    auto bs = Bootstrap::init(id, r, n, 30, "");
    ASSERT_EQ(bs->rank(), r);
    ASSERT_EQ(bs->nranks(), n);
    // Allgather of distinct, odd-sized records, twice (different sizes).
    for (size_t rec : {size_t(13), size_t(4099)}) {
      std::vector<uint8_t> data(n * rec, 0xee);
      for (size_t i = 0; i < rec; ++i) data[r * rec + i] = pattern(r, 0, int(rec), i);
      bs->allgather(data.data(), rec);
      for (int s = 0; s < n; ++s)
        for (size_t i = 0; i < rec; ++i)
          ASSERT_EQ(data[s * rec + i], pattern(s, 0, int(rec), i))
              << "rank " << r << " slot " << s << " byte " << i;
    }
    bs->barrier();
    // Every rank sends to every rank (itself included) before receiving:
    // the eager receive side must keep this from deadlocking, also for
    // messages far larger than a socket buffer.
    auto size_of = [&](int src, int dst) {
      return (src + dst) % 3 == 0 ? size_t(3 << 20) + 7 : size_t(1 + (src * 37 + dst * 11) % 999);
    };
    for (int p = 0; p < n; ++p) {
      std::vector<uint8_t> msg(size_of(r, p));
      for (size_t i = 0; i < msg.size(); ++i) msg[i] = pattern(r, p, 1, i);
      bs->send(p, msg.data(), msg.size());
    }
    for (int k = 0; k < n; ++k) {
      int p = (r + n - k) % n;  // receive in an order different from sending
      std::vector<uint8_t> msg(size_of(p, r));
      bs->recv(p, msg.data(), msg.size());
      for (size_t i = 0; i < msg.size(); ++i)
        ASSERT_EQ(msg[i], pattern(p, r, 1, i)) << "rank " << r << " from " << p << " byte " << i;
    }
    bs->barrier();
    EXPECT_FALSE(bs->local_ip().empty());
  });
  expect_all_ok(errors);
}

TEST_F(BootEnv, BootCollectives1) { check_collectives(1); }
TEST_F(BootEnv, BootCollectives2) { check_collectives(2); }
TEST_F(BootEnv, BootCollectives3) { check_collectives(3); }
TEST_F(BootEnv, BootCollectives5) { check_collectives(5); }
TEST_F(BootEnv, BootCollectives8) { check_collectives(8); }

// mycollCommInitFromEnv's path: rank 0 serves the rendezvous on a known
// host:port, given as a name and as IPv4 / IPv6 literals.
TEST_F(BootEnv, BootRootFromAddress) {
  for (const char* host : {"localhost", "127.0.0.1", "::1"}) {
    SCOPED_TRACE(host);
    net::SockAddr probe;
    int port;
    {
      // A port free on every address (what the root binds), without TIME_WAIT
      // leftovers: hence "" and no SO_REUSEADDR.
      net::Fd fd = net::listen_on("", 0, false, &probe);
      port = probe.port();
    }
    const int n = 3;
    auto errors = run_rank_threads(n, [&](int r) {
      UniqueIdData id = unique_id_from_address(host, port);  // every rank derives the same id
      if (r == 0) start_root_listener(id, n, 10);
      auto bs = Bootstrap::init(id, r, n, 10, "");
      std::vector<uint32_t> v(n);
      v[r] = 7 * r + 1;
      bs->allgather(v.data(), sizeof(uint32_t));
      for (int s = 0; s < n; ++s) EXPECT_EQ(v[s], uint32_t(7 * s + 1));
    });
    expect_all_ok(errors);
  }
  // A port that is taken is a clear SystemError, not a hang.
  net::SockAddr bound;
  net::Fd blocker = net::listen_on("", 0, false, &bound);
  try {
    start_root_listener(unique_id_from_address("127.0.0.1", bound.port()), 2, 1);
    FAIL() << "second listener on a busy port";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollSystemError) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(bound.port())), std::string::npos)
        << e.what();
  }
}

TEST_F(BootEnv, BootSameTagOnAllRanks) {
  const int n = 3;
  UniqueIdData id = new_id();
  std::vector<uint64_t> tags(n);
  expect_all_ok(
      run_rank_threads(n, [&](int r) { tags[r] = Bootstrap::init(id, r, n, 30, "")->tag(); }));
  EXPECT_EQ(tags[0], tags[1]);
  EXPECT_EQ(tags[0], tags[2]);
}

// ------------------------------------------------------- hostile clients ----

TEST_F(BootEnv, BootHostileClientsDoNotDisturbRendezvous) {
  const int n = 3;
  UniqueIdData id = new_id();
  const net::SockAddr root = net::SockAddr::from_bytes(id.addr);

  // While the real ranks join (staggered), hostile clients hit the root: a
  // silent one held open throughout, port scanners, a garbage sender, a
  // wrong secret claiming a real rank, an authenticated client announcing
  // a rank out of range.
  net::Fd silent = net::connect_to(root, net::Deadline::after(5), "silent", false);
  std::vector<std::string> errors;
  // The root ends once every rank is in: the last rank waits until the
  // clients whose answers are checked below have theirs (at most 10 s).
  std::atomic<int> answered{0};
  std::thread ranks([&] {
    errors = run_rank_threads(n, [&](int r) {
      std::this_thread::sleep_for(std::chrono::milliseconds(60 * r));
      for (int i = 0; r == n - 1 && answered.load() < 3 && i < 1000; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      auto bs = Bootstrap::init(id, r, n, 20, "");
      std::vector<int32_t> v(n, -1);
      v[r] = 100 + r;
      bs->allgather(v.data(), sizeof(int32_t));
      for (int s = 0; s < n; ++s) EXPECT_EQ(v[s], 100 + s);
    });
  });
  std::thread scanner([&] {
    for (int i = 0; i < 15; ++i) {
      try {
        net::connect_to(root, net::Deadline::after(1), "scanner", false);
      } catch (const Error&) {
        // the root may be gone already: fine
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  std::thread garbage([&] {
    net::Fd fd = net::connect_to(root, net::Deadline::after(5), "garbage", false);
    std::vector<uint8_t> junk(4096);
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = pattern(9, 9, 9, i);
    net::send_all(fd.get(), junk.data(), junk.size(), net::Deadline::after(2));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  });
  std::string wrong_secret_error;
  mycollResult_t wrong_secret_code = mycollSuccess;
  std::thread wrong([&] {
    UniqueIdData bad = id;
    bad.secret[3] ^= 1;
    try {
      Bootstrap::init(bad, 1, n, 10, "");
    } catch (const Error& e) {
      wrong_secret_error = e.what();
      wrong_secret_code = e.code();
    }
    answered.fetch_add(1);
  });
  // Clients that know the secret but break the protocol after the
  // handshake: a rank out of range (a tagged hello), and a hello whose tag
  // is not the session's (changed on the way). Each gets the root's error
  // report, tagged for its link, naming what was wrong.
  auto misbehave = [&](int rank, bool good_tag, const char* expect) {
    struct Count {
      std::atomic<int>& n;
      ~Count() { n.fetch_add(1); }
    } count{answered};
    net::Fd fd = net::connect_to(root, net::Deadline::after(5), "bogus", false);
    net::SessionKey key;
    ASSERT_TRUE(net::authenticate_client(fd.get(), id.secret, bswire::kRoleRoot, 5, &key));
    bswire::RankHello h;
    std::memset(&h, 0, sizeof(h));
    h.magic = bswire::kHelloMagic;
    h.version = bswire::kIdVersion;
    h.rank = rank;
    h.nranks = n;
    net::SessionKey other = key;
    other[0] ^= 1;
    bswire::FrameMac out(good_tag ? key : other, bswire::Dir::kFromClient);
    const std::vector<uint8_t> hello = bswire::seal_hello(out, h);
    ASSERT_EQ(net::send_all(fd.get(), hello.data(), hello.size(), net::Deadline::after(5)),
              net::IoStatus::kOk);
    bswire::FrameHeader fh;
    ASSERT_EQ(net::recv_all(fd.get(), &fh, sizeof(fh), net::Deadline::after(5)),
              net::IoStatus::kOk);
    ASSERT_EQ(fh.kind, bswire::kRootError);
    ASSERT_LT(fh.len, 4096u);
    std::vector<uint8_t> payload(fh.len);
    bswire::Tag tag;
    ASSERT_EQ(net::recv_all(fd.get(), payload.data(), payload.size(), net::Deadline::after(5)),
              net::IoStatus::kOk);
    ASSERT_EQ(net::recv_all(fd.get(), tag.data(), tag.size(), net::Deadline::after(5)),
              net::IoStatus::kOk);
    bswire::FrameMac in(key, bswire::Dir::kFromServer);
    EXPECT_TRUE(in.check(tag.data(), &fh, sizeof(fh), payload.data(), payload.size()));
    const std::string text(payload.begin() + sizeof(bswire::ErrorHeader), payload.end());
    EXPECT_NE(text.find(expect), std::string::npos) << text;
  };
  std::thread bogus([&] { misbehave(77, true, "77"); });
  std::thread forged([&] { misbehave(1, false, "failed authentication"); });
  for (std::thread* t : {&ranks, &scanner, &garbage, &wrong, &bogus, &forged}) t->join();
  expect_all_ok(errors);
  EXPECT_EQ(wrong_secret_code, mycollInvalidUsage) << wrong_secret_error;
  EXPECT_NE(wrong_secret_error.find("authentication"), std::string::npos) << wrong_secret_error;
}

TEST_F(BootEnv, BootAuthRejectsWrongSecretDirectly) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Secret a{}, b{};
  b[0] = 1;
  bool server_ok = true;
  std::thread server([&] {
    server_ok = net::authenticate_server(sv[0], a, "role", 5);
    if (!server_ok) ::shutdown(sv[0], SHUT_RDWR);  // as a listener drops a bad client
  });
  EXPECT_FALSE(net::authenticate_client(sv[1], b, "role", 5));
  ::shutdown(sv[1], SHUT_RDWR);
  server.join();
  EXPECT_FALSE(server_ok);
  close(sv[0]);
  close(sv[1]);

  // Same secret, different role tag: also rejected. Same everything: accepted.
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::thread s2([&] {
    server_ok = net::authenticate_server(sv[0], a, "socket", 5);
    if (!server_ok) ::shutdown(sv[0], SHUT_RDWR);
  });
  EXPECT_FALSE(net::authenticate_client(sv[1], a, "bootstrap", 5));
  ::shutdown(sv[1], SHUT_RDWR);
  s2.join();
  EXPECT_FALSE(server_ok);
  close(sv[0]);
  close(sv[1]);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::thread s3([&] { server_ok = net::authenticate_server(sv[0], a, "socket", 5); });
  EXPECT_TRUE(net::authenticate_client(sv[1], a, "socket", 5));
  s3.join();
  EXPECT_TRUE(server_ok);
  close(sv[0]);
  close(sv[1]);
}

// -------------------------------------------------------------- failures ----

TEST_F(BootEnv, BootMissingRankTimesOut) {
  const int n = 3;
  UniqueIdData id = new_id();
  auto t0 = std::chrono::steady_clock::now();
  std::vector<mycollResult_t> codes(n, mycollSuccess);
  auto errors = run_rank_threads(2, [&](int r) {  // rank 2 never comes
    try {
      Bootstrap::init(id, r, n, 2.0, "");
    } catch (const Error& e) {
      codes[r] = e.code();
      throw;
    }
  });
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 4.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[r], mycollTimeout) << errors[r];
    EXPECT_NE(errors[r].find("2 of 3 ranks arrived"), std::string::npos) << errors[r];
  }
}

TEST_F(BootEnv, BootRootTimeoutNamesMissingRanks) {
  setenv("MYCOLL_TIMEOUT", "1.5", 1);
  UniqueIdData id = new_id();  // root gives up after 1.5 s
  setenv("MYCOLL_TIMEOUT", "30", 1);
  try {
    Bootstrap::init(id, 1, 4, 10.0, "");
    FAIL() << "init succeeded without the other ranks";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollTimeout);
    std::string m = e.what();
    EXPECT_NE(m.find("1 of 4 ranks arrived"), std::string::npos) << m;
    EXPECT_NE(m.find("missing ranks: 0, 2, 3"), std::string::npos) << m;
  }
}

TEST_F(BootEnv, BootMismatchedNranksRejected) {
  UniqueIdData id = new_id();
  std::vector<std::string> errors(2);
  std::thread a([&] {
    try {
      Bootstrap::init(id, 0, 2, 1.5, "");
    } catch (const Error& e) {
      errors[0] = e.what();
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  try {
    Bootstrap::init(id, 1, 3, 3.0, "");
  } catch (const Error& e) {
    errors[1] = e.what();
    EXPECT_EQ(e.code(), mycollInvalidUsage);
  }
  a.join();
  EXPECT_NE(errors[1].find("nranks=3"), std::string::npos) << errors[1];
  EXPECT_NE(errors[0], "");  // rank 0 waits for a rank 1 that never properly joins
}

TEST_F(BootEnv, BootDeadRankIsRemoteErrorNamingIt) {
  const int n = 3;
  UniqueIdData id = new_id();
  std::vector<mycollResult_t> codes(n, mycollSuccess);
  auto errors = run_rank_threads(n, [&](int r) {
    auto bs = Bootstrap::init(id, r, n, 20, "");
    bs->barrier();
    if (r == 2) {
      bs.reset();  // rank 2 "dies": its sockets close
      return;
    }
    std::vector<uint8_t> v(n * 64);
    try {
      bs->allgather(v.data(), 64);
    } catch (const Error& e) {
      codes[r] = e.code();
      throw;
    }
  });
  EXPECT_EQ(errors[2], "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(codes[r], mycollRemoteError) << errors[r];
    EXPECT_NE(errors[r].find("rank 2"), std::string::npos) << errors[r];
  }
}

TEST_F(BootEnv, BootAbortUnblocksAndPropagates) {
  const int n = 2;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    bs[1]->abort();
  });
  auto t0 = std::chrono::steady_clock::now();
  char c;
  try {
    bs[1]->recv(0, &c, 1);  // rank 0 never sends
    FAIL() << "recv returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollRemoteError) << e.what();
  }
  killer.join();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  EXPECT_THROW(bs[1]->barrier(), Error);  // future calls fail too
  // Rank 0 learns of it (abort frame) instead of waiting for the timeout.
  t0 = std::chrono::steady_clock::now();
  try {
    bs[0]->barrier();
    FAIL() << "barrier with an aborted peer returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
}

// ncclCommAbort of a non-blocking init: a cancel flag ends a rendezvous that
// waits for a rank that never comes within about 0.1 s (not at the
// timeout), with the reason; set after init, it fails the bootstrap as
// abort() does and the peer learns of it.
TEST_F(BootEnv, BootCancelEndsARendezvousThatWaits) {
  UniqueIdData id = new_id();
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel->store(true);
  });
  auto t0 = std::chrono::steady_clock::now();
  try {
    Bootstrap::init(id, 0, 2, 20, "", cancel);  // rank 1 never comes
    ADD_FAILURE() << "init returned without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollRemoteError) << e.what();
    EXPECT_NE(std::string(e.what()).find("init cancelled"), std::string::npos) << e.what();
  }
  setter.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(s, 0.25);
  EXPECT_LT(s, 5.0);  // the timeout is 20 s; the flag is read every 0.1 s

  id = new_id();
  std::vector<CancelFlag> flags(2);
  auto flag1 = std::make_shared<std::atomic<bool>>(false);
  flags[1] = flag1;
  std::vector<std::unique_ptr<Bootstrap>> bs(2);
  expect_all_ok(
      run_rank_threads(2, [&](int r) { bs[r] = Bootstrap::init(id, r, 2, 20, "", flags[r]); }));
  flag1->store(true);
  t0 = std::chrono::steady_clock::now();
  for (int r : {1, 0}) {
    try {
      char c = 0;
      if (r == 1) bs[r]->recv(0, &c, 1);  // rank 0 sends nothing: only the cancel ends it
      if (r == 0) bs[r]->barrier();
      ADD_FAILURE() << "rank " << r << ": a wait after rank 1's cancel returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollRemoteError) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1: init cancelled"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

// A shrink after a rank died: rank 3 dies and the others fail (as a GPU
// communicator does when it sees a process end), so send/recv refuse. The
// survivors still hand each other a message over rescue links, in both
// directions, twice, and a rescue link's end is no news of its rank: the
// links of survivors that did not fail (1 and 2, whose rescue links reached
// 0 and 2) do not read as closed afterwards. A wrong size is an error.
TEST_F(BootEnv, BootRescueLinksWorkAfterAFailure) {
  const int n = 4;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  bs[3].reset();  // rank 3 "dies": its sockets close
  bs[0]->fail_with("rank 0: rank 3 died");
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 300 && bs[r]->remote_failure(0.01).empty() && r != 0; ++i) {}
    char c = 0;
    EXPECT_THROW(bs[r]->send((r + 1) % 3, &c, 1), Error) << "rank " << r;
  }
  for (int round = 0; round < 2; ++round) {
    auto errors = run_rank_threads(3, [&](int r) {
      if (r == 0) {
        for (int to = 1; to < 3; ++to) {
          uint64_t v = 1000 * round + to;
          bs[0]->send_rescue(to, &v, sizeof(v));
        }
      } else {
        uint64_t v = 0;
        bs[r]->recv_rescue(0, &v, sizeof(v));
        EXPECT_EQ(v, uint64_t(1000 * round + r));
        v = 7000 + r;
        bs[r]->send_rescue(0, &v, sizeof(v));
      }
    });
    expect_all_ok(errors);
    for (int from = 1; from < 3; ++from) {
      uint64_t v = 0;
      bs[0]->recv_rescue(from, &v, sizeof(v));
      EXPECT_EQ(v, uint64_t(7000 + from));
    }
  }
  std::vector<bool> survivors = {true, true, true, false};
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rescue links have ended
  for (int r = 0; r < 3; ++r) {
    std::vector<bool> others = survivors;  // rank 0 failed: its links are shut
    others[r] = false;
    if (r != 0) others[0] = false;
    const Bootstrap::PeerTrouble t = bs[r]->peer_trouble(0.0, others);
    EXPECT_EQ(t.closed, -1) << "rank " << r << ": rank " << t.closed << " " << t.closed_why;
  }
  uint32_t four = 4;
  bs[1]->send_rescue(2, &four, sizeof(four));
  uint64_t eight = 0;
  EXPECT_THROW(bs[2]->recv_rescue(1, &eight, sizeof(eight)), Error);
}

// A failure report reaches every rank with a link to the failing one, in
// either direction: rank 0's ring link goes to rank 1, yet rank 2 (whose
// ring link goes to rank 0) hears it over the way back, and so does a rank
// that failed already.
TEST_F(BootEnv, BootFailureReportsTravelBothWays) {
  const int n = 3;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  bs[2]->fail_with("rank 2: first");
  bs[0]->fail_with("rank 0: second");
  EXPECT_NE(bs[2]->remote_failure(3.0).find("rank 0: second"), std::string::npos);
  std::string at1;  // rank 1 hears both, in either order
  for (int i = 0; i < 300 && at1.find("rank 2: first") == std::string::npos; ++i) {
    at1 = bs[1]->remote_failure(3.0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(at1.find("rank 2: first"), std::string::npos) << at1;
  EXPECT_NE(bs[0]->remote_failure(3.0).find("rank 2: first"), std::string::npos);
}

// Issue 14's lost connection, through real links: rank 0 timed out waiting
// for rank 1 and reported first; rank 1 then lost its connection to rank 0
// while also waiting for rank 2, which stays silent (stopped). Rank 1's
// report carries rank 2 apart (Waits::also); both ranks follow it there
// instead of reading a cycle. (Rank 2 never settles: each wait runs its
// whole 2 s, long enough for the reports to arrive on a loaded machine.)
TEST_F(BootEnv, BootALostConnectionsOtherWaitsReachTheStoppedRank) {
  const int n = 3;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  bs[0]->fail_with("rank 0: no progress for 4 s (MYCOLL_TIMEOUT) while receiving from rank 1",
                   Waits{{1}, {}});
  bs[1]->fail_with("rank 1: connection to rank 0 closed", Waits{{0}, {2}});
  const Bootstrap::Cause c0 = bs[0]->root_cause(Waits{{1}, {}}, 2.0);
  const Bootstrap::Cause c1 = bs[1]->root_cause(Waits{{0}, {2}}, 2.0);
  for (const Bootstrap::Cause& c : {c0, c1}) {
    EXPECT_NE(c.root.find("rank 2 reported no failure and made no progress"), std::string::npos)
        << c.root;
    EXPECT_EQ(c.root.find("waiting for one another"), std::string::npos) << c.root;
  }
}

// The GPU path: rank 1's kernels were stopped by rank 2's report, so its
// report names rank 2 as its cause (no waits of its own); rank 0, waiting
// for rank 1, names rank 2's failure.
TEST_F(BootEnv, BootAReportCausedByAnotherLeadsOnToIt) {
  const int n = 3;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  bs[2]->fail_with("rank 2: call mismatch found by its kernel");
  bs[1]->fail_with("rank 1: GPU kernels stopped: another rank failed", Waits{{}, {2}});
  const Bootstrap::Cause c = bs[0]->root_cause(Waits{{1}, {}}, 3.0);
  EXPECT_EQ(c.root, "rank 2: call mismatch found by its kernel (rank 1 was waiting for it)");
}

// The GPU communicator's peer watch (lib/engine/peer_watch.h): every rank
// that watches hears another rank's failure report, once, and its watch
// ends; a watched rank's link ending is reported with that rank; an
// unwatched one's (a rank of this process) is not.
template <typename Pred>
bool wait_for(std::mutex& mu, std::condition_variable& cv, Pred done) {
  std::unique_lock<std::mutex> lk(mu);
  return cv.wait_for(lk, std::chrono::seconds(10), done);
}

TEST_F(BootEnv, BootPeerWatchHearsAReportOnceAndEnds) {
  const int n = 3;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Bootstrap::PeerTrouble> got(n);
  std::vector<int> calls(n, 0);
  std::vector<std::unique_ptr<PeerWatch>> watch;
  for (int r : {0, 1})
    watch.push_back(std::make_unique<PeerWatch>(
        *bs[r], std::vector<bool>(n, true), [] { return false; },
        [&, r](const Bootstrap::PeerTrouble& t) {
          std::lock_guard<std::mutex> g(mu);
          got[r] = t;
          ++calls[r];
          cv.notify_all();
        },
        0.02));
  bs[2]->fail_with("rank 2: boom");
  EXPECT_TRUE(wait_for(mu, cv, [&] { return calls[0] && calls[1]; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no second call
  std::lock_guard<std::mutex> g(mu);
  for (int r : {0, 1}) {
    EXPECT_EQ(calls[r], 1) << "rank " << r;
    EXPECT_NE(got[r].reports.find("rank 2: boom"), std::string::npos) << got[r].reports;
  }
}

TEST_F(BootEnv, BootPeerWatchSeesAWatchedRanksLinkEnd) {
  const int n = 3;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  std::mutex mu;
  std::condition_variable cv;
  Bootstrap::PeerTrouble seen;
  int watched_calls = 0, unwatched_calls = 0;
  // Rank 2's incoming link is rank 1's ring link.
  auto watched = std::make_unique<PeerWatch>(
      *bs[2], std::vector<bool>{true, true, false}, [] { return false; },
      [&](const Bootstrap::PeerTrouble& t) {
        std::lock_guard<std::mutex> g(mu);
        seen = t;
        ++watched_calls;
        cv.notify_all();
      },
      0.02);
  auto unwatched = std::make_unique<PeerWatch>(
      *bs[2], std::vector<bool>(n, false), [] { return false; },
      [&](const Bootstrap::PeerTrouble&) {
        std::lock_guard<std::mutex> g(mu);
        ++unwatched_calls;
      },
      0.02);
  bs[1].reset();  // rank 1's process "ends": its sockets close, no report
  EXPECT_TRUE(wait_for(mu, cv, [&] { return watched_calls > 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_EQ(watched_calls, 1);
    EXPECT_EQ(seen.closed, 1);
    EXPECT_NE(seen.closed_why.find("closed"), std::string::npos) << seen.closed_why;
    EXPECT_EQ(seen.reports, "");
    EXPECT_EQ(unwatched_calls, 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  unwatched.reset();  // a watch that saw nothing ends within about a period
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

TEST_F(BootEnv, BootPeerWatchEndsOnALocalFailure) {
  const int n = 2;
  std::vector<std::unique_ptr<Bootstrap>> bs = boot_ranks(n);
  std::atomic<int> asked{0}, peer_calls{0};
  PeerWatch watch(
      *bs[0], std::vector<bool>(n, true), [&] { return ++asked >= 5; },
      [&](const Bootstrap::PeerTrouble&) { ++peer_calls; }, 0.01);
  for (int i = 0; i < 1000 && asked.load() < 5; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  bs[1]->fail_with("rank 1: after the watch ended");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(asked.load(), 5);  // asked every period until it failed, then no more
  EXPECT_EQ(peer_calls.load(), 0);
}

TEST_F(BootEnv, BootSizeMismatchIsAnError) {
  const int n = 2;
  UniqueIdData id = new_id();
  auto errors = run_rank_threads(n, [&](int r) {
    auto bs = Bootstrap::init(id, r, n, 10, "");
    std::vector<uint8_t> buf(100);
    if (r == 0) bs->send(1, buf.data(), 10);
    if (r == 1) bs->recv(0, buf.data(), 11);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_NE(errors[1].find("expected 11"), std::string::npos) << errors[1];
}

}  // namespace
}  // namespace mycoll
