"""bench_common_ops_python.py: Python tensordict's side of bench_common_ops.lua.

The workloads of tensordict's benchmarks/common/common_ops_test.py (creation, indexing,
setitem, get/set nested, update, select/exclude, key flattening, clone, unbind, split,
chunk, stack, cat, lock/unlock, items/keys/values, apply), written here for a plain
timer: one line per workload, `<name> <seconds_per_call>`, the median of 5 timed loops
of ~20 ms each (time.perf_counter), one thread. The Lua side runs the same workloads
under the same names (indices 1-based there).

Prints `skip: python tensordict not installed` and exits 0 without torch/tensordict.
"""
import statistics
import sys
import time

try:
    import torch
    from tensordict import TensorDict
except Exception:  # ImportError, or a broken install raising something else
    print("skip: python tensordict not installed")
    sys.exit(0)

torch.set_num_threads(1)


def per_call(fn):
    """Median of 5 loops sized to ~20 ms, in seconds per call."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - t0 >= 0.02 or n >= 1 << 20:
            break
        n *= 2
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def zeros():
    return torch.zeros(3, 4, 5)


def chain(size):
    """19 leaves, leaf i at depth i: ("0", "t"), ("0", "1", "t"), ... built from dotted keys."""
    flat = {}
    for i in range(1, 20):
        flat[".".join([str(j) for j in range(i)] + ["t"])] = torch.zeros(size) + i
    return TensorDict(flat, size).unflatten_keys(".")


a, b, c = zeros(), zeros(), zeros()
td = TensorDict({"a": a, "b": {"b1": b}}, [3, 4])
td2 = td.clone()
flat2 = TensorDict({"a": a, "b": b}, [3, 4])
flat2_other = flat2.clone()
keys10 = {str(i): zeros() for i in range(10)}
keys100 = {str(i): zeros() for i in range(100)}
nested10 = {str(i): zeros() for i in range(10)}
nested10["nested"] = {str(i): zeros() for i in range(10)}
big = TensorDict({str(i): torch.zeros(3, 4) + i for i in range(100)}, [3, 4])
deep = chain((3, 4))
deep_wide = chain((3, 20))
deep_flat = deep.flatten_keys(".")
leaf_key = tuple(str(i) for i in range(19)) + ("t",)
sub_key = tuple(str(i) for i in range(19))
new_key = tuple(str(j) for j in range(20, 0, -1))
last_leaf = list(deep.keys(True, True))[-1]
row = td[1].clone().zero_()
column = td[:, 1].clone().zero_()
idx = torch.tensor([0, 2])
mask = torch.tensor([True, False, True])
z34 = torch.zeros(3, 4)


def set_deep_new():
    deep.set(new_key, z34)


def lock_unlock():
    deep.lock_()
    deep.unlock_()


def setitem_int():
    td[1] = row


def setitem_slice_int():
    td[:, 1] = column


def setitem_key():
    tdc = td.clone()
    tdc["c"] = c


def set_nested():
    tdc = td.clone()
    tdc["b", "b1"] = b


def set_nested_new():
    tdc = td.clone()
    tdc["c", "c", "c"] = c


def update():
    tdc = flat2.clone()
    tdc.update(flat2_other)


def update_nested():
    tdc = td.clone()
    tdc.update(td2)


def update__nested():
    tdc = td.clone()
    tdc.update_(td2)


WORKLOADS = [
    ("creation_empty", lambda: TensorDict({}, [3, 4])),
    ("creation_2keys", lambda: TensorDict({"a": a, "b": b}, [3, 4])),
    ("creation_nested", lambda: TensorDict({"a": a, "b": {"b1": b}}, [3, 4])),
    ("creation_10keys", lambda: TensorDict(keys10, [3, 4])),
    ("creation_100keys", lambda: TensorDict(keys100, [3, 4])),
    ("creation_nested_10keys", lambda: TensorDict(nested10, [3, 4])),
    ("clone", td.clone),
    ("getitem_int", lambda: td[1]),
    ("getitem_slice_int", lambda: td[:, 1]),
    ("getitem_range", lambda: td[0:2]),
    ("getitem_range_int", lambda: td[0:2, 1]),
    ("getitem_tuple", lambda: td[2, 1]),
    ("getitem_tensor", lambda: td[idx]),
    ("getitem_mask", lambda: td[mask]),
    ("getitem_ellipsis", lambda: td[..., 1]),
    ("setitem_int", setitem_int),
    ("setitem_slice_int", setitem_slice_int),
    ("setitem_key", setitem_key),
    ("set_nested", set_nested),
    ("set_nested_new", set_nested_new),
    ("get_nested_leaf", lambda: deep.get(leaf_key)),
    ("get_nested_td", lambda: deep.get(sub_key)),
    ("set_deep_new", set_deep_new),
    ("update", update),
    ("update_nested", update_nested),
    ("update__nested", update__nested),
    ("select_nested", lambda: deep.select(last_leaf)),
    ("exclude_nested", lambda: deep.exclude(last_leaf)),
    ("flatten_keys", lambda: deep.flatten_keys()),
    ("unflatten_keys", lambda: deep_flat.unflatten_keys()),
    ("unbind", lambda: deep.unbind(0)),
    ("split", lambda: deep_wide.split(2, dim=1)),
    ("chunk", lambda: deep_wide.chunk(10, dim=1)),
    ("stack", lambda: torch.stack([deep] * 4, 0)),
    ("cat", lambda: torch.cat([deep] * 4, 0)),
    ("lock_unlock", lock_unlock),
    ("items", lambda: list(big.items())),
    ("keys", lambda: list(big.keys())),
    ("values", lambda: list(big.values())),
    ("keys_nested_leaves", lambda: list(deep.keys(True, True))),
    ("items_nested", lambda: list(deep.items(True))),
    ("membership", lambda: "a" in big.keys()),
    ("apply_nested", lambda: deep.apply(lambda x: x)),
]

only = set(sys.argv[1:])
for name, fn in WORKLOADS:
    if not only or name in only:
        print(f"{name} {per_call(fn):.6e}", flush=True)
