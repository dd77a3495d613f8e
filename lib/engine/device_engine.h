// Device engine: collectives on GPU buffers, enqueued on the user's stream.
// Implemented in device_comm_*.cc (+ kernels/) when CUDA is built; without
// CUDA the functions report that no GPU support exists.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/task.h"
#include "mycoll.h"

struct mycollComm;

namespace mycoll {

// Number of usable CUDA devices (0 without a driver or GPU). Cached.
int cuda_device_count();
// Whether p is device (or managed) memory. False when no GPU exists.
bool is_device_pointer(const void* p);
// Whether p may be GPU memory allocated inside a CUDA graph being captured
// on stream (cudaMallocAsync under capture: a graph allocation, mapped only
// when the graph is launched, which the driver does not know until then):
// stream is capturing and the driver knows nothing of p.
bool may_be_graph_allocation(const void* p, mycollStream_t stream);
// PCI bus id of a device packed as domain<<32 | bus<<8 | device (0 if none).
uint64_t device_bus_id(int dev);
// The calling thread's current CUDA device (throws if none).
int current_cuda_device();
// Blocks until the stream's work is done (host path with a non-NULL stream).
void stream_synchronize(mycollStream_t stream);

class DeviceComm {
 public:
  // Collective over the communicator: maps peers' buffers, allocates FIFOs.
  static std::unique_ptr<DeviceComm> create(mycollComm& comm);
  virtual ~DeviceComm() = default;
  // "cuda_ipc NVLink (IPC between processes)" etc.
  virtual std::string describe_peer(int rank) const = 0;
  // Refuses, before anything of the call or group is launched, a stream
  // that belongs to another GPU than this communicator's (or is no stream),
  // and on a GPU shared by ranks of this process the legacy default stream.
  // Cheap when the stream is the one checked last. enqueue() checks too.
  virtual void check_stream(mycollStream_t stream) = 0;
  // Enqueues the tasks of one communicator on stream; returns at once.
  // Where a launch fails (or CUDA fails in this process) the communicator
  // fails as by launch_failed, then the error is thrown.
  virtual void enqueue(std::vector<Task>& tasks, mycollStream_t stream) = 0;
  // Task t (null: the next one) was not launched although it has taken its
  // sequence number, so the peers' kernels of that call would wait for it
  // until MYCOLL_TIMEOUT: fails the communicator (its report reaches every
  // rank, whose peer watch stops their kernels) and makes this rank's
  // running kernels give up. Returns the reason. Never throws.
  virtual std::string launch_failed(const Task* t, mycollResult_t code,
                                    const std::string& what) noexcept = 0;
  // Ranks driven by one thread whose calls in one group name the same
  // stream (ranks of one communicator sharing a GPU: mycollCommInitAll with
  // a repeated device): on that stream alone each rank's kernels would queue
  // behind the others', which they wait for. So each rank enqueues on a
  // side stream of its own instead, forked from the caller's stream and
  // joined back (lib/comm/enqueue.cc): fork() for every rank of the group
  // first (where the side streams start), then enqueue_beside() for each,
  // then join() for each (the caller's stream waits for every side stream).
  virtual void fork(mycollStream_t stream) = 0;
  virtual void enqueue_beside(std::vector<Task>& tasks) = 0;
  virtual void join(mycollStream_t stream) = 0;
  // The CUDA device this communicator's kernels run on.
  virtual int device() const = 0;
  // A kernel that gave up (timeout, abort) leaves its reason here; returns
  // mycollSuccess while healthy. Never blocks.
  virtual mycollResult_t poll_error(std::string* reason) = 0;
  // Makes running and future kernels of this communicator give up promptly.
  virtual void abort() = 0;
  // The algorithm of a call whose whole message is `bytes`: what MYCOLL_ALGO
  // forces, else the rule of the engine's selection table
  // (device_algo, lib/engine/device_select.h).
  virtual Algo choose_algo(const AlgoPolicy& policy, Coll c, uint64_t bytes) const = 0;
  // Destroy in two steps, so that the meeting can run apart (comm/retire.h).
  // quiesce() waits for this rank's work on the GPU (every kernel of the
  // process on the GPUs of its ranks, every slot its proxy holds) and says
  // whether the ranks must still meet before this communicator's memory
  // goes: peers in other processes may still write into its inbox, or a
  // proxy serves peers. meet() is that meeting, a barrier bounded by
  // MYCOLL_TIMEOUT (a failed one is let go: the memory goes anyway). The
  // destructor runs whichever of the two has not run. Neither throws.
  virtual bool quiesce() noexcept { return false; }
  virtual void meet() noexcept {}
};

}  // namespace mycoll
