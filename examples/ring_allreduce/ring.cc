#include "ring.h"

namespace ring_example {
namespace {

mycollResult_t host_copy(float* dst, const float* src, size_t n, mycollStream_t) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i];
  return mycollSuccess;
}

mycollResult_t host_add(float* dst, const float* src, size_t n, mycollStream_t) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
  return mycollSuccess;
}

int mod(int a, int n) { return ((a % n) + n) % n; }

// One ring step: send `out` to the next rank while receiving `in` from the
// previous one. Both calls sit in one group, so they are in flight together
// and the ring cannot deadlock (every rank sends before it has received).
// Zero-length chunks (count < nranks) are skipped: both ends of a message
// compute the same chunk, so they skip it together.
mycollResult_t exchange(const float* out, size_t out_count, int next, float* in, size_t in_count,
                        int prev, mycollComm_t comm, mycollStream_t stream) {
  mycollResult_t r = mycollGroupStart();
  if (r != mycollSuccess) return r;
  mycollResult_t first = mycollSuccess;
  if (out_count > 0) first = mycollSend(out, out_count, mycollFloat32, next, comm, stream);
  if (first == mycollSuccess && in_count > 0)
    first = mycollRecv(in, in_count, mycollFloat32, prev, comm, stream);
  r = mycollGroupEnd();  // always close the group, even after a failed call
  return first != mycollSuccess ? first : r;
}

}  // namespace

RingOps host_ring_ops() { return RingOps{host_copy, host_add}; }

Chunk ring_chunk(size_t count, int n, int c) {
  const size_t base = count / n, extra = count % n;
  const size_t uc = static_cast<size_t>(c);
  Chunk ch;
  ch.offset = uc * base + (uc < extra ? uc : extra);
  ch.count = base + (uc < extra ? 1 : 0);
  return ch;
}

mycollResult_t ring_allreduce(const float* sendbuff, float* recvbuff, float* scratch, size_t count,
                              mycollComm_t comm, mycollStream_t stream, const RingOps& ops) {
  int n = 0, rank = 0;
  mycollResult_t r = mycollCommCount(comm, &n);
  if (r == mycollSuccess) r = mycollCommUserRank(comm, &rank);
  if (r != mycollSuccess) return r;

  // The ring works in recvbuff: start from this rank's own contribution.
  if (sendbuff != recvbuff) {
    r = ops.copy(recvbuff, sendbuff, count, stream);
    if (r != mycollSuccess) return r;
  }
  if (n == 1 || count == 0) return mycollSuccess;

  const int next = mod(rank + 1, n);  // we always send to next...
  const int prev = mod(rank - 1, n);  // ...and receive from prev.

  // Phase 1, reduce-scatter: n-1 steps. At step s rank r sends chunk
  // (r - s) mod n, which holds the sum of s+1 contributions (ranks r-s..r),
  // and receives chunk (r - s - 1) mod n from prev, holding s+1 contributions
  // (ranks r-s-1..r-1), into scratch; adding its own data makes it s+2.
  // After step n-2, chunk (r + 1) mod n on rank r holds all n contributions:
  // rank r owns the final sum of chunk (r + 1) mod n.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = ring_chunk(count, n, mod(rank - s, n));
    const Chunk in = ring_chunk(count, n, mod(rank - s - 1, n));
    r = exchange(recvbuff + out.offset, out.count, next, scratch, in.count, prev, comm, stream);
    if (r != mycollSuccess) return r;
    if (in.count > 0) r = ops.add(recvbuff + in.offset, scratch, in.count, stream);
    if (r != mycollSuccess) return r;
  }

  // Phase 2, all-gather: n-1 steps that circulate the finished chunks. At
  // step s rank r forwards chunk (r + 1 - s) mod n (final: its own at s = 0,
  // then the one it received at step s-1) and receives the final chunk
  // (r - s) mod n from prev straight into place: no reduction any more.
  for (int s = 0; s < n - 1; ++s) {
    const Chunk out = ring_chunk(count, n, mod(rank + 1 - s, n));
    const Chunk in = ring_chunk(count, n, mod(rank - s, n));
    r = exchange(recvbuff + out.offset, out.count, next, recvbuff + in.offset, in.count, prev, comm,
                 stream);
    if (r != mycollSuccess) return r;
  }
  return mycollSuccess;
}

}  // namespace ring_example
