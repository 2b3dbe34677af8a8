-- flow_core_spec.lua: the node protocol (tensordict.flow): parameters, the registry and
-- spec round trips, Seq's key derivation and error positions, flow.run's driving,
-- closing and aborting, and the built-in apply, batching, masking and in-memory nodes.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")

-- rows 1..n: x = [i, 10 i] float32, y = i int64, ok = i odd, nested n.z = -i, s = "tag"
local function data(n)
  local x = T.zeros(n, 2)
  if n > 0 then
    x[{ {}, 1 }] = T.arange(1, n, "float32")
    x[{ {}, 2 }] = T.arange(1, n, "float32") * 10
  end
  local y = n > 0 and T.arange(1, n) or T.zeros({ 0 }, "int64")
  return T.TensorDict({ x = x, y = y, ok = (y % 2):eq(1), n = { z = -y:to("float32") }, s = "tag" }, { n })
end

local function run(source, node, opts)
  return flow.run(source, node, flow.Collect {}, opts)
end

-- Row counts and every y of a list of batches; { a, ..., b }.
local sizes, range = H.sizes, H.range
local function ys(list) return H.column(list, "y") end

local double = flow.register_function("spec.double", function(t) return t * 2 end)

describe("flow: the node protocol", function()
  it("is reached as require('tensordict.flow') and T.flow, with a protocol version", function()
    assert.are.equal(flow, T.flow)
    assert.are.equal(1, flow.PROTOCOL_VERSION)
    for _, name in ipairs({ "Apply", "Module", "Lambda", "Select", "Exclude", "Rename", "Cast", "Seq",
      "Batch", "Unbatch", "Rebatch", "Shuffle", "Take", "Filter", "MaskedFill", "Where",
      "TensorSource", "Collect" }) do
      assert.is_truthy(flow.registry[name], name)
      assert.are.equal(flow.registry[name], flow[name])
    end
  end)

  it("makes callable nodes with in_keys and out_keys that write into the batch", function()
    local node = flow.Apply { keys = { "x" }, fn = double, out_keys = { "x2" } }
    assert.is_true(flow.is_node(node))
    assert.are.same({ "x" }, node.in_keys)
    assert.are.same({ "x2" }, node.out_keys)
    local td = data(3)
    local out = node(td)
    assert.are.equal(td, out)
    assert.are.same({ { 2, 20 }, { 4, 40 }, { 6, 60 } }, out.x2:totable())
    assert.are.same({ { 1, 10 }, { 2, 20 }, { 3, 30 } }, out.x:totable())
  end)

  it("checks every parameter and names all the problems at once", function()
    H.raises(function() flow.Apply { keys = "x", fnn = double } end,
      "Apply: fnn: unknown parameter (did you mean 'fn'?) (parameters: keys, fn, out_keys)",
      "fn: required (a function or the name of a registered function)")
    H.raises(function() flow.Rebatch { size = "x" } end, "Rebatch: size: expected an integer, got \"x\"")
    H.raises(function() flow.Rebatch { size = 0 } end, "Rebatch: size: expected integer >= 1, got 0")
    H.raises(function() flow.Apply { keys = { 1 }, fn = double } end,
      "Apply: keys: expected a list of keys (strings or arrays of strings), got a table")
    H.raises(function() flow.Apply { keys = "x", fn = "no.such.fn" } end,
      "Apply: fn: expected a function or the name of a registered function, got \"no.such.fn\" (unknown function)")
    H.raises(function() flow.Cast { dtype = "float17" } end, "Cast: dtype: expected a dtype name (")
    H.raises(function() flow.Apply(3) end, "Apply: expected a table of parameters, got 3")
    H.raises(function() flow.Apply { keys = { "a", "b" }, out_keys = { "c" }, fn = double } end,
      "Apply: keys has 2 keys but out_keys has 1; they pair up one to one")
  end)

  it("round-trips specs through the registry: flow.build(node:spec()) behaves the same", function()
    local nodes = {
      flow.Apply { keys = { { "n", "z" } }, fn = "spec.double" },
      flow.Module { fn = "spec.double", in_keys = "x", out_keys = "x2" },
      flow.Select { keys = { "x", "y", "ok" } },
      flow.Exclude { keys = "s" },
      flow.Rename { keys = { y = "label" } },
      flow.Cast { dtype = "float64", keys = { "x" } },
      flow.Filter { where = "ok" },
      flow.MaskedFill { mask = "ok", value = -1, keys = { "x" } },
      flow.Where { cond = "ok", keys = { "x" }, other = 5 },
      flow.Seq { flow.Take { n = 4 }, flow.Rebatch { size = 3 }, selected_out_keys = {} },
    }
    for _, node in ipairs(nodes) do
      local spec = node:spec()
      assert.are.equal("string", type(spec.type))
      local copy = flow.build(spec)
      assert.are.same(spec, copy:spec())
      assert.are.same(node.in_keys, copy.in_keys)
      assert.are.same(node.out_keys, copy.out_keys)
      local a = run(flow.TensorSource { td = data(7), batch_size = 2 }, node)
      local b = run(flow.TensorSource { td = data(7), batch_size = 2 }, copy)
      assert.are.equal(#a, #b)
      for i = 1, #a do assert.is_true(a[i]:equal(b[i]), spec.type) end
    end
    local seq = flow.Seq { flow.Apply { keys = "x", fn = "spec.double" }, flow.Rebatch { size = 2 } }
    assert.are.same({ type = "Seq", steps = { { type = "Apply", keys = { "x" }, fn = "spec.double" },
      { type = "Rebatch", size = 2 } } }, seq:spec())
  end)

  it("refuses specs of unnamed functions and in-memory data, and unknown types", function()
    H.raises(function() flow.Apply { keys = "x", fn = function(t) return t end }:spec() end,
      "Apply: spec: fn is a function without a name; register it with flow.register_function(name, fn)")
    H.raises(function() flow.TensorSource { td = data(2), batch_size = 1 }:spec() end,
      "TensorSource: spec: td is an in-memory TensorDict, which has no plain form")
    H.raises(function() flow.build({ type = "Aply", keys = "x" }) end,
      "build: unknown node type 'Aply' (did you mean 'Apply'?)")
    H.raises(function() flow.build({ keys = "x" }) end, "build: the spec has no 'type' string (got nil)")
    H.raises(function() flow.build(3) end, "build: expected a spec table with a 'type' field, got 3")
  end)

  it("resolves Tensor.<method> names and registers plugin types", function()
    local node = flow.Apply { keys = "x", fn = "Tensor.neg" }
    assert.are.same({ { -1, -10 } }, node(data(1)).x:totable())
    assert.are.equal("Tensor.neg", node:spec().fn)
    local Scale = flow.define("SpecScale", {
      doc = "multiplies x", params = { { "by", "number", default = 2 } },
    })
    function Scale:init() self.in_keys, self.out_keys = { "x" }, { "x" } end
    function Scale:forward(td) td.x = td.x * self.p.by; return td end
    local built = flow.build({ type = "SpecScale", by = 3 })
    assert.are.same({ { 3, 30 } }, built(data(1)).x:totable())
    assert.are.equal(Scale, flow.SpecScale)
    H.raises(function() flow.register("bad name", function() end) end, "register: a node type name is an identifier")
  end)
end)

describe("flow.Seq", function()
  it("derives in_keys (needed from outside) and out_keys (added), with nested paths", function()
    local seq = flow.Seq {
      flow.Apply { keys = "x", fn = double, out_keys = "x2" },
      flow.Module { fn = function(a, b) return a:sum(2) + b end, in_keys = { "x2", { "n", "z" } }, out_keys = "score" },
      flow.Rename { keys = { score = "total" } },
      flow.Apply { keys = { { "n", "z" } }, fn = double, out_keys = { { "m", "w" } } },
      flow.Exclude { keys = "x2" },
    }
    assert.are.same({ "x", { "n", "z" } }, seq.in_keys)
    assert.are.same({ "total", { "m", "w" } }, seq.out_keys)
    local out = seq(data(2))
    assert.are.same({ 21, 42 }, out.total:totable())
    assert.are.same({ -2, -4 }, out:get({ "m", "w" }):totable())
    assert.is_nil(out:get("x2"))
  end)

  it("keeps only selected_out_keys of what its steps add", function()
    local seq = flow.Seq {
      flow.Apply { keys = "x", fn = double, out_keys = "tmp" },
      flow.Module { fn = function(t) return t:sum(2) end, in_keys = "tmp", out_keys = "score" },
      selected_out_keys = { "score" },
    }
    assert.are.same({ "score" }, seq.out_keys)
    local out = seq(data(2))
    assert.are.same({ 22, 44 }, out.score:totable())
    assert.is_nil(out:get("tmp"))
    assert.is_truthy(out:get("x"))
  end)

  it("checks key flow against what a source provides", function()
    local seq = flow.Seq {
      flow.Select { keys = { "x" } },
      flow.Apply { keys = "y", fn = double },
      flow.Seq { flow.Apply { keys = "nope", fn = double } },
    }
    local problems = seq:check_keys(flow.KeySet.new({ "x", "y" }))
    assert.are.equal(2, #problems)
    assert.are.equal("steps[2]", problems[1].where)
    assert.are.equal("y", problems[1].key)
    assert.are.equal("steps[3].steps[1]", problems[2].where)
    assert.are.equal("nope", problems[2].key)
  end)

  it("names the failing step by its position and type, nested too", function()
    local seq = flow.Seq {
      flow.Apply { keys = "x", fn = double },
      flow.Seq { flow.Cast { dtype = "float64" }, flow.Apply { keys = "missing", fn = double } },
    }
    local err = H.raises(function() seq(data(2)) end,
      "tensordict: steps[2].steps[2] (Apply): key 'missing' is missing from the batch (its keys: ")
    assert.is_truthy(err:find("'x'", 1, true))
    H.raises(function()
      run(flow.TensorSource { td = data(3), batch_size = 2 }, seq)
    end, "steps[2].steps[2] (Apply): key 'missing' is missing")
    H.raises(function()
      run(flow.TensorSource { td = data(3), batch_size = 2 },
        flow.Seq { flow.Apply { keys = "x", fn = function() error("boom") end } })
    end, "tensordict: steps[1] (Apply): ", "boom")
  end)

  it("returns every batch a stream step emits for a direct call", function()
    local seq = flow.Seq { flow.Unbatch {}, flow.Batch { size = 2 } }
    local a, b, c = seq(data(5))
    assert.are.same({ 2 }, a:batch_size())
    assert.are.same({ 3, 4 }, b.y:totable())
    assert.is_nil(c)
  end)
end)

describe("flow.run", function()
  it("drives source, node and sink and returns the sink's result and a summary", function()
    local out, summary = flow.run(flow.TensorSource { td = data(10), batch_size = 4 },
      flow.Seq { flow.Filter { where = "ok" } }, flow.Collect { cat = true })
    assert.are.same({ 1, 3, 5, 7, 9 }, out.y:totable())
    assert.are.equal(3, summary.batches_in)
    assert.are.equal(10, summary.rows_in)
    assert.are.equal(3, summary.batches_out)
    assert.are.equal(5, summary.rows_out)
    assert.is_true(summary.seconds >= 0)
  end)

  it("accepts no node, a list of nodes, and calls on_batch", function()
    local seen = 0
    local list = flow.run(flow.TensorSource { td = data(5), batch_size = 2 }, nil, flow.Collect {},
      { on_batch = function(s) seen = s.rows_in end })
    assert.are.same({ 2, 2, 1 }, sizes(list))
    assert.are.equal(5, seen)
    local out = flow.run(flow.TensorSource { td = data(5), batch_size = 2 },
      { flow.Unbatch {}, flow.Batch { size = 3 } }, flow.Collect {})
    assert.are.same({ 3, 2 }, sizes(out))
  end)

  it("opens and closes every node and aborts the sink on an error", function()
    local log = {}
    local Probe = flow.define("SpecProbe", { params = { { "fail_at", "integer", default = 0 } } })
    function Probe:open(ctx) log[#log + 1] = "open " .. ctx.seed end
    function Probe:close() log[#log + 1] = "close" end
    function Probe:forward(td)
      self.n = (self.n or 0) + 1
      if self.n == self.p.fail_at then self:fail("failing at batch %d", self.n) end
      return td
    end
    local sink = flow.Collect {}
    local aborted = false
    local abort = sink.abort
    function sink:abort() aborted = true; return abort(self) end
    H.raises(function()
      flow.run(flow.TensorSource { td = data(6), batch_size = 2 },
        flow.Seq { flow.Apply { keys = "x", fn = double }, Probe { fail_at = 2 } }, sink, { seed = 7 })
    end, "tensordict: steps[2] (SpecProbe): failing at batch 2")
    assert.are.same({ "open 7", "close" }, log)
    assert.is_true(aborted)
    assert.are.same({}, sink.batches)
  end)

  it("names the source or the sink when they fail, and checks its arguments", function()
    local bad_source = { iter = function() return function() error("disk gone") end end }
    H.raises(function() run(bad_source, nil) end, "tensordict: source: ", "disk gone")
    local sink = flow.Collect {}
    function sink:write() self:fail("full") end
    H.raises(function() flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, nil, sink) end,
      "tensordict: sink (Collect): full")
    H.raises(function() flow.run({}, nil, flow.Collect {}) end, "run: the source has no iter method")
    H.raises(function() flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, 3, flow.Collect {}) end,
      "run: the node must be a flow node (or a list of nodes), got 3")
    H.raises(function() flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, nil, {}) end,
      "run: the sink has no write method")
    H.raises(function()
      flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, nil, flow.Collect {}, { sed = 1 })
    end, "run: unknown option 'sed'")
    H.raises(function()
      flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, nil, flow.Collect {}, { on_batch = 3 })
    end, "run: option on_batch must be a function, got 3")
  end)

  it("seeds the global generator with the pipeline seed", function()
    local draw = flow.Lambda { fn = function(td) td.r = T.rand(#td); return td end, out_keys = "r" }
    local a = flow.run(flow.TensorSource { td = data(4), batch_size = 4 }, draw, flow.Collect {}, { seed = 3 })
    local b = flow.run(flow.TensorSource { td = data(4), batch_size = 4 }, draw, flow.Collect {}, { seed = 3 })
    local c = flow.run(flow.TensorSource { td = data(4), batch_size = 4 }, draw, flow.Collect {}, { seed = 4 })
    assert.are.same(a[1].r:totable(), b[1].r:totable())
    assert.are_not.same(a[1].r:totable(), c[1].r:totable())
  end)
end)

describe("flow: apply nodes", function()
  it("Apply replaces leaves or writes out_keys, and checks fn's results", function()
    local td = flow.Apply { keys = { "x", { "n", "z" } }, fn = double }(data(2))
    assert.are.same({ { 2, 20 }, { 4, 40 } }, td.x:totable())
    assert.are.same({ -2, -4 }, td:get({ "n", "z" }):totable())
    H.raises(function() flow.Apply { keys = "x", fn = function() return 3 end }(data(2)) end,
      "Apply: fn returned 3 for 'x'; expected a tensor or a TensorDict")
    H.raises(function() flow.Apply { keys = "x", fn = function() return T.zeros(5) end }(data(2)) end,
      "tensordict: set: ")
  end)

  it("Apply works on a locked batch through a shallow copy", function()
    local td = data(2):lock()
    local out = flow.Apply { keys = "x", fn = double, out_keys = "x2" }(td)
    assert.are_not.equal(td, out)
    assert.is_nil(td:get("x2"))
    assert.are.same({ { 2, 20 }, { 4, 40 } }, out.x2:totable())
  end)

  it("Module passes in_keys' values and stores one result per out_key", function()
    local node = flow.Module { fn = function(x, y) return x:sum(2), y * 3 end, in_keys = { "x", "y" },
      out_keys = { "sx", { "deep", "y3" } } }
    local td = node(data(2))
    assert.are.same({ 11, 22 }, td.sx:totable())
    assert.are.same({ 3, 6 }, td:get({ "deep", "y3" }):totable())
    assert.are.equal("int64", td:get({ "deep", "y3" }):dtype())
    H.raises(function()
      flow.Module { fn = function(x) return x end, in_keys = "x", out_keys = { "a", "b" } }(data(1))
    end, "Module: fn returned 1 value; out_keys needs 2")
    H.raises(function() flow.Module { fn = double, in_keys = "q", out_keys = "a" }(data(1)) end,
      "Module: key 'q' is missing from the batch")
  end)

  it("Lambda gets the batch and may drop it", function()
    local node = flow.Lambda { fn = function(td) if #td > 1 then return td[{ { 1, 1 } }] end end }
    assert.are.same({ 1 }, node(data(3)):batch_size())
    assert.is_nil(node(data(1)))
    H.raises(function() flow.Lambda { fn = function() return 1 end }(data(1)) end,
      "Lambda: fn returned 1; expected a TensorDict or nil")
  end)

  it("Select, Exclude, Rename and Cast", function()
    local td = flow.Select { keys = { "x", { "n", "z" } } }(data(2))
    assert.are.same({ "x", "n" }, td:keys())
    H.raises(function() flow.Select { keys = "q" }(data(2)) end, "Select: key 'q' is missing from the batch")
    assert.are.same({ "x", "y", "n" }, flow.Select { keys = { "x", "y", "q", "n" }, strict = false }(data(2)):keys())
    assert.are.same({ "n", "ok", "y" }, flow.Exclude { keys = { "x", "s", "q" } }(data(2)):keys())
    local r = flow.Rename { keys = { x = "obs", { { "n", "z" }, { "m", "z" } } } }(data(2))
    assert.are.same({ "n", "ok", "s", "y", "m", "obs" }, r:keys()) -- renamed keys move to the end
    assert.are.same({ -1, -2 }, r:get({ "m", "z" }):totable())
    H.raises(function() flow.Rename { keys = { q = "w" } }(data(1)) end, "Rename: key 'q' is missing")
    H.raises(function() flow.Rename { keys = {} } end, "Rename: keys: nothing to rename")
    local c = flow.Cast { dtype = "float64" }(data(2))
    assert.are.equal("float64", c.x:dtype())
    assert.are.equal("int64", c.y:dtype())
    local c2 = flow.Cast { dtype = "float16", keys = { "y" } }(data(2))
    assert.are.equal("float16", c2.y:dtype())
    assert.are.equal("float32", c2.x:dtype())
    H.raises(function() flow.Cast { dtype = "int32", keys = "s" }(data(1)) end, "Cast: key 's' is 'tag', not a tensor")
  end)
end)

describe("flow: batching nodes", function()
  it("Batch stacks n containers, the last partial unless drop_last", function()
    local out = run(flow.TensorSource { td = data(5), batch_size = 1 },
      flow.Seq { flow.Unbatch {}, flow.Batch { size = 2 } })
    assert.are.same({ 2, 2, 1 }, sizes(out))
    assert.are.same({ 2 }, out[1]:batch_size())
    assert.are.same({ 2, 2 }, out[1].x:shape())
    assert.are.same(range(1, 5), ys(out))
    local dropped = run(flow.TensorSource { td = data(5), batch_size = 1 },
      flow.Seq { flow.Unbatch {}, flow.Batch { size = 2, drop_last = true } })
    assert.are.same({ 2, 2 }, sizes(dropped))
    local stacked = run(flow.TensorSource { td = data(6), batch_size = 3 }, flow.Seq { flow.Batch { size = 2 } })
    assert.are.same({ 2, 3 }, stacked[1]:batch_size())
  end)

  it("Unbatch yields rows and refuses a batch without batch dims", function()
    local rows = { flow.Unbatch {}(data(3)) }
    assert.are.equal(3, #rows)
    assert.are.same({}, rows[2]:batch_size())
    assert.are.equal(2, rows[2].y:item())
    assert.are.equal(0, select("#", flow.Unbatch {}(data(0))))
    H.raises(function() flow.Unbatch {}(rows[1]) end, "Unbatch: the batch has batch size []; Unbatch counts rows")
  end)

  it("Rebatch makes batches of exactly size rows from any sizes, 0-row batches included", function()
    local src = { data(3), data(0), data(5), data(1), data(4) }
    local i = 0
    local source = { iter = function() return function() i = i + 1; return src[i] end end }
    local out = run(source, flow.Rebatch { size = 4 })
    assert.are.same({ 4, 4, 4, 1 }, sizes(out))
    assert.are.same({ 1, 2, 3, 1, 2, 3, 4, 5, 1, 1, 2, 3, 4 }, ys(out))
    assert.are.same({ "tag" }, { out[2].s })
    i = 0
    local dropped = run(source, flow.Rebatch { size = 4, drop_last = true })
    assert.are.same({ 4, 4, 4 }, sizes(dropped))
    local whole = run(flow.TensorSource { td = data(8), batch_size = 8 }, flow.Rebatch { size = 4 })
    assert.are.same({ 4, 4 }, sizes(whole))
    H.raises(function() flow.Rebatch { size = 2 }(data(2)[1]) end, "Rebatch: the batch has batch size []")
  end)

  it("Rebatch names the keys when batches do not match", function()
    local src = { data(3), data(3):exclude("x") }
    local i = 0
    local source = { iter = function() return function() i = i + 1; return src[i] end end }
    H.raises(function() run(source, flow.Seq { flow.Rebatch { size = 4 } }) end, "steps[1] (Rebatch): ", "x")
  end)

  it("Shuffle permutes rows with a seed: every row once, the same order for the same seed", function()
    local function shuffled(seed, batch)
      return ys(run(flow.TensorSource { td = data(50), batch_size = batch },
        flow.Shuffle { buffer = 16, seed = seed }))
    end
    local a, b, c = shuffled(1, 5), shuffled(1, 5), shuffled(2, 5)
    assert.are.same(a, b)
    assert.are_not.same(a, c)
    local sorted = { unpack(a) }
    table.sort(sorted)
    assert.are.same(range(1, 50), sorted)
    assert.are_not.same(range(1, 50), a)
    -- batches keep the input's size once the buffer is full (the first one carries
    -- the rows past the buffer's size; flush emits the rest in the last input's size)
    local out = run(flow.TensorSource { td = data(50), batch_size = 5 }, flow.Shuffle { buffer = 16, seed = 1 })
    assert.are.same({ 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 1 }, sizes(out))
    -- a buffer larger than the stream, and batches larger than the buffer
    local small = shuffled(3, 40)
    table.sort(small)
    assert.are.same(range(1, 50), small)
    local big = ys(run(flow.TensorSource { td = data(50), batch_size = 7 }, flow.Shuffle { buffer = 100, seed = 1 }))
    table.sort(big)
    assert.are.same(range(1, 50), big)
    -- the pipeline seed is the default
    local d1 = ys(flow.run(flow.TensorSource { td = data(30), batch_size = 4 }, flow.Shuffle { buffer = 8 },
      flow.Collect {}, { seed = 9 }))
    local d2 = ys(flow.run(flow.TensorSource { td = data(30), batch_size = 4 }, flow.Shuffle { buffer = 8, seed = 9 },
      flow.Collect {}))
    assert.are.same(d1, d2)
  end)

  it("Take passes the first n rows", function()
    local out = run(flow.TensorSource { td = data(10), batch_size = 3 }, flow.Take { n = 7 })
    assert.are.same({ 3, 3, 1 }, sizes(out))
    assert.are.same(range(1, 7), ys(out))
    assert.are.same({}, run(flow.TensorSource { td = data(4), batch_size = 3 }, flow.Take { n = 0 }))
    -- the source stops once Take has its rows
    local pulled = 0
    local out2, summary = flow.run(flow.TensorSource { td = data(100), batch_size = 10 },
      flow.Seq { flow.Lambda { fn = function(td) pulled = pulled + 1; return td end }, flow.Take { n = 25 } },
      flow.Collect {})
    assert.are.same({ 10, 10, 5 }, sizes(out2))
    assert.are.equal(3, pulled)
    assert.are.equal(30, summary.rows_in)
  end)
end)

describe("flow: masking nodes", function()
  it("Filter keeps rows where a bool key or a function holds and drops empty batches", function()
    local out = run(flow.TensorSource { td = data(7), batch_size = 3 }, flow.Filter { where = "ok" })
    assert.are.same({ 1, 3, 5, 7 }, ys(out))
    assert.are.same({ 2, 1, 1 }, sizes(out))
    local f = flow.Filter { where = function(td) return td.y:gt(5) end }
    assert.are.same({ 6, 7 }, ys(run(flow.TensorSource { td = data(7), batch_size = 3 }, f)))
    assert.is_nil(f(data(3)))
    assert.are.equal(0, #flow.Filter { where = function(td) return td.y:gt(5) end, keep_empty = true }(data(3)))
    H.raises(function() flow.Filter { where = "y" }(data(2)) end,
      "Filter: where 'y' is a tensor of dtype int64; expected a bool tensor over the batch dims")
    H.raises(function() flow.Filter { where = function() return T.ones(3, "bool") end }(data(2)) end,
      "Filter: mask of shape [3] does not cover the leading batch dims of batch size [2]")
    H.raises(function() flow.Filter { where = 5 } end,
      "Filter: where: expected a key (a bool leaf of the batch) or a function")
  end)

  it("MaskedFill writes a value where the mask holds, in chosen leaves or all", function()
    local td = flow.MaskedFill { mask = "ok", value = 0, keys = { "x" } }(data(3))
    assert.are.same({ { 0, 0 }, { 2, 20 }, { 0, 0 } }, td.x:totable())
    assert.are.same({ 1, 2, 3 }, td.y:totable())
    local all = flow.MaskedFill { mask = "ok", value = 9 }(data(2))
    assert.are.same({ 9, 2 }, all.y:totable())
    assert.are.same({ -9 + 18, -2 }, all:get({ "n", "z" }):totable())
  end)

  it("Where picks per row between a leaf and a number or another leaf", function()
    local td = flow.Where { cond = "ok", keys = { "x" }, other = -1, out_keys = { "w" } }(data(2))
    assert.are.same({ { 1, 10 }, { -1, -1 } }, td.w:totable())
    local td2 = flow.Where { cond = "ok", keys = { "y" }, other_keys = { { "n", "z" } } }(data(3))
    assert.are.same({ 1, -2, 3 }, td2.y:totable())
    assert.are.equal("float32", td2.y:dtype())
    H.raises(function() flow.Where { cond = "ok", keys = { "y" }, other_keys = { "x", "y" } } end,
      "Where: other_keys has 2 keys but keys has 1")
  end)
end)

describe("flow: in-memory source and sink", function()
  it("TensorSource yields views of rows, shuffles per epoch with a seed, knows its length", function()
    local td = data(7)
    local src = flow.TensorSource { td = td, batch_size = 3 }
    assert.are.equal(7, src:len())
    local out = run(src, nil)
    assert.are.same({ 3, 3, 1 }, sizes(out))
    out[1].x[{ 1, 1 }] = 100
    assert.are.equal(100, td.x[{ 1, 1 }])
    local dl = flow.TensorSource { td = data(7), batch_size = 3, drop_last = true, epochs = 2 }
    assert.are.equal(12, dl:len())
    assert.are.same({ 3, 3, 3, 3 }, sizes(run(dl, nil)))
    local sh = flow.TensorSource { td = data(6), batch_size = 4, shuffle = true, seed = 5, epochs = 2 }
    local a, b = ys(run(sh, nil)), ys(run(sh, nil))
    assert.are.same(a, b)
    local e1, e2 = { unpack(a, 1, 6) }, { unpack(a, 7, 12) }
    assert.are_not.same(e1, e2)
    table.sort(e1)
    assert.are.same(range(1, 6), e1)
    assert.are.same({}, run(flow.TensorSource { td = data(0), batch_size = 2 }, nil))
    H.raises(function() flow.TensorSource { td = data(2)[1], batch_size = 1 } end,
      "TensorSource: td has batch size []")
  end)

  it("Collect returns the list, or one cat'ed TensorDict", function()
    assert.are.same({}, flow.run(flow.TensorSource { td = data(0), batch_size = 1 }, nil, flow.Collect {}))
    assert.is_nil(flow.run(flow.TensorSource { td = data(0), batch_size = 1 }, nil, flow.Collect { cat = true }))
    local one = flow.run(flow.TensorSource { td = data(5), batch_size = 2 }, nil, flow.Collect { cat = true })
    assert.are.same(range(1, 5), one.y:totable())
  end)
end)

describe("flow.Seq profiling", function()
  it("counts each step's batches and rows in and out, nested steps under their paths", function()
    local seq = flow.Seq {
      flow.Filter { where = "ok" },
      flow.Seq { flow.Rebatch { size = 4 }, flow.Apply { keys = "x", fn = double } },
    }
    seq:set_profile(true)
    flow.run(flow.TensorSource { td = data(20), batch_size = 5 }, seq, flow.Collect {})
    local prof = seq:profile()
    assert.are.equal(3, #prof)
    assert.are.same({ "steps[1]", "Filter", 4, 20, 4, 10 },
      { prof[1].where, prof[1].type, prof[1].batches_in, prof[1].rows_in, prof[1].batches_out, prof[1].rows_out })
    assert.are.same({ "steps[2].steps[1]", "Rebatch", 4, 10, 3, 10 },
      { prof[2].where, prof[2].type, prof[2].batches_in, prof[2].rows_in, prof[2].batches_out, prof[2].rows_out })
    assert.are.same({ "steps[2].steps[2]", "Apply", 3, 10, 3, 10 },
      { prof[3].where, prof[3].type, prof[3].batches_in, prof[3].rows_in, prof[3].batches_out, prof[3].rows_out })
    for _, p in ipairs(prof) do assert.is_true(p.seconds >= 0) end
    seq:set_profile(false)
    assert.are.same({}, seq:profile())
  end)
end)

describe("flow.run and close(failed)", function()
  it("tells nodes whether the run failed, and Normalize saves its stats only after success", function()
    local seen = {}
    local Probe = flow.define("SpecCloseProbe", { params = { { "fail", "boolean", default = false } } })
    function Probe:forward(td) if self.p.fail then self:fail("no") end return td end
    function Probe:close(failed) seen[#seen + 1] = failed end
    flow.run(flow.TensorSource { td = data(2), batch_size = 1 }, flow.Seq { Probe {} }, flow.Collect {})
    pcall(flow.run, flow.TensorSource { td = data(2), batch_size = 1 }, flow.Seq { Probe { fail = true } },
      flow.Collect {})
    assert.are.same({ false, true }, seen)
    local path = os.tmpname()
    os.remove(path)
    local fs = require("tensordict.fs")
    local failing = flow.Seq { flow.Normalize { keys = "x", path = path }, Probe { fail = true } }
    pcall(flow.run, flow.TensorSource { td = data(4), batch_size = 2 }, failing, flow.Collect {})
    assert.is_false(fs.exists(path))
    flow.run(flow.TensorSource { td = data(4), batch_size = 2 },
      flow.Seq { flow.Normalize { keys = "x", path = path } }, flow.Collect {})
    assert.is_true(fs.exists(path .. "/meta.json"))
    os.execute("rm -rf " .. path)
  end)
end)

describe("flow.Map workers' threads", function()
  it("gives each worker its share of the parent's threads", function()
    local before = T.get_num_threads()
    T.set_num_threads(2)
    local function threads_seen(workers)
      local out = flow.run(flow.TensorSource { td = data(4), batch_size = 2 },
        flow.Seq { flow.Map { fn = function(td) td.threads = T.full({ #td }, T.get_num_threads()); return td end,
          workers = workers } }, flow.Collect { cat = true })
      return out.threads:totable()
    end
    assert.are.same({ 1, 1, 1, 1 }, threads_seen(2))
    assert.are.same({ 2, 2, 2, 2 }, threads_seen(1))
    assert.are.equal(2, T.get_num_threads())
    T.set_num_threads(before)
  end)
end)

describe("key flow past functions that add undeclared keys", function()
  it("counts every key as present after a Lambda or Map without out_keys", function()
    local seq = flow.Seq {
      flow.Lambda { fn = function(td) td.extra = td.y * 2; return td end },
      flow.Apply { keys = "extra", fn = double },
    }
    assert.are.same({}, seq:check_keys(flow.KeySet.new({ "x", "y" })))
    local declared = flow.Seq {
      flow.Lambda { fn = function(td) td.extra = td.y * 2; return td end, out_keys = "extra" },
      flow.Apply { keys = "extra", fn = double },
      flow.Apply { keys = "nope", fn = double },
    }
    local problems = declared:check_keys(flow.KeySet.new({ "x", "y" }))
    assert.are.equal(1, #problems)
    assert.are.equal("nope", problems[1].key)
    local mapped = flow.Seq { flow.Map { fn = function(td) return td end, workers = 0 },
      flow.Apply { keys = "z", fn = double } }
    assert.are.same({}, mapped:check_keys(flow.KeySet.new({ "x" })))
  end)
end)
