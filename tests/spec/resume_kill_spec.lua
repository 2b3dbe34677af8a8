-- resume_kill_spec.lua: `tdflow run --checkpoint` SIGKILLed at 20 random moments, for 0,
-- 1 and 2 Map workers, and each resumed with `tdflow run --resume`: the output is byte
-- for byte the output of a run that was never stopped (the provenance record aside).
-- A kill before the first checkpoint leaves nothing, and the run starts over; one after
-- the commit leaves the whole output. The recipe has a state in every kind of node
-- (Normalize, Map, Shuffle, Rebatch, Take) and checkpoints every 10,000 of 140,000
-- rows; a run takes ~0.4 s, and kills land anywhere in it (a checkpoint being written,
-- the final commit).
local H = require("helpers")

local KILLS = 20 -- at least; see the loop below
-- tdflow starts in ~30 ms. Kills land between half the time the first checkpoint takes
-- and a tenth past the end of a checkpointed run, both measured per case by a run that
-- is watched, not killed: a window taken from the uninterrupted run's time (~30% faster,
-- no checkpoints to write) put 11 of 20 kills before the first checkpoint on a loaded
-- machine, where starting takes a larger share of the run.
local MIN_US = 30000
local now = require("tensordict.util").now
local ffi = require("ffi")
pcall(ffi.cdef, "int kill(int pid, int sig); int usleep(unsigned int usec);")

local dir = H.tmpdir()
local RECIPE = H.write(dir .. "/recipe.json", ([[
{"seed": 2, "batch_size": 1000,
 "source": {"use": "ParticleSource", "n": 150000, "steps": 4},
 "steps": [{"use": "Normalize", "keys": ["pos", "vel"]},
           {"use": "Map", "fn": "physics.features"},
           {"use": "Shuffle", "buffer": 4000},
           {"use": "Rebatch", "size": 1500},
           {"use": "Take", "n": 140000}],
 "sink": {"use": "MemmapSink", "path": "%s/out", "fsync": false}}
]]):format(dir))

teardown(function() H.rmtree(dir) end)

local function tdflow(args)
  local p = io.popen(("scripts/tdflow %s 2>&1; echo \"exit $?\""):format(args))
  local text = p:read("*a")
  p:close()
  return text, tonumber(text:match("exit (%d+)%s*$"))
end

local function same(a, b) return H.sh(("diff -r -x '%%provenance.json' '%s' '%s' >/dev/null"):format(a, b)) end

local function checkpoint_rows(path)
  return require("tensordict").flow.MemmapSink.checkpoint_rows(path)
end

-- Runs cmd to its end, watching path: microseconds from the start to its first
-- checkpoint, and to the end of the run.
local function checkpoint_times(cmd, path)
  local t0 = now()
  local p = io.popen(cmd .. " & echo $!; wait")
  local pid = tonumber(p:read("*l"))
  local first
  while ffi.C.kill(pid, 0) == 0 do
    first = first or (checkpoint_rows(path) and now() - t0)
    ffi.C.usleep(1000)
  end
  p:close()
  return (first or 0) * 1e6, (now() - t0) * 1e6
end

for _, workers in ipairs({ 0, 1, 2 }) do
  describe(("tdflow run --checkpoint, SIGKILLed %d times (%d workers)"):format(KILLS, workers), function()
    it("resumes to the bytes of a run that was never stopped", function()
      local ref = ("%s/ref%d"):format(dir, workers)
      local out = dir .. "/out"
      local text, code = tdflow(("run %s -q --workers %d --set 'sink.path=\"%s\"'"):format(RECIPE, workers, ref))
      assert.are.equal(0, code, text)
      local cmd = ("scripts/tdflow run %s -q --workers %d --checkpoint 10000"):format(RECIPE, workers)
      H.rmtree(out)
      local first_us, end_us = checkpoint_times(cmd .. " >/dev/null 2>&1", out)
      local min_us = math.max(MIN_US, math.floor(first_us / 2))
      local max_us = math.max(2 * min_us, math.floor(end_us * 1.1))
      local seed = os.time()
      math.randomseed(seed + workers)
      local resumed, fresh, done = 0, 0, 0
      -- KILLS rounds, and up to as many more while fewer than half left a checkpoint
      -- (a loaded machine's runs vary in speed more than the window measured once)
      local round = 0
      while round < KILLS or (resumed < KILLS / 2 and round < 2 * KILLS) do
        round = round + 1
        H.rmtree(out)
        H.kill_at_random(cmd .. " >/dev/null 2>&1", min_us, max_us)
        local where = ("round %d (seed %d)"):format(round, seed)
        if H.exists(out) then
          done = done + 1 -- finished before the kill
          assert.is_nil(checkpoint_rows(out), where)
        elseif checkpoint_rows(out) then
          resumed = resumed + 1
          text, code = tdflow(("run %s -q --workers %d --resume"):format(RECIPE, workers))
          assert.are.equal(0, code, where .. ": " .. text)
        else
          fresh = fresh + 1 -- killed before the first checkpoint: nothing to resume
          text, code = tdflow(("run %s -q --workers %d --resume"):format(RECIPE, workers))
          assert.are.equal(2, code, where .. ": " .. text)
          assert.is_truthy(text:find("has no checkpoint to resume", 1, true), text)
          text, code = tdflow(("run %s -q --workers %d"):format(RECIPE, workers))
          assert.are.equal(0, code, where .. ": " .. text)
        end
        assert.is_true(same(ref, out), where .. ": the output differs from the uninterrupted run's")
        assert.is_nil(checkpoint_rows(out), where)
        assert.are.same({ "out", "recipe.json" }, (function()
          local names = {}
          for _, n in ipairs(require("tensordict.fs").list(dir)) do
            if not n:match("^ref%d$") then names[#names + 1] = n end
          end
          return names
        end)(), where .. ": something was left beside the output")
      end
      -- most kills land in the middle of a run
      assert.is_true(resumed >= KILLS / 2, ("only %d of %d kills left a checkpoint (%d before the first, %d after "
        .. "the end; kills at %d..%d us; seed %d)"):format(resumed, round, fresh, done, min_us, max_us, seed))
    end)
  end)
end
