"""Python tensordict's side of the lazy stack interop spec (tests/spec/lazy_stack_spec.lua).

    python lazy_stack_interop.py read <prefix>               the lazy stack at prefix as JSON
    python lazy_stack_interop.py read_consolidated <file>    the same for a consolidated file
    python lazy_stack_interop.py resave <prefix> <out>       loads prefix, adds the key
                                                             "from_python" ([k] per member k)
                                                             and memmaps it to out

The JSON: {"type": class name, "stack_dim": 0-based, "batch_size": [...], "members":
[{key: {"shape": [...], "values": [...]} or {"data": value}}]} with nested keys as "a.b".
Exits 3 when tensordict is not installed."""
import json
import sys

try:
    import torch
    from tensordict import LazyStackedTensorDict, TensorDict
except ImportError:
    sys.exit(3)


def leaves(td, prefix=""):
    out = {}
    for k in td.keys():
        v = td.get(k)
        if isinstance(v, torch.Tensor):
            out[prefix + k] = {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape),
                               "values": v.flatten().double().tolist()}
        elif isinstance(v, TensorDict):
            out.update(leaves(v, prefix + k + "."))
        else:
            out[prefix + k] = {"data": td[k]}
    return out


def describe(s):
    return {"type": type(s).__name__, "stack_dim": s.stack_dim,
            "batch_size": list(s.batch_size), "members": [leaves(m) for m in s.tensordicts]}


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "read":
        print(json.dumps(describe(TensorDict.load_memmap(path))))
    elif cmd == "read_consolidated":
        print(json.dumps(describe(TensorDict.from_consolidated(path))))
    elif cmd == "resave":
        s = TensorDict.load_memmap(path)
        s = LazyStackedTensorDict(*[m.clone() for m in s.tensordicts], stack_dim=s.stack_dim)
        for k, m in enumerate(s.tensordicts):
            m["from_python"] = torch.full(m.batch_size + (1,), float(k))
        s.memmap(sys.argv[3])
    else:
        sys.exit(2)


if __name__ == "__main__":
    main()
