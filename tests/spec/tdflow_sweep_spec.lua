-- tdflow_sweep_spec.lua: `tdflow sweep` run as a user runs it (scripts/tdflow in a child
-- process): every form of variants (--grid, the recipe's grid, list and seeded random),
-- ids and folders, --jobs 2 against --jobs 1, a failing variant, --resume, SIGTERM, the
-- summary (table, sweep.json, sweep.csv), the refusals before anything runs, mpirun;
-- and the recipe's metrics block in tdflow run and tdflow check.
local json = require("tensordict.json")
local T = require("tensordict")
local proc = require("tensordict.proc")
local variants = require("tensordict.host.sweep_variants")
local H = require("helpers")

local dir = H.tmpdir()
teardown(function() H.rmtree(dir) end)

local function write(name, text) return H.write(dir .. "/" .. name, text) end

-- stdout and stderr together, and the exit code.
local function tdflow(args)
  local p = io.popen(("scripts/tdflow %s 2>&1; echo \"exit $?\""):format(args))
  local text = p:read("*a")
  p:close()
  local code = tonumber(text:match("exit (%d+)%s*$"))
  return (text:gsub("exit %d+%s*$", "")), code
end

local function expect(args, code, ...)
  local text, got = tdflow(args)
  assert.are.equal(code, got, ("tdflow %s exited %s:\n%s"):format(args, tostring(got), text))
  for _, needle in ipairs({ ... }) do
    if not text:find(needle, 1, true) then
      error(("tdflow %s: output does not contain %q:\n%s"):format(args, needle, text), 2)
    end
  end
  return text
end

local function summary(out) return json.decode(H.read(out .. "/sweep.json")) end

-- The statuses of a summary's variants by id.
local function statuses(doc)
  local s = {}
  for _, v in ipairs(doc.variants) do s[v.id] = v.status end
  return s
end

-- A small JSON recipe: particles filtered by energy (steps.2.max) into out/parts.
local RECIPE = write("r.json", [[
{"seed": 3, "batch_size": 64, "workers": 0,
 "source": {"use": "ParticleSource", "n": 300, "steps": 2},
 "steps": [{"use": "Normalize", "keys": ["pos"]}, {"use": "physics.EnergyFilter", "max": 2.0}],
 "sink": {"use": "MemmapSink", "path": "somewhere/parts"},
 "metrics": {"mean_e": {"key": "energy", "stat": "mean"}, "std_e": {"key": "energy", "stat": "std"},
             "min_e": {"key": "energy", "stat": "min"}, "max_e": {"key": "energy", "stat": "max"},
             "sum_m": {"key": "mass", "stat": "sum"}, "rows": {"stat": "count"},
             "n_pos": {"key": "pos", "stat": "count"}, "nan_e": {"key": "energy", "stat": "nan_count"}}}
]])

-- Every file under folder d but the provenance record, relative path -> bytes.
local function folder_bytes(d)
  local files = {}
  for _, rel in ipairs(H.output_lines(("cd %q && find . -type f | sort"):format(d))) do
    if not rel:find("%provenance.json", 1, true) then files[rel] = H.read(d .. "/" .. rel) end
  end
  return files
end

describe("tdflow sweep --grid", function()
  local out = dir .. "/g1"
  it("runs the cartesian product into OUT/<id>, each with its report, provenance and metrics", function()
    local text = expect(("sweep %s --grid steps.2.max=1,2 --grid seed=1..2 --out %s"):format(RECIPE, out), 0,
      "tdflow: sweep: 4 variants: 4 ok (" .. out .. "/sweep.json, " .. out .. "/sweep.csv)")
    -- the table: one column per override path, then status, rows, time and the metrics
    assert.is_truthy(text:find("\nseed  steps.2.max  status  rows in  rows out    time", 1, true), text)
    local doc = summary(out)
    assert.are.same({ "max_e", "mean_e", "min_e", "n_pos", "nan_e", "rows", "std_e", "sum_m" }, doc.metrics)
    assert.are.equal(RECIPE, doc.recipe)
    assert.are.equal(out, doc.out)
    local ids = {}
    for i, v in ipairs(doc.variants) do ids[i] = v.id end
    assert.are.same({ "seed=1,steps.2.max=1", "seed=1,steps.2.max=2", "seed=2,steps.2.max=1",
      "seed=2,steps.2.max=2" }, ids)
    local v = doc.variants[3]
    assert.are.same({ seed = 2, ["steps.2.max"] = 1 }, v.overrides)
    assert.are.same({ out .. "/seed=2,steps.2.max=1", "ok", 300 }, { v.path, v.status, v.rows_in })
    assert.is_nil(v.error)
    assert.is_true(v.seconds > 0)
    -- the sink's path is redirected into the variant's folder, keeping its last part
    local td = T.load_memmap(v.path .. "/parts")
    assert.are.equal(#td, v.rows_out)
    local rec = json.decode(H.read(v.path .. "/parts/%provenance.json"))
    assert.are.same({ "seed=2", "steps.2.max=1", ('sink.path="%s/parts"'):format(v.path) }, rec.overrides)
    local rep = json.decode(H.read(v.path .. "/report.json"))
    assert.are.same({ "ok", 300, v.rows_out }, { rep.status, rep.rows_in, rep.rows_out })
    assert.are.same(v.metrics, rep.metrics)
    -- the metrics against values computed here
    local e = td:get("energy"):to("float64")
    local got = v.metrics
    H.assert_near({ e:mean(), e:std(), e:min(), e:max(), td:get("mass"):to("float64"):sum() },
      { got.mean_e, got.std_e, got.min_e, got.max_e, got.sum_m }, 1e-12)
    assert.are.same({ #td, #td * 2 * 3, 0 }, { got.rows, got.n_pos, got.nan_e })
  end)

  it("writes sweep.csv with the same rows", function()
    local lines = {}
    for line in H.read(out .. "/sweep.csv"):gmatch("([^\n]*)\n") do lines[#lines + 1] = line end
    assert.are.equal(5, #lines)
    assert.are.equal("id,path,seed,steps.2.max,status,rows_in,rows_out,seconds,max_e,mean_e,min_e,n_pos,nan_e,"
      .. "rows,std_e,sum_m,error", lines[1])
    local v = summary(out).variants[2]
    local want = ('"%s","%s",1,2,ok,300,%d,'):format(v.id, v.path, v.rows_out)
    assert.are.equal(want, lines[3]:sub(1, #want))
    assert.is_truthy(lines[3]:find(("," .. json.encode(v.metrics.mean_e) .. ","), 1, true), lines[3])
    assert.are.equal(",", lines[3]:sub(-1)) -- no error
  end)

  it("gives the same outputs with --jobs 2 as with --jobs 1", function()
    local out2 = dir .. "/g2"
    expect(("sweep %s --grid steps.2.max=1,2 --grid seed=1..2 --out %s --jobs 2"):format(RECIPE, out2), 0)
    for _, v in ipairs(summary(out).variants) do
      assert.are.same(folder_bytes(v.path .. "/parts"), folder_bytes(out2 .. "/" .. v.id .. "/parts"))
    end
  end)

  it("-q prints only the counts line, and writes the same summary", function()
    local out3 = dir .. "/g3"
    local text, code = tdflow(("sweep %s --grid steps.2.max=1,2 --out %s -q"):format(RECIPE, out3))
    assert.are.equal(0, code, text)
    assert.are.equal("tdflow: sweep: 2 variants: 2 ok (" .. out3 .. "/sweep.json, " .. out3 .. "/sweep.csv)\n",
      text)
    assert.are.same({ "ok", "ok" }, { summary(out3).variants[1].status, summary(out3).variants[2].status })
  end)

  it("lets tdflow rerun repeat one variant alone, byte for byte", function()
    local v = summary(out).variants[4]
    expect(("rerun %q --verify -q"):format(v.path .. "/parts"), 0, "identical")
  end)

  it("names OUT after the recipe by default, in the current folder", function()
    local text = expect(("--version >/dev/null; cd %q && %q/scripts/tdflow sweep r.json --grid seed=1 --dry-run")
      :format(dir, H.pwd()), 0)
    assert.are.equal("seed=1  --set seed=1\ntdflow: sweep r.json: 1 variant, each checked; they would run into "
      .. "r.sweep\n", text)
  end)

  it("refuses an OUT that holds a sweep, without --resume", function()
    expect(("sweep %s --grid seed=1,2 --out %s"):format(RECIPE, out), 2,
      ("tdflow: sweep: '%s' is not empty (a sweep ran there?): continue it with --resume, or give another --out")
        :format(out))
  end)
end)

describe("the recipe's sweep block", function()
  it("grid (lists and a..b ranges), with --grid replacing a path of it and adding others", function()
    local r = write("block.json", ([[
{"seed": 1, "batch_size": 100,
 "source": {"use": "ParticleSource", "n": 100, "steps": 1},
 "sink": {"use": "MemmapSink", "path": "x"},
 "sweep": {"grid": {"seed": "1..3", "batch_size": [50, 100]}, "out": "%s/block"}}
]]):format(dir))
    expect("sweep " .. r .. " --dry-run", 0, "batch_size=50,seed=1  --set batch_size=50 --set seed=1\n",
      ("tdflow: sweep %s: 6 variants, each checked; they would run into %s/block"):format(r, dir))
    local text = expect("sweep " .. r .. " --dry-run --grid seed=7 --grid source.n=10,20", 0)
    assert.are.equal(([[batch_size=50,seed=7,source.n=10  --set batch_size=50 --set seed=7 --set source.n=10
batch_size=50,seed=7,source.n=20  --set batch_size=50 --set seed=7 --set source.n=20
batch_size=100,seed=7,source.n=10  --set batch_size=100 --set seed=7 --set source.n=10
batch_size=100,seed=7,source.n=20  --set batch_size=100 --set seed=7 --set source.n=20
tdflow: sweep %s: 4 variants, each checked; they would run into %s/block
]]):format(r, dir), text)
    expect("sweep " .. r, 0, "tdflow: sweep: 6 variants: 6 ok")
    assert.are.same({ ["batch_size=50,seed=1"] = "ok", ["batch_size=50,seed=2"] = "ok", ["batch_size=50,seed=3"] = "ok",
      ["batch_size=100,seed=1"] = "ok", ["batch_size=100,seed=2"] = "ok", ["batch_size=100,seed=3"] = "ok" },
      statuses(summary(dir .. "/block")))
  end)

  it("list (a Lua recipe), ids of strings and of values that are not filesystem-safe", function()
    local r = write("list.lua", ([[
return { seed = 1, batch_size = 100, name = "n",
  source = { use = "ParticleSource", n = 100, steps = 1 },
  sink = { use = "MemmapSink", path = "x" },
  sweep = { list = { { seed = 4, name = "a b/c" }, { ["source.n"] = 50 } }, out = %q } }
]]):format(dir .. "/list"))
    local ids = variants.expand({ list = { { seed = 4, name = "a b/c" }, { ["source.n"] = 50 } } })
    assert.are.equal("name=a_b_c,seed=4~", ids[1].id:sub(1, 18))
    assert.is_truthy(ids[1].id:match("^name=a_b_c,seed=4~%x%x%x%x%x%x%x%x$"), ids[1].id)
    assert.are.equal("source.n=50", ids[2].id)
    expect("sweep " .. r, 0, "2 variants: 2 ok")
    local doc = summary(dir .. "/list")
    assert.are.same({ name = "a b/c", seed = 4 }, doc.variants[1].overrides)
    assert.are.equal(ids[1].id, doc.variants[1].id)
    assert.are.equal(50, #T.load_memmap(dir .. "/list/source.n=50/x"))
  end)

  it("random: seeded samples, the same twice, inside their ranges", function()
    local block = { random = { n = 40, seed = 7, ranges = { ["steps.1.scale"] = { 0.1, 1.0 },
      ["steps.3.k"] = { int = { 1, 10 } }, lr = { log = { 1e-4, 1e-1 } }, mode = { choice = { "a", "b" } } } } }
    local a, pa = variants.expand(block)
    local b = variants.expand(block)
    assert.are.same({}, pa)
    assert.are.same(a, b)
    local c = variants.expand({ random = { n = 40, seed = 8, ranges = block.random.ranges } })
    assert.are_not.same(a, c)
    local modes = {}
    for _, v in ipairs(a) do
      local x = {}
      for _, o in ipairs(v.set) do x[o[1]] = json.decode(o[2]) end
      assert.is_true(x.lr >= 1e-4 and x.lr <= 1e-1, v.id)
      assert.is_true(x["steps.1.scale"] >= 0.1 and x["steps.1.scale"] < 1.0, v.id)
      assert.is_true(x["steps.3.k"] >= 1 and x["steps.3.k"] <= 10 and x["steps.3.k"] % 1 == 0, v.id)
      modes[x.mode] = true
      -- ids: numbers in 4 significant digits, then the hash of the exact values
      assert.are.equal(("lr=%.4g,mode=%s,steps.1.scale=%.4g,steps.3.k=%d~"):format(x.lr, x.mode,
        x["steps.1.scale"], x["steps.3.k"]), v.id:sub(1, -9))
      assert.is_truthy(v.id:match("~%x%x%x%x%x%x%x%x$"), v.id)
    end
    assert.are.same({ a = true, b = true }, modes)
    -- through the command: a recipe's random block over seed and source.n, twice
    local r = write("random.json", [[
{"seed": 1, "batch_size": 100, "source": {"use": "ParticleSource", "n": 100, "steps": 1},
 "sink": {"use": "MemmapSink", "path": "x"},
 "sweep": {"random": {"n": 3, "seed": 5, "ranges": {"seed": {"int": [0, 1000]}, "source.n": {"int": [10, 90]}}}}}
]])
    local once = expect("sweep " .. r .. " --dry-run", 0)
    assert.are.equal(once, expect("sweep " .. r .. " --dry-run", 0))
    assert.are.equal(4, select(2, once:gsub("\n", "\n")))
  end)
end)

describe("a failing variant", function()
  -- a Lua recipe whose step fails in the variants with seed 2 (TDFLOW_SWEEP_VARIANT),
  -- counting its runs per variant in files beside it
  local r = write("fail.lua", ([[
local variant = os.getenv("TDFLOW_SWEEP_VARIANT")
if variant then
  local f = assert(io.open(%q .. "/runs-" .. variant, "a"))
  f:write("x")
  f:close()
end
return { seed = 1, batch_size = 50,
  source = { use = "ParticleSource", n = 200, steps = 1 },
  steps = { { use = "Lambda", fn = function(td)
    if (variant or ""):find("seed=2", 1, true) and os.getenv("SWEEP_SPEC_FIXED") == nil then
      error("boom in " .. variant)
    end
    return td end } },
  sink = { use = "MemmapSink", path = "out" } }
]]):format(dir))
  local out = dir .. "/fail"
  local function runs(id) return #(H.read(dir .. "/runs-" .. id) or "") end

  it("does not stop the others: status failed with its error, exit 1", function()
    local text = expect(("sweep %s --grid seed=1..3 --jobs 2 --out %s"):format(r, out), 1,
      "tdflow: sweep: seed=2 failed: steps[1] (Lambda): boom in seed=2\n",
      "tdflow: sweep: 3 variants: 2 ok, 1 failed")
    assert.is_truthy(text:find("\n2     failed        0         0", 1, true), text)
    local doc = summary(out)
    assert.are.same({ ["seed=1"] = "ok", ["seed=2"] = "failed", ["seed=3"] = "ok" }, statuses(doc))
    assert.are.equal("steps[1] (Lambda): boom in seed=2", doc.variants[2].error)
    assert.are.same({ 1, 1, 1 }, { runs("seed=1"), runs("seed=2"), runs("seed=3") })
    assert.is_truthy(H.read(out .. "/seed=2/log.txt"):find("boom in seed=2", 1, true))
  end)

  it("--resume runs only what is not complete", function()
    expect(("sweep %s --grid seed=1..3 --out %s --resume"):format(r, out), 1,
      "tdflow: sweep: 3 variants: 2 skipped, 1 failed")
    assert.are.same({ 1, 2, 1 }, { runs("seed=1"), runs("seed=2"), runs("seed=3") })
    local doc = summary(out)
    assert.are.same({ ["seed=1"] = "skipped", ["seed=2"] = "failed", ["seed=3"] = "skipped" }, statuses(doc))
    assert.are.equal(200, doc.variants[1].rows_out) -- a skipped variant keeps its report's rows
  end)

  it("--resume after the fix completes the sweep", function()
    local p = io.popen(("SWEEP_SPEC_FIXED=1 scripts/tdflow sweep %s --grid seed=1..3 --out %s --resume 2>&1; "
      .. "echo \"exit $?\""):format(r, out))
    local text = p:read("*a")
    p:close()
    assert.is_truthy(text:find("tdflow: sweep: 3 variants: 1 ok, 2 skipped", 1, true), text)
    assert.is_truthy(text:find("exit 0", 1, true), text)
    assert.are.same({ 1, 3, 1 }, { runs("seed=1"), runs("seed=2"), runs("seed=3") })
  end)
end)

describe("a variant that left a checkpoint", function()
  it("goes on with tdflow run --resume under sweep --resume", function()
    local r = write("ck.lua", [[
local batches = 0
return { seed = 1, batch_size = 50,
  source = { use = "ParticleSource", n = 200, steps = 1 },
  steps = { { use = "Lambda", fn = function(td)
    batches = batches + 1
    if batches == 3 and os.getenv("SWEEP_SPEC_FIXED") == nil then error("boom at batch 3") end
    return td end } },
  sink = { use = "MemmapSink", path = "out", checkpoint = 50 } }
]])
    local out = dir .. "/ck"
    expect(("sweep %s --grid seed=1 --out %s"):format(r, out), 1, "tdflow: sweep: seed=1 failed: steps[1] (Lambda): "
      .. "boom at batch 3\n")
    assert.are.equal(100, T.flow.MemmapSink.checkpoint_rows(out .. "/seed=1/out"))
    local p = io.popen(("SWEEP_SPEC_FIXED=1 scripts/tdflow sweep %s --grid seed=1 --out %s --resume 2>&1; "
      .. "echo \"exit $?\""):format(r, out))
    local text = p:read("*a")
    p:close()
    assert.is_truthy(text:find("tdflow: sweep: 1 variant: 1 ok", 1, true) and text:find("exit 0", 1, true), text)
    local rec = json.decode(H.read(out .. "/seed=1/out/%provenance.json"))
    assert.are.equal(100, rec.resumed[1].rows) -- continued from the checkpoint, not started over
    assert.are.equal("--resume", rec.command[#rec.command])
    assert.are.equal(200, #T.load_memmap(out .. "/seed=1/out"))
  end)
end)

describe("the variants' shares", function()
  it("of the threads (TD_NUM_THREADS over --jobs) and of --workers", function()
    local r = write("share.lua", [[
return { name = "threads " .. os.getenv("TD_NUM_THREADS"), seed = 1, batch_size = 50,
  source = { use = "ParticleSource", n = 100, steps = 1 },
  sink = { use = "MemmapSink", path = "out" } }
]])
    local out = dir .. "/share"
    local p = io.popen(("TD_NUM_THREADS=5 scripts/tdflow sweep %s --grid seed=1,2 --jobs 2 --workers 3 --out %s "
      .. "2>&1; echo \"exit $?\""):format(r, out))
    local text = p:read("*a")
    p:close()
    assert.is_truthy(text:find("exit 0", 1, true), text)
    for _, id in ipairs({ "seed=1", "seed=2" }) do
      local rec = json.decode(H.read(out .. "/" .. id .. "/out/%provenance.json"))
      assert.are.same({ "threads 2", 1 }, { rec.effective.name, rec.options.workers })
    end
  end)
end)

describe("an interrupted sweep", function()
  it("stops its children on SIGTERM and writes the summary, exit 143", function()
    local r = write("slow.lua", [[
return { seed = 1, batch_size = 10,
  source = { use = "ParticleSource", n = 2000, steps = 1 },
  steps = { { use = "Lambda", fn = function(td) os.execute("sleep 0.02") return td end } },
  sink = { use = "MemmapSink", path = "out" } }
]])
    local out = dir .. "/slow"
    local p = io.popen(("scripts/tdflow sweep %s --grid seed=1..4 --jobs 2 --out %s >%s/slow.txt 2>&1 & "
      .. "echo $!; wait $!; echo \"exit $?\""):format(r, out, dir))
    local pid = tonumber(p:read("*l"))
    for _ = 1, 3000 do -- both first variants started (their logs exist), 30 s at most
      if H.exists(out .. "/seed=1/log.txt") and H.exists(out .. "/seed=2/log.txt") then break end
      proc.sleep(0.01)
    end
    proc.sleep(0.3)
    proc.kill(pid, proc.SIGTERM)
    local rest = p:read("*a")
    p:close()
    assert.is_truthy(rest:find("exit 143", 1, true), rest)
    local text = H.read(dir .. "/slow.txt")
    assert.is_truthy(text:find("tdflow: sweep interrupted by SIGTERM: the variants running were stopped, the "
      .. "summary written (run again with --resume to finish)", 1, true), text)
    assert.is_truthy(text:find("tdflow: sweep: 4 variants: 4 interrupted", 1, true), text)
    local doc = summary(out)
    assert.are.same({ ["seed=1"] = "interrupted", ["seed=2"] = "interrupted", ["seed=3"] = "interrupted",
      ["seed=4"] = "interrupted" }, statuses(doc))
    -- the stopped runs committed nothing and left no temporary folder
    -- (a child stopped before it took the signals has no report: the default action ended it)
    for _, id in ipairs({ "seed=1", "seed=2" }) do
      local names = H.ls_a(out .. "/" .. id)
      assert.is_truthy(names == ".\n..\nlog.txt\nreport.json\n" or names == ".\n..\nlog.txt\n", names)
      local rep = H.read(out .. "/" .. id .. "/report.json")
      if rep then assert.are.equal("interrupted", json.decode(rep).status) end
    end
    assert.is_false(H.exists(out .. "/seed=3"))
    assert.is_true(proc.kill(pid, 0) == false)
  end)
end)

describe("tdflow sweep refuses before anything runs", function()
  local out = dir .. "/never"
  local function refused(args, ...)
    expect(("sweep %s --out %s %s"):format(RECIPE, out, args), 2, ...)
    assert.is_false(H.exists(out))
  end

  it("a malformed --grid, an empty range, no values", function()
    refused("--grid seed", ("tdflow: sweep %s: 1 problem:\n  --grid seed: expected PATH=VALUES, e.g. "
      .. "steps.2.max=1,2,3 or seed=1..4\n"):format(RECIPE))
    refused("--grid seed=5..1", "  --grid seed=5..1: the range 5..1 is empty (a..b counts up from a to b)\n")
    refused("--grid seed=", "  --grid seed=: no values after '=' (give VALUES, e.g. seed=1,2,3)\n")
    refused("--grid seed=1,,2", "  --grid seed=1,,2: an empty value between commas\n")
    refused("", ('  nothing to sweep: give --grid PATH=VALUES or a "sweep" block ({"grid": ..., "list": ..., '
      .. '"random": ...}) in the recipe\n'))
  end)

  it("an override path that does not apply to the recipe, naming the variant", function()
    refused("--grid steps.9.max=1,2", ("tdflow: sweep %s: 2 problems:\n"
      .. "  variant steps.9.max=1: --set steps.9.max=1: steps has 2 entries, so there is no steps.9 (its entries "
      .. "are steps.1 to steps.2)\n"
      .. "  variant steps.9.max=2: --set steps.9.max=2: steps has 2 entries, so there is no steps.9 (its entries "
      .. "are steps.1 to steps.2)\n"):format(RECIPE))
    refused("--grid 'steps.2.max=1,\"x\"'", '  variant steps.2.max=x: steps[2].max: expected a number, got "x"\n')
    refused("--grid seed=1,2 --set source.nn=3", "  variant seed=1: source.nn: unknown parameter (did you mean 'n'?)")
  end)

  it("a malformed sweep block, a recipe on standard input", function()
    local r = write("badblock.json", [[
{"source": {"use": "ParticleSource", "n": 10}, "sink": {"use": "MemmapSink", "path": "x"},
 "sweep": {"grid": {"seed": [], "batch_size": "3..1"}, "lst": [],
           "random": {"n": 0, "ranges": {"a": [2, 1], "b": {"lg": [1, 2]}, "c": {"log": [0, 1]}}}}}
]])
    local text = expect("check " .. r, 2)
    for _, line in ipairs({
      "  sweep.lst: unknown field (did you mean 'list'?) (fields: grid, list, random, out)",
      "  sweep.grid.batch_size: the range 3..1 is empty (a..b counts up from a to b)",
      "  sweep.grid.seed: no values (an empty list)",
      "  sweep.random.n: expected an integer in 1..100000, got 0",
      "  sweep.random.ranges.a: [lo, hi] needs lo < hi, got [2, 1]",
      "  sweep.random.ranges.b: expected one of the fields int, log, choice, got lg (did you mean 'log'?)",
      "  sweep.random.ranges.c.log: expected 0 < lo < hi, got [0, 1]" }) do
      assert.is_truthy(text:find(line, 1, true), line .. "\n" .. text)
    end
    expect("sweep - < " .. RECIPE, 2, "tdflow: sweep: the recipe must be a file (each variant runs it again)")
  end)
end)

describe("the metrics block", function()
  it("tdflow run prints the metrics and puts them in its report", function()
    local text = expect(("run %s --set 'sink.path=\"%s/m1\"' --report %s/m1.json"):format(RECIPE, dir, dir), 0,
      "\nmetrics: max_e = ")
    local rep = json.decode(H.read(dir .. "/m1.json"))
    local td = T.load_memmap(dir .. "/m1")
    assert.are.equal(#td, rep.metrics.rows)
    H.assert_near(td:get("energy"):to("float64"):mean(), rep.metrics.mean_e, 1e-12)
    assert.is_truthy(text:find(("rows = %d"):format(#td), 1, true), text)
  end)

  it("an empty output gives null for what has no value", function()
    local rep = dir .. "/m2.json"
    expect(("run %s -q --set steps.2.max=-100 --set 'sink.path=\"%s/m2\"' --report %s"):format(RECIPE, dir, rep), 0)
    local m = json.decode(H.read(rep)).metrics
    assert.are.same({ json.null, json.null, json.null, json.null, 0, 0, 0, 0 },
      { m.mean_e, m.std_e, m.min_e, m.max_e, m.sum_m, m.rows, m.n_pos, m.nan_e })
  end)

  it("tdflow check refuses an unknown stat, an unknown key, a sink that keeps nothing", function()
    local r = write("badmetrics.json", [[
{"batch_size": 10, "source": {"use": "ParticleSource", "n": 10, "steps": 1},
 "steps": [{"use": "Select", "keys": ["energy", "pos"]}],
 "metrics": {"a": {"key": "energy", "stat": "meen"}, "b": {"key": "enrgy", "stat": "mean"},
             "c": {"key": "mass", "stat": "sum"}, "d": {"stat": "max"}, "e": {"stat": "count", "kye": "x"}}}
]])
    local text = expect("check " .. r, 2)
    for _, line in ipairs({
      "  metrics: the sink (Discard) keeps no rows to compute them over (MemmapSink, H5Sink and Collect do)",
      "  metrics.a.stat: unknown stat 'meen' (did you mean 'mean'?) (stats: mean, std, min, max, sum, count, "
        .. "nan_count)",
      "  metrics.b.key: key 'enrgy' does not reach the sink (did you mean 'energy'?) (keys at the sink: pos, energy)",
      "  metrics.c.key: key 'mass' does not reach the sink (keys at the sink: pos, energy)",
      "  metrics.d.key: required for the stat 'max' (only count goes without a key: the rows)",
      "  metrics.e.kye: unknown field (did you mean 'key'?) (fields: key, stat)" }) do
      assert.is_truthy(text:find(line, 1, true), line .. "\n" .. text)
    end
  end)
end)

describe("tdflow sweep under mpirun", function()
  local root = (debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or ".")
  local core_lib = os.getenv("TENSORDICT_LIB") or (root .. "/build/libtensordict.so")
  local mpi_lib = core_lib:gsub("libtensordict%.so$", "libtensordict_mpi.so")

  it("deals the variants to the ranks; rank 0 writes the summary", function()
    if not (H.exists(mpi_lib) and H.sh("command -v mpirun >/dev/null 2>&1")) then
      pending("mpirun or libtensordict_mpi.so missing")
      return
    end
    local r = write("ranks.lua", [[
return { name = "rank " .. (os.getenv("TDFLOW_SWEEP_RANK") or "-"), seed = 1, batch_size = 50,
  source = { use = "ParticleSource", n = 100, steps = 1 },
  sink = { use = "MemmapSink", path = "out" },
  metrics = { m = { key = "mass", stat = "mean" } } }
]])
    local out = dir .. "/ranks"
    local p = io.popen(("TENSORDICT_LIB=%q TENSORDICT_MPI_LIB=%q timeout 120 scripts/mpirun.sh -n 2 scripts/tdflow "
      .. "sweep %s --grid seed=1..4 --out %s 2>&1; echo \"exit $?\""):format(core_lib, mpi_lib, r, out))
    local text = p:read("*a")
    p:close()
    assert.is_truthy(text:find("exit 0", 1, true), text)
    local _, tables = text:gsub("tdflow: sweep: 4 variants: 4 ok", "")
    assert.are.equal(1, tables, text) -- one summary: rank 0's
    local doc = summary(out)
    local names = {}
    for i, v in ipairs(doc.variants) do
      assert.are.equal("ok", v.status)
      assert.is_number(v.metrics.m)
      names[i] = json.decode(H.read(v.path .. "/out/%provenance.json")).effective.name
    end
    assert.are.same({ "rank 0", "rank 1", "rank 0", "rank 1" }, names)
  end)
end)
