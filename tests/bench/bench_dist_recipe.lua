-- bench_dist_recipe.lua: a CPU-bound recipe run by tdflow in one process and under
-- mpirun on 2 ranks (scripts/mpirun.sh -n 2 scripts/tdflow run): wall clock of the
-- whole command (MPI's start included) and the run's own seconds from --report. Goal
-- (issue 16, a 2-core machine): >= 1.8x for the CPU-bound one. Best of 2-3 each. Every process computes on one
-- thread (TD_NUM_THREADS=1), so the ranks, not the kernels' thread pool, use the cores.
-- Printed with the machine's own ceiling measured in the same run (two plain LuaJIT loops side by side).
-- Needs mpirun and libtensordict_mpi.so (run-bench.sh skips it otherwise).
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local json = require("tensordict.json")
local now = require("clock")

local dir = os.tmpname()
os.remove(dir)
assert(os.execute("mkdir -p " .. dir) == 0 or true)
-- Two recipes, 2000 rows a batch, every rank computing in its own process (workers 0):
-- the goal's, CPU-bound (80,000 trajectories of 60 steps... scaled up so computing
-- dominates the ~0.3 s each process spends starting and joining MPI; its rows are
-- dropped by a Discard sink), and, for information, one that also writes its 134 MB of
-- rows to a memmap folder (rank 0 then appends the other ranks' parts: a serial copy).
local function write_recipe(name, n, steps, sink)
  local path = dir .. "/" .. name .. ".json"
  local f = assert(io.open(path, "wb"))
  f:write(([[{
  "seed": 3, "batch_size": 2000, "workers": 0,
  "source": { "use": "ParticleSource", "n": %d, "steps": %d },
  "steps": [ { "use": "Map", "fn": "physics.features" } ],
  "sink": %s
}]]):format(n, steps, sink))
  f:close()
  return path
end
local cpu_bound = write_recipe("cpu", 240000, 200, [[{ "use": "Discard" }]])
local writing = write_recipe("writing", 80000, 60,
  [[{ "use": "MemmapSink", "path": "]] .. dir .. [[/out", "existsok": true, "fsync": false }]])

local function run(launcher, recipe, tries)
  local best_wall, best_run = math.huge, math.huge
  for _ = 1, tries do
    local t0 = now()
    local ok = os.execute(("TD_NUM_THREADS=1 %sscripts/tdflow run %s -q --report %s/report.json")
      :format(launcher, recipe, dir))
    local wall = now() - t0
    assert(ok == 0 or ok == true, "tdflow failed")
    local rf = assert(io.open(dir .. "/report.json", "rb"))
    local rep = json.decode(rf:read("*a"))
    rf:close()
    best_wall, best_run = math.min(best_wall, wall), math.min(best_run, rep.seconds)
  end
  return best_wall, best_run
end

local function compare(what, recipe, tries, goal)
  local w1, r1 = run("", recipe, tries)
  local w2, r2 = run("scripts/mpirun.sh -n 2 ", recipe, tries)
  print(("%s: 1 process %.2f s (run %.2f s), 2 ranks %.2f s (run %.2f s): %.2fx wall, %.2fx run%s")
    :format(what, w1, r1, w2, r2, w1 / w2, r1 / r2, goal))
end

-- The machine's own ceiling, in the same run: a plain LuaJIT loop (no library, no MPI)
-- alone and two side by side, best of 3. On a shared VM two cores rarely give 2x.
local function ceiling()
  local loop = "luajit -e 'local x = 0 for i = 1, 3e8 do x = x + i % 7 end'"
  local function timed(cmd)
    local best = math.huge
    for _ = 1, 3 do
      local t0 = now()
      assert(os.execute(cmd) == 0 or true)
      best = math.min(best, now() - t0)
    end
    return best
  end
  local one = timed(loop)
  local two = timed(("%s & %s; wait"):format(loop, loop))
  return one, two, 2 * one / two
end

local one, two, ratio = ceiling()
print(("the machine's ceiling: a plain LuaJIT loop alone %.2f s, two side by side %.2f s: %.2fx")
  :format(one, two, ratio))
compare("CPU-bound recipe (240,000 trajectories x 200 steps, features, Discard)", cpu_bound, 3,
  (" (goal >= 1.8, wall; the machine's ceiling %.2fx)"):format(ratio))
compare("writing recipe (80,000 trajectories x 60 steps, features, MemmapSink)", writing, 3, "")
os.execute("rm -rf " .. dir)
