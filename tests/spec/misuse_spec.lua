-- A few thousand random calls with hostile arguments (tests/fuzz/misuse.lua; make fuzz
-- runs 100,000): every outcome is a result or a "tensordict: " error.
package.path = "tests/fuzz/?.lua;" .. package.path
local misuse = require("misuse")

describe("misuse", function()
  it("random calls with wrong arguments give results or tensordict errors only", function()
    local report = misuse.run({ calls = 4000, seed = 7, surfaces = misuse.surfaces("api") })
    assert.are.equal(4000, report.calls)
    assert.are.equal(4000, report.ok + report.errors)
    assert.is_true(report.ok > 400, "too few calls succeeded: the pool is off")
    assert.are.same({}, report.findings)
  end)

  it("the sites the issue named raise tensordict errors", function()
    local T = require("tensordict")
    local H = require("helpers")
    local td = T.TensorDict({ a = T.ones(2, 3) }, { 2 })
    H.raises(function() T.pad(nil, { 1, 1 }) end, "pad: expected a tensor, got nil")
    H.raises(function() T.pad({}, { 1, 1 }) end, "pad: expected a tensor")
    H.raises(function() T.pad(td, { 1, 1 }, td) end, "pad: value must be a number")
    H.raises(function() T.zeros(3):permute() end, "permute: expected the new order of the dims")
    H.raises(function() td:permute() end, "permute: expected the new order of the batch dims")
    H.raises(function() td:refine_names() end, "refine_names: expected names")
    H.raises(function() return T.zeros(3) + require("ffi").new("int[3]") end, "tensordict: ")
    H.raises(function() T.arange(nil, 3) end, "tensordict: arange")
    H.raises(function() T.pad_sequence({ td, td }, 1) end, "tensordict: ")
  end)
end)

describe("misuse findings", function()
  local T = require("tensordict")
  local H = require("helpers")
  it("chunk of an empty dim into more pieces than a table holds is refused", function()
    H.raises(function() T.TensorDict({}, { 0 }):chunk(2 ^ 40) end,
      "chunk: 1099511627776 chunks of an empty dim would be 1099511627776 empty pieces, more than 67108864")
    assert.are.equal(5, #T.zeros(0):chunk(5))
  end)
  it("arange checks every bound, also after a nil", function()
    H.raises(function() T.arange(nil, 3) end, "arange: bounds and step must be finite numbers, got nil")
    H.raises(function() T.arange(1, {}, 2) end, "arange: bounds and step must be finite numbers, got a table")
  end)
end)

describe("misuse findings in the new math", function()
  local T = require("tensordict")
  local H = require("helpers")
  it("a nil among list arguments, a NULL batch_dims and get_at of a value are refused", function()
    H.raises(function() T.zeros(3)["repeat"](T.zeros(3), nil, 2) end, "repeat: argument 1 is nil")
    H.raises(function() T.zeros(2, 3):permute(2, nil) end, "permute: argument 2 is nil")
    local td = T.TensorDict({ a = T.zeros(2), s = "x" }, { 2 })
    H.raises(function() td:auto_batch_size_(require("ffi").cast("void *", 0)) end,
      "auto_batch_size_: batch_dims must be a non-negative integer")
    H.raises(function() td:get_at("s", 1) end, "get_at: 's' is a non-tensor value; it cannot be indexed")
    H.raises(function() T.Tensor.expand_as(5, T.zeros(2)) end, "expand_as: expected a tensor, got 5")
  end)
end)

describe("misuse of the new surfaces (issue 28)", function()
  it("T.flow's nodes and recipes give results or tensordict errors only", function()
    local report = misuse.run({ calls = 3000, seed = 8, surfaces = misuse.surfaces("flow,recipe") })
    assert.are.equal(3000, report.ok + report.errors)
    assert.is_true(report.ok > 300, "too few calls succeeded: the pool is off")
    assert.are.same({}, report.findings)
  end)

  it("T.dist on one rank gives results or tensordict errors only (in a child process: MPI starts there)", function()
    local cmd = "LUA_PATH='lua/?.lua;lua/?/init.lua;tests/fuzz/?.lua;;' luajit tests/fuzz/misuse.lua 1500 9 dist 2>&1"
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    assert.truthy(out:find("misuse: 1500 calls %(seed 9, surfaces dist%), %d+ results, %d+ tensordict errors, "
      .. "0 findings"), out)
  end)
end)

describe("misuse findings on the new surfaces (issue 28)", function()
  local T = require("tensordict")
  local H = require("helpers")
  local flow = T.flow
  local recipe = require("tensordict.host.recipe")
  local td = T.TensorDict({ a = T.zeros(2) }, { 2 })

  it("a node's entry points check their arguments, for every node type", function()
    H.raises(function() local _ = flow.TensorSource { td = td, batch_size = 1 }(td) end,
      "tensordict: TensorSource: a source is not called on batches (it yields them: iter(ctx))")
    H.raises(function() local _ = flow.Collect {}(td) end,
      "tensordict: Collect: a sink is not called on batches (it takes them: write(td), then finish())")
    H.raises(function() local _ = flow.Apply { keys = { "a" }, fn = "Tensor.neg" }:forward(nil) end,
      "tensordict: Apply: forward: expected a TensorDict batch, got nil")
    H.raises(function() local _ = flow.Rebatch { size = 2 }:push(T.zeros(2), function() end) end,
      "tensordict: Rebatch: push: expected a TensorDict batch, got a tensor")
    H.raises(function() local _ = flow.Rebatch { size = 2 }:push(td, 5) end,
      "tensordict: Rebatch: push: expected emit to be a function, got 5")
    H.raises(function() local _ = flow.Map { fn = function(b) return b end, workers = 0 }:push(nil, print) end,
      "tensordict: Map: push: expected a TensorDict batch, got nil")
    H.raises(function() local _ = flow.Rebatch { size = 2 }:flush(nil) end,
      "tensordict: Rebatch: flush: expected emit to be a function, got nil")
    H.raises(function() local _ = flow.Map { fn = function(b) return b end, workers = 0 }:drain(3) end,
      "tensordict: Map: drain: expected emit to be a function, got 3")
    H.raises(function() local _ = flow.Collect {}:write(5) end,
      "tensordict: Collect: write: expected a TensorDict batch, got 5")
    H.raises(function() local _ = flow.Normalize { keys = { "a" } }:open(require("ffi").new("double", 1)) end,
      "tensordict: Normalize: open: expected a ctx table (or nil), got a cdata")
    H.raises(function() local _ = flow.Normalize { keys = { "a" } }:open(require("ffi").cast("void *", 0)) end,
      "tensordict: Normalize: open: expected a ctx table (or nil), got cdata<void *>: NULL")
    H.raises(function() local _ = flow.TensorSource { td = td, batch_size = 1 }:iter({ dist = 5 }) end,
      "tensordict: TensorSource: iter: ctx.dist must be the host's table of a data-parallel run {rank =, size =, ...}")
    H.raises(function()
      local _ = flow.TensorSource { td = td, batch_size = 1 }:iter({ dist = { rank = 2, size = 2 } })
    end, "ctx.dist must be the host's table")
    H.raises(function() local _ = flow.Seq { steps = { flow.Take { n = 1 } } }:check_keys(nil) end,
      "tensordict: Seq: check_keys: expected a flow.KeySet, got nil")
    H.raises(function() local _ = flow.Select { keys = { "a" } }:keys_after("x") end,
      "tensordict: Select: keys_after: expected a flow.KeySet, got 'x'")
    H.raises(function() local _ = flow.MemmapSink { path = "x" }:preflight(1.5) end,
      "tensordict: MemmapSink: preflight: expected an options table (or nil), got 1.5")
    H.raises(function() local _ = flow.Normalize { keys = { "a" } }:check_dtypes({}) end,
      "tensordict: Normalize: check_dtypes: expected a flow.KeySet, got")
    assert.is_nil((flow.MemmapSink { path = "/nonexistent/x" }:preflight({ resume = false })))
    -- profile() takes no arguments: given some, it does not take them for its own
    local seq = flow.Seq { steps = { flow.Take { n = 1 } } }
    seq:set_profile(true)
    assert.are.equal("steps[1]", seq:profile({ reduce = true }, 2 ^ 63)[1].where)
    -- what the checks let through still works
    local it = flow.TensorSource { td = td, batch_size = 1 }:iter({ dist = { rank = 1, size = 2 } })
    assert.are.same({ 0 }, it().a:totable())
    assert.is_nil(it())
    assert.are.same({ 0, 0 }, flow.Select { keys = { "a" } }:forward(td).a:totable())
  end)

  it("recipe.load checks its options and refuses a recipe table that holds itself", function()
    local t = { source = { use = "ParticleSource", n = 2, steps = 1, batch_size = 2 } }
    H.raises(function() recipe.load(t, 5) end,
      "tensordict: recipe: options must be a table {resume =, set =, workers =}, got 5")
    H.raises(function() recipe.load(t, { sets = {} }) end, "tensordict: recipe: unknown option 'sets'")
    t.source.again = t
    H.raises(function() recipe.load(t) end,
      "tensordict: recipe: the recipe's tables hold a cycle (a table inside itself)")
  end)

  it("a hint for a name among keys that are not strings is no error", function()
    local util = require("tensordict.util")
    assert.are.equal("cut", util.nearest("cat", { 1, "cut", true }))
    assert.is_nil(util.nearest("cat", { 1, 2 }))
    assert.is_nil(util.nearest(5, { "cut" }))
    assert.are.equal("", util.did_you_mean(5, { "cut" }))
  end)

  it("T.dist keeps its helpers to itself", function()
    local dist = T.dist
    assert.is_nil(rawget(dist, "fail"))
    assert.is_nil(rawget(dist, "timeout_of"))
  end)
end)
