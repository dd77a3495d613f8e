// mycoll-perf-gloo.so: Gloo's side of --vs gloo (gloo_compare.h). The only
// code that includes Gloo's headers or links libgloo.
#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/broadcast.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <vector>

#include "gloo_compare.h"

namespace mycoll_perf {
namespace {

std::shared_ptr<gloo::Context> g_ctx;
uint32_t g_tag = 0;

uint32_t next_tag() { return ++g_tag; }

size_t type_size(mycollDataType_t t) {
  switch (t) {
    case mycollInt8: case mycollUint8: return 1;
    case mycollFloat16: case mycollBfloat16: return 2;
    case mycollInt32: case mycollUint32: case mycollFloat32: return 4;
    case mycollInt64: case mycollUint64: case mycollFloat64: return 8;
    default: return 0;
  }
}

using RawFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's reduction functions for type T (avg runs as sum, as for MPI).
template <typename T>
RawFn func_of(mycollRedOp_t op) {
  switch (op) {
    case mycollProd: return static_cast<RawFn>(&gloo::product<T>);
    case mycollMax: return static_cast<RawFn>(&gloo::max<T>);
    case mycollMin: return static_cast<RawFn>(&gloo::min<T>);
    default: return static_cast<RawFn>(&gloo::sum<T>);
  }
}

// Calls f with a value of the C++ type of t (nullptr-typed: only the type
// matters); false for types Gloo cannot reduce here (bfloat16; half, whose
// gloo::float16 only has sum in this Gloo).
template <typename F>
bool with_type(mycollDataType_t t, mycollRedOp_t op, F&& f) {
  switch (t) {
    case mycollInt8: f(static_cast<int8_t*>(nullptr)); return true;
    case mycollUint8: f(static_cast<uint8_t*>(nullptr)); return true;
    case mycollInt32: f(static_cast<int32_t*>(nullptr)); return true;
    case mycollUint32: f(static_cast<uint32_t*>(nullptr)); return true;
    case mycollInt64: f(static_cast<int64_t*>(nullptr)); return true;
    case mycollUint64: f(static_cast<uint64_t*>(nullptr)); return true;
    case mycollFloat32: f(static_cast<float*>(nullptr)); return true;
    case mycollFloat64: f(static_cast<double*>(nullptr)); return true;
    case mycollFloat16:
      if (op != mycollSum && op != mycollAvg) return false;
      f(static_cast<gloo::float16*>(nullptr));
      return true;
    default: return false;
  }
}

// The reduce-scatter algorithm object of the last shape (Gloo's class-based
// algorithms are built once and run many times).
struct RsCache {
  std::unique_ptr<gloo::Algorithm> algo;
  const void* send = nullptr;
  size_t count = 0;
  mycollDataType_t type = mycollFloat32;
  mycollRedOp_t op = mycollSum;
  std::vector<char> work;  // the in-place buffer (a copy of the input)
} g_rs;

bool reduce_scatter(const void* send, void* recv, size_t count, mycollDataType_t t,
                    mycollRedOp_t op, std::string* err) {
  const int n = g_ctx->size, r = g_ctx->rank;
  const size_t es = type_size(t), blk = count * es;
  if (!(g_rs.algo && g_rs.send == send && g_rs.count == count && g_rs.type == t && g_rs.op == op)) {
    g_rs.algo.reset();
    g_rs.work.assign(blk * n, 0);
    bool ok = with_type(t, op, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const gloo::ReductionFunction<T>* fn =
          op == mycollProd  ? gloo::ReductionFunction<T>::product
          : op == mycollMax ? gloo::ReductionFunction<T>::max
          : op == mycollMin ? gloo::ReductionFunction<T>::min
                            : gloo::ReductionFunction<T>::sum;
      std::vector<T*> ptrs{reinterpret_cast<T*>(g_rs.work.data())};
      std::vector<int> elems(n, static_cast<int>(count));
      g_rs.algo.reset(new gloo::ReduceScatterHalvingDoubling<T>(
          g_ctx, ptrs, static_cast<int>(count * n), elems, fn));
    });
    if (!ok) {
      *err = "Gloo has no reduce-scatter for this type and op";
      return false;
    }
    g_rs.send = send, g_rs.count = count, g_rs.type = t, g_rs.op = op;
  }
  std::memcpy(g_rs.work.data(), send, blk * n);
  g_rs.algo->run();
  std::memcpy(recv, g_rs.work.data() + blk * r, blk);
  return true;
}

bool sendrecv(const void* send, void* recv, size_t bytes) {
  const int n = g_ctx->size, r = g_ctx->rank;
  const uint32_t slot = next_tag();
  auto out = g_ctx->createUnboundBuffer(const_cast<void*>(send), bytes);
  auto in = g_ctx->createUnboundBuffer(recv, bytes);
  in->recv((r + n - 1) % n, slot);
  out->send((r + 1) % n, slot);
  in->waitRecv();
  out->waitSend();
  return true;
}

bool run(CollId c, const void* send, void* recv, size_t count, mycollDataType_t t,
         mycollRedOp_t op, int root, std::string* err) {
  // Gloo divides by the element count in places (a 0-element all-gather
  // dies with SIGFPE): nothing to move is done here.
  if (count == 0) return true;
  try {
    const size_t es = type_size(t);
    const int n = g_ctx->size;
    char* in = const_cast<char*>(static_cast<const char*>(send));
    char* out = static_cast<char*>(recv);
    switch (c) {
      case CollId::AllReduce: {
        gloo::AllreduceOptions o(g_ctx);
        bool ok = with_type(t, op, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          o.setInput(reinterpret_cast<T*>(in), count);
          o.setOutput(reinterpret_cast<T*>(out), count);
          o.setReduceFunction(func_of<T>(op));
        });
        if (!ok) break;
        o.setTag(next_tag());
        gloo::allreduce(o);
        return true;
      }
      case CollId::Reduce: {
        gloo::ReduceOptions o(g_ctx);
        bool ok = with_type(t, op, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          o.setInput(reinterpret_cast<T*>(in), count);
          o.setOutput(reinterpret_cast<T*>(out ? out : in), count);
          o.setReduceFunction(func_of<T>(op));
        });
        if (!ok) break;
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::reduce(o);
        return true;
      }
      case CollId::ReduceScatter: return reduce_scatter(send, recv, count, t, op, err);
      // The collectives that only move data see bytes.
      case CollId::AllGather: {
        gloo::AllgatherOptions o(g_ctx);
        o.setInput(reinterpret_cast<uint8_t*>(in), count * es);
        o.setOutput(reinterpret_cast<uint8_t*>(out), count * es * n);
        o.setTag(next_tag());
        gloo::allgather(o);
        return true;
      }
      case CollId::Broadcast: {  // on recv, the root's send copied in first
        if (g_ctx->rank == root && in != out) std::memcpy(out, in, count * es);
        gloo::BroadcastOptions o(g_ctx);
        o.setOutput(reinterpret_cast<uint8_t*>(out), count * es);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::broadcast(o);
        return true;
      }
      case CollId::AllToAll: {
        gloo::AlltoallOptions o(g_ctx);
        o.setInput(reinterpret_cast<uint8_t*>(in), count * es * n);
        o.setOutput(reinterpret_cast<uint8_t*>(out), count * es * n);
        o.setTag(next_tag());
        gloo::alltoall(o);
        return true;
      }
      case CollId::Scatter: {
        gloo::ScatterOptions o(g_ctx);
        std::vector<uint8_t*> blocks;
        if (g_ctx->rank == root) {
          for (int b = 0; b < n; ++b)
            blocks.push_back(reinterpret_cast<uint8_t*>(in + b * count * es));
          o.setInputs(blocks, count * es);
        }
        o.setOutput(reinterpret_cast<uint8_t*>(out), count * es);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::scatter(o);
        return true;
      }
      case CollId::Gather: {
        gloo::GatherOptions o(g_ctx);
        o.setInput(reinterpret_cast<uint8_t*>(in), count * es);
        if (g_ctx->rank == root) o.setOutput(reinterpret_cast<uint8_t*>(out), count * es * n);
        o.setRoot(root);
        o.setTag(next_tag());
        gloo::gather(o);
        return true;
      }
      case CollId::SendRecv: return sendrecv(send, recv, count * es);
    }
    *err = "Gloo has no equivalent for this type and op";
    return false;
  } catch (const std::exception& e) {
    *err = e.what();
    return false;
  }
}

const GlooApi kApi = {
    [](int rank, int size, const char* store_dir, const char* host, std::string* err) {
      try {
        gloo::transport::tcp::attr attr(host);
        auto dev = gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::FileStore store(store_dir);
        auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
        ctx->connectFullMesh(store, dev);
        g_ctx = ctx;
        return 0;
      } catch (const std::exception& e) {
        *err = e.what();
        return 1;
      }
    },
    [] {
      g_rs = RsCache{};
      g_ctx.reset();
    },
    [](double v, MpiAgg how) {
      double x = v;
      gloo::AllreduceOptions o(g_ctx);
      o.setOutput(&x, 1);
      o.setReduceFunction(func_of<double>(how == MpiAgg::Min   ? mycollMin
                                          : how == MpiAgg::Max ? mycollMax
                                                               : mycollSum));
      o.setTag(next_tag());
      gloo::allreduce(o);
      return x;
    },
    [](void* buf, size_t bytes, int root) {
      gloo::BroadcastOptions o(g_ctx);
      o.setOutput(static_cast<uint8_t*>(buf), bytes);
      o.setRoot(root);
      o.setTag(next_tag());
      gloo::broadcast(o);
    },
    [](mycollDataType_t t) { return t != mycollBfloat16 && type_size(t) != 0; },
    run,
};

}  // namespace
}  // namespace mycoll_perf

extern "C" __attribute__((visibility("default"))) const mycoll_perf::GlooApi* mycoll_perf_gloo_api() {
  return &mycoll_perf::kApi;
}
