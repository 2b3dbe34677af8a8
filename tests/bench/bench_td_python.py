"""bench_td_python.py: Python tensordict's side of the tensordict benchmarks.

Reference timings for the same workloads as the LuaJIT+C implementation.
Prints one line per workload: `<name> <seconds_per_call>` (%.6e), the per-call
time being the median of 5 repeats of a timed loop sized to ~0.2 s each
(time.perf_counter). torch.set_num_threads(1) throughout.

If torch or tensordict cannot be imported it prints
`skip: python tensordict not installed` and exits 0.
"""
import statistics
import sys
import time

try:
    import torch
    import tensordict
    from tensordict import TensorDict
except Exception:  # ImportError, or a broken install raising something else
    print("skip: python tensordict not installed")
    sys.exit(0)

torch.set_num_threads(1)

REPEATS = 5
TARGET_S = 0.2


def per_call(fn):
    """Median over REPEATS of (loop time / iterations), loop sized to ~TARGET_S."""
    fn()  # warm-up
    # calibrate: grow n until one loop takes >= 1/10 of the target
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= TARGET_S / 10 or n >= 1 << 30:
            break
        n *= 2
    n = max(1, int(n * TARGET_S / max(dt, 1e-9)))
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def report(name, fn):
    print("%s %.6e" % (name, per_call(fn)), flush=True)


def leaves(n, shape):
    return {"k%d" % i: torch.rand(*shape) for i in range(1, n + 1)}


# --- construction --------------------------------------------------------
d16 = leaves(16, (32, 4))
d256 = leaves(256, (32, 4))
report("construct16", lambda: TensorDict(d16, batch_size=[32]))
report("construct256", lambda: TensorDict(d256, batch_size=[32]))

# --- indexing / get / set / update on the 16-leaf td ---------------------
td16 = TensorDict(d16, batch_size=[32])
report("index_int16", lambda: td16[3])
report("index_range16", lambda: td16[0:16])
report("get", lambda: td16.get("k1"))
t_same = torch.rand(32, 4)
report("set_existing", lambda: td16.set("k1", t_same))
other16 = TensorDict(leaves(16, (32, 4)), batch_size=[32])
report("update_16", lambda: td16.update_(other16))

# --- stack ---------------------------------------------------------------
# Public API: torch.stack(list, 0) (dispatched through __torch_function__ to
# tensordict's stack; same as tensordict.stack(list, 0), which the
# installed version also exports). Both give a dense TensorDict.
tds8 = [TensorDict(leaves(20, (64,)), batch_size=[]) for _ in range(8)]
report("stack8x20", lambda: torch.stack(tds8, 0))

# --- collector write -----------------------------------------------------
# buffer: batch [8*4096], 25 leaves [8*4096, 16] float32;
# step:   batch [4096],   25 leaves [4096, 16]   float32;
# timed call: out[t*4096:(t+1)*4096] = step, t cycling over 0..7.
T, B, F, NL = 8, 4096, 16, 25
out = TensorDict({"k%d" % i: torch.zeros(T * B, F) for i in range(1, NL + 1)},
                 batch_size=[T * B])
step = TensorDict({"k%d" % i: torch.rand(B, F) for i in range(1, NL + 1)},
                  batch_size=[B])
state = [0]


def collector_write():
    t = state[0]
    out[t * B:(t + 1) * B] = step
    state[0] = (t + 1) % T


report("collector_write", collector_write)
nbytes = NL * B * F * 4
print("collector_write_bytes %d" % nbytes, flush=True)

# --- memcpy reference: one contiguous copy of the same byte count ---------
src = torch.rand(NL * B * F)
dst = torch.empty_like(src)
report("memcpy_ref", lambda: dst.copy_(src))
