"""sweep_ops.py: PyTorch's side of bench_sweep.lua: the same ops at the same sizes.
Prints "op size threads seconds" per case (median of 7 timed batches). Exits 3 when torch
is missing. Indices are 0-based here and 1-based in the Lua side; the data is random in
both (the values do not change the time)."""
import os
import sys
import time

try:
    import torch
except ImportError:
    sys.exit(3)

QUICK = os.environ.get("TD_SWEEP_QUICK") == "1"
SIZES = [100, 1000, 10_000, 100_000] + ([] if QUICK else [1_000_000, 10_000_000])
MATMUL = [64, 256] + ([] if QUICK else [1024])


def median_time(fn):
    fn()
    reps, t = 1, 0.0
    while True:  # enough calls per batch for ~2 ms, so the clock's cost does not count
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        t = time.perf_counter() - t0
        if t >= 2e-3 or reps >= 1 << 16:
            break
        reps *= 4
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        times.append((time.perf_counter() - t0) / reps)
    times.sort()
    return times[3]


def cases(n):
    a, b, c = torch.rand(n), torch.rand(n), torch.rand(n)
    acc = a.clone()  # add_ grows its own tensor: exp of a grown `a` overflowed (slow inf paths)
    rows = max(n // 64, 1)
    m = torch.rand(rows, 64)
    mask = torch.rand(n) < 0.5
    idx_rows = torch.randint(0, rows, (rows,))
    idx = torch.randint(0, n, (n,))
    parts = [torch.rand(max(n // 8, 1)) for _ in range(8)]
    return {
        "add": lambda: a + b,
        "add_": lambda: acc.add_(b),
        "mul_scalar": lambda: a * 2.0,
        "exp": lambda: torch.exp(a),
        "sigmoid": lambda: torch.sigmoid(a),
        "sum": lambda: a.sum(),
        "sum_dim": lambda: m.sum(0),
        "transpose_copy": lambda: m.t().contiguous(),
        "where": lambda: torch.where(mask, a, b),
        "masked_select": lambda: a[mask],
        "index_select_rows": lambda: m.index_select(0, idx_rows),
        "gather": lambda: a.gather(0, idx),
        "cat8": lambda: torch.cat(parts),
        "stack8": lambda: torch.stack(parts),
        "chain": lambda: ((a + b) * c).exp().sum(),
    }


def main():
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for n in SIZES:
            for name, fn in cases(n).items():
                print(name, n, threads, median_time(fn), flush=True)
        for k in MATMUL:
            x = torch.rand(k, k)
            print("matmul", k, threads, median_time(lambda: x @ x), flush=True)


main()
