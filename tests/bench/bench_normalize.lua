-- bench_normalize.lua: what Normalize's nan policy costs (issue 27, item 3). The same
-- batches through Normalize with nan = "propagate" (the plain update, the behaviour
-- before the policy existed: the reference), "error" (the default: the kernels' partial
-- states are checked, and fixed statistics count NaNs and infinities) and "ignore"
-- (per-feature counts), updating and with fixed statistics, in one run. Results are
-- dropped to the garbage collector, as users' code does. A tree without the policy
-- (an older checkout) runs the default alone.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = T.flow
local now = require("clock")

local ROWS, FEATURES, BATCHES, REPEATS = 8192, 16, 200, 15

local g = T.Generator(0)
local batches = {}
for i = 1, 8 do batches[i] = T.TensorDict({ obs = T.randn({ ROWS, FEATURES }, "float32", g) }, { ROWS }) end

local has_policy = pcall(flow.Normalize, { keys = "obs", nan = "error" })

-- Seconds for BATCHES batches through a fresh node made by make().
local function once(make)
  local node = make()
  local t0 = now()
  for i = 1, BATCHES do node(batches[(i - 1) % #batches + 1]) end
  return now() - t0
end

-- Best of REPEATS for each maker, the makers taking turns within each repeat so that
-- a busy machine's drift reaches them alike.
local function best_of(makers)
  local best = {}
  for i = 1, #makers do best[i] = math.huge end
  for _ = 1, REPEATS do
    for i, make in ipairs(makers) do best[i] = math.min(best[i], once(make)) end
  end
  return best
end

local fixed = { obs = { mean = T.zeros({ FEATURES }, "float64"), var = T.ones({ FEATURES }, "float64"), count = 1 } }
local rows = ROWS * BATCHES
for _, mode in ipairs({ { "updating", nil }, { "fixed statistics", fixed } }) do
  local name, stats = mode[1], mode[2]
  local function node(nan)
    return function() return flow.Normalize { keys = "obs", stats = stats, nan = nan } end
  end
  if not has_policy then
    local t = best_of({ node(nil) })[1]
    print(("Normalize %s, %d x [%d, %d] float32: default %.3f s (%.1f M rows/s)"):format(name, BATCHES,
      ROWS, FEATURES, t, rows / t / 1e6))
  else
    local t = best_of({ node("propagate"), node("error"), node("ignore") })
    local ref, err, ign = t[1], t[2], t[3]
    print(("Normalize %s, %d x [%d, %d] float32: propagate %.3f s (%.1f M rows/s), error (default) %.3f s "
      .. "= %.3fx, ignore %.3f s = %.3fx"):format(name, BATCHES, ROWS, FEATURES, ref, rows / ref / 1e6, err,
      err / ref, ign, ign / ref))
  end
end
