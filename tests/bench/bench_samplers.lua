-- bench_samplers.lua: ReplayBuffer's samplers (issue 31): sample(256) of a 1M-row ring
-- with the prioritized sampler next to the uniform one in the same run (target:
-- prioritized/uniform <= 1.5), the other samplers beside them, and torchrl's
-- TensorDictPrioritizedReplayBuffer and uniform TensorDictReplayBuffer on a
-- LazyMemmapStorage of the same rows where TD_PYTHON has torchrl
-- (bench_samplers_python.py). Rows: obs [32] float32, action [4] float32, reward
-- float32, done bool, episode int64 (episodes of 200 steps); every row's priority set
-- at random first. Samples are dropped to the GC as user code does. Writes ~160 MiB
-- under TD_BENCH_DIR (default /tmp). TD_BENCH_QUICK=1 uses 64k rows.
-- Run by 'make bench'; never by tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = require("tensordict.flow")
local now = require("clock")

local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-samplers"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

local ROWS = os.getenv("TD_BENCH_QUICK") == "1" and 65536 or 1048576
local N, CALLS, RUNS, CHUNK, EPISODE = 256, 200, 9, 65536, 200
local ALPHA, BETA = 0.7, 0.5

-- For each of fns (name -> function), the median over RUNS of CALLS calls each, in us
-- per call; the runs of the functions take turns, so a busy moment of the machine
-- falls on all of them alike.
local function medians_us(names, fns)
  for _, name in ipairs(names) do for _ = 1, CALLS do fns[name]() end end -- warm-up (the JIT, the page cache)
  local times = {}
  for _, name in ipairs(names) do times[name] = {} end
  for r = 1, RUNS do
    for _, name in ipairs(names) do
      local fn = fns[name]
      local t0 = now()
      for _ = 1, CALLS do fn() end
      times[name][r] = (now() - t0) / CALLS * 1e6
    end
  end
  local out = {}
  for _, name in ipairs(names) do
    table.sort(times[name])
    out[name] = times[name][(RUNS + 1) / 2]
  end
  return out
end

local function chunk(first, n)
  local id = T.arange(first, first + n - 1, "int64")
  return T.TensorDict({ obs = T.rand(n, 32), action = T.rand(n, 4), reward = T.rand(n),
    done = id:remainder(EPISODE):eq(0), episode = id:sub(1):floor_divide(EPISODE) }, { n })
end

local function filled(params)
  params.path, params.capacity, params.fsync = dir .. "/" .. params.sampler, ROWS, false
  local rb = flow.ReplayBuffer(params)
  local g = T.Generator(1)
  for first = 1, ROWS, CHUNK do
    rb:extend(chunk(first, CHUNK))
    if params.sampler == "prioritized" then
      rb:update_priority(T.arange(first, first + CHUNK - 1, "int64"), T.rand({ CHUNK }, "float64", g))
    end
  end
  return rb
end

local g = T.Generator(0)
local names, results = {}
do -- the rings live in here
  local fns = {}
  for _, params in ipairs({
    { sampler = "uniform" },
    { sampler = "prioritized", alpha = ALPHA, beta = BETA },
    { sampler = "without_replacement" },
    { sampler = "slice", end_key = "done", slice_len = 32 },
  }) do
    local rb = filled(params)
    names[#names + 1] = params.sampler
    fns[params.sampler] = function() local _ = rb:sample(N, g) end
  end
  results = medians_us(names, fns)
end
collectgarbage() -- the rings unmapped before their folders go (setup, not timed)
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'") -- the rings' space, for torchrl's

print(("-- sample(%d) of a %d-row ring (obs [32] f32, action [4] f32, reward, done, episode), %d thread(s)")
  :format(N, ROWS, T.get_num_threads()))
local uniform = results.uniform
for _, name in ipairs(names) do
  local extra = name == "prioritized" and " (target <= 1.5)" or ""
  print(("%-22s %8.1f us, /uniform %.2f%s"):format(name, results[name], results[name] / uniform, extra))
end

-- torchrl on a LazyMemmapStorage of the same rows, where installed.
local py = os.getenv("TD_PYTHON") or "python3"
local pipe = io.popen(("%s tests/bench/bench_samplers_python.py '%s' %d %d %s %s 2>/dev/null"):format(py, dir, ROWS,
  N, ALPHA, BETA))
local out = pipe and pipe:read("*a") or ""
if pipe then pipe:close() end
local pu, pp = out:match("uniform (%S+)"), out:match("prioritized (%S+)")
if pu then
  pu, pp = tonumber(pu) * 1e6, tonumber(pp) * 1e6
  print(("%-22s %8.1f us, ours/torchrl %.2f"):format("torchrl uniform", pu, uniform / pu))
  print(("%-22s %8.1f us, ours/torchrl %.2f, its prioritized/uniform %.2f"):format("torchrl prioritized", pp,
    results.prioritized / pp, pp / pu))
else
  print("torchrl: not installed where TD_PYTHON points (skipped)")
end
os.execute("rm -rf '" .. dir .. "'")
