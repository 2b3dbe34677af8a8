-- recipe_checks_spec.lua: what `tdflow check` and `tdflow run` refuse before any data
-- moves, and say when they cannot check (issue 27, items 1 and 4 to 7; issue 28,
-- defects 3 to 5 and "Also"). Run as a user runs them: scripts/tdflow in a child
-- process, exit codes and every message's text; tdrepl's :load and recipe.load{set =}
-- share the overrides' resolver and are run too.
local json = require("tensordict.json")
local H = require("helpers")

local dir = H.tmpdir()
local function write(name, text) return H.write(dir .. "/" .. name, text) end

local tdflow, expect = H.tdflow_runner(dir)

-- The JSON report a run wrote.
local function read_report(path) return json.decode(assert(H.read(path))) end

-- The 4-step demo recipe of the issue, writing under this spec's folder.
local function demo()
  return write("demo.json", ([[{
    "seed": 1, "batch_size": 64, "workers": 0,
    "vars": {"max_energy": 3.0},
    "source": {"use": "ParticleSource", "n": 200, "steps": 3},
    "steps": [
      {"use": "Normalize", "keys": ["energy"], "out_keys": ["energy_z"]},
      {"use": "physics.EnergyFilter", "max": "$vars.max_energy"},
      {"use": "Map", "fn": "physics.features"},
      {"use": "Rebatch", "size": 32}
    ],
    "sink": {"use": "MemmapSink", "path": "%s/out", "existsok": true}
  }]]):format(dir))
end

local IRIS = ("%s/recipes/data/iris.csv"):format(os.getenv("PWD") or ".")

describe("--set paths resolve to a place that exists (issue 27 item 1, issue 28 defect 5)", function()
  local bad = {
    { "steps.7.max=0.5", "--set steps.7.max=0.5: steps has 4 entries, so there is no steps.7 "
      .. "(its entries are steps.1 to steps.4)" },
    { "steps.0.max=0.5", "--set steps.0.max=0.5: 0 is not an entry of steps: list entries are numbered "
      .. "from 1 (its entries are steps.1 to steps.4)" },
    { "steps.-1.max=0.5", "--set steps.-1.max=0.5: -1 is not an entry of steps: list entries are numbered "
      .. "from 1 (its entries are steps.1 to steps.4)" },
    { "steps.5=1", "--set steps.5=1: steps has 4 entries, so there is no steps.5" },
    { "steps.x.max=1", "--set steps.x.max=1: steps is a list: expected an entry number, got 'x' "
      .. "(its entries are steps.1 to steps.4)" },
    { "..=1", "--set ..=1: the path has an empty part (at the start) where a field or an entry number "
      .. "was expected" },
    { "steps..max=1", "--set steps..max=1: the path has an empty part (after steps)" },
    { "seed.=1", "--set seed.=1: the path has an empty part (at the end)" },
    { "=1", "--set =1: expected PATH=VALUE, e.g. steps.2.max=0.5" },
    { "source.nn.x=1", "--set source.nn.x=1: source has no field 'nn' (did you mean 'n'?), so source.nn "
      .. "names nothing (source has the fields: n, steps, use); only the last part of a path may be a new field" },
    { "seed.x=1", "--set seed.x=1: seed is 1, not an object or a list, so seed.x names nothing" },
    { "steps.2.max.x=1", "--set steps.2.max.x=1: steps.2.max is \"$vars.max_energy\", not an object or a list" },
  }
  for _, case in ipairs(bad) do
    it("refuses --set " .. case[1] .. " (check and run exit 2)", function()
      local path = demo()
      expect("check " .. path .. " --set " .. case[1], 2, case[2])
      expect("run " .. path .. " --quiet --set " .. case[1], 2, case[2])
    end)
  end

  it("applies an existing place, a new key of an existing object, and a key of vars", function()
    local recipe = require("tensordict.host.recipe")
    local path = demo()
    local r = recipe.load(path, { set = { "steps.4.size=8", "sink.fsync=false", "vars.max_energy=1.5", "seed=9" } })
    assert.are.equal(8, r.steps[4].p.size)
    assert.is_false(r.sink.p.fsync)
    assert.are.equal(1.5, r.steps[2].p.max)
    assert.are.equal(9, r.seed)
  end)

  it("is one resolver for recipe.load{set =} and tdrepl's :load", function()
    local recipe = require("tensordict.host.recipe")
    local path = demo()
    local ok, err = pcall(recipe.load, path, { set = { "steps.7.max=0.5" } })
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("recipe " .. path .. ": 1 problem:\n  --set steps.7.max=0.5: steps has 4 "
      .. "entries, so there is no steps.7", 1, true), tostring(err))
    local repl = require("tensordict.repl")
    local st = repl.new({ history = false, banner = false })
    local text, status = repl.eval_line(st, ":load " .. path .. " steps.0.max=1")
    assert.are.equal("error", status)
    assert.is_truthy(text:find("--set steps.0.max=1: 0 is not an entry of steps", 1, true), text)
  end)

  it("refuses an integer a double would round, in the recipe and in --set and --seed", function()
    local path = demo()
    expect("check " .. path .. " --set seed=18446744073709551617", 2, "--set seed=18446744073709551617: "
      .. "18446744073709551617 is an integer that a double cannot hold exactly (it would be read as "
      .. "18446744073709551616); integers are exact up to 2^53 = 9007199254740992")
    local exact = write("exact.json", '{"seed": 9007199254740993, "source": {"use": "ParticleSource", '
      .. '"n": 4, "steps": 1, "batch_size": 2}}')
    expect("check " .. exact, 2, "seed: 9007199254740993 is an integer that a double cannot hold exactly (it would "
      .. "be read as 9007199254740992)")
    expect("run " .. path .. " --seed 9007199254740993", 2, "--seed expects an integer in 0..2^64-1 that a double "
      .. "holds exactly (any up to 2^53), got '9007199254740993'")
    expect("run " .. path .. " --quiet --seed 9007199254740992", 0)
  end)
end)

describe("vars must be an object (issue 28 defect 3)", function()
  it("refuses a JSON array and --set vars=[1], with exit 2 and no internal error", function()
    local path = write("vars.json", '{"vars": [1], "source": {"use": "ParticleSource", "n": "$vars.x", '
      .. '"steps": 1, "batch_size": 2}}')
    local _, err = expect("check " .. path, 2, 'vars: expected an object {"name": value, ...}, got an array')
    assert.is_falsy(err:find("attempt to", 1, true), err)
    local demo_path = demo()
    expect("check " .. demo_path .. " --set vars=[1]", 2, 'vars: expected an object {"name": value, ...}, got an array')
    expect("run " .. demo_path .. " --set vars=[1]", 2, 'vars: expected an object')
    local lua = write("vars.lua", 'return { vars = { 1, 2 }, source = { use = "ParticleSource", n = 4, steps = 1, '
      .. 'batch_size = 2 } }')
    expect("check " .. lua, 2, 'vars: expected an object {"name": value, ...}, got a table with list entries')
  end)

  it("says when ${vars.x} inside a string is not text", function()
    local path = write("varstr.json", '{"vars": {"o": {"a": 1}}, "source": {"use": "ParticleSource", "n": 4, '
      .. '"steps": 1, "batch_size": 2}, "sink": {"use": "MemmapSink", "path": "/tmp/${vars.o}"}}')
    expect("check " .. path, 2, "sink.path: ${vars.o} inside a string needs a string, a number or a boolean, "
      .. "got a table (use \"$vars.o\" alone for the value itself)")
  end)
end)

describe("integer parameters have ranges and sizes fit the machine (issue 28 defect 4)", function()
  local function particles(fields) return write("p.json", ('{"batch_size": 8, "source": {"use": '
    .. '"ParticleSource", %s}}'):format(fields)) end

  it("refuses seeds past 2^64 and counts past 2^53", function()
    expect("check " .. particles('"n": 4, "steps": 1, "seed": 18446744073709551616'), 2,
      "source.seed: expected a seed (an integer in 0..2^64-1), got 18446744073709551616")
    expect("check " .. particles('"n": 18446744073709551616, "steps": 1'), 2,
      "source.n: expected an integer, got 18446744073709551616 (integers are exact up to 2^53 = "
      .. "9007199254740992; past it no count or size is meant)")
    expect("check " .. particles('"n": 4, "steps": 1e30'), 2,
      "source.steps: expected an integer, got 1e+30 (integers are exact up to 2^53")
    expect("check " .. particles('"n": 4, "steps": 1, "seed": -3'), 2,
      "source.seed: expected a seed (an integer in 0..2^64-1), got -3")
  end)

  it("refuses sizes this machine cannot hold", function()
    local _, err = expect("check " .. particles('"n": 1e15, "steps": 1'), 2,
      "source (ParticleSource): n = 1000000000000000 particles of steps = 1 states (batches of 8) needs about ")
    assert.is_truthy(err:find("of memory at once, more than this machine's", 1, true), err)
    expect("check " .. particles('"n": 100, "steps": 1e12'), 2, "source (ParticleSource): n = 100 particles of "
      .. "steps = 1000000000000 states (batches of 8) needs about")
    local rebatch = write("rb.json", '{"batch_size": 8, "source": {"use": "ParticleSource", "n": 4, "steps": 2}, '
      .. '"steps": [{"use": "Seq", "steps": [{"use": "Rebatch", "size": 1e15}]}]}')
    expect("check " .. rebatch, 2, "steps[1].steps[1] (Rebatch): size = 1000000000000000 rows of about 68 B each "
      .. "(the source's rows) needs about")
    local hist = write("hist.json", '{"batch_size": 8, "source": {"use": "ParticleSource", "n": 4, "steps": 2}, '
      .. '"sink": {"use": "physics.Histogram", "key": "energy", "min": 0, "max": 1, "bins": 1e15}}')
    expect("check " .. hist, 2, "sink (physics.Histogram): bins = 1000000000000000 needs about")
    local csv = write("csvbig.json", ('{"source": {"use": "CsvSource", "path": "%s", "batch_size": 1e15}}')
      :format(IRIS))
    expect("check " .. csv, 2, "source (CsvSource): batch_size = 1000000000000000 rows of 5 columns needs about")
    expect("check " .. demo() .. " --set workers=5000", 2, "workers: expected integer <= 1024, got 5000")
    expect("check " .. demo() .. " --set steps.3.workers=-1", 2, "steps[3].workers: expected integer >= 0, got -1")
  end)
end)

describe("tdflow check reports every problem at once (issue 27 item 5)", function()
  it("parameter problems, an existing sink path, a missing key and a refused dtype, together", function()
    os.execute("mkdir -p " .. dir .. "/exists")
    local path = write("many.json", ([[{
      "source": {"use": "CsvSource", "path": "%s", "batch_size": 8,
                 "columns": {"sepal": ["sepal_length", "sepal_width"], "species": "int64"}},
      "steps": [
        {"use": "Normalize", "keys": ["sepal", "species"], "eps": "x"},
        {"use": "Rebatch", "size": 0},
        {"use": "Apply", "keys": ["petal"], "fn": "Tensor.neg"}
      ],
      "sink": {"use": "MemmapSink", "path": "%s/exists"}
    }]]):format(IRIS, dir))
    local _, err = expect("check " .. path, 2, "5 problems:",
      'steps[1].eps: expected a number, got "x"',
      "steps[2].size: expected integer >= 1, got 0",
      "sink (MemmapSink): path '" .. dir .. "/exists' exists",
      "steps[1] (Normalize): key 'species' has dtype int64 (as the source declares it); Normalize works on float "
        .. 'leaves (cast it first: {"use": "Cast", "dtype": "float32", "keys": ["species"]})',
      "steps[3] (Apply): key 'petal' is neither given by the source nor produced upstream (did you mean "
        .. "'sepal'?) (source keys: 'sepal', 'species')")
    assert.is_falsy(err:find("not checked", 1, true), err)
  end)

  it("checks dtypes the source declares: CsvSource species int64 into Normalize (item 7)", function()
    local function csv(steps) return write("iris.json", ('{"source": {"use": "CsvSource", "path": "%s", '
      .. '"batch_size": 8, "columns": {"sepal": ["sepal_length", "sepal_width"], "species": "int64"}}, '
      .. '"steps": %s}'):format(IRIS, steps)) end
    expect("check " .. csv('[{"use": "Normalize", "keys": ["species"]}]'), 2,
      "steps[1] (Normalize): key 'species' has dtype int64 (as the source declares it)")
    expect("check " .. csv('[{"use": "Cast", "dtype": "float32", "keys": ["species"]}, '
      .. '{"use": "Normalize", "keys": ["species"]}]'), 0, "ok (checked in")
    expect("check " .. csv('[{"use": "Rename", "keys": {"species": "label"}}, '
      .. '{"use": "Normalize", "keys": ["label"]}]'), 2,
      "steps[2] (Normalize): key 'label' has dtype int64 (as the source declares it)")
    expect("check " .. csv('[{"use": "Cast", "dtype": "int32"}, {"use": "Normalize", "keys": ["sepal"]}]'), 2,
      "steps[2] (Normalize): key 'sepal' has dtype int32 (cast by steps[1])")
    expect("check " .. csv('[{"use": "Filter", "where": "sepal"}]'), 2,
      "steps[1] (Filter): key 'sepal' has dtype float32 (as the source declares it); where needs a bool leaf")
    expect("check " .. csv('[{"use": "Normalize", "keys": ["sepal"], "out_keys": ["z"]}, '
      .. '{"use": "MaskedFill", "mask": "z", "value": 0}]'), 2,
      "steps[2] (MaskedFill): key 'z' has dtype float32 (as the source declares it); mask needs a bool leaf")
  end)

  it("checks a sink's keys against the key flow (issue 28, Also)", function()
    local function hist(key) return write("h.json", ('{"batch_size": 8, "source": {"use": "ParticleSource", '
      .. '"n": 4, "steps": 2}, "steps": [{"use": "Exclude", "keys": ["vel"]}], "sink": {"use": '
      .. '"physics.Histogram", "key": "%s", "min": 0, "max": 1}}'):format(key)) end
    expect("check " .. hist("energi"), 2, "sink (physics.Histogram): key 'energi' is neither given by the source "
      .. "nor produced upstream (did you mean 'energy'?) (source keys: 'id', 'mass', 'pos', 'vel', 'energy')")
    expect("check " .. hist("vel"), 2, "sink (physics.Histogram): key 'vel' is neither given by the source")
    expect("check " .. hist("energy"), 0, "ok")
  end)

  it("checks that a Map fn given by name is a function of a batch (issue 28, Also)", function()
    local function steps(s) return write("fn.json", ('{"batch_size": 8, "source": {"use": "ParticleSource", '
      .. '"n": 4, "steps": 2}, "steps": [%s]}'):format(s)) end
    expect("check " .. steps('{"use": "Map", "fn": "physics.speed", "out_keys": ["s"]}'), 2,
      "steps[1].fn: 'physics.speed' is a function of tensors (fn(leaf, ...)), but this parameter calls it with a "
      .. "batch (fn(td)) (a function of tensors goes in Apply or Module)")
    expect("check " .. steps('{"use": "Map", "fn": "Tensor.sigmoid"}'), 2,
      "steps[1].fn: 'Tensor.sigmoid' is a function of tensors")
    expect("check " .. steps('{"use": "Apply", "keys": ["pos"], "fn": "physics.features"}'), 2,
      "steps[1].fn: 'physics.features' is a function of a batch (fn(td)), but this parameter calls it with tensors "
      .. "(fn(leaf, ...)) (a function of a batch goes in Lambda or Map)")
    expect("check " .. steps('{"use": "Map", "fn": "physics.features", "out_keys": ["speed"]}, '
      .. '{"use": "Module", "fn": "physics.speed", "in_keys": ["vel"], "out_keys": ["s2"]}'), 0, "ok")
  end)
end)

describe("names that are neither keys nor functions, and what cannot be checked (issue 27 item 4)", function()
  it("offers the nearest function for a misspelt mask function, the nearest key otherwise", function()
    local function filter(where, before) return write("f.json", ('{"batch_size": 8, "source": {"use": '
      .. '"ParticleSource", "n": 4, "steps": 2}, "steps": [%s{"use": "Filter", "where": "%s"}]}')
      :format(before or "", where)) end
    expect("check " .. filter("physics.featurs"), 2, "steps[1] (Filter): where: 'physics.featurs' is neither a key "
      .. "known upstream nor a registered function (did you mean the function 'physics.features'?)")
    expect("check " .. filter("enrgy"), 2, "steps[1] (Filter): key 'enrgy' is neither given by the source nor "
      .. "produced upstream (did you mean 'energy'?)")
    -- after a step that adds keys it does not declare: still a problem when a function is meant
    local map = '{"use": "Map", "fn": "physics.features"}, '
    expect("check " .. filter("physics.featurs", map), 2, "steps[2] (Filter): where: 'physics.featurs' is neither")
  end)

  it("says what it could not check, and exits 0 for it", function()
    local path = write("open.json", '{"batch_size": 8, "source": {"use": "ParticleSource", "n": 4, "steps": 2}, '
      .. '"steps": [{"use": "Map", "fn": "physics.features"}, {"use": "Normalize", "keys": ["speed"]}]}')
    local out = expect("check " .. path, 0, "ok (checked in")
    assert.is_truthy(out:find(("tdflow: %s: 1 thing not checked:\n  steps[2] (Normalize): key 'speed' is not "
      .. "known upstream; steps[1] (Map) adds keys it does not declare, so it may come from there (not checked: "
      .. "give that step out_keys to check it)\n"):format(path), 1, true), out)
    local declared = write("declared.json", '{"batch_size": 8, "source": {"use": "ParticleSource", "n": 4, '
      .. '"steps": 2}, "steps": [{"use": "Map", "fn": "physics.features", "out_keys": ["speed"]}, '
      .. '{"use": "Normalize", "keys": ["speed"]}]}')
    out = expect("check " .. declared, 0, "ok")
    assert.is_falsy(out:find("not checked", 1, true), out)
    -- a run prints the notes on stderr (not with --quiet)
    local _, err = expect("run " .. path, 0)
    assert.is_truthy(err:find("1 thing not checked", 1, true), err)
    local qout, qerr = expect("run " .. path .. " --quiet", 0)
    assert.are.equal("", qout .. qerr)
    -- and tdrepl's :load shows them under the stepper
    local repl = require("tensordict.repl")
    local text, status = repl.eval_line(repl.new({ history = false, banner = false }), ":load " .. path)
    assert.are.equal("ok", status)
    assert.is_truthy(text:find("\nnot checked: steps[2] (Normalize): key 'speed' is not known upstream; steps[1] "
      .. "(Map) adds keys it does not declare", 1, true), text)
  end)

  it("refuses a TDFLOW_PLUGIN_PATH folder that does not exist, naming it", function()
    local out, err, code = tdflow("check " .. demo(), "TDFLOW_PLUGIN_PATH=" .. dir .. "/nope:" .. dir)
    assert.are.equal(2, code, out .. err)
    assert.is_truthy(err:find("plugin path: TDFLOW_PLUGIN_PATH names '" .. dir .. "/nope', which does not exist",
      1, true), err)
    write("afile", "x")
    out, err, code = tdflow("plugins", "TDFLOW_PLUGIN_PATH=" .. dir .. "/afile")
    assert.are.equal(2, code, out .. err)
    assert.is_truthy(err:find("TDFLOW_PLUGIN_PATH names '" .. dir .. "/afile', which is not a folder", 1, true), err)
  end)
end)

describe("--report (issue 27 item 6)", function()
  it("is checked before any data moves", function()
    local path = demo()
    local out_dir = dir .. "/out"
    os.execute("rm -rf " .. out_dir)
    expect("run " .. path .. " --report " .. dir .. "/none/r.json", 2,
      "--report " .. dir .. "/none/r.json: the folder '" .. dir .. "/none' does not exist")
    expect("run " .. path .. " --report " .. dir, 2, "--report " .. dir .. ": a folder, not a file")
    assert.is_false(require("tensordict.fs").exists(out_dir))
  end)

  it("is written for a failed run, with its status and error", function()
    local path = write("fails.lua", [[
      return { batch_size = 8, workers = 0,
        source = { use = "ParticleSource", n = 40, steps = 1 },
        steps = { { use = "Lambda", fn = function(td)
          if td.id[1] > 20 then error("tensordict: no good past row 20") end
          return td
        end } } }
    ]])
    local report = dir .. "/failed.json"
    expect("run " .. path .. " --quiet --report " .. report, 1, "no good past row 20")
    local rep = read_report(report)
    assert.are.equal("failed", rep.status)
    assert.is_truthy(rep.error:find("steps[1] (Lambda): no good past row 20", 1, true), rep.error)
    -- how far it came: the batch that failed was taken in (rows 25..32), none given out
    assert.are.equal(32, rep.rows_in)
    assert.are.equal(24, rep.rows_out)
    local ok_report = dir .. "/ok.json"
    expect("run " .. demo() .. " --quiet --report " .. ok_report, 0)
    local good = read_report(ok_report)
    assert.are.equal("ok", good.status)
    assert.is_nil(good.error)
  end)

  it("is written for an interrupted run", function()
    local path = write("int.lua", [[
      local ffi = require("ffi")
      pcall(ffi.cdef, "int kill(int pid, int sig); int getpid(void);")
      local n = 0
      return { batch_size = 8, workers = 0,
        source = { use = "ParticleSource", n = 4000, steps = 1 },
        steps = { { use = "Lambda", fn = function(td)
          n = n + 1
          if n == 3 then ffi.C.kill(ffi.C.getpid(), 2) end -- Ctrl-C, from within
          return td
        end } } }
    ]])
    local report = dir .. "/int.json"
    expect("run " .. path .. " --quiet --report " .. report, 130, "tdflow: interrupted")
    local rep = read_report(report)
    assert.are.equal("interrupted", rep.status)
    assert.are.equal("interrupted by SIGINT", rep.error)
  end)
end)

describe("recipe.prepare's options", function()
  it("go through util.options", function()
    local recipe = require("tensordict.host.recipe")
    H.raises(function() recipe.load(demo(), { sets = {} }) end,
      "recipe: unknown option 'sets' (options: resume, set, workers)")
  end)
end)
