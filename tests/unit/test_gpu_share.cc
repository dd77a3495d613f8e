// Ranks sharing a GPU (lib/topo): who shares with whom, and the block
// budget that keeps the kernels of ranks sharing a GPU resident together.
// Ranks sharing CPUs: which hosts run more ranks than their CPUs.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstring>
#include <vector>

#include "topo/topo.h"

using namespace mycoll;

namespace {

PeerInfo peer(int rank, const char* host, int dev, uint64_t bus, int pid) {
  PeerInfo p;
  p.rank = rank;
  p.pid = pid;
  p.cuda_device = dev;
  p.gpu_bus_id = dev >= 0 ? bus : 0;
  std::strncpy(p.host_id, host, sizeof(p.host_id) - 1);
  return p;
}

TEST(GpuShare, OneRankPerGpuSharesNothing) {
  std::vector<PeerInfo> all = {peer(0, "a", 0, 0x1800, 10), peer(1, "a", 1, 0x2a00, 11),
                               peer(2, "a", 2, 0x3a00, 12)};
  EXPECT_EQ(max_ranks_per_gpu(all), 1);
  EXPECT_EQ(ranks_on_gpu(all, 1), std::vector<int>({1}));
  EXPECT_EQ(shared_gpu_block_budget(132, max_ranks_per_gpu(all)), 132);
}

TEST(GpuShare, RoundRobinOverTwoGpus) {
  // torchrun layout local_rank % 2: ranks 0, 2, 4 on the first GPU.
  std::vector<PeerInfo> all;
  for (int r = 0; r < 5; ++r) all.push_back(peer(r, "a", r % 2, r % 2 ? 0x2a00 : 0x1800, 100 + r));
  EXPECT_EQ(ranks_on_gpu(all, 2), std::vector<int>({0, 2, 4}));
  EXPECT_EQ(ranks_on_gpu(all, 3), std::vector<int>({1, 3}));
  EXPECT_EQ(max_ranks_per_gpu(all), 3);
  // Every rank budgets for the busiest GPU, so all agree.
  EXPECT_EQ(shared_gpu_block_budget(132, 3), 44);
  EXPECT_EQ(shared_gpu_block_budget(132, 8), 16);
}

TEST(GpuShare, SameBusOnAnotherHostIsAnotherGpu) {
  std::vector<PeerInfo> all = {peer(0, "a", 0, 0x1800, 10), peer(1, "b", 0, 0x1800, 10),
                               peer(2, "a", 0, 0x1800, 12)};
  EXPECT_EQ(ranks_on_gpu(all, 0), std::vector<int>({0, 2}));
  EXPECT_EQ(ranks_on_gpu(all, 1), std::vector<int>({1}));
  EXPECT_EQ(max_ranks_per_gpu(all), 2);
}

TEST(GpuShare, HostRanksShareNoGpu) {
  std::vector<PeerInfo> all = {peer(0, "a", -1, 0, 10), peer(1, "a", -1, 0, 11)};
  EXPECT_EQ(max_ranks_per_gpu(all), 1);
  EXPECT_EQ(ranks_on_gpu(all, 0), std::vector<int>({0}));
}

TEST(GpuShare, BudgetNeverZero) {
  EXPECT_EQ(shared_gpu_block_budget(4, 64), 1);
  EXPECT_EQ(shared_gpu_block_budget(0, 1), 1);
}

CpuMask cpus_of(std::initializer_list<int> cs) {
  CpuMask m;
  for (int c : cs) m.bits[c / 64] |= uint64_t(1) << (c % 64);
  return m;
}

// mpirun / srun --cpu-bind=cores: each rank bound to a core of its own.
TEST(CpuShare, RanksBoundToACoreEachAreNotOversubscribed) {
  std::vector<PeerInfo> all = {peer(0, "a", -1, 0, 10), peer(1, "a", -1, 0, 11),
                               peer(2, "a", -1, 0, 12), peer(3, "a", -1, 0, 13)};
  std::vector<int> cpus;
  auto over =
      oversubscribed_hosts(all, {cpus_of({0}), cpus_of({1}), cpus_of({70}), cpus_of({71})}, &cpus);
  EXPECT_EQ(over, std::vector<char>({0, 0, 0, 0}));
  EXPECT_EQ(cpus, std::vector<int>({4, 4, 4, 4}));
}

TEST(CpuShare, RanksConfinedToFewerCpusAreOversubscribed) {
  // Four ranks unbound on a 2-CPU machine, and four pinned to CPUs 0-1 of
  // a larger one: the same answer.
  std::vector<PeerInfo> all = {peer(0, "a", -1, 0, 10), peer(1, "a", -1, 0, 11),
                               peer(2, "a", -1, 0, 12), peer(3, "a", -1, 0, 13)};
  const CpuMask two = cpus_of({0, 1});
  EXPECT_EQ(oversubscribed_hosts(all, {two, two, two, two}), std::vector<char>({1, 1, 1, 1}));
  EXPECT_EQ(oversubscribed_hosts(all, {cpus_of({0}), cpus_of({0}), cpus_of({1}), cpus_of({1})}),
            std::vector<char>({1, 1, 1, 1}));
  // Three ranks on three CPUs between them: exactly full is not over.
  all.pop_back();
  EXPECT_EQ(oversubscribed_hosts(all, {cpus_of({0, 1}), cpus_of({1, 2}), cpus_of({2})}),
            std::vector<char>({0, 0, 0}));
}

TEST(CpuShare, EachHostJudgedOnItsOwnRanks) {
  // Host a: two ranks on one CPU; host b: two ranks on two CPUs (the same
  // CPU numbers on another machine are other CPUs).
  std::vector<PeerInfo> all = {peer(0, "a", -1, 0, 10), peer(1, "b", -1, 0, 10),
                               peer(2, "a", -1, 0, 12), peer(3, "b", -1, 0, 13)};
  std::vector<int> cpus;
  auto over =
      oversubscribed_hosts(all, {cpus_of({5}), cpus_of({5}), cpus_of({5}), cpus_of({6})}, &cpus);
  EXPECT_EQ(over, std::vector<char>({1, 0, 1, 0}));
  EXPECT_EQ(cpus, std::vector<int>({1, 2, 1, 2}));
}

TEST(CpuShare, UnknownMaskIsNotOversubscribed) {
  std::vector<PeerInfo> all = {peer(0, "a", -1, 0, 10), peer(1, "a", -1, 0, 11),
                               peer(2, "b", -1, 0, 12), peer(3, "b", -1, 0, 13)};
  std::vector<int> cpus;
  auto over =
      oversubscribed_hosts(all, {CpuMask{}, cpus_of({0}), cpus_of({0}), cpus_of({0})}, &cpus);
  EXPECT_EQ(over, std::vector<char>({0, 0, 1, 1}));
  EXPECT_EQ(cpus, std::vector<int>({0, 0, 1, 1}));
}

TEST(CpuShare, ThisProcessHasItsAffinityMask) {
  const CpuMask m = local_cpu_mask();
  int count = 0;
  for (uint64_t w : m.bits) count += __builtin_popcountll(w);
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(count, CPU_COUNT(&set));
  for (int c = 0; c < 1024 && c < CPU_SETSIZE; ++c)
    EXPECT_EQ((m.bits[c / 64] >> (c % 64)) & 1, CPU_ISSET(c, &set) ? 1u : 0u) << "CPU " << c;
}

}  // namespace
