"""Python tensordict's side of the record interop spec (tests/spec/record_spec.lua).

    python record_interop.py read <prefix>     loads the folder with the @tensorclass Step
                                               (fields obs, reward, label) declared here and
                                               prints it as JSON
    python record_interop.py unknown <prefix>  loads it without that class: prints the error

Exits 3 when tensordict is not installed."""
import json
import sys

try:
    import torch
    from tensordict import TensorDict, tensorclass
except ImportError:
    sys.exit(3)


@tensorclass
class Step:
    obs: torch.Tensor
    reward: torch.Tensor
    label: str


def main():
    cmd, path = sys.argv[1], sys.argv[2]
    if cmd == "read":
        r = TensorDict.load_memmap(path)
        print(json.dumps({"type": type(r).__name__, "batch_size": list(r.batch_size),
                          "obs": r.obs.flatten().tolist(), "reward": r.reward.tolist(),
                          "label": r.label,
                          "fields": type(TensorDict.load_memmap(path + "/_tensordict")).__name__}))
    elif cmd == "unknown":
        with open(path + "/meta.json") as f:
            meta = f.read()
        with open(path + "/meta.json", "w") as f:
            f.write(meta.replace("__main__.Step", "elsewhere.Step"))
        try:
            TensorDict.load_memmap(path)
            print("loaded")
        except Exception as e:  # what Python says about a class it cannot import
            print(type(e).__name__ + ": " + str(e))
    else:
        sys.exit(2)


if __name__ == "__main__":
    main()
