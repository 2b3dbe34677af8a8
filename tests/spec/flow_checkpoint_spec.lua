-- flow_checkpoint_spec.lua: resumable runs in flow.run (MemmapSink{checkpoint = rows},
-- flow.run{resume = true}) and the node state protocol (state/restore): every stateful
-- node and source continues exactly where a checkpoint left it, a run stopped by an
-- error resumes to the bytes of a run that never stopped, what cannot checkpoint is
-- refused with a message naming it; the state codec; the run's provenance record; the
-- seed streams' positions; the commit read from a tree without git.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")
local flow = T.flow
local checkpoint = require("tensordict.flow.checkpoint")
local about = require("tensordict.about")

local dir
before_each(function() dir = H.tmpdir() end)
after_each(function() H.rmtree(dir) end)

-- Every file of folder a equals b's (names and bytes), the provenance record aside.
local function same_folder(a, b)
  local ok = H.sh(("diff -r -x '%%provenance.json' '%s' '%s' >/dev/null"):format(a, b))
  return ok
end

-- Batches of rows base..base+n-1: x [n, 2] float32, id int64.
local function rows(base, n)
  local ids = T.arange(base, base + n - 1)
  return T.TensorDict({ id = ids, x = ids:to("float32"):view(n, 1):expand(n, 2):contiguous() * 0.5 }, { n })
end

local function ids(list)
  local out = {}
  for _, td in ipairs(list) do
    for i = 1, #td do out[#out + 1] = td.id[i] end
  end
  return out
end

-- Pushes batches through node, collecting what it emits.
local function push_all(node, batches, out)
  out = out or {}
  for _, b in ipairs(batches) do node:push(b, function(r) out[#out + 1] = r end) end
  return out
end

-- A node's state through the codec (a checkpoint folder), as a resumed run gets it.
local function through_disk(state)
  local d = dir .. "/state-" .. math.random(1e9)
  os.execute("mkdir -p '" .. d .. "'")
  checkpoint.write(d, state, { fsync = false })
  return checkpoint.read(d)
end

describe("the node state protocol", function()
  -- Node a takes the first batches, saves; a fresh node b restores and takes the rest:
  -- together they emit what one node emits over all batches.
  local function continues(make, batches, split, ctx)
    local whole = make()
    if whole.open then whole:open(ctx or { seed = 3 }) end
    local expect = push_all(whole, batches)
    if whole.flush then whole:flush(function(r) expect[#expect + 1] = r end) end

    local a = make()
    if a.open then a:open(ctx or { seed = 3 }) end
    local got = {}
    for i = 1, split do push_all(a, { batches[i] }, got) end
    if a.drain then a:drain(function(r) got[#got + 1] = r end) end
    local state = through_disk(a:state())
    local b = make()
    if b.open then b:open(ctx or { seed = 3 }) end
    b:restore(state)
    for i = split + 1, #batches do push_all(b, { batches[i] }, got) end
    if b.flush then b:flush(function(r) got[#got + 1] = r end) end
    if a.close then a:close() end
    if b.close then b:close() end
    if whole.close then whole:close() end
    assert.are.same(ids(expect), ids(got))
    assert.are.equal(#expect, #got)
    for i = 1, #expect do assert.is_true(expect[i]:equal(got[i]), "batch " .. i) end
  end

  local batches = { rows(1, 7), rows(8, 3), rows(11, 0), rows(11, 12), rows(23, 5), rows(28, 9) }

  it("Rebatch keeps the rows waiting for the next batch", function()
    for split = 1, #batches - 1 do continues(function() return flow.Rebatch { size = 4 } end, batches, split) end
  end)

  it("Shuffle keeps its buffer, the last batch's size and its generator", function()
    for split = 1, #batches - 1 do
      continues(function() return flow.Shuffle { buffer = 10 } end, batches, split)
      continues(function() return flow.Shuffle { buffer = 30, seed = 9 } end, batches, split)
    end
  end)

  it("Batch keeps the containers it holds; Take its count", function()
    local singles = {}
    for i = 1, 11 do singles[i] = rows(i, 1)[1] end
    for split = 1, 10 do
      continues(function() return flow.Batch { size = 4 } end, singles, split)
    end
    for split = 1, #batches - 1 do continues(function() return flow.Take { n = 20 } end, batches, split) end
  end)

  it("Normalize keeps its running statistics bit for bit", function()
    local data = {}
    for i = 1, 5 do data[i] = T.TensorDict({ x = T.randn(6, 3), id = T.arange(1, 6) }, { 6 }) end
    local function norm() return flow.Normalize { keys = { "x" } } end
    for split = 1, 4 do
      local whole, a = norm(), norm()
      local expect, got = {}, {}
      for i = 1, 5 do expect[i] = whole(data[i]:clone()) end
      for i = 1, split do got[i] = a(data[i]:clone()) end
      local b = norm()
      b:restore(through_disk(a:state()))
      for i = split + 1, 5 do got[i] = b(data[i]:clone()) end
      for i = 1, 5 do assert.is_true(expect[i].x:eq(got[i].x):all(), "batch " .. i) end
      assert.are.equal(whole.stats:get("x"):count(), b.stats:get("x"):count())
    end
    -- fixed statistics keep nothing
    assert.is_nil(flow.Normalize { keys = { "x" }, stats = { x = { mean = 0, var = 1 } } }:state())
  end)

  it("Map keeps its batch count (batch k's seed), inline and in workers", function()
    local function noisy(td) return T.TensorDict({ id = td.id, r = T.rand(#td) }, { #td }) end
    for _, w in ipairs({ 0, 2 }) do
      continues(function() return flow.Map { fn = noisy, workers = w } end, batches, 3, { seed = 4 })
    end
    local m = flow.Map { fn = noisy, workers = 0 }
    m:open({ seed = 4 })
    H.raises(function() m:restore({ count = 2, seed = 5 }) end,
      "tensordict: Map: restore: the checkpoint's batches were seeded from 5, this run's from 4")
  end)

  it("a Seq keeps each step's state and refuses another Seq's", function()
    local function seq() return flow.Seq { flow.Rebatch { size = 5 }, flow.Apply { keys = "x", fn = "Tensor.neg" },
      flow.Shuffle { buffer = 6 } } end
    for split = 1, #batches - 1 do continues(seq, batches, split) end
    local s = seq()
    assert.is_nil(s:state().steps[2].state)
    H.raises(function() s:restore({ steps = { {}, {} } }) end,
      "tensordict: Seq: restore: the state has 2 steps, this Seq 3")
  end)

  -- A source's pass resumed from its state gives the batches an uninterrupted pass gives.
  local function source_continues(make, ctx)
    local all = {}
    for b in make():iter(ctx) do all[#all + 1] = b end
    for split = 0, #all do
      local a = make()
      local nxt = a:iter(ctx)
      for _ = 1, split do nxt() end
      local b = make()
      b:restore(through_disk(a:state()))
      local rest = {}
      for td in b:iter(ctx) do rest[#rest + 1] = td end
      assert.are.equal(#all - split, #rest, "after " .. split .. " batches")
      for i = 1, #rest do assert.is_true(all[split + i]:equal(rest[i]), ("batch %d after %d"):format(i, split)) end
    end
  end

  it("sources continue their pass: TensorSource (shuffled, epochs), MemmapSource, ParticleSource, CsvSource", function()
    local data = rows(1, 23)
    source_continues(function() return flow.TensorSource { td = data, batch_size = 5 } end, {})
    source_continues(function() return flow.TensorSource { td = data, batch_size = 5, shuffle = true, epochs = 3,
      drop_last = true } end, { seed = 7 })
    data:memmap(dir .. "/src")
    source_continues(function() return flow.MemmapSource { path = dir .. "/src", batch_size = 6, shuffle = true } end,
      { seed = 2 })
    source_continues(function() return flow.ParticleSource { n = 17, steps = 2, batch_size = 5, seed = 1 } end, {})
    local f = io.open(dir .. "/a.csv", "w")
    f:write("a,b\n")
    for i = 1, 13 do f:write(("%d,\"%d.5\"\n"):format(i, i)) end
    f:close()
    source_continues(function() return flow.CsvSource { path = dir .. "/a.csv", batch_size = 4 } end, {})
  end)
end)

describe("the state codec", function()
  it("writes numbers JSON cannot hold, tables, tensors and TensorDicts, and reads them back", function()
    local td = rows(1, 3)
    local t = T.tensor({ 1.5, 0 / 0, math.huge }, "float64")
    local back = through_disk({ a = { 1, 2, { b = "x" } }, nan = 0 / 0, inf = -math.huge, td = td, t = t,
      flag = false, empty = {} })
    assert.are.same({ 1, 2, { b = "x" } }, back.a)
    assert.is_true(back.nan ~= back.nan)
    assert.are.equal(-math.huge, back.inf)
    assert.is_true(back.td:equal(td))
    assert.is_false(back.td:is_locked()) -- a copy in memory: the checkpoint's files go
    assert.are.equal("float64", back.t:dtype())
    assert.is_true(back.t[2] ~= back.t[2])
    assert.are.equal(math.huge, back.t[3])
    assert.is_false(back.flag)
    assert.are.same({}, back.empty)
  end)

  it("refuses what has no place in a checkpoint, naming where", function()
    H.raises(function() through_disk({ f = print }) end,
      "tensordict: checkpoint: state.f: a function has no place in a checkpoint (states hold numbers, strings, "
        .. "booleans, tables, tensors and TensorDicts)")
    H.raises(function() through_disk({ ["$td"] = 1 }) end,
      "tensordict: checkpoint: state: keys starting with '$' are reserved (got '$td')")
    H.raises(function() through_disk({ 1, 2, x = 3 }) end,
      "tensordict: checkpoint: state: a state table is a list or a table of string keys, not both")
  end)
end)

describe("flow.run with checkpoints", function()
  -- A pipeline with every kind of state. crash_at: the sink raises at its first write
  -- from that row on once it has a checkpoint (a run that dies; Map's workers make
  -- where a batch's rows land a matter of timing, the rows a sink has are not).
  local function pipeline(path, crash_at, workers, every)
    local sink = flow.MemmapSink { path = path, checkpoint = every or 200, fsync = false }
    if crash_at then
      local write = sink.write
      sink.write = function(self, td)
        if self.last_checkpoint and self:rows() >= crash_at then error("crash at row " .. self:rows()) end
        return write(self, td)
      end
    end
    return flow.ParticleSource { n = 2000, steps = 2, batch_size = 70, seed = 5 },
      flow.Seq {
        flow.Normalize { keys = { "pos" } },
        flow.Map { fn = function(td) td:set("noise", T.rand(#td)); return td end, workers = workers },
        flow.Lambda { fn = function(td) td:set("g", T.randn(#td)); return td end },
        flow.Shuffle { buffer = 150 },
        flow.Rebatch { size = 64 },
        flow.Take { n = 1900 },
      },
      sink
  end

  for _, workers in ipairs({ 0, 1, 2 }) do
    it(("a run that failed resumes to the bytes of one that never stopped (%d workers)"):format(workers), function()
      flow.run(select(1, pipeline(dir .. "/ref", nil, workers)), select(2, pipeline(dir .. "/x", nil, workers)),
        (select(3, pipeline(dir .. "/ref", nil, workers))), { seed = 3 })
      -- before the first checkpoint: nothing is kept
      local s0, n0 = pipeline(dir .. "/early", nil, workers)
      local k0 = flow.MemmapSink { path = dir .. "/early", checkpoint = 200, fsync = false }
      H.raises(function()
        flow.run(s0, n0, k0, { seed = 3, on_batch = function(sm)
          if sm.batches_in == 2 then error("tensordict: stopped early") end
        end })
      end, "stopped early")
      assert.is_nil(flow.MemmapSink.checkpoint_rows(dir .. "/early"))
      assert.are.same({ "ref" }, require("tensordict.fs").list(dir))
      for _, crash_at in ipairs({ 300, 700, 1200, 1800 }) do
        local out = dir .. "/out" .. crash_at
        local s, n, k = pipeline(out, crash_at, workers)
        H.raises(function() flow.run(s, n, k, { seed = 3 }) end, "crash at row")
        assert.is_false(H.exists(out))
        local kept = flow.MemmapSink.checkpoint_rows(out)
        assert.is_truthy(kept, "no checkpoint after a crash at row " .. crash_at)
        local rec = {}
        s, n, k = pipeline(out, nil, workers)
        local result, summary = flow.run(s, n, k, { seed = 3, resume = true, provenance = rec })
        assert.are.equal(1900, #result)
        assert.are.equal(1900, summary.rows_out)
        assert.are.equal(kept, rec.resumed[1].rows)
        assert.is_true(same_folder(dir .. "/ref", out), "bytes differ after a crash at row " .. crash_at)
        assert.is_nil(flow.MemmapSink.checkpoint_rows(out))
      end
    end)
  end

  it("resumes a run resumed before, and a sink without its own interval keeps the recorded one", function()
    local ref = dir .. "/ref"
    flow.run(select(1, pipeline(ref, nil, 0)), select(2, pipeline(ref, nil, 0)), (select(3, pipeline(ref, nil, 0))),
      { seed = 3 })
    local out = dir .. "/out"
    local s, n, k = pipeline(out, 400, 0, 100)
    pcall(flow.run, s, n, k, { seed = 3 })
    local first = flow.MemmapSink.checkpoint_rows(out)
    s, n, k = pipeline(out, 1000, 0)
    k.p.checkpoint = nil -- the interval comes from the checkpoint
    H.raises(function() flow.run(s, n, k, { seed = 3, resume = true }) end, "crash at row")
    local second = flow.MemmapSink.checkpoint_rows(out)
    assert.is_true(second > first)
    local rec = {}
    s, n, k = pipeline(out, nil, 0)
    flow.run(s, n, k, { seed = 3, resume = true, provenance = rec })
    assert.are.equal(2, #rec.resumed)
    assert.are.equal(first, rec.resumed[1].rows)
    assert.are.equal(second, rec.resumed[2].rows)
    assert.is_true(same_folder(ref, out))
  end)

  it("refuses to resume another pipeline, another seed, or nothing", function()
    local out = dir .. "/out"
    local s, n, k = pipeline(out, 500)
    pcall(flow.run, s, n, k, { seed = 3 })
    s, n, k = pipeline(out)
    H.raises(function() flow.run(s, n, k, { seed = 4, resume = true }) end,
      "tensordict: run: resume: the checkpoint was made with seed 3, this run has seed 4")
    H.raises(function()
      flow.run(s, flow.Seq { flow.Normalize { keys = { "pos" } } }, k, { seed = 3, resume = true })
    end, "tensordict: run: resume: the checkpoint was made by another pipeline: it has steps[2] Map where this "
      .. "one has sink MemmapSink")
    H.raises(function()
      flow.run(s, n, k, { seed = 3, resume = true, on_resume = function() error("tensordict: not this run") end })
    end, "not this run")
    assert.is_truthy(flow.MemmapSink.checkpoint_rows(out)) -- refusals keep it
    H.raises(function() flow.run(s, n, flow.MemmapSink { path = dir .. "/none" }, { seed = 3, resume = true }) end,
      "tensordict: sink (MemmapSink): '" .. dir .. "/none' has no checkpoint to resume")
    H.raises(function() flow.run(s, n, flow.Collect {}, { resume = true }) end,
      "tensordict: run: resume: the sink (Collect) keeps no checkpoint (MemmapSink{checkpoint = rows} does)")
  end)

  it("refuses what cannot checkpoint, naming each part", function()
    local Mystery = flow.define("spec.Mystery", { doc = "keeps a count", stateful = true })
    function Mystery:forward(td) return td end
    local Holder = flow.define("spec.Holder", { doc = "holds rows" })
    function Holder:push(td, emit) emit(td) end
    function Holder:flush() end
    local src = { iter = function() return function() return nil end end }
    H.raises(function()
      flow.run(src, flow.Seq { Mystery {}, flow.Apply { keys = "x", fn = "Tensor.neg" }, Holder {} },
        flow.MemmapSink { path = dir .. "/o", checkpoint = 5 })
    end, "tensordict: run: the run cannot checkpoint: source (?): it has no state()/restore() to record its "
      .. "position; steps[1] (spec.Mystery): it keeps state from batch to batch and has no state()/restore() "
      .. "to save it; steps[3] (spec.Holder): it holds rows until the end of the stream (it has flush) and has "
      .. "no state()/restore() to save them")
    flow.registry["spec.Mystery"], flow.registry["spec.Holder"] = nil, nil
  end)

  it("keeps the checkpoint after an error and replaces it on a fresh run only with existsok", function()
    local out = dir .. "/out"
    local s, n, k = pipeline(out, 500)
    pcall(flow.run, s, n, k, { seed = 3 })
    local rows_kept = flow.MemmapSink.checkpoint_rows(out)
    assert.is_true(rows_kept >= 200)
    assert.are.same({ ("path '%s' has a checkpoint of an unfinished run (%d rows): continue it with --resume, "
      .. "or start over with --set sink.existsok=true"):format(out, rows_kept) }, k:preflight())
    assert.is_nil(k:preflight({ resume = true }))
    s, n, k = pipeline(out)
    H.raises(function() flow.run(s, n, k, { seed = 3 }) end,
      ("tensordict: sink (MemmapSink): '%s' has a checkpoint of an unfinished append (%d rows): resume it, or "
        .. "pass existsok to start over"):format(out, rows_kept))
    s, n = pipeline(out)
    flow.run(s, n, flow.MemmapSink { path = out, existsok = true }, { seed = 3 })
    assert.is_nil(flow.MemmapSink.checkpoint_rows(out))
    assert.are.same({ ("path '%s' has no checkpoint to resume"):format(out),
      ("path '%s' exists (pass existsok = true to replace it, e.g. --set sink.existsok=true)"):format(out) },
      { flow.MemmapSink { path = out }:preflight({ resume = true })[2],
        flow.MemmapSink { path = out }:preflight({ resume = true })[1] })
    H.raises(function() flow.MemmapSink { path = out, checkpoint = 0 } end,
      "tensordict: MemmapSink: checkpoint: expected integer >= 1, got 0")
    H.raises(function() flow.MemmapSink { path = out }:set_checkpoint(2.5) end,
      "tensordict: MemmapSink: checkpoint: expected an integer >= 1 (rows between checkpoints), got 2.5")
  end)
end)

describe("the provenance record of flow.run", function()
  local ISO = "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$"

  it("records what made the run, commits it with the output, and Python's loader ignores it", function()
    local rec = { note = "mine" }
    local out = dir .. "/out"
    flow.run(flow.TensorSource { td = rows(1, 10), batch_size = 4 }, flow.Rebatch { size = 3 },
      flow.MemmapSink { path = out }, { seed = 6, workers = 1, provenance = rec, profile = true })
    assert.are.equal("mine", rec.note)
    assert.are.equal("tensordict.provenance/1", rec.format)
    assert.are.equal("ok", rec.status)
    assert.is_nil(rec.error)
    assert.are.equal(6, rec.seed)
    assert.are.equal(1, rec.workers)
    assert.are.equal(T.version, rec.library.version)
    assert.are.equal(T.abi_version, rec.library.abi)
    assert.are.equal(about.tree_commit("."), rec.library.commit)
    assert.are.equal(about.host().name, rec.host.name)
    assert.is_truthy(rec.started:match(ISO))
    assert.is_truthy(rec.finished:match(ISO))
    assert.is_true(rec.finished >= rec.started)
    assert.are.same({ 10, 10, 3, 4 }, { rec.rows_in, rec.rows_out, rec.batches_in, rec.batches_out })
    assert.are.same({ "source", "steps[1]", "sink" }, { rec.nodes[1].where, rec.nodes[2].where, rec.nodes[3].where })
    assert.are.same({ 10, 10 }, { rec.nodes[2].rows_in, rec.nodes[2].rows_out })
    -- committed with the rows
    local saved = json.decode(H.read(out .. "/%provenance.json"))
    assert.are.equal("mine", saved.note)
    assert.are.equal("ok", saved.status)
    assert.are.equal(rec.started, saved.started)
    -- Python's load_memmap reads only what meta.json names (tensordict/_td.py,
    -- _load_memmap: the entries of meta.json, then the folders they name): no entry
    -- names the record, and no key's file name can be "%provenance.json"
    assert.is_nil(H.read(out .. "/meta.json"):find("provenance", 1, true))
    assert.are.equal(10, #T.load_memmap(out))
  end)

  it("records a failed run's error and an interrupted run's status", function()
    local rec = {}
    H.raises(function()
      flow.run(flow.TensorSource { td = rows(1, 10), batch_size = 4 },
        flow.Lambda { fn = function(td) if td.id[1] > 4 then error("bad batch") end return td end },
        flow.MemmapSink { path = dir .. "/out" }, { provenance = rec })
    end, "bad batch")
    assert.are.equal("failed", rec.status)
    assert.is_truthy(rec.error:find("tensordict: Lambda: bad batch", 1, true), rec.error)
    assert.are.same({ 8, 4 }, { rec.rows_in, rec.rows_out })
    assert.is_false(H.exists(dir .. "/out"))
    rec = {}
    pcall(flow.run, flow.TensorSource { td = rows(1, 10), batch_size = 4 }, nil, flow.Discard {},
      { provenance = rec, on_batch = function() error({ interrupted = true }, 0) end })
    assert.are.equal("interrupted", rec.status)
    assert.are.equal("interrupted", rec.error)
  end)
end)

describe("seed streams", function()
  it("T.get_rng_state and Generator:get_state give positions that set_state continues exactly", function()
    T.manual_seed(11)
    T.rand(5)
    local state = T.get_rng_state()
    assert.are.equal("11:2", state)
    local a = T.randn(9)
    T.manual_seed(0)
    T.set_rng_state(state)
    assert.is_true(T.randn(9):eq(a):all())
    local g = T.Generator(2 ^ 40)
    T.rand(3, g)
    local gs = g:get_state()
    local b = T.randperm(20, g)
    assert.are.equal(g, g:set_state(gs))
    assert.is_true(T.randperm(20, g):eq(b):all())
    g:set_state("18446744073709551615:7")
    assert.are.equal("18446744073709551615:7", g:get_state())
    H.raises(function() T.set_rng_state("18446744073709551616:0") end,
      "tensordict: set_rng_state: '18446744073709551616:0' is past 2^64 - 1")
    H.raises(function() g:set_state(5) end,
      "tensordict: Generator:set_state: expected a state from get_state() (\"seed:offset\"), got 5")
  end)
end)

describe("the commit of a tree, read without git", function()
  local function git(files)
    for path, text in pairs(files) do
      os.execute(("mkdir -p '%s'"):format((dir .. "/" .. path):match("^(.*)/[^/]*$")))
      H.write(dir .. "/" .. path, text)
    end
  end
  local A, B = ("a"):rep(40), ("b"):rep(40)

  it("follows HEAD to a loose ref, packed-refs, a detached HEAD and a worktree's .git file", function()
    git({ ["t1/.git/HEAD"] = "ref: refs/heads/main\n", ["t1/.git/refs/heads/main"] = A .. "\n" })
    assert.are.same({ A, "main" }, { about.tree_commit(dir .. "/t1") })
    git({ ["t2/.git/HEAD"] = "ref: refs/heads/dev\n",
      ["t2/.git/packed-refs"] = "# pack-refs with: peeled\n" .. A .. " refs/heads/main\n" .. B .. " refs/heads/dev\n" })
    assert.are.same({ B, "dev" }, { about.tree_commit(dir .. "/t2") })
    git({ ["t3/.git/HEAD"] = B .. "\n" })
    assert.are.same({ B }, { about.tree_commit(dir .. "/t3") })
    git({ ["main/.git/refs/heads/wt"] = A .. "\n", ["main/.git/worktrees/wt/HEAD"] = "ref: refs/heads/wt\n",
      ["main/.git/worktrees/wt/commondir"] = "../..\n",
      ["wt/.git"] = "gitdir: " .. dir .. "/main/.git/worktrees/wt\n" })
    assert.are.same({ A, "wt" }, { about.tree_commit(dir .. "/wt") })
    assert.is_nil(about.tree_commit(dir .. "/none"))
  end)
end)
