-- bench_sort.lua: sort and topk(k = 10) of 1e3, 1e5 and 1e7 float32, results dropped to
-- the GC, next to torch in the same run (TD_TORCH_PYTHON, else TD_PYTHON, else python3,
-- when it has torch), 1 and 2 threads. Goal (issue 30): <= 1.0x torch.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local json = require("tensordict.json")
local best_of = require("best")
local torch_side = require("torch_side")

local SIZES = { 1e3, 1e5, 1e7 }

-- Best of 3 runs of reps calls of fn, seconds per call.
local function best(reps, fn)
  return best_of(3, function() for _ = 1, reps do fn() end end) / reps
end

local function reps_for(n) return n <= 1e3 and 200 or n <= 1e5 and 10 or 1 end

local function torch_times(py, threads)
  return torch_side.run(py, ([[
import json, time, torch
torch.set_num_threads(%d)
torch.manual_seed(0)
out = {}
for n in %s:
    n = int(n)
    a = torch.randn(n)
    reps = 200 if n <= 1000 else 10 if n <= 100000 else 1
    for name, fn in (("sort", lambda: torch.sort(a)), ("topk", lambda: torch.topk(a, 10))):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best = min(best, (time.perf_counter() - t0) / reps)
        out[f"{name} {n}"] = best
print(json.dumps(out))
]]):format(threads, json.encode(SIZES)))
end

local py = torch_side.python()
local has_torch = py ~= nil
print(("sort and topk(10) of float32 (results dropped; ms per call; torch %s)"):format(
  has_torch and "in the same run" or "absent"))
for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  local theirs = has_torch and torch_times(py, threads) or {}
  print(("threads %d"):format(threads))
  print(("%-14s %10s %10s %7s"):format("case", "ours", "torch", "ratio"))
  for _, n in ipairs(SIZES) do
    local a = T.randn(n)
    for _, name in ipairs({ "sort", "topk" }) do
      local fn = name == "sort" and function() a:sort() end or function() a:topk(10) end
      local ours = best(reps_for(n), fn)
      local key = ("%s %d"):format(name, n)
      local t = theirs[key]
      print(("%-14s %10.4f %10s %7s"):format(key, ours * 1e3, t and ("%.4f"):format(t * 1e3) or "-",
        t and ("%.2f"):format(ours / t) or "-"))
    end
  end
end
