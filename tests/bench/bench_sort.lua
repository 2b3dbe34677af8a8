-- bench_sort.lua: sorting, selection and counting next to torch in the same run
-- (TD_TORCH_PYTHON, else TD_PYTHON, else python3, when it has torch), 1 and 2 threads,
-- results dropped to the GC, ms per call: the best of 25 runs of 40 calls at 1e3, of 7
-- runs of 3 calls at 1e5, of 3 single calls at 1e7, on both sides (short runs: on a
-- shared machine a long one is seldom left alone), the best of 2 rounds of both sides
-- (TD_SORT_ROUNDS). Goal (issue 30): <= 1.0x torch.
--   sort, topk(10)         float32 from randn, 1e3 / 1e5 / 1e7
--   unique                 float32 from randn (all distinct: a sort) and int64 in 0..999
--   histc                  float32 from randn, 100 bins over its own range
--   bincount               int64 in 0..999
--   searchsorted           float32 from randn into 1000 sorted float32
-- (the last four at 1e5 and 1e7). The inputs are made the same way on both sides, not
-- the same numbers.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local json = require("tensordict.json")
local best_of = require("best")
local torch_side = require("torch_side")

local CASES = {
  { "sort", { 1e3, 1e5, 1e7 } },
  { "topk", { 1e3, 1e5, 1e7 } },
  { "unique", { 1e5, 1e7 } },
  { "unique_int", { 1e5, 1e7 } },
  { "histc", { 1e5, 1e7 } },
  { "bincount", { 1e5, 1e7 } },
  { "searchsorted", { 1e5, 1e7 } },
}

local function reps_for(n) return n <= 1e3 and 40 or n <= 1e5 and 3 or 1 end
local function runs_for(n) return n <= 1e3 and 25 or n <= 1e5 and 7 or 3 end

-- Best of runs_for(n) runs of reps_for(n) calls of fn, seconds per call.
local function best(n, fn)
  return best_of(runs_for(n), function() for _ = 1, reps_for(n) do fn() end end) / reps_for(n)
end

local function torch_times(py, threads)
  return torch_side.run(py, ([[
import json, time, torch
torch.set_num_threads(%d)
torch.manual_seed(0)
seq = torch.sort(torch.randn(1000)).values
def calls(n):
    a = torch.randn(n)
    ints = torch.randint(0, 1000, (n,))
    return {
        "sort": lambda: torch.sort(a), "topk": lambda: torch.topk(a, 10),
        "unique": lambda: torch.unique(a), "unique_int": lambda: torch.unique(ints),
        "histc": lambda: torch.histc(a, 100), "bincount": lambda: torch.bincount(ints),
        "searchsorted": lambda: torch.searchsorted(seq, a),
    }
out = {}
for name, sizes in %s:
    for n in sizes:
        n = int(n)
        fn = calls(n)[name]
        reps = 40 if n <= 1000 else 3 if n <= 100000 else 1
        fn()
        best = float("inf")
        for _ in range(25 if n <= 1000 else 7 if n <= 100000 else 3):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best = min(best, (time.perf_counter() - t0) / reps)
        out[f"{name} {n}"] = best
print(json.dumps(out))
]]):format(threads, json.encode(CASES)))
end

local function our_calls(n)
  local a = T.randn(n)
  local ints = T.randint(0, 999, { n })
  local seq = T.randn(1000):sort()
  return {
    sort = function() a:sort() end, topk = function() a:topk(10) end,
    unique = function() a:unique() end, unique_int = function() ints:unique() end,
    histc = function() a:histc(100) end, bincount = function() ints:bincount() end,
    searchsorted = function() seq:searchsorted(a) end,
  }
end

local py = torch_side.python()
print(("sorting, selection and counting (results dropped; ms per call; torch %s)"):format(
  py and "in the same run" or "absent"))
T.manual_seed(0)
-- The best of each side over ROUNDS rounds, each ours then torch's: on a shared machine
-- the load drifts over a run, and a side measured only early or late would pay for it.
local ROUNDS = tonumber(os.getenv("TD_SORT_ROUNDS")) or 2
local function keep_best(into, from)
  for k, v in pairs(from) do into[k] = math.min(into[k] or math.huge, v) end
end
for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  local ours, theirs = {}, {}
  for _ = 1, ROUNDS do
    local round = {}
    for _, case in ipairs(CASES) do
      local name, sizes = case[1], case[2]
      for _, n in ipairs(sizes) do
        local fn = our_calls(n)[name]
        fn()
        round[("%s %d"):format(name, n)] = best(n, fn)
      end
    end
    keep_best(ours, round)
    if py then keep_best(theirs, torch_times(py, threads)) end
  end
  print(("threads %d"):format(threads))
  print(("%-20s %10s %10s %7s"):format("case", "ours", "torch", "ratio"))
  for _, case in ipairs(CASES) do
    for _, n in ipairs(case[2]) do
      local key = ("%s %d"):format(case[1], n)
      local o, t = ours[key], theirs[key]
      print(("%-20s %10.4f %10s %7s"):format(key, o * 1e3, t and ("%.4f"):format(t * 1e3) or "-",
        t and ("%.2f"):format(o / t) or "-"))
    end
  end
end
