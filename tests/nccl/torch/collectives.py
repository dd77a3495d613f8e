"""(a) Every torch.distributed collective on CUDA tensors, checked against
values computed on the host; (c) only mycoll's libnccl.so.2 is mapped.
Run with torchrun and LD_PRELOAD=<build>/nccl/libnccl.so.2 (run.sh)."""
import os

import torch
import torch.distributed as dist

from common import Results, library_of, mapped_libnccl, setup

rank, world, dev = setup()
res = Results(rank)

# PyTorch's own libnccl.so.2 (its RPATH dependency) is mapped too; with
# LD_PRELOAD every nccl* symbol must resolve to mycoll's.
maps = mapped_libnccl()
want_lib = os.environ.get("MYCOLL_NCCL_LIB", "")
for sym in ["ncclAllReduce", "ncclCommInitRankConfig", "ncclGroupEnd"]:
    got = library_of(sym)
    res.check(f"{sym} resolves to mycoll's libnccl.so.2",
              got is not None and (not want_lib or os.path.realpath(got) == os.path.realpath(want_lib)),
              f"resolves to {got}; mapped: {maps}")


def value(r, n, op=None, offset=0, unsigned=False):
    """Small integers: exact in every dtype and under any summation order
    (non-negative for unsigned types)."""
    i = torch.arange(n, dtype=torch.float64) + offset
    if op == dist.ReduceOp.PRODUCT:
        return torch.where((r + i) % 3 == 0, 2.0, 1.0)
    return ((r * 7 + i * 3) % 5) - (0 if unsigned else 2)


def same(got, want):
    return torch.equal(got.double().cpu(), want.double().cpu())


def expected(op, n, dtype, offset=0, factor=None):
    vals = torch.stack([value(r, n, op, offset, dtype == torch.uint8) for r in range(world)])
    if factor is not None:
        return (vals * factor).sum(0).to(dtype)
    if op == dist.ReduceOp.SUM:
        return vals.sum(0).to(dtype)
    if op == dist.ReduceOp.PRODUCT:
        return vals.prod(0).to(dtype)
    if op == dist.ReduceOp.MAX:
        return vals.max(0).values.to(dtype)
    if op == dist.ReduceOp.MIN:
        return vals.min(0).values.to(dtype)
    if op == dist.ReduceOp.AVG:
        return (vals.sum(0) / world).to(dtype)
    raise ValueError(op)


OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
       "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}
FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
SIZES = [1, 1000, (1 << 20) + 3]  # one-shot, mid-size, ring kernels

# all_reduce: every op, float and integer types, small to large
for dtype in FLOATS + [torch.int32, torch.int64, torch.uint8, torch.int8]:
    for name, op in OPS.items():
        if name == "avg" and not dtype.is_floating_point:
            continue
        if name == "prod" and dtype in (torch.int8, torch.uint8) and world > 6:
            continue  # 2^world would overflow
        for n in SIZES:
            if n > 1000 and dtype not in (torch.float32, torch.bfloat16):
                continue
            t = value(rank, n, op, unsigned=dtype == torch.uint8).to(dtype).to(dev)
            dist.all_reduce(t, op=op)
            res.check(f"all_reduce {name} {dtype} n={n}", same(t, expected(op, n, dtype)))

# PREMUL_SUM: scalar factor (host) and tensor factor (device memory)
# bfloat16 is left out: PyTorch hands NCCL a float scalar for bfloat16 data
# (unpackPreMulSum<float, ncclBfloat16>), which NCCL reads as a bfloat16
# (ncclTypeSize(datatype) bytes), as mycoll does: the factor is not 0.5.
for dtype in [d for d in FLOATS if d != torch.bfloat16]:
    for n in [7, 4097]:
        for kind in ["float", "tensor"]:
            factor = 0.5 if kind == "float" else torch.tensor([2.0], dtype=dtype, device=dev)
            f = 0.5 if kind == "float" else 2.0
            t = value(rank, n).to(dtype).to(dev)
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
            res.check(f"all_reduce premul_sum({kind}) {dtype} n={n}",
                      same(t, expected(None, n, dtype, factor=f)))

# fp8: PyTorch may refuse reductions on fp8; data movement must work
for dtype in [getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)]:
    if dtype is None:
        continue
    n = 333
    src = value(rank, n).to(torch.float32)
    out = torch.empty(world * n, dtype=dtype, device=dev)
    try:
        dist.all_gather_into_tensor(out, src.to(dtype).to(dev))
        want = torch.cat([value(r, n) for r in range(world)]).to(dtype)
        res.check(f"all_gather_into_tensor {dtype}", same(out.float(), want.float()))
    except (RuntimeError, TypeError) as e:
        res.skip(f"all_gather_into_tensor {dtype}", str(e).splitlines()[0])
    try:
        t = src.to(dtype).to(dev)
        dist.all_reduce(t)
        res.check(f"all_reduce sum {dtype}", same(t.float(), expected(dist.ReduceOp.SUM, n, dtype).float()))
    except (RuntimeError, TypeError) as e:
        res.skip(f"all_reduce {dtype}", str(e).splitlines()[0])

# all_gather_into_tensor / reduce_scatter_tensor
for dtype in FLOATS + [torch.int32]:
    for n in [1, 513, 1 << 18]:
        inp = value(rank, n).to(dtype).to(dev)
        out = torch.empty(world * n, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, inp)
        want = torch.cat([value(r, n) for r in range(world)]).to(dtype)
        res.check(f"all_gather_into_tensor {dtype} n={n}", same(out, want))
        big = value(rank, world * n).to(dtype).to(dev)
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX}
        if dtype.is_floating_point:
            ops["avg"] = dist.ReduceOp.AVG
            if dtype != torch.bfloat16:  # see PREMUL_SUM above
                ops["premul_sum"] = dist._make_nccl_premul_sum(0.25)
        for name, op in ops.items():
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, big, op=op)
            if name == "premul_sum":
                w = expected(None, world * n, dtype, factor=0.25)
            else:
                w = expected(op, world * n, dtype)
            res.check(f"reduce_scatter_tensor {name} {dtype} n={n}", same(out, w[rank * n:(rank + 1) * n]))

# broadcast and reduce from every root
for root in range(world):
    for n in [5, 1 << 20]:
        t = (value(root, n) if rank == root else torch.zeros(n, dtype=torch.float64)).float().to(dev)
        dist.broadcast(t, src=root)
        res.check(f"broadcast root={root} n={n}", same(t, value(root, n)))
        for name in ["sum", "max"]:
            t = value(rank, n).float().to(dev)
            dist.reduce(t, dst=root, op=OPS[name])
            if rank == root:
                res.check(f"reduce {name} root={root} n={n}", same(t, expected(OPS[name], n, torch.float32)))

# all_to_all_single, equal and uneven splits
for n in [1, 1000]:
    inp = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * rank + 100 * j for j in range(world)]).to(dev)
    out = torch.empty(world * n, dtype=torch.float32, device=dev)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.arange(n, dtype=torch.float32) + 1000 * j + 100 * rank for j in range(world)])
    res.check(f"all_to_all_single n={n}", same(out, want))
send_sizes = [(rank + j) % 3 + 1 for j in range(world)]
recv_sizes = [(j + rank) % 3 + 1 for j in range(world)]
inp = torch.cat([torch.arange(send_sizes[j], dtype=torch.float32) + 1000 * rank + 100 * j
                 for j in range(world)]).to(dev)
out = torch.empty(sum(recv_sizes), dtype=torch.float32, device=dev)
dist.all_to_all_single(out, inp, output_split_sizes=recv_sizes, input_split_sizes=send_sizes)
want = torch.cat([torch.arange(recv_sizes[j], dtype=torch.float32) + 1000 * j + 100 * rank for j in range(world)])
res.check("all_to_all_single with splits", same(out, want))

# Zero-size splits (an MoE layer routes no token to some experts) and empty
# tensors: every collective of count 0 returns at once and leaves the
# non-empty parts right.
def split(src, dst):
    return 0 if (src + dst) % 2 == 0 else (2 * src + dst) % 3 + 1


send_sizes = [split(rank, j) for j in range(world)]
recv_sizes = [split(j, rank) for j in range(world)]
inp = torch.cat([torch.arange(send_sizes[j], dtype=torch.float32) + 1000 * rank + 100 * j
                 for j in range(world)]).to(dev)
out = torch.full((sum(recv_sizes),), -1.0, device=dev)
dist.all_to_all_single(out, inp, output_split_sizes=recv_sizes, input_split_sizes=send_sizes)
want = torch.cat([torch.arange(recv_sizes[j], dtype=torch.float32) + 1000 * j + 100 * rank for j in range(world)])
res.check("all_to_all_single with zero-size splits", same(out, want))
empty = torch.empty(0, device=dev)
dist.all_reduce(empty)
dist.broadcast(empty, src=world - 1)
dist.reduce(empty, dst=0)
dist.all_gather_into_tensor(torch.empty(0, device=dev), empty)
dist.reduce_scatter_tensor(empty, torch.empty(0, device=dev))
dist.all_to_all_single(torch.empty(0, device=dev), torch.empty(0, device=dev))
t = value(rank, 9).float().to(dev)  # the communicator still works after them
dist.all_reduce(t)
res.check("collectives of empty tensors, then an all_reduce", same(t, expected(dist.ReduceOp.SUM, 9, torch.float32)))

# gather / scatter
n = 777
t = value(rank, n).float().to(dev)
glist = [torch.empty(n, device=dev) for _ in range(world)] if rank == 0 else None
dist.gather(t, gather_list=glist, dst=0)
if rank == 0:
    res.check("gather", all(same(glist[r], value(r, n)) for r in range(world)))
slist = [value(r, n, offset=50).float().to(dev) for r in range(world)] if rank == 0 else None
t = torch.empty(n, device=dev)
dist.scatter(t, scatter_list=slist, src=0)
res.check("scatter", same(t, value(rank, n, offset=50)))

# send/recv (ring with isend/irecv; blocking pairs), batch_isend_irecv
nxt, prv = (rank + 1) % world, (rank - 1) % world
n = 4099
out = value(rank, n).float().to(dev)
inb = torch.empty(n, device=dev)
reqs = [dist.isend(out, dst=nxt), dist.irecv(inb, src=prv)]
for q in reqs:
    q.wait()
res.check("isend/irecv ring", same(inb, value(prv, n)))
partner = rank ^ 1
if partner < world:
    got = torch.empty(n, device=dev)
    if rank % 2 == 0:
        dist.send(out, dst=partner)
        dist.recv(got, src=partner)
    else:
        dist.recv(got, src=partner)
        dist.send(out, dst=partner)
    res.check("send/recv pairs", same(got, value(partner, n)))
ops = [dist.P2POp(dist.isend, out, nxt), dist.P2POp(dist.irecv, inb.zero_(), prv)]
for q in dist.batch_isend_irecv(ops):
    q.wait()
res.check("batch_isend_irecv", same(inb, value(prv, n)))

dist.barrier()
res.check("barrier", True)

# new_group (a subset) and split groups
members = list(range(max(2, world - 1)))
g = dist.new_group(ranks=members)
if rank in members:
    t = torch.tensor([float(rank)], device=dev)
    dist.all_reduce(t, group=g)
    res.check("new_group all_reduce", t.item() == sum(members))
split_group = getattr(dist, "split_group", None)
if split_group is None:
    res.skip("split_group", "this PyTorch has no torch.distributed.split_group")
else:
    evens, odds = list(range(0, world, 2)), list(range(1, world, 2))
    try:
        sg = split_group(split_ranks=[evens, odds] if odds else [evens])
        mine = evens if rank % 2 == 0 else odds
        t = torch.tensor([float(rank)], device=dev)
        dist.all_reduce(t, group=sg)
        res.check("split_group all_reduce", t.item() == sum(mine))
    except TypeError as e:
        res.skip("split_group", f"signature differs: {e}")

# ncclConfig_t.maxCTAs through ProcessGroupNCCL.Options (what per-group
# NCCL configs such as Megatron's set): a group whose kernels may run 2
# thread blocks; large calls on it checked element by element. run.sh
# checks that the log names the cap.
try:
    ctas_opts = dist.ProcessGroupNCCL.Options()
    ctas_opts.config.max_ctas = 2
    ctas_opts.config.min_ctas = 1
except (AttributeError, TypeError) as e:
    ctas_opts = None
    res.skip("maxCTAs group", f"this PyTorch has no NCCL config options: {e}")
if ctas_opts is not None:
    cg = dist.new_group(ranks=list(range(world)), pg_options=ctas_opts)
    big = (1 << 22) + 5
    t = value(rank, big).float().to(dev)
    dist.all_reduce(t, group=cg)
    res.check("maxCTAs 2 group: all_reduce 16 MiB", same(t, expected(dist.ReduceOp.SUM, big, torch.float32)))
    part = (1 << 20) + 3
    out = torch.empty(part * world, device=dev, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(out, value(rank, part, offset=rank).to(torch.bfloat16).to(dev), group=cg)
    want = torch.cat([value(r, part, offset=r) for r in range(world)])
    res.check("maxCTAs 2 group: all_gather_into_tensor bf16", same(out, want))

# CUDA graphs (torch.cuda.graph: global capture mode): an all_reduce, an
# average bf16 reduce_scatter_tensor and a batch_isend_irecv ring of sizes
# not run above, captured without a warm-up, called eagerly once before the
# first replay, then replayed with new inputs; every element checked.
n_ar, n_rs, n_pp = 300007, 40009, 262147
ar = torch.empty(n_ar, device=dev)
rs_in = torch.empty(n_rs * world, device=dev, dtype=torch.bfloat16)
rs_out = torch.empty(n_rs, device=dev, dtype=torch.bfloat16)
pp_out = torch.empty(n_pp, device=dev)
pp_in = torch.empty(n_pp, device=dev)


def graph_calls():
    dist.all_reduce(ar)
    dist.reduce_scatter_tensor(rs_out, rs_in, op=dist.ReduceOp.AVG)
    for q in dist.batch_isend_irecv([dist.P2POp(dist.isend, pp_out, nxt), dist.P2POp(dist.irecv, pp_in, prv)]):
        q.wait()


def graph_inputs(k):
    ar.copy_(value(rank, n_ar, offset=k).float().to(dev))
    rs_in.copy_(value(rank, n_rs * world, offset=k).to(torch.bfloat16).to(dev))
    pp_out.copy_(value(rank, n_pp, offset=k).float().to(dev))
    pp_in.zero_()


def graph_check(k, what):
    torch.cuda.synchronize()
    res.check(f"{what}: all_reduce", same(ar, expected(dist.ReduceOp.SUM, n_ar, torch.float32, k)))
    want = expected(dist.ReduceOp.AVG, n_rs * world, torch.bfloat16, k)[rank * n_rs:(rank + 1) * n_rs]
    res.check(f"{what}: reduce_scatter_tensor avg bf16", same(rs_out, want))
    res.check(f"{what}: batch_isend_irecv", same(pp_in, value(prv, n_pp, offset=k)))


try:
    graph = torch.cuda.CUDAGraph()
    graph_inputs(0)
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        graph_calls()
    graph_inputs(1000)
    graph_calls()
    graph_check(1000, "CUDA graph: eager before the first replay")
    for k in range(1, 4):
        graph_inputs(k)
        graph.replay()
        graph_check(k, f"CUDA graph: replay {k}")
except Exception as e:  # noqa: BLE001 (reported as a failure, the rest still runs)
    res.check("CUDA graph capture and replay", False, f"{type(e).__name__}: {e}")

torch.cuda.synchronize()
dist.destroy_process_group()
res.exit()
