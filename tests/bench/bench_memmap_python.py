"""Python tensordict's save (memmap) and load (load_memmap) of the container
bench_memmap.lua saves: ROWS x 64 float32 in LEAVES leaves. Prints 'save <s>' and
'load <s>' (best of 3 and of 20). Exits quietly when tensordict is absent."""
import sys
import time

try:
    import torch
    from tensordict import TensorDict
except ImportError:
    print("skip: python tensordict not installed")
    sys.exit(0)

folder, rows, leaves = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)
td = TensorDict({f"leaf{i + 1}": torch.rand(rows, 64) for i in range(leaves)}, batch_size=[rows])
prefix = folder + "/py"


def best(n, fn):
    b = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        b = min(b, time.perf_counter() - t0)
    return b


save = best(3, lambda: td.memmap(prefix, existsok=True))
load = best(20, lambda: TensorDict.load_memmap(prefix))
print(f"save {save:.6e}")
print(f"load {load:.6e}")
