// Host entry to the collective kernels (kernels/plan_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include "kernels/device_plan.h"
#include "mycoll.h"

namespace mycoll {

// Launches the plan kernel: one block per channel. reduce=false runs the
// byte-moving instantiation (no RecvReduce/ScaleAvg ops allowed).
cudaError_t launch_plan(const KernelArgs& a, bool reduce, mycollDataType_t t, mycollRedOp_t op,
                        int nchannels, cudaStream_t stream);
int plan_kernel_threads();
int plan_kernel_max_step_ops();

}  // namespace mycoll
