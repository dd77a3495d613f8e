// Who is where, and which transport serves each peer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.h"
#include "transports/transport.h"

namespace mycoll {

// This host's identity: MYCOLL_HOST_ID, else hostname + "/" + boot id.
std::string local_host_id(const Config& cfg);

PeerInfo local_peer_info(int rank, int cuda_device, const std::string& ip, const Config& cfg);

// Transport name per rank ("self" for this rank). Rules:
//  MYCOLL_TRANSPORT set: that transport for every peer; one that cannot
//  serve a peer is Error(InvalidUsage) naming the peer and why.
//  auto: host communicators use shm on the same host, the network transport
//  (MYCOLL_NET, default socket) otherwise; GPU communicators use cuda_ipc
//  between GPUs of one host.
std::vector<std::string> select_transports(const Config& cfg, const std::vector<PeerInfo>& all,
                                           int rank);

// The network transport between hosts: MYCOLL_NET (ib | ucx | socket;
// naming an unavailable one is Error(InvalidUsage) saying why), unset = ib
// when `needed` and an RDMA device exists, else socket.
std::string choose_net(const Config& cfg, bool needed);

// Host-major rank order: ranks grouped by host (hosts in order of their
// lowest rank), rank order inside a host. A ring in this order crosses each
// host boundary once. order[v] = rank at position v.
std::vector<int> host_major_order(const std::vector<PeerInfo>& all);

// Number of distinct hosts among all.
int count_hosts(const std::vector<PeerInfo>& all);

// The CPUs a rank may run on (its affinity mask), as allgathered at init:
// bit c % 64 of word c / 64 is CPU c. All zero: not known (the mask did not
// fit these 1024 CPUs).
struct CpuMask {
  uint64_t bits[16] = {};
};
CpuMask local_cpu_mask();

// For each rank: whether its host runs more ranks than the CPUs those
// ranks may run on together (the union of the masks of every rank with its
// host_id). Ranks bound to a core each are not oversubscribed; ranks bound
// to fewer cores than there are of them are, however many the machine has.
// A host with an unknown mask is not counted as oversubscribed. cpus, when
// given, gets per rank the CPUs its host's ranks cover (0: unknown). Every
// rank computes the same from the allgathered peers and masks.
std::vector<char> oversubscribed_hosts(const std::vector<PeerInfo>& all,
                                       const std::vector<CpuMask>& masks,
                                       std::vector<int>* cpus = nullptr);

// Ranks on the same GPU as `rank` (same host, same PCI bus id), `rank`
// included, ascending; just {rank} for a host-only rank.
std::vector<int> ranks_on_gpu(const std::vector<PeerInfo>& all, int rank);

// The most ranks any one GPU of the communicator carries (1 when no two
// ranks share a GPU, or none has one). Every rank computes the same value
// from the allgathered PeerInfo.
int max_ranks_per_gpu(const std::vector<PeerInfo>& all);

// Thread blocks one rank's kernel may use so that the kernels of `per_gpu`
// ranks sharing a GPU of `sms` multiprocessors are resident together (one
// block per multiprocessor, the kernels' launch bounds): sms / per_gpu, at
// least 1. A kernel waits on its peers' kernels, so on a shared GPU they
// must run at once (threads of one process, or processes under MPS); with
// one rank per GPU this is the whole GPU.
int shared_gpu_block_budget(int sms, int per_gpu);

}  // namespace mycoll
