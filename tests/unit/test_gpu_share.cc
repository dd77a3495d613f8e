// Ranks sharing a GPU (lib/topo): who shares with whom, and the block
// budget that keeps the kernels of ranks sharing a GPU resident together.
#include <gtest/gtest.h>

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

}  // namespace
