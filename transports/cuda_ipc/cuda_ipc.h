// CUDA IPC mesh: every rank's FIFO inbox (one device allocation) mapped into
// every other rank of the same host that is served by cuda_ipc, through CUDA
// IPC handles between processes or directly with peer access inside one
// process. Also says which path (NVLink or PCIe) joins each pair.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "transports/transport.h"

namespace mycoll {

class CudaIpcMesh {
 public:
  // Collective over bs (every rank calls it). use[r]: whether rank r is a
  // cuda_ipc peer of this rank (symmetric). Allocates `bytes` of zeroed
  // device memory on `device` as this rank's inbox, zeroed through `stream`
  // (a non-blocking stream: no implicit synchronisation with kernels of
  // other ranks sharing the GPU). Throws Error.
  static std::unique_ptr<CudaIpcMesh> create(Bootstrap& bs, const std::vector<PeerInfo>& all,
                                             const std::vector<bool>& use, int device,
                                             size_t bytes, cudaStream_t stream);
  ~CudaIpcMesh();

  char* local() const { return local_; }
  // Rank r's inbox as addressable from this device (nullptr if not a peer).
  const std::vector<char*>& remote() const { return remote_; }
  // "cuda_ipc NVLink, CUDA IPC between processes" etc.
  const std::string& describe(int rank) const { return desc_[rank]; }

 private:
  CudaIpcMesh() = default;
  int device_ = -1;
  char* local_ = nullptr;
  std::vector<char*> remote_;
  std::vector<bool> opened_;  // remote_[r] came from cudaIpcOpenMemHandle
  std::vector<std::string> desc_;
};

// Whether device `dev` can reach the GPU with PCI bus id `bus_id` (packed as
// in device_bus_id) by peer access; sets *nvlink to the path guess.
bool cuda_peer_reachable(int dev, uint64_t bus_id, bool* nvlink);

}  // namespace mycoll
