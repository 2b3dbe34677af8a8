-- bench_checkpoint.lua: the figures of issue 27 (resumable runs and provenance), each
-- next to its reference measured in the same run, as users run them (tdflow's own
-- M.execute: profiling, progress off, results dropped to the GC):
--   - checkpoint overhead: a ~1 GiB run (ParticleSource -> Normalize -> Shuffle ->
--     Rebatch -> MemmapSink, fsync on) with a checkpoint every 64 MiB of output vs the
--     same run without checkpoints (goal <= 1.10x);
--   - resume: from tdflow's main({"run", recipe, "--resume"}) to the first new row the
--     sink takes, with ~1 GiB already in the checkpoint, vs a fresh start of the same
--     recipe to its first row (goal <= 1 s);
--   - provenance: a small run (4,096 rows to a MemmapSink) with its provenance record
--     vs without it (goal <= 5 ms added).
-- Each figure is the best of N alternating runs (TD_BENCH_RUNS, default 3). Writes
-- ~2.3 GiB under TD_BENCH_DIR (default /tmp) and deletes it. Never run by tests.
-- Usage: TENSORDICT_LIB=build/libtensordict.so luajit tests/bench/bench_checkpoint.lua
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = T.flow
local now = require("clock")
local tdflow = require("tensordict.host.tdflow")
local recipe = require("tensordict.host.recipe")
local host_provenance = require("tensordict.host.provenance")
local json = require("tensordict.json")

local RUNS = tonumber(os.getenv("TD_BENCH_RUNS") or "3")
local dir = (os.getenv("TD_BENCH_DIR") or "/tmp") .. "/td-bench-checkpoint"
os.execute("rm -rf '" .. dir .. "' && mkdir -p '" .. dir .. "'")

-- ParticleSource rows of 10 steps: id 8 + mass 4 + pos 120 + vel 120 + energy 40 bytes.
local ROW_BYTES = 292
local N = math.floor(2 ^ 30 / ROW_BYTES)   -- ~1 GiB of output
local EVERY = math.floor(64 * 2 ^ 20 / ROW_BYTES)
local RECIPE = dir .. "/gib.json"
local f = assert(io.open(RECIPE, "w"))
f:write(json.encode({ seed = 0, batch_size = 16384,
  source = { use = "ParticleSource", n = N, steps = 10 },
  steps = { { use = "Normalize", keys = { "pos", "vel" } }, { use = "Shuffle", buffer = 10000 },
    { use = "Rebatch", size = 8192 } },
  sink = { use = "MemmapSink", path = dir .. "/out", existsok = true } }))
f:close()

local function quiet_err() return { write = function() end, flush = function() end } end

-- One tdflow run of the recipe (args as tdflow's parser gives them); its seconds.
local function run(args)
  local r = assert(tdflow.prepare_run(RECIPE, args, quiet_err()))
  local t0 = now()
  local ok, err = tdflow.execute(r, { quiet = true, resume = args.resume })
  assert(ok, err)
  return now() - t0
end

------------------------------------------------------------ checkpoint overhead
print(("== checkpoint overhead: %d rows (%.2f GiB) through a MemmapSink, a checkpoint every %d rows (64 MiB), "
  .. "best of %d"):format(N, N * ROW_BYTES / 2 ^ 30, EVERY, RUNS))
local plain, ckpt = math.huge, math.huge
for _ = 1, RUNS do
  collectgarbage()
  plain = math.min(plain, run({}))
  collectgarbage()
  ckpt = math.min(ckpt, run({ checkpoint = EVERY }))
end
print(("no checkpoints %7.2f s (%.0f MB/s)"):format(plain, N * ROW_BYTES / plain / 1e6))
print(("checkpoints    %7.2f s (%.0f MB/s, %d of them)"):format(ckpt, N * ROW_BYTES / ckpt / 1e6,
  math.floor(N / EVERY)))
print(("ratio: %.3fx (goal <= 1.10x)"):format(ckpt / plain))

------------------------------------------------------------------------ resume
-- A run with checkpoints stopped once its checkpoint holds ~1 GiB: the sink raises at
-- its first write past that (the checkpoint is kept, as after a kill).
local MemmapSink = flow.MemmapSink
local write = MemmapSink.write
local stop_after, first_row_at
MemmapSink.write = function(self, td)
  if first_row_at == nil then first_row_at = now() end
  if stop_after and self.last_checkpoint and self.last_checkpoint >= stop_after then
    error("tensordict: bench: stopped", 0)
  end
  return write(self, td)
end
local BIG = math.floor(N * 1.1)
local big = dir .. "/big.json"
f = assert(io.open(big, "w"))
f:write((io.open(RECIPE):read("*a"):gsub('"n":' .. N, '"n":' .. BIG)))
f:close()
RECIPE = big
os.execute("rm -rf '" .. dir .. "/out'")
stop_after = N
local r = assert(tdflow.prepare_run(RECIPE, { checkpoint = EVERY }, quiet_err()))
assert(not tdflow.execute(r, { quiet = true }))
local kept = MemmapSink.checkpoint_rows(dir .. "/out")
print(("== resume: a checkpoint of %d rows (%.2f GiB) of %d; from tdflow's main to the first new row, best of %d")
  :format(kept, kept * ROW_BYTES / 2 ^ 30, BIG, RUNS))
-- each resume stops at its first row: the checkpoint stays for the next
stop_after = 0
local resume, fresh = math.huge, math.huge
for _ = 1, RUNS do
  collectgarbage()
  first_row_at = nil
  local t0 = now()
  tdflow.main({ "run", RECIPE, "--resume", "-q" }, quiet_err(), quiet_err())
  resume = math.min(resume, first_row_at - t0)
  assert(MemmapSink.checkpoint_rows(dir .. "/out") == kept)
  collectgarbage()
  first_row_at = nil
  t0 = now()
  tdflow.main({ "run", RECIPE, "-q", "--set", ('sink.path="%s/fresh"'):format(dir) }, quiet_err(), quiet_err())
  fresh = math.min(fresh, first_row_at - t0)
end
print(("fresh start to its first row   %7.3f s"):format(fresh))
print(("--resume to its first new row  %7.3f s (goal <= 1 s)"):format(resume))
MemmapSink.write = write
os.execute("rm -rf '" .. dir .. "/out' '" .. dir .. "/.out.checkpoint' '" .. dir .. "/fresh'")

-------------------------------------------------------------------- provenance
local SMALL = dir .. "/small.json"
f = assert(io.open(SMALL, "w"))
f:write(json.encode({ seed = 0, batch_size = 512, source = { use = "ParticleSource", n = 4096, steps = 2 },
  steps = { { use = "Rebatch", size = 1000 } },
  sink = { use = "MemmapSink", path = dir .. "/small", existsok = true } }))
f:close()
local PROV_RUNS = 30
local with, without = math.huge, math.huge
for _ = 1, PROV_RUNS do
  for _, recorded in ipairs({ true, false }) do
    local p = recipe.prepare(SMALL, {})
    if recorded then p.provenance = host_provenance.record(p, { command = { "tdflow", "run", SMALL } }) end
    collectgarbage()
    local t0 = now()
    assert(tdflow.execute(p, { quiet = true }))
    local s = now() - t0
    if recorded then with = math.min(with, s) else without = math.min(without, s) end
  end
end
print(("== provenance: a run of 4,096 rows to a MemmapSink (fsync on), best of %d"):format(PROV_RUNS))
print(("without the record %7.2f ms"):format(without * 1e3))
print(("with the record    %7.2f ms (the record committed in the folder)"):format(with * 1e3))
print(("added: %.2f ms (goal <= 5 ms)"):format((with - without) * 1e3))
os.execute("rm -rf '" .. dir .. "'")
