"""bench_h5_python.py FILE BATCH: Python tensordict's side of tests/bench/bench_h5.lua.

Iterates FILE with PersistentTensorDict.from_h5 in batches of BATCH rows (td[i:i + BATCH]
read into memory), best of 3 passes after one untimed pass; prints "seconds S".
"""
import sys
import time
import warnings

from tensordict import PersistentTensorDict


def one_pass(path, batch):
    td = PersistentTensorDict.from_h5(path)
    n = td.batch_size[0]
    rows = 0
    for i in range(0, n, batch):
        b = td[i:i + batch]
        if not isinstance(b, PersistentTensorDict):
            b = b.to_tensordict()
        rows += b.batch_size[0]
    td.close()
    assert rows == n, (rows, n)


def main():
    path, batch = sys.argv[1], int(sys.argv[2])
    warnings.simplefilter("ignore")
    one_pass(path, batch)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        one_pass(path, batch)
        best = min(best, time.perf_counter() - t0)
    print("seconds %.6f" % best)


if __name__ == "__main__":
    main()
