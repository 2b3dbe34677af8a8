-- Normalize{fit = true} (issue 31): flow.run makes a first pass over the source through
-- the steps before the node (fresh copies: the run's nodes keep their state), then
-- normalises with those statistics fixed; in a JSON recipe through tdflow, with Map
-- workers, the statistics in the run's record. Compared with statistics computed here.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")
local flow = require("tensordict.flow")

local function source(n, batch)
  local x = T.arange(1, n, "float64"):mul(0.5):add(T.arange(1, n, "float64"):pow(2):mul(0.01))
  return flow.TensorSource{ td = T.TensorDict({ x = x, y = T.ones(n, 2, "float32") }, { n }), batch_size = batch }, x
end

-- (x - mean) / sqrt(var + eps) per feature (the rows along dim 1), population variance,
-- as Normalize computes it; and the mean and variance as flat lists.
local function by_hand(x, eps)
  local mean = x:mean(1)
  local var = (x - mean):pow(2):mean(1)
  return (x - mean) / (var + (eps or 1e-5)):sqrt(), mean:reshape(-1):totable(), var:reshape(-1):totable()
end

describe("Normalize{fit = true} in flow.run", function()
  it("normalises every batch with the statistics of the whole source, recorded in the run's record", function()
    local src, x = source(50, 7)
    local record = {}
    local out = flow.run(src, { flow.Normalize{ keys = { "x" }, fit = true } }, flow.Collect{ cat = true },
      { provenance = record })
    local want, mean, var = by_hand(x)
    H.assert_near(out.x:totable(), want:totable(), 1e-12)
    local fitted = record.fitted["steps[1]"].x
    assert.are.equal(50, fitted.count)
    H.assert_near(fitted.mean, mean, 1e-12)
    H.assert_near(fitted.var, var, 1e-9)
    -- a single node (no list) is steps[1], as in the run's report
    local rec2 = {}
    flow.run(src, flow.Normalize{ keys = { "x" }, fit = true }, flow.Discard{}, { provenance = rec2 })
    assert.are.equal(50, rec2.fitted["steps[1]"].x.count)
  end)

  it("fits after the steps before it, run as fresh copies that leave the run's nodes as they were", function()
    local src, x = source(40, 8)
    local running = flow.Normalize{ keys = { "y" } } -- running statistics: must count 40 rows, not 80
    local steps = { running, flow.Apply{ keys = { "x" }, fn = "Tensor.neg" },
      flow.Normalize{ keys = { "x" }, fit = true } }
    local out = flow.run(src, steps, flow.Collect{ cat = true })
    H.assert_near(out.x:totable(), by_hand(-x):totable(), 1e-12)
    assert.are.equal(40, running.stats:get("y"):count())
    -- two fitted steps: the second's pass goes through the first, fitted
    local two = { flow.Normalize{ keys = { "x" }, fit = true }, flow.Apply{ keys = { "x" }, fn = "Tensor.exp" },
      flow.Normalize{ keys = { "x" }, fit = true } }
    local out2 = flow.run(src, two, flow.Collect{ cat = true })
    H.assert_near(out2.x:totable(), by_hand(by_hand(x):exp()):totable(), 1e-9)
  end)

  it("refuses what cannot fit, naming the node", function()
    H.raises(function() flow.Normalize{ keys = { "x" }, fit = true, update = true } end,
      "Normalize: fit = true takes the statistics from a first pass; it goes with neither stats nor update = true")
    H.raises(function() flow.Normalize{ keys = { "x" }, fit = true, stats = { x = { mean = 0, var = 1 } } } end,
      "it goes with neither stats nor update = true")
    H.raises(function() flow.Normalize{ keys = { "x" }, fit = true }(T.TensorDict({ x = T.ones(2) }, { 2 })) end,
      "Normalize: fit = true: no statistics yet; flow.run (and tdflow) make the fitting pass first")
    local src = source(10, 4)
    H.raises(function()
      flow.run(src, { flow.Lambda{ fn = function(td) return td end }, flow.Normalize{ keys = { "x" }, fit = true } },
        flow.Discard{})
    end, "steps[2] (Normalize): fit = true runs the steps before it twice, so each must be rebuilt from its spec; "
      .. "steps[1] (Lambda) cannot be")
    H.raises(function() flow.run(src, { flow.Normalize{ keys = { "nope" }, fit = true } }, flow.Discard{}) end,
      "steps[1] (Normalize{fit = true}): the fitting pass failed: Normalize: fit: batch 1 of the fitting pass:")
    H.raises(function()
      flow.run(src, { flow.Seq{ flow.Normalize{ keys = { "x" }, fit = true } } }, flow.Discard{})
    end, "steps[1].steps[1]: Normalize{fit = true} must be a top-level step (the fitting pass runs the steps before "
      .. "it); move it out of its Seq")
    -- spec: a node built from it fits again
    assert.are.same({ type = "Normalize", keys = { "x" }, fit = true },
      flow.Normalize{ keys = { "x" }, fit = true }:spec())
  end)
end)

describe("Normalize{fit = true} in a JSON recipe", function()
  local dir
  setup(function() dir = H.tmpdir() end)
  teardown(function() H.rmtree(dir) end)

  local function recipe(name, workers)
    return H.write(dir .. "/" .. name .. ".json", json.encode({
      seed = 5, batch_size = 64, workers = workers,
      source = { use = "ParticleSource", n = 300, steps = 2 },
      steps = { { use = "Map", fn = "physics.features" },
        { use = "Normalize", keys = { "speed" }, out_keys = { "speed_z" }, fit = true } },
      sink = { use = "MemmapSink", path = dir .. "/" .. name } }))
  end

  it("runs through tdflow, with Map workers too, and equals normalising by hand", function()
    local _, expect = H.tdflow_runner(dir)
    local results = {}
    for _, workers in ipairs({ 0, 2 }) do
      local name = "fit" .. workers
      local report = dir .. "/" .. name .. ".report.json"
      expect("run " .. recipe(name, workers) .. " --quiet --report " .. report, 0)
      local td = T.load_memmap(dir .. "/" .. name)
      assert.are.equal(300, #td)
      local want, mean = by_hand(td.speed:to("float64"))
      H.assert_near(td.speed_z:to("float64"):totable(), want:totable(), 1e-5)
      local rep = json.decode(assert(H.read(report)))
      local fitted = rep.provenance.fitted["steps[2]"].speed
      assert.are.equal(300, fitted.count)
      H.assert_near(fitted.mean, mean, 1e-9)
      results[workers] = td.speed_z
    end
    assert.is_true(results[0]:eq(results[2]):all())
  end)

  it("under mpirun, fits every rank's share and merges them: the output equals one process's", function()
    local root = (debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or ".")
    local mpi_lib = root .. "/build/libtensordict_mpi.so"
    if not (H.exists(mpi_lib) and H.sh("command -v mpirun >/dev/null 2>&1")) then
      pending("mpirun or libtensordict_mpi.so missing: data-parallel fit is not checked")
      return
    end
    local _, expect = H.tdflow_runner(dir)
    expect("run " .. recipe("one", 0) .. " --quiet", 0)
    local report = dir .. "/ranks.report.json"
    local p = io.popen(("TENSORDICT_MPI_LIB=%q timeout 120 scripts/mpirun.sh -n 2 scripts/tdflow run %s --quiet "
      .. "--report %s 2>&1; echo \"rc=$?\""):format(mpi_lib, recipe("ranks", 0), report))
    local out = p:read("*a")
    p:close()
    assert.are.equal("0", out:match("rc=(%d+)%s*$"), out)
    local one, ranks = T.load_memmap(dir .. "/one"), T.load_memmap(dir .. "/ranks")
    assert.are.equal(300, #ranks)
    assert.is_true(ranks.speed_z:eq(one.speed_z):all())
    assert.are.equal(300, json.decode(assert(H.read(report))).provenance.fitted["steps[2]"].speed.count)
  end)
end)
