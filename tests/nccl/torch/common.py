"""Shared helpers of the PyTorch checks (run by run.sh on a GPU machine)."""
import os
import sys

import torch
import torch.distributed as dist


def setup(timeout_s=120):
    """Joins the job: one CUDA device per rank, several ranks per GPU allowed."""
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    from datetime import timedelta
    dist.init_process_group("nccl", device_id=dev, timeout=timedelta(seconds=timeout_s))
    return rank, world, dev


def library_of(symbol):
    """Path of the mapped file holding the address this process resolves
    `symbol` to (what PyTorch's calls reach), or None."""
    import ctypes
    try:
        addr = ctypes.cast(getattr(ctypes.CDLL(None), symbol), ctypes.c_void_p).value
    except AttributeError:
        return None
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi and len(parts) >= 6:
                return parts[-1]
    return None


def mapped_libnccl():
    """Paths of every libnccl mapped into this process."""
    paths = set()
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "libnccl" in os.path.basename(p):
                paths.add(p)
    return sorted(paths)


class Results:
    """PASS/FAIL lines (printed by every rank, prefixed with it)."""

    def __init__(self, rank):
        self.rank = rank
        self.failed = 0

    def check(self, name, ok, detail=""):
        if not ok:
            self.failed += 1
        print(f"[rank {self.rank}] {'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}",
              flush=True)
        return ok

    def skip(self, name, why):
        print(f"[rank {self.rank}] SKIP {name}: {why}", flush=True)

    def exit(self):
        sys.stdout.flush()
        sys.exit(1 if self.failed else 0)
