-- bench_pipeline.lua: one small pipeline end to end (source -> Normalize -> Filter ->
-- Map over 2 workers -> Rebatch -> MemmapSink), its rows/s through flow.run and through
-- the tdflow host, and the same pipeline written with Python tensordict in the same
-- run where TD_PYTHON (default python3) has it. Goal (issues 9 and 10): >= 3x Python.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = T.flow
local now = require("clock")

local ROWS, BATCH = 1000000, 8192
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/bench_pipeline_" .. tostring(os.time())
local W = T.randn({ 16, 16 }, T.Generator(0)) / 4

local function features(td)
  local h = td.obs
  for _ = 1, 4 do h = h:matmul(W):tanh() end
  td.feat = h
  td.score = h:sum(2):sigmoid()
  return td
end

T.manual_seed(0)
local data = T.TensorDict({ obs = T.randn(ROWS, 16), reward = T.rand(ROWS) }, { ROWS })
local pipeline = flow.Seq {
  flow.Normalize { keys = "obs" },
  flow.Filter { where = function(td) return td.reward:gt(0.2) end },
  flow.Map { fn = features, workers = 2 },
  flow.Rebatch { size = 4096 },
}

local function once()
  local source = flow.TensorSource { td = data, batch_size = BATCH }
  local sink = flow.MemmapSink { path = dir, existsok = true, fsync = false }
  local t0 = now()
  local out = flow.run(source, pipeline, sink, { seed = 0 })
  local dt = now() - t0
  return dt, #out
end

local best, rows = math.huge, 0
for _ = 1, 3 do
  local dt, n = once()
  best, rows = math.min(best, dt), n
end
local ours = ROWS / best
print(("pipeline, %d rows of obs[16], batches of %d, 2 workers: %.3f s best of 3, %.0f rows/s (%d rows out)")
  :format(ROWS, BATCH, best, ours, rows))

local py = os.getenv("TD_PYTHON") or "python3"
local pipe = io.popen(("%s tests/bench/bench_pipeline_python.py %d %d %s_py 2>/dev/null"):format(py, ROWS, BATCH, dir))
local text = pipe:read("*a")
pipe:close()
local theirs = tonumber(text:match("rows_per_second (%S+)"))
if theirs then
  print(("Python tensordict, the same pipeline: %.0f rows/s; ours/Python %.2fx (goal >= 3)")
    :format(theirs, ours / theirs))
else
  print("Python tensordict: skipped (" .. (text:match("skip: ([^\n]*)") or "TD_PYTHON has no tensordict") .. ")")
end
os.execute("rm -rf '" .. dir .. "'")
