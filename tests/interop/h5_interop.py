"""h5_interop.py: the Python side of tests/spec/h5_spec.lua (h5py 3 and tensordict).

  write DIR   writes DIR/py.h5 (every h5py dtype a container holds, nested groups,
              attributes, strings, a gzip-compressed chunked dataset) and DIR/zero.h5
              (a 0-dim and an empty dataset), as h5py writes them.
  read FILE   prints, as JSON, every dataset of FILE (a file written by the Lua side):
              dtype, shape and values, as h5py reads them, plus the batch size Python
              tensordict's PersistentTensorDict.from_h5 gives it.
"""
import json
import sys
import warnings

import h5py
import numpy as np


def write(d):
    with h5py.File(d + "/py.h5", "w") as f:
        f["f32"] = (np.arange(6, dtype=np.float32).reshape(3, 2) / 4)
        f["f64"] = np.array([1.5, -2.25, 3e100])
        f["f16"] = np.array([0.5, -1, 65504], dtype=np.float16)
        f["i8"] = np.array([-128, 0, 127], dtype=np.int8)
        f["i16"] = np.array([-32768, 1, 32767], dtype=np.int16)
        f["i32"] = np.array([-2**31, 2, 2**31 - 1], dtype=np.int32)
        f["i64"] = np.array([-2**63, 3, 2**63 - 1], dtype=np.int64)
        f["u8"] = np.array([0, 7, 255], dtype=np.uint8)
        f["b"] = np.array([True, False, True])
        f.create_dataset("gz", data=np.arange(30, dtype=np.int32).reshape(3, 10),
                         compression="gzip", compression_opts=6, chunks=(2, 5))
        f["nested/deep/x"] = np.arange(3, dtype=np.int64) * 10
        f["s"] = "h\u00e9llo"
        f["s"].attrs["__tensordict_str__"] = True
        f["fixed"] = np.bytes_(b"abc")
        f.attrs["title"] = "run 1"
        f.attrs["lr"] = 0.5
        f["nested"].attrs["k"] = np.array([1, 2, 3])
    with h5py.File(d + "/zero.h5", "w") as f:
        f["scalar"] = np.float64(2.5)
        f["empty"] = np.zeros((3, 0), dtype=np.float32)


def read(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, node):
            if isinstance(node, h5py.Dataset):
                v = node[()]
                entry = {"dtype": str(node.dtype), "shape": list(node.shape),
                         "chunks": list(node.chunks) if node.chunks else None,
                         "compression": node.compression}
                if isinstance(v, bytes):
                    entry["values"] = v.decode()
                    entry["marker"] = bool(node.attrs.get("__tensordict_str__", False))
                else:
                    entry["values"] = np.asarray(v).astype(np.float64).tolist() \
                        if node.dtype.kind == "f" else np.asarray(v).tolist()
                out[name] = entry
        f.visititems(visit)
    try:
        from tensordict import PersistentTensorDict
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            td = PersistentTensorDict.from_h5(path)
            out["__batch_size__"] = list(td.batch_size)
            td.close()
    except ImportError:
        pass
    print(json.dumps(out))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](sys.argv[2])
