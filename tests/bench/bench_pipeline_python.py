"""bench_pipeline_python.py: Python tensordict's side of bench_pipeline.lua.

The same small pipeline as the Lua side, written the way tensordict offers it:
batches of an in-memory TensorDict, a running mean/variance normalisation of "obs"
(Chan's merge, in torch), a mask filter (td[mask]), TensorDictBase.map over 2 worker
processes for the per-row function, then the result rebatched and written with
memmap. Prints `rows_per_second <value>` (best of 3 runs, wall clock), or
`skip: ...` when torch or tensordict cannot be imported.
Usage: python bench_pipeline_python.py ROWS BATCH OUT_DIR
"""
import shutil
import sys
import time

try:
    import torch
    from tensordict import TensorDict
except Exception:
    print("skip: python tensordict not installed")
    sys.exit(0)

ROWS, BATCH, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(1)
torch.manual_seed(0)
W = torch.randn(16, 16) / 4


def features(td):
    # CPU-bound per-row work: a few small matmuls and transcendental functions
    h = td["obs"]
    for _ in range(4):
        h = torch.tanh(h @ W)
    td["feat"] = h
    td["score"] = torch.sigmoid(h.sum(-1))
    return td


def run(data):
    count, mean, m2 = 0, torch.zeros(16, dtype=torch.float64), torch.zeros(16, dtype=torch.float64)
    kept = []
    for start in range(0, ROWS, BATCH):
        b = data[start:start + BATCH]
        x = b["obs"].double()
        n_b = x.shape[0]
        mean_b = x.mean(0)
        m2_b = ((x - mean_b) ** 2).sum(0)
        delta = mean_b - mean
        total = count + n_b
        mean = mean + delta * (n_b / total)
        m2 = m2 + m2_b + delta ** 2 * (count * n_b / total)
        count = total
        var = m2 / count
        b = b.clone(False)
        b["obs"] = ((x - mean) / torch.sqrt(var + 1e-5)).float()
        b = b[b["reward"] > 0.2]
        kept.append(b)
    filtered = torch.cat(kept, 0)
    mapped = filtered.map(features, dim=0, num_workers=2, chunksize=BATCH)
    out = torch.cat(list(mapped.split(4096, 0)), 0)  # rebatch: pieces of 4096 rows
    shutil.rmtree(OUT, ignore_errors=True)
    out.memmap(OUT)
    return out.batch_size[0]


if __name__ == "__main__":
    data = TensorDict({"obs": torch.randn(ROWS, 16), "reward": torch.rand(ROWS)}, [ROWS])
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        run(data)
        best = min(best, time.perf_counter() - t0)
    shutil.rmtree(OUT, ignore_errors=True)
    print("rows_per_second %.6e" % (ROWS / best), flush=True)
