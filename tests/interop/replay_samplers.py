"""replay_samplers.py: the torchrl side of tests/spec/replay_samplers_spec.lua, one run
(importing torchrl takes seconds) printing one JSON object:

  ALPHA BETA EPS P1,P2,... CAP LEN IDS
    "weights": a TensorDictReplayBuffer with a PrioritizedSampler (float32 trees) of
      len(P) rows whose priorities are set to P: {row (1-based): priority_weight} over
      4000 sampled rows;
    "slice": a TensorDictReplayBuffer with a SliceSampler (traj_key "episode", slice_len
      LEN) on a storage of CAP rows extended with episode ids IDS (1,1,2,...): the shape
      of sample(4 * LEN) and of its "episode" leaf.
"""
import json
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
from tensordict import TensorDict  # noqa: E402
from torchrl.data import (  # noqa: E402
    LazyTensorStorage,
    TensorDictReplayBuffer,
)
from torchrl.data.replay_buffers.samplers import PrioritizedSampler, SliceSampler  # noqa: E402


def weights(alpha, beta, eps, priorities):
    p = [float(x) for x in priorities.split(",")]
    n = len(p)
    sampler = PrioritizedSampler(n, alpha=alpha, beta=beta, eps=eps)  # float32 trees (float64 fails in 0.14)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(n), sampler=sampler, batch_size=4000)
    rb.extend(TensorDict({"x": torch.arange(n)}, [n]))
    rb.update_priority(torch.arange(n), torch.tensor(p))
    torch.manual_seed(0)
    s = rb.sample()
    out = {}
    for i, w in zip(s["index"].tolist(), s["priority_weight"].tolist()):
        out[str(i + 1)] = w
    return out


def slices(cap, slice_len, ids):
    episode = torch.tensor([int(x) for x in ids.split(",")])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(cap), sampler=SliceSampler(slice_len=slice_len,
                                traj_key="episode"), batch_size=4 * slice_len)
    rb.extend(TensorDict({"episode": episode}, [len(episode)]))
    s = rb.sample()
    return {"shape": list(s.batch_size), "episode": list(s["episode"].shape)}


if __name__ == "__main__":
    a = sys.argv
    print(json.dumps({"weights": weights(float(a[1]), float(a[2]), float(a[3]), a[4]),
                      "slice": slices(int(a[5]), int(a[6]), a[7])}))
