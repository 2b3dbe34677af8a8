-- bench_unary_ops.lua: every unary op of the op table on 1e6 float32, results dropped to
-- the GC as user code drops them, next to torch in the same run (TD_TORCH_PYTHON, else
-- TD_PYTHON, else python3, when it has torch) and to a memcpy of the same bytes. Goal
-- (issue 30): <= 1.0x torch for each, and >= 0.5x memcpy's bandwidth for the ops that
-- are one instruction (neg, abs, sqrt, relu, floor, ceil, round, trunc, sign, ...).
-- Threads: 1, then 2 (T.set_num_threads and torch.set_num_threads alike). The inputs lie
-- in every op's domain (0.05 .. 0.95; acosh gets 1 + that), so no side takes a NaN path.
-- bitwise_not takes integers only: it runs on 1e6 int32 (the same values times 1000).
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local ffi = require("ffi")
local json = require("tensordict.json")
local ops = require("tensordict.tensor.ops")
local best_of = require("best")
local torch_side = require("torch_side")

local N = 1000000
local ONE_INSTRUCTION = { neg = true, abs = true, sqrt = true, rsqrt = true, relu = true, floor = true,
  ceil = true, round = true, trunc = true, frac = true, sign = true, isnan = true, isinf = true,
  isfinite = true, signbit = true, logical_not = true, bitwise_not = true }

local names = {}
for name in pairs(ops.UNARY) do names[#names + 1] = name end
table.sort(names)

-- Best seconds of reps calls of fn, over 5 tries.
local function best(reps, fn)
  return best_of(5, function() for _ = 1, reps do fn() end end) / reps
end

local function torch_times(py, threads)
  return torch_side.run(py, ([[
import json, time, torch
torch.set_num_threads(%d)
torch.manual_seed(0)
a = torch.rand(%d) * 0.9 + 0.05
b = a + 1
i = (a * 1000).int()
out = {}
for op in %s:
    fn = getattr(torch, op)
    x = b if op == "acosh" else i if op == "bitwise_not" else a
    try:
        fn(x)
    except Exception:
        continue
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            fn(x)
        best = min(best, (time.perf_counter() - t0) / 20)
    out[op] = best
print(json.dumps(out))
]]):format(threads, N, json.encode(names)))
end

local py = torch_side.python()
local has_torch = py ~= nil
local a = T.rand(N) * 0.9 + 0.05
local b = a + 1
local i = (a * 1000):to("int32")
ffi.cdef("void *memcpy(void *, const void *, size_t);")
local src, dst = ffi.new("float[?]", N), ffi.new("float[?]", N)
print(("unary ops on %d float32 (results dropped; ms per call; torch %s)"):format(N,
  has_torch and "in the same run" or "absent"))
for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  local theirs = has_torch and torch_times(py, threads) or {}
  local memcpy = best(50, function() ffi.C.memcpy(dst, src, N * 4) end)
  print(("threads %d: memcpy of 4 MB %.3f ms"):format(threads, memcpy * 1e3))
  print(("%-12s %9s %9s %8s %10s"):format("op", "ours", "torch", "ratio", "vs memcpy"))
  for _, name in ipairs(names) do
    local fn, x = a[name], name == "acosh" and b or name == "bitwise_not" and i or a
    local ours = best(20, function() fn(x) end)
    local t = theirs[name]
    print(("%-12s %9.3f %9s %8s %10s"):format(name, ours * 1e3, t and ("%.3f"):format(t * 1e3) or "-",
      t and ("%.2f"):format(ours / t) or "-",
      ONE_INSTRUCTION[name] and ("%.2fx"):format(memcpy / ours) or ""))
  end
end
