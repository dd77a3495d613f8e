#include "transports/cuda_ipc/cuda_ipc.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "bootstrap/bootstrap.h"
#include "base/error.h"
#include "base/log.h"

namespace mycoll {

namespace {

void cuda_check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess)
    throw_error(mycollUnhandledCudaError, what + ": " + cudaGetErrorString(e));
}

int device_by_bus_id(uint64_t bus_id) {
  char s[32];
  std::snprintf(s, sizeof(s), "%08x:%02x:%02x.0", unsigned(bus_id >> 32),
                unsigned((bus_id >> 8) & 0xff), unsigned(bus_id & 0xff));
  int d = -1;
  if (cudaDeviceGetByPCIBusId(&d, s) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

struct IpcDesc {
  cudaIpcMemHandle_t handle;
  uint64_t raw;  // device pointer in the owner's process
  int32_t pid;
  int32_t device;
};

}  // namespace

bool cuda_peer_reachable(int dev, uint64_t bus_id, bool* nvlink) {
  int peer = device_by_bus_id(bus_id);
  if (peer < 0) return false;
  if (peer == dev) {
    *nvlink = false;
    return true;
  }
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, dev, peer) != cudaSuccess || !can) {
    cudaGetLastError();
    return false;
  }
  int atomics = 0;
  cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, dev, peer);
  cudaGetLastError();
  *nvlink = atomics != 0;
  return true;
}

std::unique_ptr<CudaIpcMesh> CudaIpcMesh::create(Bootstrap& bs, const std::vector<PeerInfo>& all,
                                                 const std::vector<bool>& use, int device,
                                                 size_t bytes, cudaStream_t stream) {
  std::unique_ptr<CudaIpcMesh> m(new CudaIpcMesh());
  const int n = bs.nranks(), me = bs.rank();
  m->device_ = device;
  m->remote_.assign(n, nullptr);
  m->opened_.assign(n, false);
  m->desc_.assign(n, "");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  void* p = nullptr;
  cuda_check(cudaMalloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes for FIFOs");
  m->local_ = static_cast<char*>(p);
  cuda_check(cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync FIFOs");
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");

  std::vector<IpcDesc> descs(n);
  std::memset(&descs[me], 0, sizeof(IpcDesc));
  cuda_check(cudaIpcGetMemHandle(&descs[me].handle, p), "cudaIpcGetMemHandle");
  descs[me].raw = reinterpret_cast<uint64_t>(p);
  descs[me].pid = getpid();
  descs[me].device = device;
  bs.allgather(descs.data(), sizeof(IpcDesc));

  for (int r = 0; r < n; ++r) {
    if (r == me) {
      m->remote_[r] = m->local_;
      continue;
    }
    if (!use[r]) continue;
    bool nvlink = false;
    if (!cuda_peer_reachable(device, all[r].gpu_bus_id, &nvlink))
      throw_error(mycollInvalidUsage, "cuda_ipc: GPU " + std::to_string(device) +
                                          " of rank " + std::to_string(me) +
                                          " cannot access the GPU of rank " + std::to_string(r) +
                                          " (no peer-to-peer path); use MYCOLL_TRANSPORT=shm");
    const char* link = nvlink ? "NVLink" : "PCIe";
    if (descs[r].pid == descs[me].pid) {
      // Same process: plain peer access to the other device's allocation.
      int peer_dev = descs[r].device;
      if (peer_dev != device) {
        cudaError_t e = cudaDeviceEnablePeerAccess(peer_dev, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
          cuda_check(e, "cudaDeviceEnablePeerAccess(" + std::to_string(peer_dev) + ")");
        cudaGetLastError();
      }
      m->remote_[r] = reinterpret_cast<char*>(descs[r].raw);
      m->desc_[r] = std::string("cuda_ipc ") + link + ", peer access in one process (GPU " +
                    std::to_string(device) + " -> GPU " + std::to_string(peer_dev) + ")";
    } else {
      void* q = nullptr;
      cuda_check(cudaIpcOpenMemHandle(&q, descs[r].handle, cudaIpcMemLazyEnablePeerAccess),
                 "cudaIpcOpenMemHandle for rank " + std::to_string(r));
      m->remote_[r] = static_cast<char*>(q);
      m->opened_[r] = true;
      m->desc_[r] = std::string("cuda_ipc ") + link + ", CUDA IPC between processes (pid " +
                    std::to_string(descs[r].pid) + ")";
    }
  }
  return m;
}

CudaIpcMesh::~CudaIpcMesh() {
  cudaSetDevice(device_);
  for (size_t r = 0; r < remote_.size(); ++r)
    if (opened_[r]) cudaIpcCloseMemHandle(remote_[r]);
  if (local_) cudaFree(local_);
  cudaGetLastError();
}

}  // namespace mycoll
