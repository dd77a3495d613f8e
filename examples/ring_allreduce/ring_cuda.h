// The ring's local operations on device buffers (ring_cuda.cu): copy =
// cudaMemcpyAsync on the stream, add = a small elementwise kernel launched
// on the stream, so each runs in stream order after the receive it follows.
#pragma once

#include "ring.h"

namespace ring_example {

RingOps cuda_ring_ops();

}  // namespace ring_example
