#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string>

#include "base/config.h"
#include "base/error.h"

using namespace mycoll;

TEST(Config, ParsesSizesAndRejectsGarbage) {
  EXPECT_EQ(parse_bytes("4M", "x"), 4u << 20);
  EXPECT_EQ(parse_bytes("64k", "x"), 64u << 10);
  EXPECT_EQ(parse_bytes("1G", "x"), 1u << 30);
  EXPECT_EQ(parse_bytes(" 123 ", "x"), 123u);
  EXPECT_EQ(parse_bytes("2MB", "x"), 2u << 20);
  EXPECT_THROW(parse_bytes("", "x"), Error);
  EXPECT_THROW(parse_bytes("4Q", "x"), Error);
  EXPECT_THROW(parse_bytes("-1", "x"), Error);
  EXPECT_EQ(parse_int("-42", "x"), -42);
  EXPECT_THROW(parse_int("4.5", "x"), Error);
  EXPECT_DOUBLE_EQ(parse_double("2.5", "x"), 2.5);
  EXPECT_THROW(parse_double("abc", "x"), Error);
}

// A variable unset for one test and put back as it was found.
class UnsetEnv {
 public:
  explicit UnsetEnv(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    had_ = v != nullptr;
    if (had_) saved_ = v;
    unsetenv(name);
  }
  ~UnsetEnv() {
    if (had_)
      setenv(name_, saved_.c_str(), 1);
    else
      unsetenv(name_);
  }
  UnsetEnv(const UnsetEnv&) = delete;
  UnsetEnv& operator=(const UnsetEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string saved_;
};

// A tuned default that depends on oversubscription: unset, `get(c, over)`
// gives `when_not` on a host (or communicator) with a CPU per rank and
// `when_over` on an oversubscribed one; each value in `values` set in the
// environment (the default's own included) is kept as given on both, and
// `is_set` says it was given.
template <typename Get>
void expect_kept_unless_oversubscribed(const char* var, Get get, bool Config::*is_set,
                                       size_t when_not, size_t when_over,
                                       std::initializer_list<const char*> values) {
  UnsetEnv unset(var);
  Config c = Config::from_env();
  EXPECT_FALSE(c.*is_set) << var;
  EXPECT_EQ(get(c, false), when_not) << var;
  EXPECT_EQ(get(c, true), when_over) << var;
  for (const char* v : values) {
    setenv(var, v, 1);
    Config s = Config::from_env();
    EXPECT_TRUE(s.*is_set) << var << "=" << v;
    EXPECT_EQ(get(s, true), parse_bytes(v, "x")) << var << "=" << v;
    EXPECT_EQ(get(s, false), parse_bytes(v, "x")) << var << "=" << v;
  }
}

// Unset, the single-copy threshold is 2 MiB, or 1 MiB on an oversubscribed
// host.
TEST(Config, ShmReadBytesIsLowerOnAnOversubscribedHostUnlessSet) {
  expect_kept_unless_oversubscribed(
      "MYCOLL_SHM_READ_BYTES", [](const Config& c, bool o) { return c.shm_read_bytes_for(o); },
      &Config::shm_read_bytes_set, 2u << 20, 1u << 20, {"2M", "0", "4K", "8M"});
}

// Unset, a gather's messages never go single copy (its root would make
// every copy); given, MYCOLL_SHM_READ_BYTES holds for them too.
TEST(Config, GatherKeepsTheFifoUnlessTheThresholdIsGiven) {
  {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    const Config c = Config::from_env();
    EXPECT_EQ(c.shm_read_bytes_gather(), 0u);
    EXPECT_GT(c.shm_read_bytes_for(false), 0u);  // the other collectives' threshold stays
  }
  for (const char* v : {"2M", "1", "0", "4K"}) {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    setenv("MYCOLL_SHM_READ_BYTES", v, 1);
    const Config c = Config::from_env();
    EXPECT_EQ(c.shm_read_bytes_gather(), parse_bytes(v, "x")) << v;
    EXPECT_EQ(c.shm_read_bytes_gather(), c.shm_read_bytes_for(true)) << v;
  }
}

// Unset, an all-to-all's messages go single copy from 128 KiB where a
// host's ranks are 3 or more per CPU, else as the other collectives'
// (2 MiB, 1 MiB oversubscribed; CPUs unknown: 2 MiB); given, the value.
TEST(Config, AllToAllReadsFrom128KWhereRanksAreThreePerCpuUnlessGiven) {
  {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    const Config c = Config::from_env();
    EXPECT_EQ(c.shm_read_bytes_alltoall, c.shm_read_bytes);
    struct Case {
      int ranks, cpus;
      size_t want;
    };
    for (const Case& k : {Case{1, 1, 2u << 20}, Case{2, 2, 2u << 20}, Case{16, 16, 2u << 20},
                          Case{3, 2, 1u << 20}, Case{5, 2, 1u << 20}, Case{11, 4, 1u << 20},
                          Case{6, 2, 128u << 10}, Case{8, 2, 128u << 10}, Case{3, 1, 128u << 10},
                          Case{64, 16, 128u << 10}, Case{10, 0, 2u << 20}})
      EXPECT_EQ(c.shm_read_bytes_alltoall_for(k.ranks, k.cpus), k.want)
          << k.ranks << " ranks on " << k.cpus << " CPUs";
  }
  for (const char* v : {"2M", "0", "4K", "8M"}) {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    setenv("MYCOLL_SHM_READ_BYTES", v, 1);
    const Config c = Config::from_env();
    EXPECT_EQ(c.shm_read_bytes_alltoall, parse_bytes(v, "x")) << v;
    for (int ranks : {2, 3, 8, 64})
      EXPECT_EQ(c.shm_read_bytes_alltoall_for(ranks, 2), parse_bytes(v, "x")) << v << " " << ranks;
  }
}

// MYCOLL_SHM_READ_SPEED_CHECK: a host's verdict is the median of the
// checks its ranks made (the upper one of an even count; negative values
// are ranks that made none); below 350 (0.35 of memcpy's speed) single copy
// is off for every collective, unless MYCOLL_SHM_READ_BYTES was given.
TEST(Config, ReadSpeedMedianTurnsSingleCopyOffBelowThirtyFiveHundredths) {
  EXPECT_EQ(Config::read_speed_median({}), -1);
  EXPECT_EQ(Config::read_speed_median({-1, -1}), -1);
  EXPECT_EQ(Config::read_speed_median({250}), 250);
  EXPECT_EQ(Config::read_speed_median({-1, 640, -1}), 640);
  EXPECT_EQ(Config::read_speed_median({900, 100, 300}), 300);
  EXPECT_EQ(Config::read_speed_median({390, 410}), 410);
  EXPECT_EQ(Config::read_speed_median({410, 100, 390, 120}), 390);
  EXPECT_EQ(Config::read_speed_median({0, 0, 1000, -1}), 0);
  struct Case {
    int32_t median;
    bool off;
  };
  for (const Case& k :
       {Case{-1, false}, Case{0, true}, Case{250, true}, Case{349, true}, Case{350, false},
        Case{400, false}, Case{640, false}, Case{100000, false}}) {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    Config c = Config::from_env();
    c.shm_read_bytes = c.shm_read_bytes_for(true);
    c.shm_read_bytes_alltoall = c.shm_read_bytes_alltoall_for(8, 2);
    const size_t before = c.shm_read_bytes, before_a2a = c.shm_read_bytes_alltoall;
    EXPECT_EQ(c.apply_read_speed(k.median), k.off) << k.median;
    EXPECT_EQ(c.shm_read_bytes, k.off ? 0u : before) << k.median;
    EXPECT_EQ(c.shm_read_bytes_alltoall, k.off ? 0u : before_a2a) << k.median;
    EXPECT_EQ(c.shm_read_bytes_gather(), 0u) << k.median;
  }
  {
    UnsetEnv unset("MYCOLL_SHM_READ_BYTES");
    setenv("MYCOLL_SHM_READ_BYTES", "4M", 1);
    Config c = Config::from_env();
    EXPECT_FALSE(c.apply_read_speed(100));
    EXPECT_EQ(c.shm_read_bytes, 4u << 20);
    EXPECT_EQ(c.shm_read_bytes_alltoall, 4u << 20);
  }
}

// Unset, a broadcast's chunk is the 512 KiB of every pipeline, or 1 MiB
// (the single-copy threshold there) on an oversubscribed communicator for
// messages of 2 MiB or more; a smaller message keeps two 512 KiB chunks.
TEST(Config, BroadcastChunkReachesSingleCopyOnAnOversubscribedCommUnlessSet) {
  expect_kept_unless_oversubscribed(
      "MYCOLL_CHUNK_BYTES",
      [](const Config& c, bool o) { return c.broadcast_chunk_bytes(size_t(64) << 20, o); },
      &Config::chunk_bytes_set, 512u << 10, 1u << 20, {"512K", "64K", "1M", "4M"});
  UnsetEnv unset("MYCOLL_CHUNK_BYTES");
  const Config c = Config::from_env();
  for (size_t bytes : {size_t(0), size_t(1), size_t(1) << 20, (size_t(2) << 20) - 1}) {
    EXPECT_EQ(c.broadcast_chunk_bytes(bytes, true), 512u << 10) << bytes;
    EXPECT_EQ(c.broadcast_chunk_bytes(bytes, false), 512u << 10) << bytes;
  }
  for (size_t bytes : {size_t(2) << 20, (size_t(2) << 20) + 1, size_t(5) << 30}) {
    EXPECT_EQ(c.broadcast_chunk_bytes(bytes, true), 1u << 20) << bytes;
    EXPECT_EQ(c.broadcast_chunk_bytes(bytes, false), 512u << 10) << bytes;
  }
  EXPECT_EQ(Config::broadcast_chunk_bytes_oversubscribed(512u << 10), 1u << 20);
  EXPECT_EQ(Config::broadcast_chunk_bytes_oversubscribed(4u << 20), 4u << 20);
}

TEST(Config, FromEnvReadsEveryVariableAndNamesBadOnes) {
  setenv("MYCOLL_TIMEOUT", "7.5", 1);
  setenv("MYCOLL_SHM_FIFO_BYTES", "1M", 1);
  Config c = Config::from_env();
  EXPECT_DOUBLE_EQ(c.timeout_s, 7.5);
  EXPECT_EQ(c.shm_fifo_bytes, 1u << 20);
  setenv("MYCOLL_SHM_READ_BYTES", "0", 1);
  EXPECT_EQ(Config::from_env().shm_read_bytes, 0u);
  setenv("MYCOLL_SHM_READ_BYTES", "2M", 1);
  EXPECT_EQ(Config::from_env().shm_read_bytes, 2u << 20);
  setenv("MYCOLL_SHM_READ_BYTES", "lots", 1);
  EXPECT_THROW(Config::from_env(), Error);
  unsetenv("MYCOLL_SHM_READ_BYTES");
  setenv("MYCOLL_TIMEOUT", "soon", 1);
  try {
    Config::from_env();
    FAIL() << "bad MYCOLL_TIMEOUT accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), mycollInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("MYCOLL_TIMEOUT"), std::string::npos) << e.what();
  }
  setenv("MYCOLL_TIMEOUT", "-1", 1);
  EXPECT_THROW(Config::from_env(), Error);
  unsetenv("MYCOLL_TIMEOUT");
  unsetenv("MYCOLL_SHM_FIFO_BYTES");
  setenv("MYCOLL_NCHANNELS", "0", 1);
  EXPECT_THROW(Config::from_env(), Error);
  unsetenv("MYCOLL_NCHANNELS");
  EXPECT_EQ(Config::from_env().gpu_plan_channels, 32);
  setenv("MYCOLL_GPU_PLAN_CHANNELS", "64", 1);
  EXPECT_EQ(Config::from_env().gpu_plan_channels, 64);
  for (const char* bad : {"0", "65", "x"}) {
    setenv("MYCOLL_GPU_PLAN_CHANNELS", bad, 1);
    EXPECT_THROW(Config::from_env(), Error) << bad;
  }
  unsetenv("MYCOLL_GPU_PLAN_CHANNELS");
  EXPECT_NO_THROW(Config::from_env());
}

// Transport settings are parsed with the rest at init (transports read them
// from the communicator's Config, never from the environment at connect).
TEST(Config, TransportSettingsParsedOnceWithTheRest) {
  Config d = Config::from_env();
  EXPECT_EQ(d.ucx.chunk_bytes, 256u << 10);
  EXPECT_EQ(d.ucx.window, 8);
  EXPECT_TRUE(d.ucx.peer_error_mode);
  EXPECT_EQ(d.ib.hca, "");
  EXPECT_EQ(d.ib.gid_index, -1);
  EXPECT_EQ(d.ib.timeout, 14);
  EXPECT_EQ(d.ib.retry_cnt, 7);
  EXPECT_EQ(d.ib.buffer_bytes, 4u << 20);
  EXPECT_EQ(d.topo_dump_file, "");
  setenv("MYCOLL_UCX_CHUNK_BYTES", "64K", 1);
  setenv("MYCOLL_UCX_ERROR_MODE", "none", 1);
  setenv("MYCOLL_IB_HCA", "mlx5_0:1", 1);
  setenv("MYCOLL_IB_RETRY_CNT", "3", 1);
  setenv("MYCOLL_TOPO_DUMP_FILE", "/tmp/t_%r.json", 1);
  Config c = Config::from_env();
  EXPECT_EQ(c.ucx.chunk_bytes, 64u << 10);
  EXPECT_FALSE(c.ucx.peer_error_mode);
  EXPECT_EQ(c.ib.hca, "mlx5_0:1");
  EXPECT_EQ(c.ib.retry_cnt, 3);
  EXPECT_EQ(c.topo_dump_file, "/tmp/t_%r.json");
  for (const char* v : {"MYCOLL_UCX_CHUNK_BYTES", "MYCOLL_UCX_ERROR_MODE", "MYCOLL_IB_HCA",
                        "MYCOLL_IB_RETRY_CNT", "MYCOLL_TOPO_DUMP_FILE"})
    unsetenv(v);
  const struct {
    const char* var;
    const char* bad;
  } bad[] = {{"MYCOLL_UCX_CHUNK_BYTES", "32"},  {"MYCOLL_UCX_WINDOW", "0"},
             {"MYCOLL_UCX_ERROR_MODE", "some"}, {"MYCOLL_IB_GID_INDEX", "-2"},
             {"MYCOLL_IB_TIMEOUT", "32"},       {"MYCOLL_IB_RETRY_CNT", "8"},
             {"MYCOLL_IB_BUFFER_BYTES", "1K"}};
  for (const auto& b : bad) {
    setenv(b.var, b.bad, 1);
    try {
      Config::from_env();
      ADD_FAILURE() << b.var << "=" << b.bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(b.var), std::string::npos) << e.what();
    }
    unsetenv(b.var);
  }
}

// MYCOLL_TIMEOUT has one parser: Config::from_env and the rendezvous root
// (before any Config exists) agree on what is valid.
TEST(Config, TimeoutParsedInOnePlace) {
  EXPECT_DOUBLE_EQ(timeout_from_env(), 300.0);
  setenv("MYCOLL_TIMEOUT", "12.5", 1);
  EXPECT_DOUBLE_EQ(timeout_from_env(), 12.5);
  EXPECT_DOUBLE_EQ(Config::from_env().timeout_s, 12.5);
  for (const char* bad : {"0", "-3", "never"}) {
    setenv("MYCOLL_TIMEOUT", bad, 1);
    EXPECT_THROW(timeout_from_env(), Error) << bad;
    EXPECT_THROW(Config::from_env(), Error) << bad;
  }
  unsetenv("MYCOLL_TIMEOUT");
}

TEST(Config, RegistryIsUniqueAndUnregisteredNamesFail) {
  std::set<std::string> names;
  for (const auto& v : env_registry()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_EQ(std::string(v.name).rfind("MYCOLL_", 0), 0u) << v.name;
    EXPECT_GT(std::string(v.meaning).size(), 10u) << v.name;
  }
  EXPECT_THROW(env_get("MYCOLL_NOT_A_VARIABLE"), Error);
}

TEST(Config, EnvironmentDocMatchesRegistry) {
  std::ifstream f(std::string(MYCOLL_SOURCE_DIR) + "/docs/environment.md");
  ASSERT_TRUE(f.good()) << "docs/environment.md missing";
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_EQ(ss.str(), environment_markdown())
      << "regenerate: build/tools/mycoll-gen-env-doc > docs/environment.md";
}

#include <cstring>

#include "topo/topo.h"

TEST(Topo, HostMajorOrderGroupsRanksByHost) {
  std::vector<PeerInfo> all(7);
  const char* hosts[] = {"b", "a", "b", "c", "a", "b", "c"};
  for (int r = 0; r < 7; ++r) {
    all[r].rank = r;
    std::strcpy(all[r].host_id, hosts[r]);
  }
  EXPECT_EQ(host_major_order(all), (std::vector<int>{0, 2, 5, 1, 4, 3, 6}));
  EXPECT_EQ(count_hosts(all), 3);
  for (auto& p : all) std::strcpy(p.host_id, "same");
  EXPECT_EQ(host_major_order(all), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

#include "algorithms/plan.h"

TEST(AlgoPolicyOversubscribed, PrefersFewerStepsForMidSizeAllReduce) {
  constexpr size_t KiB = 1024;
  AlgoPolicy p = AlgoPolicy::parse("");
  EXPECT_EQ(p.choose(Coll::AllReduce, 8, size_t(4) << 20), Algo::Ring);
  p.set_oversubscribed(true);
  EXPECT_EQ(p.choose(Coll::AllReduce, 8, size_t(4) << 20), Algo::Rhd);
  // Host memory on shm, 4-8 ranks: recursive doubling over 2-16 KiB; other
  // rank counts, sizes and links keep the lines above.
  AlgoPolicy s;
  s.set_oversubscribed(true);
  s.set_host_links(AlgoPolicy::HostLinks::Shm);
  for (int n : {4, 6, 8}) {
    EXPECT_EQ(s.choose(Coll::AllReduce, n, 2 * KiB), p.choose(Coll::AllReduce, n, 2 * KiB)) << n;
    EXPECT_EQ(s.choose(Coll::AllReduce, n, 2 * KiB + 4), Algo::Doubling) << n;
    EXPECT_EQ(s.choose(Coll::AllReduce, n, 16 * KiB), Algo::Doubling) << n;
    EXPECT_EQ(s.choose(Coll::AllReduce, n, 16 * KiB + 4),
              p.choose(Coll::AllReduce, n, 16 * KiB + 4))
        << n;
    EXPECT_NE(p.choose(Coll::AllReduce, n, 8 * KiB), Algo::Doubling) << n;
  }
  for (int n : {3, 9})
    EXPECT_EQ(s.choose(Coll::AllReduce, n, 8 * KiB), p.choose(Coll::AllReduce, n, 8 * KiB)) << n;
  AlgoPolicy not_over;
  not_over.set_host_links(AlgoPolicy::HostLinks::Shm);
  EXPECT_EQ(not_over.choose(Coll::AllReduce, 8, 8 * KiB),
            AlgoPolicy::auto_choice(Coll::AllReduce, 8, 8 * KiB));
  EXPECT_EQ(p.choose(Coll::AllReduce, 8, size_t(64) << 20), Algo::Ring);
  EXPECT_EQ(p.choose(Coll::AllReduce, 2, size_t(4) << 20), Algo::Ring);
  EXPECT_EQ(p.choose(Coll::AllGather, 8, size_t(4) << 20), Algo::Ring);
  // Oversubscribed: the one shot while its n-1 copies stay within 32 KiB
  // (measured on 2 cores), then rhd; with a core per rank the rule's own
  // limit (one_shot_max_bytes, lower from 4 ranks).
  AlgoPolicy q = AlgoPolicy::parse("");
  EXPECT_EQ(q.choose(Coll::AllReduce, 3, 32 * KiB), Algo::Direct);
  EXPECT_EQ(q.choose(Coll::AllReduce, 4, 4 * KiB), Algo::Rhd);
  q.set_oversubscribed(true);
  for (int n : {3, 4, 5, 8, 16}) {
    const size_t limit = 32 * KiB / size_t(n - 1);  // largest one shot
    EXPECT_EQ(q.choose(Coll::AllReduce, n, 8), Algo::Direct) << n;
    EXPECT_EQ(q.choose(Coll::AllReduce, n, limit), Algo::Direct) << n;
    EXPECT_EQ(q.choose(Coll::AllReduce, n, limit + 1), Algo::Rhd) << n;
    EXPECT_EQ(q.choose(Coll::AllReduce, n, 64 * KiB), Algo::Rhd) << n;
  }
  EXPECT_EQ(q.choose(Coll::AllReduce, 2, 64 * KiB), Algo::Direct);  // one step either way
  EXPECT_EQ(q.choose(Coll::Gather, 4, 64 * KiB), Algo::Direct);     // all-reduce only
  // A forced algorithm still wins.
  AlgoPolicy f = AlgoPolicy::parse("ring");
  f.set_oversubscribed(true);
  EXPECT_EQ(f.choose(Coll::AllReduce, 8, size_t(4) << 20), Algo::Ring);
}

// Gather and scatter over shm with a core per rank: the tree at 8 ranks
// and more while blocks are at most 4 KiB (16+ ranks: the rule's own 8
// KiB); direct below 8 ranks, oversubscribed, across a network, on GPU
// communicators, and where MYCOLL_ALGO names one.
TEST(AlgoPolicyShm, SmallGatherAndScatterTakeTheTreeWithACorePerRankFromEightRanks) {
  constexpr size_t KiB = 1024;
  AlgoPolicy shm;
  shm.set_host_links(AlgoPolicy::HostLinks::Shm);
  for (Coll c : {Coll::Gather, Coll::Scatter}) {
    for (int n : {8, 9, 12}) {
      EXPECT_EQ(shm.choose(c, n, 8), Algo::Tree) << n;
      EXPECT_EQ(shm.choose(c, n, n * 4 * KiB), Algo::Tree) << n;
      EXPECT_EQ(shm.choose(c, n, n * 4 * KiB + n), Algo::Direct) << n;
    }
    EXPECT_EQ(shm.choose(c, 16, 16 * 8 * KiB), Algo::Tree);  // the rule's, unchanged
    for (int n : {2, 4, 7}) EXPECT_EQ(shm.choose(c, n, 64), Algo::Direct) << n;
    AlgoPolicy crowded;
    crowded.set_host_links(AlgoPolicy::HostLinks::Shm);
    crowded.set_oversubscribed(true);
    EXPECT_EQ(crowded.choose(c, 8, 64), Algo::Direct);
    AlgoPolicy net;
    net.set_host_links(AlgoPolicy::HostLinks::Network);
    EXPECT_EQ(net.choose(c, 8, 64), Algo::Direct);
    AlgoPolicy gpu;  // HostLinks::None
    EXPECT_EQ(gpu.choose(c, 8, 64), Algo::Direct);
    AlgoPolicy forced = AlgoPolicy::parse("gather:direct,scatter:direct");
    forced.set_host_links(AlgoPolicy::HostLinks::Shm);
    EXPECT_EQ(forced.choose(c, 8, 64), Algo::Direct);
  }
  EXPECT_FALSE(AlgoPolicy::shm_rooted_tree(8, 64, true));
  EXPECT_TRUE(AlgoPolicy::shm_rooted_tree(8, 8 * 4 * KiB, false));
  EXPECT_EQ(shm.choose(Coll::Broadcast, 8, 64), AlgoPolicy::auto_choice(Coll::Broadcast, 8, 64));
}

// The GPU kernel limits: default, 0 (off), a value in range, one past the
// upper bound (where there is one) and garbage.
TEST(Config, GpuKernelLimits) {
  struct Case {
    const char* var;
    size_t Config::*field;
    size_t def;
    const char* ok;
    size_t ok_value;
    const char* bad;  // beyond the bound, or negative where there is none
  };
  const Case cases[] = {
      {"MYCOLL_GPU_ONESHOT_BYTES", &Config::gpu_oneshot_bytes, 64u << 10, "256K", 256u << 10, "5M"},
      {"MYCOLL_GPU_TWOSHOT_BYTES", &Config::gpu_twoshot_bytes, 4u << 20, "64M", 64u << 20, "65M"},
      {"MYCOLL_GPU_LL_COLL_BYTES", &Config::gpu_ll_coll_bytes, 2u << 20, "16M", 16u << 20, "17M"},
      {"MYCOLL_GPU_RING_BYTES", &Config::gpu_ring_bytes, 1u << 20, "1", 1u, "-4K"},
      {"MYCOLL_GPU_DIRECT_BYTES", &Config::gpu_direct_bytes, 1u << 20, "3M", 3u << 20, "-1M"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.var);
    EXPECT_EQ(Config::from_env().*c.field, c.def);
    setenv(c.var, "0", 1);
    EXPECT_EQ(Config::from_env().*c.field, 0u);
    setenv(c.var, c.ok, 1);
    EXPECT_EQ(Config::from_env().*c.field, c.ok_value);
    setenv(c.var, c.bad, 1);
    EXPECT_THROW(Config::from_env(), Error);
    setenv(c.var, "lots", 1);
    EXPECT_THROW(Config::from_env(), Error);
    unsetenv(c.var);
  }
}

// Each of `bad` in `var` is refused as an invalid argument naming `var`;
// the variable is unset after.
static void expect_refused(const char* var, std::initializer_list<const char*> bad) {
  for (const char* v : bad) {
    setenv(var, v, 1);
    try {
      (void)Config::from_env();
      ADD_FAILURE() << var << ": accepted '" << v << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), mycollInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(var), std::string::npos) << e.what();
    }
  }
  unsetenv(var);
}

// MYCOLL_SHM_READ_SPEED_CHECK is 1 unset, 0 or 1 given, and nothing else.
TEST(Config, ReadSpeedCheckIsZeroOrOne) {
  UnsetEnv unset("MYCOLL_SHM_READ_SPEED_CHECK");
  EXPECT_TRUE(Config::from_env().shm_read_speed_check);
  setenv("MYCOLL_SHM_READ_SPEED_CHECK", "0", 1);
  EXPECT_FALSE(Config::from_env().shm_read_speed_check);
  setenv("MYCOLL_SHM_READ_SPEED_CHECK", "1", 1);
  EXPECT_TRUE(Config::from_env().shm_read_speed_check);
  expect_refused("MYCOLL_SHM_READ_SPEED_CHECK", {"yes", "2", "on"});
}

// The GPU call check is on (chains' first ranks deferring) unless the
// variable says 0, strict without deferral; anything but 0, 1 or strict is
// refused, naming the variable.
TEST(Config, GpuCallCheckSwitch) {
  unsetenv("MYCOLL_GPU_CALL_CHECK");
  EXPECT_TRUE(Config::from_env().gpu_call_check);
  EXPECT_FALSE(Config::from_env().gpu_call_check_strict);
  setenv("MYCOLL_GPU_CALL_CHECK", "0", 1);
  EXPECT_FALSE(Config::from_env().gpu_call_check);
  EXPECT_FALSE(Config::from_env().gpu_call_check_strict);
  setenv("MYCOLL_GPU_CALL_CHECK", " 1 ", 1);
  EXPECT_TRUE(Config::from_env().gpu_call_check);
  EXPECT_FALSE(Config::from_env().gpu_call_check_strict);
  setenv("MYCOLL_GPU_CALL_CHECK", "strict", 1);
  EXPECT_TRUE(Config::from_env().gpu_call_check);
  EXPECT_TRUE(Config::from_env().gpu_call_check_strict);
  expect_refused("MYCOLL_GPU_CALL_CHECK", {"yes", "2", "", "off", "Strict"});
}

// Programmatic launch of the LL kernel: on unless the variable says 0;
// anything but 0 or 1 is refused, naming the variable.
TEST(Config, GpuPdlSwitch) {
  unsetenv("MYCOLL_GPU_PDL");
  EXPECT_TRUE(Config::from_env().gpu_pdl);
  setenv("MYCOLL_GPU_PDL", "0", 1);
  EXPECT_FALSE(Config::from_env().gpu_pdl);
  setenv("MYCOLL_GPU_PDL", " 1 ", 1);
  EXPECT_TRUE(Config::from_env().gpu_pdl);
  expect_refused("MYCOLL_GPU_PDL", {"yes", "2", "", "on"});
}

// forced(): whether MYCOLL_ALGO names a collective's algorithm (the engine
// runs a small broadcast as the LL kernel only when it does not).
TEST(AlgoPolicy, Forced) {
  EXPECT_FALSE(AlgoPolicy::parse("").forced(Coll::Broadcast));
  EXPECT_FALSE(AlgoPolicy::parse("auto").forced(Coll::Broadcast));
  EXPECT_TRUE(AlgoPolicy::parse("ring").forced(Coll::Broadcast));
  EXPECT_TRUE(AlgoPolicy::parse("tree").forced(Coll::Broadcast));
  // rhd does not serve broadcast: the rule picks it. direct does (the flat
  // tree the LL kernel runs).
  EXPECT_FALSE(AlgoPolicy::parse("rhd").forced(Coll::Broadcast));
  EXPECT_TRUE(AlgoPolicy::parse("direct").forced(Coll::Broadcast));
  EXPECT_TRUE(AlgoPolicy::parse("direct").forced(Coll::AllGather));
  EXPECT_TRUE(AlgoPolicy::parse("broadcast:tree").forced(Coll::Broadcast));
  EXPECT_FALSE(AlgoPolicy::parse("broadcast:tree").forced(Coll::AllGather));
  EXPECT_FALSE(AlgoPolicy::parse("ring,broadcast:auto").forced(Coll::Broadcast));
  EXPECT_TRUE(AlgoPolicy::parse("ring,broadcast:auto").forced(Coll::Reduce));
  // Reduce likewise (the engine runs a small reduce as the LL kernel only
  // when it is not forced).
  EXPECT_FALSE(AlgoPolicy::parse("").forced(Coll::Reduce));
  EXPECT_FALSE(AlgoPolicy::parse("rhd").forced(Coll::Reduce));
  EXPECT_TRUE(AlgoPolicy::parse("direct").forced(Coll::Reduce));
  EXPECT_TRUE(AlgoPolicy::parse("reduce:tree").forced(Coll::Reduce));
  EXPECT_FALSE(AlgoPolicy::parse("reduce:tree").forced(Coll::Broadcast));
}
