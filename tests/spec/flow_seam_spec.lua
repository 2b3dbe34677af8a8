-- flow_seam_spec.lua: where the flow layer meets hosts. flow.run owns the run's
-- accounting (profile = true: the source's, every step's and the sink's own time and
-- rows; tdflow only formats them); one builder reads one spec dialect (type and use
-- are one field); pipeline settings (seed, workers) reach nodes by one road, the run's
-- ctx, and batch_size by the builder.
local T = require("tensordict")
local H = require("helpers")
local flow = T.flow
local recipe = require("tensordict.host.recipe")

-- rows 1..n: x = i (float32), ok = i odd
local function data(n)
  local x = T.arange(1, n, "float32")
  return T.TensorDict({ x = x, ok = (x % 2):eq(1) }, { n })
end

-- { where, type, batches_in, rows_in, batches_out, rows_out } of a profile row
local function counts(p) return { p.where, p.type, p.batches_in, p.rows_in, p.batches_out, p.rows_out } end

describe("flow.run profile = true", function()
  it("meters the source, each step (nested ones under their paths) and the sink", function()
    local seq = flow.Seq { flow.Filter { where = "ok" }, flow.Seq { flow.Rebatch { size = 4 } } }
    local out, summary = flow.run(flow.TensorSource { td = data(20), batch_size = 5 }, seq, flow.Collect {},
      { profile = true })
    assert.are.equal(3, #out)
    local nodes = summary.nodes
    assert.are.equal(4, #nodes)
    assert.are.same({ "source", "TensorSource", 4, 20, 4, 20 }, counts(nodes[1]))
    assert.are.same({ "steps[1]", "Filter", 4, 20, 4, 10 }, counts(nodes[2]))
    assert.are.same({ "steps[2].steps[1]", "Rebatch", 4, 10, 3, 10 }, counts(nodes[3]))
    assert.are.same({ "sink", "Collect", 3, 10, 3, 10 }, counts(nodes[4]))
    for _, p in ipairs(nodes) do assert.is_true(p.seconds >= 0 and p.seconds <= summary.seconds) end
    assert.are.same({ 4, 20, 3, 10 }, { summary.batches_in, summary.rows_in, summary.batches_out, summary.rows_out })
    -- profiling ends with the run: a later run counts nothing into the steps
    assert.are.same({}, seq:profile())
  end)

  it("meters a single node and no node, and a batch of batch size [] counts one row", function()
    local _, one = flow.run(flow.TensorSource { td = data(6), batch_size = 4 }, flow.Filter { where = "ok" },
      flow.Discard {}, { profile = true })
    assert.are.same({ "source", "steps[1]", "sink" }, { one.nodes[1].where, one.nodes[2].where, one.nodes[3].where })
    assert.are.same({ "steps[1]", "Filter", 2, 6, 2, 3 }, counts(one.nodes[2]))
    local rows, none = flow.run(flow.TensorSource { td = data(3), batch_size = 3 }, flow.Unbatch {},
      flow.Discard {}, { profile = true })
    assert.are.equal(3, rows) -- three rows of batch size [], one each
    assert.are.same({ "sink", "Discard", 3, 3, 3, 3 }, counts(none.nodes[3]))
    local _, direct = flow.run(flow.TensorSource { td = data(3), batch_size = 2 }, nil, flow.Discard {},
      { profile = true })
    assert.are.equal(2, #direct.nodes)
    assert.is_nil(select(2, flow.run(flow.TensorSource { td = data(3), batch_size = 2 }, nil, flow.Discard {})).nodes)
  end)

  it("names a failing single node as without profiling", function()
    local bad = flow.Lambda { fn = function() error("boom") end }
    for _, profile in ipairs({ false, true }) do
      H.raises(function()
        flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, bad, flow.Collect {}, { profile = profile })
      end, "tensordict: Lambda: boom")
    end
    for _, profile in ipairs({ false, true }) do
      H.raises(function()
        flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, flow.Cast { dtype = "float64", keys = "nope" },
          flow.Collect {}, { profile = profile })
      end, "tensordict: Cast: key 'nope' is missing from the batch")
    end
    H.raises(function()
      flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, nil, flow.Collect {}, { profile = 1 })
    end, "run: option profile must be a boolean, got 1")
  end)
end)

describe("one spec dialect, one builder", function()
  it("flow.build takes use as well as type, and refuses a spec where they differ", function()
    local a = flow.build({ use = "Rebatch", size = 3 })
    assert.are.same({ type = "Rebatch", size = 3 }, a:spec())
    local b = flow.build({ type = "Seq", steps = { { use = "Take", n = 1 }, { type = "Rebatch", size = 2 } } })
    assert.are.same({ type = "Seq", steps = { { type = "Take", n = 1 }, { type = "Rebatch", size = 2 } } }, b:spec())
    H.raises(function() flow.build({ use = "Take", type = "Rebatch", n = 1 }) end,
      "build: use and type name different node types (\"Take\", \"Rebatch\")")
    H.raises(function() flow.build({ use = "Tkae", n = 1 }) end,
      "build: unknown node type 'Tkae' (did you mean 'Take'?)")
    H.raises(function() flow.build({ type = "Rebatch", size = 0 }) end, "Rebatch: size: expected integer >= 1, got 0")
  end)

  it("a recipe takes type as well as use, with the problem's path naming the field written", function()
    local r = recipe.load({ source = { type = "TensorSource", td = data(4), batch_size = 2 },
      steps = { { type = "Take", n = 3 } }, sink = { type = "Collect", cat = true } })
    local out = recipe.run(r)
    assert.are.equal(3, #out)
    local problems = recipe.check({ source = { type = "TensorSorce", td = data(4), batch_size = 2 },
      steps = { { use = "Take", type = "Seq", n = 3 }, { type = "Rebatch", size = 0 } } })
    assert.are.same({
      "source.type: unknown node type \"TensorSorce\" (did you mean 'TensorSource'?)",
      "steps[1]: use and type name different node types (\"Take\", \"Seq\")",
      "steps[2].size: expected integer >= 1, got 0",
    }, problems)
    assert.are.same({ 'steps: expected a list of steps, got a table' },
      recipe.check({ source = { use = "TensorSource", td = data(4), batch_size = 2 }, steps = { type = "Take" } }))
  end)
end)

describe("pipeline settings reach nodes by one road", function()
  it("a recipe's workers and seed reach Map at open through the run's ctx, not its parameters", function()
    local calls = 0 -- counts in this process only: Map runs inline with workers = 0
    flow.register_function("seam.draw", function(td) calls = calls + 1; td.r = T.rand(#td); return td end)
    local r = recipe.load({ workers = 0, seed = 5, batch_size = 2,
      source = { use = "TensorSource", td = data(6) }, steps = { { use = "Map", fn = "seam.draw" } },
      sink = { use = "Collect" } })
    local map = r.steps[1]
    assert.is_nil(map.p.workers)
    assert.are.same({ type = "Map", fn = "seam.draw" }, map:spec())
    assert.are.equal(2, r.source.p.batch_size) -- batch_size: filled in when the source is made
    local a = recipe.run(r)
    assert.are.equal(3, calls)
    -- the same seed through flow.run's option: the same draws
    local b = flow.run(flow.TensorSource { td = data(6), batch_size = 2 },
      flow.Map { fn = function(td) td.r = T.rand(#td); return td end, workers = 0 }, flow.Collect {}, { seed = 5 })
    for i = 1, 3 do assert.are.same(a[i].r:totable(), b[i].r:totable()) end
  end)
end)
