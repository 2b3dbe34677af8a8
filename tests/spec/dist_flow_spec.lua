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
    assert.truthy(out:find("tdflow: rank 0: sink: dist.barrier: timed out after 3 s", 1, true), out)
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
    assert.truthy(out:find("tdflow: rank 0: sink: dist.barrier: timed out after 2 s", 1, true), out)
    helpers.rmtree(dir)
  end)
end)
