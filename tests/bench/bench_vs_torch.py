"""bench_vs_torch.py: PyTorch's side of bench_vs_torch.lua (same ops, same sizes).
Prints one line per op: name and best-of-5 seconds. Exits 3 when torch is missing."""
import sys
import time

try:
    import torch
except ImportError:
    sys.exit(3)

torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
N = 16 * 1024 * 1024
a = torch.rand(N)
b = torch.rand(N)
m = torch.rand(2048, 2048)
rows = torch.rand(1 << 20, 64)
idx = torch.randint(0, 1 << 20, (1 << 20,))
mask = torch.rand(1 << 20) < 0.5


def best(fn):
    fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


cases = {
    "add": lambda: a + b,
    "add_": lambda: a.add_(b),
    "mul": lambda: a * b,
    "exp": lambda: torch.exp(a),
    "sum": lambda: a.sum(),
    "mean": lambda: a.mean(),
    "max": lambda: a.max(),
    "var": lambda: a.var(),
    "sum_dim0": lambda: m.sum(0),
    "matmul": lambda: m @ m,
    "index_select": lambda: rows.index_select(0, idx),
    "mask_rows": lambda: rows[mask],
}
for name, fn in cases.items():
    print(name, best(fn))
