"""Python tensordict's side of the memmap interop spec (tests/spec/td_memmap_spec.lua).

    python td_interop.py write <prefix>          writes the sample container
    python td_interop.py read <prefix>           prints the container at prefix as JSON
    python td_interop.py write_consolidated <f>  the sample, consolidated into one file
    python td_interop.py read_consolidated <f>   prints that file's container as JSON

The JSON describes every leaf by its key path ("a.b"): dtype (without "torch."), shape
and the values flattened (bool as 0/1, bfloat16/float16 as floats), and non-tensor
values as {"data": ...}. Exits 3 when tensordict is not installed."""
import json
import sys

try:
    import torch
    from tensordict import NonTensorData, TensorDict
except ImportError:
    sys.exit(3)

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64"]


def sample():
    src = {}
    for i, name in enumerate(DTYPES):
        t = torch.arange(6).reshape(2, 3) % 3 - 1 + i
        src[name] = t.to(getattr(torch, name))
    src["nested"] = {"x": torch.arange(8, dtype=torch.float32).reshape(2, 4),
                     "deep": {"y": torch.tensor([[7], [8]], dtype=torch.int64)}}
    src["odd key/with%chars: *?"] = torch.tensor([1.5, -2.5])
    src["empty"] = torch.zeros(2, 0)
    td = TensorDict(src, batch_size=[2])
    td["text"] = "hello"
    td["number"] = NonTensorData(42, batch_size=[2])
    td["nested", "note"] = "inner"
    return td


def describe(td, prefix=""):
    out = {}
    for key in td.keys():
        path = prefix + key
        value = td.get(key)
        if type(value).__name__ in ("NonTensorData", "NonTensorStack"):
            out[path] = {"data": value.data}
            continue
        if isinstance(value, TensorDict):
            out.update(describe(value, path + "."))
            continue
        t = value
        out[path] = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                     "values": t.to(torch.float64).flatten().tolist()}
    return out


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "write":
        sample().memmap(path, existsok=True)
    elif cmd == "read":
        td = TensorDict.load_memmap(path)
        print(json.dumps({"batch_size": list(td.batch_size), "leaves": describe(td)}))
    elif cmd == "write_consolidated":
        sample().consolidate(filename=path)
    elif cmd == "read_consolidated":
        td = TensorDict.from_consolidated(path)
        print(json.dumps({"batch_size": list(td.batch_size), "leaves": describe(td)}))
    else:
        sys.exit(2)


main()
