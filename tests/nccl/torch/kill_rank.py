"""(d) A rank killed mid-training: the others must fail with mycoll's error
naming it within MYCOLL_TIMEOUT instead of hanging. Started by run.sh as
plain processes (not torchrun, whose agent would kill the survivors itself).
Every rank writes OUTDIR/kill_rank<r>.json: the killed rank its kill time,
the others the error they saw (when Python sees it; PyTorch's watchdog may
end the process first, run.sh then reads the rank's log)."""
import json
import os
import signal
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import setup  # noqa: E402

out_dir, victim, kill_step = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rank, world, dev = setup(timeout_s=300)  # PyTorch's own timeout well above MYCOLL_TIMEOUT
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1)).to(dev), device_ids=[dev.index])
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
path = os.path.join(out_dir, f"kill_rank{rank}.json")
x = torch.randn(32, 256, device=dev)
try:
    for step in range(100000):
        if rank == victim and step == kill_step:
            with open(path, "w") as f:
                json.dump({"killed_at": time.time()}, f)
            os.kill(os.getpid(), signal.SIGKILL)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()  # waits for the step (and its all-reduce)
        if step > kill_step + 5000:
            break
    with open(path, "w") as f:
        json.dump({"error": None, "at": time.time()}, f)
    sys.exit(0)
except Exception as e:  # noqa: BLE001
    with open(path, "w") as f:
        json.dump({"error": str(e), "at": time.time()}, f)
    print(f"[rank {rank}] error: {e}", file=sys.stderr, flush=True)
    os._exit(3)
