-- tdflow_provenance_spec.lua: what tdflow records of a run and what it does with it, run
-- as a user runs it (scripts/tdflow in a child process): the %provenance.json committed
-- with the output and the same record in --report; tdflow inspect showing it; tdflow
-- rerun (--verify, --into, --set over it, and its refusals); --checkpoint and --resume
-- (a kill, a resume, a resume refused for another recipe, the messages).
local json = require("tensordict.json")
local about = require("tensordict.about")
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
  return text:gsub("exit %d+%s*$", ""), code
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

local function record(path) return json.decode(H.read(path .. "/%provenance.json")) end

local RECIPE = write("recipe.json", ([[
{"seed": 3, "batch_size": 64, "workers": 0,
 "vars": {"out": "%s/out", "size": 50},
 "source": {"use": "ParticleSource", "n": 3000, "steps": 3},
 "steps": [{"use": "Normalize", "keys": ["pos"]},
           {"use": "Shuffle", "buffer": 200},
           {"use": "Rebatch", "size": "$vars.size"}],
 "sink": {"use": "MemmapSink", "path": "${vars.out}", "existsok": true}}
]]):format(dir))

describe("tdflow run records what made the run", function()
  it("commits %provenance.json with the output and puts the record in --report", function()
    expect(("run %s -q --set steps.3.size=40 --workers 1 --report %s/report.json"):format(RECIPE, dir), 0)
    local rec = record(dir .. "/out")
    assert.are.same({ "tdflow", "run", RECIPE, "-q", "--set", "steps.3.size=40", "--workers", "1", "--report",
      dir .. "/report.json" }, rec.command)
    assert.are.equal(RECIPE, rec.recipe_file)
    assert.are.equal("$vars.size", rec.recipe.steps[3].size)        -- as read
    assert.are.equal("${vars.out}", rec.recipe.sink.path)
    assert.are.same({ "steps.3.size=40" }, rec.overrides)             -- as given
    assert.are.equal(40, rec.effective.steps[3].size)                 -- after --set and $vars
    assert.are.equal(dir .. "/out", rec.effective.sink.path)
    assert.are.equal(1, rec.effective.workers)
    assert.are.same({ workers = 1 }, rec.options)
    assert.are.same({ 3, 1, "ok" }, { rec.seed, rec.workers, rec.status })
    assert.are.equal(about.tree_commit("."), rec.library.commit)
    assert.are.equal(about.host().name, rec.host.name)
    assert.are.same({ 3000, 3000 }, { rec.rows_in, rec.rows_out })
    assert.are.same({ "source", "steps[1]", "steps[2]", "steps[3]", "sink" },
      { rec.nodes[1].where, rec.nodes[2].where, rec.nodes[3].where, rec.nodes[4].where, rec.nodes[5].where })
    local report = json.decode(H.read(dir .. "/report.json"))
    assert.are.equal("ok", report.status)
    assert.are.same(rec.recipe, report.provenance.recipe)
    assert.are.same(rec.overrides, report.provenance.overrides)
    assert.are.equal(rec.started, report.provenance.started)
  end)

  it("shows it in tdflow inspect", function()
    local text = expect("inspect " .. dir .. "/out", 0, "provenance:\n",
      ("  command   tdflow run %s -q --set steps.3.size=40 --workers 1 --report %s/report.json\n"):format(RECIPE, dir),
      "  recipe    " .. RECIPE .. "\n", "  overrides steps.3.size=40\n", "  seed 3, workers 1\n",
      ("  library   tensordict %s (ABI %d), commit %s"):format(about.library().version, about.library().abi,
        about.tree_commit(".")),
      "  rows      3,000 in, 3,000 out\n")
    assert.is_truthy(text:find("\n  ran       %d%d%d%d%-[^\n]+ %-> [^\n]+, ok %(%d+%.%d%d%d s%)\n"), text)
    assert.is_truthy(text:find("    steps[3]             Rebatch    ", 1, true), text)
  end)
end)

describe("the report of a failed run", function()
  it("is made from its provenance record, with the status and the error", function()
    local T = require("tensordict")
    local report = require("tensordict.host.report")
    local rec = { recipe_file = "r.json" }
    pcall(T.flow.run, T.flow.TensorSource { td = T.TensorDict({ x = T.zeros(10) }, { 10 }), batch_size = 4 },
      T.flow.Lambda { fn = function(td) if #td < 4 then error("short batch") end return td end },
      T.flow.Discard {}, { provenance = rec, profile = true, seed = 2 })
    local rep = report.of_record(rec)
    assert.are.equal("failed", rep.status)
    assert.is_truthy(rep.error:find("tensordict: Lambda: short batch", 1, true), rep.error)
    assert.are.same({ 10, 8, 2, "r.json" }, { rep.rows_in, rep.rows_out, rep.seed, rep.recipe })
    assert.are.same({ "source", "steps[1]", "sink" }, { rep.nodes[1].where, rep.nodes[2].where, rep.nodes[3].where })
    local doc = json.decode(report.json(rep))
    assert.are.equal("failed", doc.provenance.status)
    assert.are.equal(rep.error, doc.error)
  end)
end)

describe("tdflow rerun", function()
  it("reruns the recorded recipe with its overrides and, with --verify, finds the same bytes", function()
    local text = expect("rerun " .. dir .. "/out --verify -q", 0)
    assert.are.equal(("tdflow: rerun of %s/out: identical (6 files, 281.8 KiB compared byte for byte)\n"):format(dir),
      text)
    assert.is_falsy(H.read(dir .. "/.out.rerun-1"))
    for _, name in ipairs(require("tensordict.fs").list(dir)) do
      assert.is_nil(name:find("rerun", 1, true), "left behind: " .. name)
    end
    expect(("rerun %s/out -q --into %s/again"):format(dir, dir), 0)
    local rec = record(dir .. "/again")
    assert.are.same({ "steps.3.size=40", ('sink.path="%s/again"'):format(dir) }, rec.overrides)
    assert.are.equal(dir .. "/out", rec.rerun_of)
    assert.are.equal(RECIPE, rec.recipe_file)
    assert.are.equal(1, rec.workers)
    assert.is_true(H.sh(("diff -r -x '%%provenance.json' %s/out %s/again"):format(dir, dir)))
    -- --set over it: other bytes, named, and the rerun's output kept to look at
    text = expect(("rerun %s/out --verify -q --set seed=9"):format(dir), 1)
    local kept = text:match("the rerun's output is at (%S+)%)")
    assert.are.equal(("tdflow: rerun of %s/out: the bytes differ: energy.memmap: the first difference is at byte "
      .. "0 of 36,000 (the rerun's output is at %s)\n"):format(dir, kept), text)
    assert.is_true(H.exists(kept))
    H.rmtree(kept)
    -- without --verify the output goes beside, as OUTPUT.rerun
    expect(("rerun %s/out -q"):format(dir), 0)
    assert.are.equal(dir .. "/out", record(dir .. "/out.rerun").rerun_of)
  end)

  it("says what is wrong with what it was given", function()
    os.execute(("mkdir -p '%s/plain'"):format(dir))
    write("plain/meta.json", "{}")
    expect(("rerun %s/plain"):format(dir), 2, ("tdflow: rerun: '%s/plain' has no provenance record "
      .. "(%%provenance.json): it was not written by tdflow run"):format(dir))
    expect(("rerun %s/nothing"):format(dir), 2, ("tdflow: rerun: '%s/nothing' is not a folder"):format(dir))
    local lua = write("fn.lua", ([[
local T = require("tensordict")
return { batch_size = 10, source = { use = "ParticleSource", n = 20, steps = 1 },
  steps = { { use = "Lambda", fn = function(td) return td end } },
  sink = { use = "MemmapSink", path = %q } }
]]):format(dir .. "/fnout"))
    expect("run " .. lua .. " -q", 0)
    assert.are.same({ "steps[1].fn" }, record(dir .. "/fnout").unplain)
    expect(("rerun %s/fnout"):format(dir), 2, "tdflow: rerun: the recorded recipe holds values with no plain form "
      .. "at steps[1].fn (a function given without a name, a TensorDict): register functions with "
      .. "flow.register_function and refer to them by name, or save TensorDicts and read them with MemmapSource")
  end)
end)

describe("tdflow run --checkpoint and --resume", function()
  local CK = write("ck.json", ([[
{"seed": 1, "batch_size": 500, "workers": 2,
 "source": {"use": "ParticleSource", "n": 200000, "steps": 4},
 "steps": [{"use": "Normalize", "keys": ["pos"]}, {"use": "Map", "fn": "physics.features"},
           {"use": "Shuffle", "buffer": 3000}, {"use": "Rebatch", "size": 700}],
 "sink": {"use": "MemmapSink", "path": "%s/ck", "fsync": false}}
]]):format(dir))
  local out = dir .. "/ck"
  local function rows() return require("tensordict").flow.MemmapSink.checkpoint_rows(out) end

  -- Starts `tdflow run CK args` and SIGKILLs it once its checkpoint holds at least
  -- min_rows rows (then waits 0..wait_us more, for a kill anywhere after it).
  local function kill_after_checkpoint(args, min_rows, wait_us)
    local ffi = require("ffi")
    pcall(ffi.cdef, "int kill(int pid, int sig); int usleep(unsigned int usec);")
    local p = io.popen(("scripts/tdflow run %s %s >/dev/null 2>&1 & echo $!; wait"):format(CK, args))
    local pid = tonumber(p:read("*l"))
    for _ = 1, 6000 do -- 60 s at most
      local n = rows()
      if (n and n >= min_rows) or H.exists(out) then break end
      ffi.C.usleep(10000)
    end
    ffi.C.usleep(math.random(0, wait_us))
    ffi.C.kill(pid, 9)
    p:close()
  end

  it("continues a killed run from its last checkpoint to the bytes of a whole run", function()
    expect(("run %s -q --set 'sink.path=\"%s/whole\"'"):format(CK, dir), 0)
    local resumed = 0
    for round = 1, 4 do
      H.rmtree(out)
      kill_after_checkpoint("-q --checkpoint 20000", 20000 * round, 100000)
      local kept = rows()
      if kept then
        resumed = resumed + 1
        expect("inspect " .. out, 1, ("tdflow: inspect: %s: no such file or folder (a checkpoint of an unfinished "
          .. "run (%s rows) is beside it: tdflow run RECIPE --resume continues it)"):format(out,
          require("tensordict.host.progress").grouped(kept)))
        expect(("run %s -q --set sink.existsok=false"):format(CK), 2, ("  sink (MemmapSink): path '%s' has a "
          .. "checkpoint of an unfinished run (%d rows): continue it with --resume, or start over with --set "
          .. "sink.existsok=true"):format(out, kept))
        expect(("run %s -q --resume --workers 1"):format(CK), 0)
        local rec = record(out)
        assert.are.equal(kept, rec.resumed[1].rows)
        assert.are.equal("ok", rec.status)
      elseif not H.exists(out) then
        expect(("run %s -q"):format(CK), 0)
      end
      assert.is_true(H.sh(("diff -r -x '%%provenance.json' %s/whole %s"):format(dir, out)))
    end
    assert.is_true(resumed >= 1, "no kill left a checkpoint")
  end)

  it("refuses a resume of another recipe and keeps the checkpoint; says when there is none", function()
    H.rmtree(out)
    local text, code = tdflow(("run %s -q --checkpoint 20000 --set 'steps.4.size=700' --set sink.existsok=true "
      .. "--report %s/r.json"):format(CK, dir))
    assert.are.equal(0, code, text)
    expect(("run %s -q --resume"):format(CK), 2, ("  sink (MemmapSink): path '%s' has no checkpoint to resume")
      :format(out))
    H.rmtree(out)
    kill_after_checkpoint("-q --checkpoint 20000", 20000, 0)
    local kept = rows()
    assert.is_truthy(kept, "the run ended before its first checkpoint")
    expect(("run %s -q --resume --set steps.4.size=701"):format(CK), 1,
      "tdflow: resume: the recipe differs from the checkpointed run's at steps[4].size: 700 there, 701 here "
        .. "(run the recipe of the checkpoint, or start over with existsok)\n",
      ("tdflow: the last checkpoint (%s rows) is kept beside '%s': run again with --resume to continue")
        :format(require("tensordict.host.progress").grouped(kept), out))
    expect(("run %s -q --resume --seed 5"):format(CK), 1,
      "tdflow: run: resume: the checkpoint was made with seed 1, this run has seed 5")
    assert.are.equal(kept, rows())
    expect(("run %s -q --resume"):format(CK), 0)
  end)

  it("refuses --checkpoint for a sink that keeps none", function()
    local d = write("discard.json", '{"batch_size": 4, "source": {"use": "ParticleSource", "n": 8, "steps": 1}}')
    expect("run " .. d .. " --checkpoint 5", 2, "tdflow: " .. d .. ": 1 problem:\n"
      .. "  --checkpoint: the sink (Discard) keeps no checkpoints; MemmapSink does")
    expect("run " .. d .. " --checkpoint 0", 2, "tdflow: --checkpoint expects a positive integer, got '0'")
  end)
end)
