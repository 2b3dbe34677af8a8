-- bench_fill_scan.lua: cumsum, linspace and tril at 1e5 and 1e7 elements (float32), and
-- the new running scans cummax and logcumsumexp, results dropped to the GC, next to
-- torch in the same run (TD_TORCH_PYTHON, else TD_PYTHON, else python3, when it has
-- torch), 1 and 2 threads. Goal (issue 30): <= 1.0x torch.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local best_of = require("best")
local torch_side = require("torch_side")

local SIZES = { 1e5, 1e7 }
local CASES = { "cumsum", "linspace", "tril", "cummax", "logcumsumexp" }

local function reps_for(n) return n <= 1e5 and 50 or 2 end

-- Best of 3 runs of reps calls of fn, seconds per call.
local function best(reps, fn)
  return best_of(3, function() for _ = 1, reps do fn() end end) / reps
end

-- tril of a square matrix of n elements.
local function side(n) return math.floor(math.sqrt(n)) end

local function torch_times(py, threads)
  return torch_side.run(py, torch_side.cases_script(threads, SIZES, [[
    a = torch.randn(n)
    s = int(math.isqrt(n))
    m = torch.randn(s, s)]], [[(("cumsum", lambda: torch.cumsum(a, 0)), ("linspace", lambda: torch.linspace(0, 1, n)),
             ("tril", lambda: torch.tril(m)), ("cummax", lambda: torch.cummax(a, 0)),
             ("logcumsumexp", lambda: torch.logcumsumexp(a, 0)))]], "50 if n <= 100000 else 2"))
end

local py = torch_side.python()
print(("cumsum, linspace, tril, cummax, logcumsumexp of float32 (results dropped; ms per call; torch %s)"):format(
  py and "in the same run" or "absent"))
for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  local theirs = py and torch_times(py, threads) or {}
  print(("threads %d"):format(threads))
  print(("%-20s %10s %10s %7s"):format("case", "ours", "torch", "ratio"))
  for _, n in ipairs(SIZES) do
    local a = T.randn(n)
    local m = T.randn(side(n), side(n))
    local fns = {
      cumsum = function() a:cumsum(1) end,
      linspace = function() T.linspace(0, 1, n) end,
      tril = function() m:tril() end,
      cummax = function() a:cummax(1) end,
      logcumsumexp = function() a:logcumsumexp(1) end,
    }
    for _, name in ipairs(CASES) do
      local ours = best(reps_for(n), fns[name])
      local key = ("%s %d"):format(name, n)
      print(torch_side.row(key, ours, theirs[key]))
    end
  end
end
