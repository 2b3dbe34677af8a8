"""torchrl's side of bench_samplers.lua: sample(N) of a TensorDictReplayBuffer (uniform)
and a TensorDictPrioritizedReplayBuffer (ALPHA, BETA; every row's priority set at random)
on a LazyMemmapStorage of ROWS rows under FOLDER, the rows bench_samplers.lua writes.
Prints 'uniform <s>' and 'prioritized <s>': the median over 9 runs of 200 calls, per
call. Exits quietly when torchrl is absent."""
import statistics
import sys
import time
import warnings

warnings.filterwarnings("ignore")
try:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage, TensorDictPrioritizedReplayBuffer, TensorDictReplayBuffer
except ImportError:
    print("skip: torchrl not installed")
    sys.exit(0)

folder, rows, n, alpha, beta = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
CHUNK, EPISODE = 65536, 200
torch.set_num_threads(1)


def chunk(first, k):
    i = torch.arange(first, first + k)
    return TensorDict({"obs": torch.rand(k, 32), "action": torch.rand(k, 4), "reward": torch.rand(k),
                       "done": i % EPISODE == 0, "episode": (i - 1) // EPISODE}, [k])


def median(fn, calls=200, runs=9):
    """Seconds per call of fn: the median of runs runs of calls calls, after a warm-up."""
    def per_call():
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - t0) / calls

    per_call()
    return statistics.median(per_call() for _ in range(runs))


def filled(rb, prioritized):
    for first in range(1, rows + 1, CHUNK):
        rb.extend(chunk(first, CHUNK))
        if prioritized:
            rb.update_priority(torch.arange(first - 1, first - 1 + CHUNK), torch.rand(CHUNK))
    return rb


uniform = filled(TensorDictReplayBuffer(storage=LazyMemmapStorage(rows, scratch_dir=folder + "/u"), batch_size=n),
                 False)
print("uniform %.9f" % median(lambda: uniform.sample()), flush=True)
del uniform
prioritized = filled(TensorDictPrioritizedReplayBuffer(alpha=alpha, beta=beta, batch_size=n,
                                                       storage=LazyMemmapStorage(rows, scratch_dir=folder + "/p")),
                     True)
print("prioritized %.9f" % median(lambda: prioritized.sample()), flush=True)
