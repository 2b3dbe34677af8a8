-- tdflow_spec.lua: the host's command line run as a user runs it (scripts/tdflow in a
-- child process): exit codes, messages for bad recipes (every one asserting its text),
-- the per-node report, --report JSON, --set, inspect and plugins.
local json = require("tensordict.json")
local H = require("helpers")

local dir = H.tmpdir()

-- Writes a file of the spec's folder; returns its path.
local function write(name, text) return H.write(dir .. "/" .. name, text) end

-- Runs scripts/tdflow with args: stdout, stderr, exit code; expect asserts them.
local tdflow, expect = H.tdflow_runner(dir)

-- A valid base recipe (JSON) the bad ones change one thing of.
local SOURCE = '{"use": "ParticleSource", "n": 40, "steps": 2, "seed": 1}'
local function recipe(fields)
  return ('{"batch_size": 16, "source": %s, %s}'):format(SOURCE, fields)
end

describe("tdflow: bad recipes", function()
  local bad_utf8 = recipe('"name": "run-\255"')
  local cases = {
    { "raw invalid UTF-8 in a string", bad_utf8,
      ("line 1, column %d: invalid UTF-8 in a string (byte 0xff)"):format(bad_utf8:find("\255", 1, true)) },
    { "malformed JSON", '{\n  "steps": [1,\n  2,, 3]\n}', "line 3, column 5: invalid JSON near ', 3]'" },
    { "text after the value", '{"seed": 1} x', "line 1, column 13: text after the JSON value near 'x'" },
    { "a top-level array", "[1, 2]", "a recipe is a JSON object, got an array" },
    { "an unknown field", recipe('"stpes": []'), "stpes: unknown recipe field (did you mean 'steps'?)" },
    { "no source", '{"steps": []}', "source: required: where the batches come from" },
    { "an unknown source type", '{"source": {"use": "ParticelSource", "n": 4, "steps": 1, "batch_size": 2}}',
      "source.use: unknown node type \"ParticelSource\" (did you mean 'ParticleSource'?)" },
    { "a node as the source", '{"source": {"use": "Take", "n": 2}}', "source.use: Take is a node, not a source" },
    { "a node as the sink", recipe('"sink": {"use": "Take", "n": 2}'), "sink.use: Take is a node, not a sink" },
    { "a step without use", recipe('"steps": [{"keys": ["pos"]}]'), "steps[1].use: required: the node type (got nil)" },
    { "an unknown step type", recipe('"steps": [{"use": "Take", "n": 1}, {"use": "Fliter", "where": "x"}]'),
      "steps[2].use: unknown node type \"Fliter\" (did you mean 'Filter'?)" },
    { "a missing parameter", recipe('"steps": [{"use": "Apply", "fn": "Tensor.neg"}]'),
      "steps[1].keys: required (a list of keys (strings or arrays of strings))" },
    { "a mistyped parameter",
      recipe('"steps": [{"use": "Take", "n": 1}, {"use": "Take", "n": 1}, {"use": "Rebatch", "size": "x"}]'),
      'steps[3].size: expected an integer, got "x"' },
    { "a parameter below its minimum", recipe('"steps": [{"use": "Rebatch", "size": 0}]'),
      "steps[1].size: expected integer >= 1, got 0" },
    { "an unknown parameter", recipe('"steps": [{"use": "Apply", "kyes": ["pos"], "fn": "Tensor.neg"}]'),
      "steps[1].kyes: unknown parameter (did you mean 'keys'?) (parameters: keys, fn, out_keys)" },
    { "an unknown function", recipe('"steps": [{"use": "Apply", "keys": ["pos"], "fn": "Tensor.nope"}]'),
      'steps[1].fn: expected a function or the name of a registered function, got "Tensor.nope" (unknown function' },
    { "an unknown variable", recipe('"vars": {"size": 4}, "steps": [{"use": "Rebatch", "size": "$vars.sise"}]'),
      "steps[1].size: unknown variable $vars.sise (did you mean $vars.size?) (vars: size)" },
    { "vars that are not an object", recipe('"vars": 3'), 'vars: expected an object {"name": value, ...}, got 3' },
    { "a negative seed", recipe('"seed": -1'), "seed: expected a seed (an integer in 0..2^64-1), got -1" },
    { "a zero timeout", recipe('"timeout": 0'), "timeout: expected a number of seconds > 0, got 0" },
    { "a timeout that is not a number", recipe('"timeout": "10"'),
      'timeout: expected a number of seconds > 0, got "10"' },
    { "a zero batch size", '{"batch_size": 0, "source": ' .. SOURCE .. "}",
      "batch_size: expected integer >= 1, got 0" },
    { "a key no step produces",
      recipe('"steps": [{"use": "Apply", "keys": ["pos"], "fn": "Tensor.neg"}, '
        .. '{"use": "Apply", "keys": ["nope"], "fn": "Tensor.neg"}]'),
      "steps[2] (Apply): key 'nope' is neither given by the source nor produced upstream "
        .. "(source keys: 'id', 'mass', 'pos', 'vel', 'energy')" },
    { "a key removed upstream",
      recipe('"steps": [{"use": "Exclude", "keys": ["vel"]}, {"use": "Apply", "keys": ["vel"], "fn": "Tensor.neg"}]'),
      "steps[2] (Apply): key 'vel' is neither given by the source nor produced upstream" },
    { "an error inside a nested Seq",
      recipe('"steps": [{"use": "Seq", "steps": [{"use": "Take", "n": 1}, {"use": "Tkae", "n": 1}]}]'),
      "steps[1].steps[2].use: unknown node type \"Tkae\" (did you mean 'Take'?)" },
    { "a key given twice", recipe('"steps": [{"use": "Take", "n": 1, "n": 2}]'),
      "steps[1].n: given twice in the same object" },
    { "a bad dtype", recipe('"steps": [{"use": "Cast", "dtype": "float17"}]'),
      "steps[1].dtype: expected a dtype name (" },
    { "steps that are not a list", recipe('"steps": {"use": "Take", "n": 1}'), "steps: expected a list of steps" },
    { "a step that is not a table", recipe('"steps": [3]'), 'steps[1]: expected a step {"use": "Type", ...}, got 3' },
    { "a node type's own check",
      recipe('"steps": [{"use": "Apply", "keys": ["pos", "vel"], "out_keys": ["a"], "fn": "Tensor.neg"}]'),
      "steps[1] (Apply): keys has 2 keys but out_keys has 1; they pair up one to one" },
    { "several problems at once", recipe('"seed": "x", "steps": [{"use": "Fliter"}, {"use": "Take"}]'),
      "3 problems:", "seed: expected a seed", "steps[1].use: unknown node type",
      "steps[2].n: required" },
  }
  for _, case in ipairs(cases) do
    it("reports " .. case[1] .. " with exit code 2", function()
      local path = write("bad.json", case[2])
      for _, cmd in ipairs({ "check", "run" }) do
        expect(cmd .. " " .. path, 2, unpack(case, 3))
      end
    end)
  end

  it("reports recipe files that cannot be read or run", function()
    expect("check " .. dir .. "/missing.json", 2, "cannot read " .. dir .. "/missing.json")
    expect("check " .. write("bad.lua", "return {"), 2, "bad.lua:1: unexpected symbol near '<eof>'")
    expect("check " .. write("boom.lua", "error('no data here')"), 2, "boom.lua failed: ", "no data here")
    expect("check " .. write("num.lua", "return 3"), 2, "num.lua must return a table, got 3")
  end)

  it("reports bad --set values and unknown commands", function()
    local path = write("ok.json", recipe('"steps": []'))
    expect("check " .. path .. " --set steps.1", 2,
      "--set steps.1: expected PATH=VALUE, e.g. steps.2.max=0.5 (PATH: dotted fields, list entries from 1)")
    expect("check " .. path .. " --set batch_size.x=1", 2,
      "--set batch_size.x=1: batch_size is 16, not an object or a list, so batch_size.x names nothing")
    expect("bogus", 2, "tdflow: unknown command 'bogus'", "Run 'tdflow --help' for usage.")
    expect("run", 2, "missing argument 'recipe'")
    expect("run " .. path .. " --workers x", 2, "--workers expects a non-negative integer, got 'x'")
  end)

  it("refuses a sink path that exists unless --set sink.existsok=true", function()
    local out_path = dir .. "/exists"
    os.execute("mkdir -p " .. out_path)
    local path = write("exists.json", recipe(('"sink": {"use": "MemmapSink", "path": "%s"}'):format(out_path)))
    expect("check " .. path, 2, ("sink (MemmapSink): path '%s' exists (pass existsok = true to replace it, "
      .. "e.g. --set sink.existsok=true)"):format(out_path))
    expect("run " .. path, 2, "sink (MemmapSink): path '" .. out_path .. "' exists")
    expect("run " .. path .. " --quiet --set sink.existsok=true", 0)
    local T = require("tensordict")
    local td = T.load_memmap(out_path)
    assert.are.same({ 40 }, td:batch_size())
    assert.are.same({ 40, 2, 3 }, td.pos:shape())
  end)

  it("exits 1 with the failing step's place when a step fails at run time", function()
    local path = write("fail.lua", [[
      return { batch_size = 8, source = { use = "ParticleSource", n = 20, steps = 1, seed = 0 },
        steps = { { use = "Take", n = 100 }, { use = "Lambda", fn = function(td) error("boom at " .. #td) end } } }
    ]])
    expect("run " .. path, 1, "tdflow: steps[2] (Lambda): ", "boom at 8")
  end)

  it("exits 1 naming the batch and the worker when a Map worker dies, and commits nothing", function()
    local out_path = dir .. "/crashed"
    local path = write("crash.lua", ([[
      return { batch_size = 8, workers = 2, source = { use = "ParticleSource", n = 40, steps = 1, seed = 0 },
        steps = { { use = "Map", fn = function(td)
          if td.id[1] == 17 then os.exit(3) end -- batch 3 only: which failure wins a race is not fixed
          return td
        end } },
        sink = { use = "MemmapSink", path = %q } }
    ]]):format(out_path))
    expect("run " .. path, 1, "tdflow: steps[1] (Map): batch 3 failed", "exited with status 3")
    assert.is_false(require("tensordict.fs").exists(out_path))
  end)
end)

describe("tdflow: a batch that takes too long (issue 28)", function()
  -- A Lua recipe whose Map never returns on batch 2 (or stops its worker with SIGSTOP):
  -- the recipe's timeout (or --timeout) fails the run, every worker is reaped and the
  -- sink commits nothing.
  local function hanging(name, how, timeout_field)
    local out_path = dir .. "/" .. name .. "-out"
    local path = write(name .. ".lua", ([[
      local ffi = require("ffi")
      pcall(ffi.cdef, "int getpid(void); int kill(int pid, int sig);")
      return { batch_size = 8, workers = 1, %s
        source = { use = "ParticleSource", n = 40, steps = 1, seed = 0 },
        steps = { { use = "Map", fn = function(td)
          if td.id[1] == 9 then %s end
          return td
        end } },
        sink = { use = "MemmapSink", path = %q } }
    ]]):format(timeout_field, how, out_path))
    return path, out_path
  end

  it("fails the run naming the batch, the seconds and the worker, and commits nothing", function()
    local path, out_path = hanging("spin", "while true do end", "timeout = 2,")
    expect("run " .. path, 1, "tdflow: steps[1] (Map): batch 2 timed out after 2 s in worker 1")
    assert.is_false(require("tensordict.fs").exists(out_path))
    path, out_path = hanging("stopped", "ffi.C.kill(ffi.C.getpid(), 19)", "")
    expect("run " .. path .. " --timeout 2", 1, "tdflow: steps[1] (Map): batch 2 timed out after 2 s in worker 1")
    assert.is_false(require("tensordict.fs").exists(out_path))
    expect("run " .. path .. " --timeout 0", 2, "--timeout expects a number of seconds > 0, got '0'")
  end)
end)

describe("tdflow run", function()
  it("runs a recipe, prints the per-node report and writes it as JSON", function()
    local path = write("good.json", recipe([["vars": {"n": 3},
      "steps": [{"use": "Apply", "keys": ["pos"], "fn": "Tensor.neg", "out_keys": ["neg"]},
                {"use": "Rebatch", "size": 24}, {"use": "Take", "n": "$vars.n"}],
      "sink": {"use": "Discard"}]]))
    local report = dir .. "/report.json"
    local out = expect("run " .. path .. " --report " .. report, 0, "step", "share", "rows/s",
      "source               ParticleSource", "steps[1]             Apply", "steps[2]             Rebatch",
      "steps[3]             Take", "sink                 Discard", "output: 3 rows")
    assert.is_truthy(out:find("total: %d+ rows in, 3 rows out"), out)
    local rep = json.decode(assert(H.read(report)))
    assert.are.equal(5, #rep.nodes)
    assert.are.equal("steps[2]", rep.nodes[3].where)
    assert.are.equal("Rebatch", rep.nodes[3].type)
    assert.are.equal(3, rep.rows_out)
    local share = 0
    for _, n in ipairs(rep.nodes) do share = share + n.share end
    assert.is_true(math.abs(share - 1) < 1e-9)
    -- committed through a temporary sibling that does not outlive the run
    assert.is_nil(H.ls_a(dir):find(".report.json.tmp-", 1, true))
    -- an unwritable --report is refused before any data moves (issue 27, item 6)
    local missing = dir .. "/no/such/folder/report.json"
    local _, err = expect("run " .. path .. " --quiet --report " .. missing, 2)
    assert.are.equal(("tdflow: %s: 1 problem:\n  --report %s: the folder '%s' does not exist\n")
      :format(path, missing, dir .. "/no/such/folder"), err)
  end)

  it("takes --set, --seed and --quiet, and check says ok", function()
    local path = write("set.json", recipe('"steps": [{"use": "Take", "n": 100}]'))
    local out, err = expect("run " .. path .. " --quiet --set steps.1.n=5 --seed 3", 0)
    assert.are.equal("", out)
    assert.are.equal("", err)
    expect("check " .. path, 0, "tdflow: " .. path .. ": ok (checked in")
    expect("check " .. path .. " --set steps.1.n=x", 2, 'steps[1].n: expected an integer, got "x"')
  end)
end)

describe("tdflow --version and recipes from standard input", function()
  it("prints its version, the library's ABI, the flow protocol and LuaJIT's version", function()
    local T = require("tensordict")
    local out = expect("--version", 0)
    assert.are.equal(("tdflow %s (libtensordict %s, ABI %d, flow protocol 1) on %s\n"):format(T.version, T.version,
      T.abi_version, jit.version), out)
  end)

  it("checks and runs a recipe read from standard input (-), JSON or Lua", function()
    local path = write("stdin.json", recipe('"steps": [{"use": "Take", "n": 3}], "sink": {"use": "Collect"}'))
    local out = expect("check - < " .. path, 0)
    assert.is_truthy(out:match("^tdflow: stdin: ok %(checked in [%d.]+ ms%)\n$"), out)
    expect("run - --quiet < " .. path, 0)
    write("stdin.lua", "return { source = { use = 'ParticleSource', n = 4, steps = 1, batch_size = 2 }, "
      .. "steps = { { use = 'Take', n = 'x' } } }")
    local _, err = expect("check - < " .. dir .. "/stdin.lua", 2)
    assert.are.equal('tdflow: stdin: 1 problem:\n  steps[1].n: expected an integer, got "x"\n', err)
    _, err = expect("check - < /dev/null", 2)
    assert.are.equal("tdflow: stdin: 1 problem:\n  stdin: no recipe: standard input is empty\n", err)
    write("broken.json", '{"seed": 1,}')
    _, err = expect("check - < " .. dir .. "/broken.json", 2)
    assert.is_truthy(err:find("tdflow: stdin: 1 problem:\n  stdin: line 1, column", 1, true), err)
  end)
end)

describe("tdflow's messages name the user's place", function()
  it("shows a worker's error without a position in tdflow's own launcher", function()
    local path = write("features.json", '{"batch_size": 16, "source": ' .. SOURCE .. ', "steps": ['
      .. '{"use": "Select", "keys": ["mass"]}, {"use": "Map", "workers": 2, "fn": "physics.features"}]}')
    -- both workers' batches fail: whichever reports first is named (batch 1 or 2)
    local _, err = expect("run " .. path .. " --quiet", 1, "tdflow: steps[2] (Map): batch ",
      "physics.Features: key 'pos' is missing from the batch (its keys: 'mass')")
    assert.is_nil(err:find("scripts/tdflow", 1, true), err)
    assert.is_nil(err:find("bin/tdflow", 1, true), err)
  end)
end)

describe("tdflow help and progress", function()
  it("prints help for the program and for each command", function()
    expect("--help", 0, "Usage: tdflow", "run", "check", "inspect", "plugins",
      "Exit codes: 0 done, 2 usage or recipe errors, 1 runtime errors, 130, 143 or 129 stopped by "
      .. "SIGINT (Ctrl-C), SIGTERM or SIGHUP (workers stopped, the sink aborted).")
    expect("help run", 0, "Usage: tdflow run", "--set PATH=VALUE", "--workers", "--report FILE", "--quiet")
    expect("help check", 0, "Usage: tdflow check")
  end)

  it("formats the progress line with a bar and an ETA when the length is known", function()
    local progress = require("tensordict.host.progress")
    assert.are.equal("[##########..........]  50%  500 rows  100 rows/s  00:05  ETA 00:05",
      progress.line(500, 1000, 5))
    assert.are.equal("1,234,567 rows  411,522 rows/s  00:03", progress.line(1234567, nil, 3))
    assert.are.equal("1:01:01", progress.clock(3661))
    local lines = {}
    local sink = {
      write = function(_, ...) for _, x in ipairs({ ... }) do lines[#lines + 1] = x end end,
      flush = function() end,
    }
    local p = progress.new({ total = 10, tty = false, out = sink, every = 0 })
    p:update(5)
    p:done(10)
    local text = table.concat(lines)
    assert.is_truthy(text:find("tdflow: [##########..........]  50%  5 rows", 1, true), text)
    assert.is_truthy(text:find("100%  10 rows", 1, true), text)
  end)
end)

describe("tdflow inspect and plugins", function()
  it("shows a Python-written memmap folder as a tree", function()
    local out = expect("inspect tests/fixtures/python-all-dtypes", 0,
      "tests/fixtures/python-all-dtypes  (memmap folder, batch size [")
    assert.is_truthy(out:find("float32", 1, true), out)
    assert.is_truthy(out:find("bfloat16", 1, true), out)
    expect("inspect " .. dir .. "/nothing", 1, "inspect: " .. dir .. "/nothing: no such file or folder")
  end)

  it("says a file or folder of neither format is neither, instead of a reader's complaint", function()
    local text = write("notes.txt", "hello world\n")
    local _, err = expect("inspect " .. text, 1)
    assert.are.equal("tdflow: inspect: " .. text .. " is neither a memmap folder, a consolidated file nor an "
      .. "HDF5 file (a file that does not end in a metadata length and JSON)\n", err)
    os.execute("mkdir -p " .. dir .. "/plain_folder")
    _, err = expect("inspect " .. dir .. "/plain_folder", 1)
    assert.are.equal("tdflow: inspect: " .. dir .. "/plain_folder is neither a memmap folder, a consolidated "
      .. "file nor an HDF5 file (a folder without meta.json)\n", err)
    -- a consolidated file that is damaged is one: the reader says what is wrong with it
    local T = require("tensordict")
    local file = dir .. "/whole.td"
    T.TensorDict({ a = T.zeros(3) }, { 3 }):consolidate(file)
    expect("inspect " .. file, 0, file .. "  (consolidated file, batch size [3], 1 tensor leaves, 12 B)")
    local f = assert(io.open(file, "r+b"))
    f:seek("end", -8 - 2)
    f:write("xx")
    f:close()
    _, err = expect("inspect " .. file, 1, "tdflow: from_consolidated: '" .. file .. "'")
    assert.is_nil(err:find("neither", 1, true), err)
  end)

  it("lists the core plugin's node types with their docs", function()
    expect("plugins", 0, "core 1", "core_plugin.lua", "node types:", "Apply", "Calls fn on each selected leaf",
      "Rebatch", "TensorSource")
  end)

  it("names a plugin that fails to load and exits 2", function()
    local pdir = dir .. "/plugins_bad"
    os.execute("mkdir -p " .. pdir)
    H.write(pdir .. "/broken.lua", "return {")
    local out, err, code = tdflow("plugins", "TDFLOW_PLUGIN_PATH=" .. pdir)
    assert.are.equal(2, code, out .. err)
    assert.is_truthy(err:find("plugin " .. pdir .. "/broken.lua: does not load: ", 1, true), err)
  end)

  it("names both files when two plugins define the same node type", function()
    local pdir = dir .. "/plugins_dup"
    os.execute("mkdir -p " .. pdir)
    H.write(pdir .. "/dup.lua", [[
      local flow = require("tensordict.flow")
      return { name = "dup", version = "1", nodes = { Apply = flow.Take } }
    ]])
    local out, err, code = tdflow("plugins", "TDFLOW_PLUGIN_PATH=" .. pdir)
    assert.are.equal(2, code, out .. err)
    assert.is_truthy(err:find("plugin " .. pdir .. "/dup.lua: node type 'Apply' is defined already by ", 1, true), err)
    assert.is_truthy(err:find("core_plugin.lua", 1, true), err)
  end)
end)

describe("tdflow and Ctrl-C, SIGTERM, SIGHUP", function()
  for _, case in ipairs({ { "SIGINT", 130 }, { "SIGTERM", 143 }, { "SIGHUP", 129 } }) do
    local signal, status = case[1], case[2]
    it(("stops the workers, aborts the sink and exits %d on %s"):format(status, signal), function()
      local out_path = dir .. "/interrupted"
      local mark = dir .. "/map-started"
      os.remove(mark)
      local path = write("slow.lua", ([[
        return { batch_size = 64, workers = 2,
          source = { use = "ParticleSource", n = 100000, steps = 1, seed = 0 },
          steps = { { use = "Map", fn = function(td)
            io.open(%q, "w"):close()
            local t = os.clock() + 0.05
            while os.clock() < t do end
            return td
          end } },
          sink = { use = "MemmapSink", path = %q } }
      ]]):format(mark, out_path))
      -- once a worker computes, the signal; then the workers tdflow had must be gone
      local cmd = ("{ scripts/tdflow run %s >%s/int.out 2>%s/int.err & pid=$!; "
        .. "while [ ! -f %s ]; do sleep 0.05; done; "
        .. "kids=$(cat /proc/$pid/task/$pid/children); kill -%s $pid; wait $pid; echo \"$? $(echo $kids | wc -w)\"; "
        .. "left=0; for k in $kids; do kill -0 $k 2>/dev/null && left=$((left + 1)); done; "
        .. "echo $left; } 2>/dev/null"):format(path, dir, dir, mark, signal:sub(4))
      local p = io.popen(cmd)
      local text = p:read("*a")
      p:close()
      local code, kids, left = text:match("^(%d+) (%d+)%s+(%d+)")
      assert.are.equal(tostring(status), code, text)
      assert.are.equal("2", kids, "two workers were running: " .. text)
      assert.are.equal("0", left, "workers left behind: " .. text)
      assert.are.equal(("tdflow: interrupted by %s: workers stopped, the sink aborted (nothing was committed)\n")
        :format(signal), H.read(dir .. "/int.err"))
      local fs = require("tensordict.fs")
      assert.is_false(fs.exists(out_path))
      for _, name in ipairs(fs.list(dir)) do
        assert.is_falsy(name:find("interrupted", 1, true), "temporary left: " .. name)
      end
    end)
  end
end)
