-- dist_flow_spec.lua: `mpirun -n N tdflow run` is data-parallel (docs/dist.md): the 2-
-- and 3-rank outputs equal the 1-rank output, Normalize's merged statistics equal one
-- process's, and a rank killed mid-run leaves the sink uncommitted. Pending (skipped)
-- where mpirun or libtensordict_mpi.so is missing.
local helpers = require("helpers")
local T = require("tensordict")

local root = (debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or ".")
local core_lib = os.getenv("TENSORDICT_LIB") or (root .. "/build/libtensordict.so")
local mpi_lib = core_lib:gsub("libtensordict%.so$", "libtensordict_mpi.so")

local exists = helpers.exists

local function have_mpi()
  return exists(mpi_lib) and helpers.sh("command -v mpirun >/dev/null 2>&1")
end

-- Runs tdflow (under scripts/mpirun.sh with ranks > 0); its exit status and output.
local function tdflow(ranks, args, recovery)
  local launcher = ranks > 0
    and ("TD_MPI_RECOVERY=%d scripts/mpirun.sh -n %d "):format(recovery and 1 or 0, ranks) or ""
  local cmd = ("cd %q && TENSORDICT_LIB=%q TENSORDICT_MPI_LIB=%q %sscripts/tdflow run %s 2>&1; echo \"rc=$?\"")
    :format(root, core_lib, mpi_lib, launcher, args)
  local pipe = io.popen(cmd)
  local out = pipe:read("*a")
  pipe:close()
  return tonumber(out:match("rc=(%d+)%s*$")), out
end

local function recipe_json(dir)
  local path = dir .. "/recipe.json"
  helpers.write(path, ([[{
  "seed": 7, "batch_size": 96, "workers": 1,
  "source": { "use": "ParticleSource", "n": 1000, "steps": 6 },
  "steps": [
    { "use": "Normalize", "keys": ["energy"], "out_keys": ["energy_z"], "path": "%s/stats" },
    { "use": "physics.EnergyFilter", "max": 2.0 },
    { "use": "Map", "fn": "physics.features" }
  ],
  "sink": { "use": "MemmapSink", "path": "%s/out", "existsok": true }
}]]):format(dir, dir))
  return path
end

-- Every leaf of a equals b's within tol, except the keys in skip.
local function assert_rows_equal(a, b, skip)
  assert.are.equal(#b, #a)
  for _, k in ipairs(b:keys({ include_nested = true, leaves_only = true, sort = true })) do
    if not skip[k] then
      local x, y = a:get(k), b:get(k)
      assert.are.equal(y:dtype(), x:dtype())
      helpers.assert_near(x:to("float64"):tolist(), y:to("float64"):tolist(), 1e-5)
    end
  end
end

-- Every file of folder a (relative path -> bytes), but the run's provenance record
-- (a data-parallel run writes none).
local function folder_bytes(dir)
  local files = {}
  for _, rel in ipairs(helpers.output_lines(("cd %q && find . -type f | sort"):format(dir))) do
    if not rel:find("%provenance.json", 1, true) then files[rel] = helpers.read(dir .. "/" .. rel) end
  end
  return files
end

-- The hidden names in dir's parent that go on with dir's name and a dot: what a run
-- left beside its output (spill, moved and rank folders, temporaries, checkpoints:
-- `.out.spill-1-of-2`, `..out.spill-1-of-2.tmp-...`, `..out.rank-0-of-2.checkpoint`).
local function siblings(dir)
  local parent, name = dir:match("^(.*)/([^/]+)$")
  local left = {}
  for _, e in ipairs(helpers.output_lines(("ls -a %q"):format(parent))) do
    local rest = e:match("^%.+(.*)$")
    if rest and rest:sub(1, #name + 1) == name .. "." then left[#left + 1] = e end
  end
  return left
end

-- A Lua recipe: ParticleSource of n rows, then steps (Lua source), into MemmapSink at out.
local function lua_recipe(path, n, steps, out)
  helpers.write(path, ([[
local T = require("tensordict")
local rank = tonumber(os.getenv("OMPI_COMM_WORLD_RANK") or "0")
return {
  seed = 5, batch_size = 7, workers = 0,
  source = { use = "ParticleSource", n = %d, steps = 4 },
  steps = { %s },
  sink = { use = "MemmapSink", path = %q, existsok = true },
}]]):format(n, steps, out))
  return path
end

describe("tdflow run under mpirun", function()
  it("gives the 1-rank output with 2 and 3 ranks; Normalize's statistics are merged", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local base = helpers.tmpdir()
    local outs, stats = {}, {}
    for _, ranks in ipairs({ 0, 2, 3 }) do
      local dir = base .. "/r" .. ranks
      helpers.sh("mkdir -p " .. dir)
      local rc, out = tdflow(ranks, recipe_json(dir) .. " -q")
      assert.are.equal(0, rc, out)
      outs[ranks] = T.load_memmap(dir .. "/out")
      stats[ranks] = T.load_memmap(dir .. "/stats")
      assert.are.equal(".\n..\nout\nrecipe.json\nstats\n", helpers.ls_a(dir)) -- no part left behind
    end
    assert.truthy(#outs[0] > 100 and #outs[0] < 1000, "the filter kept some rows: " .. #outs[0])
    for _, ranks in ipairs({ 2, 3 }) do
      -- the same rows in the same order (shards are row ranges joined in rank order);
      -- energy_z is standardised with each rank's running statistics, so it differs
      assert.are.same(outs[0]:get("id"):tolist(), outs[ranks]:get("id"):tolist())
      assert_rows_equal(outs[ranks], outs[0], { energy_z = true })
      helpers.assert_near(stats[ranks]:get({ "energy", "mean" }):tolist(),
        stats[0]:get({ "energy", "mean" }):tolist(), 1e-9)
      helpers.assert_near(stats[ranks]:get({ "energy", "var" }):tolist(),
        stats[0]:get({ "energy", "var" }):tolist(), 1e-9)
      assert.are.equal(stats[0]:get({ "energy", "count" }):tolist(), stats[ranks]:get({ "energy", "count" }):tolist())
    end
    helpers.rmtree(base)
  end)

  it("a CSV source: each rank reads its share of the rows (2 and 3 ranks give the 1-rank rows)", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    -- a text column (not read) whose quoted cells hold line ends: skipping counts records
    local lines = { "id,x,note" }
    for i = 1, 101 do lines[#lines + 1] = ("%d,%g,\"line %d\nand, more\""):format(i, i * 0.5, i) end
    helpers.write(dir .. "/data.csv", table.concat(lines, "\n") .. "\n")
    local got = {}
    for _, ranks in ipairs({ 0, 2, 3 }) do
      helpers.write(dir .. "/csv.json", ([[{
  "batch_size": 10,
  "source": { "use": "CsvSource", "path": "%s/data.csv", "batch_size": 10,
              "columns": { "id": "int64", "x": "float64" } },
  "sink": { "use": "MemmapSink", "path": "%s/out%d", "existsok": true }
}]]):format(dir, dir, ranks))
      local rc, out = tdflow(ranks, dir .. "/csv.json -q")
      assert.are.equal(0, rc, out)
      got[ranks] = T.load_memmap(("%s/out%d"):format(dir, ranks))
    end
    local ids = {}
    for i = 1, 101 do ids[i] = i end
    assert.are.same(ids, got[0]:get("id"):tolist())
    for _, ranks in ipairs({ 2, 3 }) do
      assert.are.same(ids, got[ranks]:get("id"):tolist())
      assert.are.same(got[0]:get("x"):tolist(), got[ranks]:get("x"):tolist())
    end
    helpers.rmtree(dir)
  end)

  it("every rank writes its rows into the one folder: the 1-rank folder byte for byte", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    -- steps that keep rows (the planned path: each rank writes at its share's rows), one
    -- that drops rows though its type says it keeps them (the plan misses: ranks copy
    -- their own rows into place), one that doubles them (rows past a reservation spill),
    -- and one whose type says nothing (rank 0 writes in place, the others spill)
    local cases = {
      keeps = [[{ use = "Map", fn = "physics.features" }]],
      drops = [[{ use = "Map", fn = "physics.features" }, { use = "Lambda", fn = function(td)
        local keep = (td:get("id") % 3):ne(0)
        return td[keep] end }]],
      doubles = [[{ use = "Lambda", fn = function(td) return T.cat({ td, td }, 1) end }]],
      unknown = [[{ use = "physics.EnergyFilter", max = 1e9 }]],
    }
    -- 210 rows in batches of 7: the shards of 2 and 3 ranks hold whole batches, so the
    -- doubled batches are the same ones
    for name, steps in pairs(cases) do
      local want
      for _, ranks in ipairs({ 0, 2, 3 }) do
        local out = ("%s/%s%d"):format(dir, name, ranks)
        local rc, text = tdflow(ranks, lua_recipe(dir .. "/" .. name .. ".lua", 210, steps, out) .. " -q")
        assert.are.equal(0, rc, text)
        local got = folder_bytes(out)
        if ranks == 0 then
          want = got
          assert.truthy(got["./id.memmap"] and #got["./id.memmap"] > 0, name)
        else
          assert.are.same(want, got, ("%s on %d ranks"):format(name, ranks))
        end
        assert.are.same({}, siblings(out), name)
      end
      -- ids 1..210, 70 of them multiples of 3
      if name == "drops" then assert.are.equal(140 * 8, #want["./id.memmap"]) end
      if name == "doubles" then assert.are.equal(420 * 8, #want["./id.memmap"]) end
    end
    helpers.rmtree(dir)
  end)

  it("uneven shards: a rank with no rows, and no rows at all", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    -- 2 rows over 3 ranks: rank 0's share is empty (planned, and unplanned: rank 0 then
    -- has the structure from rank 1); a filter that keeps nothing: an empty folder
    local cases = {
      planned = { 2, [[{ use = "Map", fn = "physics.features" }]] },
      unplanned = { 2, [[{ use = "physics.EnergyFilter", max = 1e9 }]] },
      none = { 30, [[{ use = "physics.EnergyFilter", max = -1 }]] },
    }
    for name, case in pairs(cases) do
      local want
      for _, ranks in ipairs({ 0, 3 }) do
        local out = ("%s/%s%d"):format(dir, name, ranks)
        local rc, text = tdflow(ranks, lua_recipe(dir .. "/" .. name .. ".lua", case[1], case[2], out) .. " -q")
        assert.are.equal(0, rc, text)
        local got = folder_bytes(out)
        if ranks == 0 then want = got else assert.are.same(want, got, name) end
        assert.are.same({}, siblings(out), name)
      end
      local td = T.load_memmap(("%s/%s3"):format(dir, name))
      assert.are.equal(name == "none" and 0 or 2, #td, name)
    end
    helpers.rmtree(dir)
  end)

  it("ranks whose rows differ in structure: refused on every rank, nothing committed", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    local recipe = lua_recipe(dir .. "/odd.lua", 40, [[{ use = "Lambda", fn = function(td)
      if rank == 1 then td:set("extra", T.zeros(#td)) end
      return td end }]], dir .. "/out")
    local rc, out = tdflow(2, recipe .. " -q")
    assert.are_not.equal(0, rc, out)
    local why = "the rows of rank 1 do not match those of rank 0 (extra: float32 [*], against id: int64 [*])"
    assert.truthy(out:find(why, 1, true), out)
    assert.is_false(exists(dir .. "/out"), "nothing committed")
    assert.are.same({}, siblings(dir .. "/out"))
    helpers.rmtree(dir)
  end)

  it("ReplayBuffer: the ranks extend one ring; 2 and 3 ranks leave the 1-rank ring, run after run", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    -- 210 rows into rings of 500 (room to spare), 150 (the stream wraps; its first
    -- rows are overwritten) and 60 (only the last rank's rows stay); each recipe run
    -- twice, the second run reopening the ring at its cursor; and a prioritized ring,
    -- whose priorities file the ranks leave as one process does
    for _, case in ipairs({ { 500 }, { 150 }, { 60 }, { 150, ', sampler = "prioritized"' } }) do
      local cap, sampler = case[1], case[2] or ""
      local want
      for _, ranks in ipairs({ 0, 2, 3 }) do
        local out = ("%s/rb%d%s-%d"):format(dir, cap, case[2] and "p" or "", ranks)
        local recipe = dir .. "/rb.lua"
        helpers.write(recipe, ([[
return {
  seed = 5, batch_size = 7, workers = 0,
  source = { use = "ParticleSource", n = 210, steps = 4 },
  steps = { { use = "Map", fn = "physics.features" } },
  sink = { use = "ReplayBuffer", path = %q, capacity = %d%s },
}]]):format(out, cap, sampler))
        for run = 1, 2 do
          local rc, text = tdflow(ranks, recipe .. " -q")
          assert.are.equal(0, rc, ("capacity %d, %d ranks, run %d: %s"):format(cap, ranks, run, text))
        end
        local got = folder_bytes(out)
        if ranks == 0 then
          want = got
          local ring = T.load_memmap(out)
          assert.are.equal(cap, #ring)
        else
          assert.are.same(want, got, ("capacity %d%s on %d ranks"):format(cap, sampler, ranks))
        end
        if case[2] then assert.is_truthy(got["./%priorities"], "the priorities file") end
        assert.are.same({}, siblings(out))
      end
    end
    helpers.rmtree(dir)
  end)

  it("checkpoints: a run killed mid-way resumes on as many ranks and gives the 1-rank folder", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    local recipe = dir .. "/ckpt.lua"
    local function write_recipe(out)
      helpers.write(recipe, ([[
local ffi = require("ffi")
ffi.cdef("int kill(int pid, int sig); int getpid(void);")
local batches = 0
return {
  seed = 5, batch_size = 7, workers = 0,
  source = { use = "ParticleSource", n = 210, steps = 4 },
  steps = { { use = "Map", fn = "physics.features" }, { use = "Lambda", fn = function(td)
    batches = batches + 1
    if batches == 9 and os.getenv("TD_TEST_KILL") and os.getenv("OMPI_COMM_WORLD_RANK") == "1" then
      ffi.C.kill(ffi.C.getpid(), 9)
    end
    return td
  end } },
  sink = { use = "MemmapSink", path = %q, checkpoint = 20 },
}]]):format(out))
    end
    write_recipe(dir .. "/one")
    local rc, out = tdflow(0, recipe .. " -q")
    assert.are.equal(0, rc, out)
    local want = folder_bytes(dir .. "/one")
    write_recipe(dir .. "/out")
    -- rank 1 kills itself at its 9th batch (63 rows: 3 checkpoints of 20 rows made)
    local cmd = ("cd %q && TD_TEST_KILL=1 TENSORDICT_LIB=%q TENSORDICT_MPI_LIB=%q scripts/mpirun.sh -x TD_TEST_KILL "
      .. "-n 2 scripts/tdflow run %s -q --timeout 5 2>&1; echo \"rc=$?\""):format(root, core_lib, mpi_lib, recipe)
    local pipe = io.popen(cmd)
    out = pipe:read("*a")
    pipe:close()
    assert.are_not.equal("0", out:match("rc=(%d+)%s*$"), out)
    assert.is_false(exists(dir .. "/out"), "nothing committed")
    local kept = siblings(dir .. "/out")
    assert.truthy(#kept >= 1, "the ranks' checkpoints are kept: " .. table.concat(kept, " "))
    -- another rank count finds no checkpoint of its own
    rc, out = tdflow(3, recipe .. " -q --resume")
    assert.are_not.equal(0, rc, out)
    assert.truthy(out:find("has no checkpoint to resume for rank 0 of 3 (a data-parallel run resumes on as "
      .. "many ranks as it ran on)", 1, true), out)
    rc, out = tdflow(2, recipe .. " -q --resume")
    assert.are.equal(0, rc, out)
    assert.are.same(want, folder_bytes(dir .. "/out"))
    assert.are.same({}, siblings(dir .. "/out"))
    helpers.rmtree(dir)
  end)

  it("a rank killed mid-run: the others fail within --timeout and nothing is committed", function()
    if not have_mpi() then pending("mpirun or libtensordict_mpi.so missing") return end
    local dir = helpers.tmpdir()
    local recipe = dir .. "/kill.lua"
    helpers.write(recipe, ([[
local ffi = require("ffi")
ffi.cdef("int kill(int pid, int sig); int getpid(void);")
local batches = 0
return {
  seed = 1, batch_size = 50,
  source = { use = "ParticleSource", n = 1000, steps = 3 },
  steps = { { use = "Lambda", fn = function(td)
    batches = batches + 1
    if batches == 3 and os.getenv("OMPI_COMM_WORLD_RANK") == "1" then ffi.C.kill(ffi.C.getpid(), 9) end
    return td
  end } },
  sink = { use = "MemmapSink", path = "%s/out" },
}]]):format(dir))
    -- With --enable-recovery the survivor lives to fail at the sink's barrier (mpirun
    -- then exits 0 whatever happened: OpenMPI 4).
    local t0 = require("tensordict.util").now()
    local _, out = tdflow(2, recipe .. " -q --timeout 3", true)
    local took = require("tensordict.util").now() - t0
    assert.truthy(out:find("tdflow: rank 0: sink: dist.all_gather: timed out after 3 s", 1, true), out)
    assert.truthy(took < 30, "took " .. took)
    -- nothing committed, no part left: only the dead rank's temporary folder (the next
    -- save of that part sweeps it, as every save does for processes gone)
    local left = helpers.ls_a(dir):gsub("%.%.out%.part%-1%-of%-2%.tmp%-%d+%-%d+%-%x+\n", "")
    assert.are.equal(".\n..\nkill.lua\n", left)
    -- Without it mpirun stops the job when a rank dies, and exits non-zero.
    local rc, out2 = tdflow(2, recipe .. " -q --timeout 3", false)
    assert.are_not.equal(0, rc, out2)
    assert.is_false(exists(dir .. "/out"), "the sink was not committed")
    -- The recipe's own timeout reaches the exchanges as --timeout does (issue 28).
    local with_field = dir .. "/kill-timeout.lua"
    helpers.write(with_field, (helpers.read(recipe):gsub("batch_size = 50,", "batch_size = 50, timeout = 2,")))
    _, out = tdflow(2, with_field .. " -q", true)
    assert.truthy(out:find("tdflow: rank 0: sink: dist.all_gather: timed out after 2 s", 1, true), out)
    helpers.rmtree(dir)
  end)
end)
