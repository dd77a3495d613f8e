"""(b) A small model trained with DDP or FSDP2 (fully_shard) for a few
hundred steps; losses and final parameters saved as JSON, compared with
the same training without the preload (--compare). Also (--mode time) the
time of a DDP step. float64 keeps the comparison tight: summation order is
the only difference between runs.

  torchrun ... train.py --mode ddp|fsdp --out FILE [--steps N]
  python3 train.py --mode single --world N --out FILE   (one process, global batch)
  torchrun ... train.py --mode time --out FILE
  python3 train.py --compare A.json B.json NAME"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn

D, H, BATCH = 32, 64, 16  # per-rank batch


def make_model(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(), nn.Linear(H, 1)).to(dtype)


def global_batch(step, world, dtype, dev):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(world * BATCH, D, generator=g, dtype=torch.float64)
    y = torch.sin(x.sum(1, keepdim=True)) + 0.1 * x[:, :1]
    return x.to(dtype).to(dev), y.to(dtype).to(dev)


def flat_params(model):
    out = []
    for p in model.parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out += t.detach().double().cpu().flatten().tolist()
    return out


def train(mode, steps, world_arg):
    import torch.distributed as dist
    dtype = torch.float64
    if mode == "single":
        rank, world, dev = 0, world_arg, torch.device("cuda", 0)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from common import setup
        rank, world, dev = setup()
    model = make_model(dtype).to(dev)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[dev.index])
    elif mode == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []
    for step in range(steps):
        x, y = global_batch(step, world, dtype, dev)
        if mode != "single":
            x, y = x[rank * BATCH:(rank + 1) * BATCH], y[rank * BATCH:(rank + 1) * BATCH]
        loss = ((model(x) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        l = loss.detach()
        if mode != "single":
            dist.all_reduce(l, op=dist.ReduceOp.AVG)  # mean of shard means = global mean
        losses.append(l.item())
    params = flat_params(model)
    if mode != "single":
        dist.destroy_process_group()
    return rank, {"mode": mode, "world": world, "losses": losses, "params": params}


def time_ddp(steps):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import setup
    rank, world, dev = setup()
    torch.manual_seed(0)
    width = 2048
    layers = []
    for _ in range(8):
        layers += [nn.Linear(width, width), nn.ReLU()]
    model = DDP(nn.Sequential(*layers).to(dev), device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, width, device=dev)
    times = []
    for step in range(20 + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if step >= 20:
            times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    dist.destroy_process_group()
    return rank, {"world": world, "step_ms_median": median * 1e3,
                  "params": sum(p.numel() for p in model.parameters())}


def compare(a_path, b_path, name):
    a, b = json.load(open(a_path)), json.load(open(b_path))
    ok = len(a["losses"]) == len(b["losses"]) and len(a["params"]) == len(b["params"])
    worst = 0.0
    if ok:
        for u, v in zip(a["losses"] + a["params"], b["losses"] + b["params"]):
            if not (math.isfinite(u) and math.isfinite(v)):
                ok = False
                break
            worst = max(worst, abs(u - v) / max(1e-6, abs(v)))
        ok = ok and worst < 1e-6
    k = max(1, len(a["losses"]) // 10)  # first and last tenth: batches are noisy
    decreased = (sum(a["losses"][-k:]) < sum(a["losses"][:k])) if a["losses"] else False
    print(f"{'PASS' if ok else 'FAIL'} {name}: {len(a['losses'])} steps, worst relative difference "
          f"{worst:.2e} (limit 1e-6); loss {a['losses'][0]:.4f} -> {a['losses'][-1]:.4f}")
    print(f"{'PASS' if decreased else 'FAIL'} {name}: the loss decreased")
    return 0 if ok and decreased else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "fsdp", "single", "time"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--compare", nargs=3, metavar=("A", "B", "NAME"))
    args = ap.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.mode == "time":
        rank, result = time_ddp(args.steps)
    else:
        rank, result = train(args.mode, args.steps, args.world)
    if rank == 0 and args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
