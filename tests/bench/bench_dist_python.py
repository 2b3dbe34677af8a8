"""bench_dist_python.py: Python tensordict's send/recv over torch.distributed (gloo),
the counterpart of tests/bench/bench_dist.lua's ping-pong, for ours/theirs in the same
run. Two processes on this machine; prints one line per leaf size:
    <leaf bytes> <best seconds of a ping-pong>
Run by bench_dist.lua (rank 0) with TD_PYTHON; needs torch and tensordict."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tensordict import TensorDict

SIZES = [1024, 64 * 1024, 1024 * 1024]  # float32 elements per leaf, as bench_dist.lua


def worker(rank, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    peer = 1 - rank
    for n in SIZES:
        td = TensorDict({f"k{i}": torch.full((n,), float(i)) for i in range(1, 26)}, [])
        runs = 7 if n >= 1024 * 1024 else 50
        best = float("inf")
        for _ in range(runs):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                td.send(peer)
                td.recv(peer)
            else:
                td.recv(peer)
                td.send(peer)
            best = min(best, time.perf_counter() - t0)
        if rank == 0:
            out.put((n * 4, best))
    dist.destroy_process_group()


if __name__ == "__main__":
    port = 29500 + os.getpid() % 1000
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, port, q)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        sys.exit(1)
    while not q.empty():
        nbytes, best = q.get()
        print(nbytes, best)
