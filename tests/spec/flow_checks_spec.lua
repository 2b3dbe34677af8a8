-- flow_checks_spec.lua: the Lua-level pieces of the recipe checks (issues 27 and 28):
-- integer ranges and seeds in declared parameters, functions that say what they are a
-- function of, key sets that know dtypes, the lenient build a failed step is checked
-- with, plugins' takes, and the size helpers.
local T = require("tensordict")
local H = require("helpers")
local flow = T.flow
local core = require("tensordict.flow.core")
local build = require("tensordict.flow.build")
local util = require("tensordict.util")

describe("declared integer parameters", function()
  it("stay within 2^53, and within a declared max", function()
    H.raises(function() flow.Take { n = 2 ^ 53 + 2 } end,
      "Take: n: expected an integer, got 9007199254740994 (integers are exact up to 2^53 = 9007199254740992; "
      .. "past it no count or size is meant)")
    assert.are.equal(2 ^ 53, flow.Take { n = 2 ^ 53 }.p.n)
    H.raises(function() flow.Map { fn = function(td) return td end, workers = 1025 } end,
      "Map: workers: expected integer <= 1024, got 1025")
    H.raises(function() flow.Rebatch { size = -2 ^ 60 } end,
      "Rebatch: size: expected an integer, got -1152921504606846976")
  end)

  it("seeds are uint64s", function()
    assert.are.equal(2 ^ 63, flow.Shuffle { buffer = 4, seed = 2 ^ 63 }.p.seed)
    H.raises(function() flow.Shuffle { buffer = 4, seed = 2 ^ 64 } end,
      "Shuffle: seed: expected a seed (an integer in 0..2^64-1), got 18446744073709551616")
    H.raises(function() flow.Shuffle { buffer = 4, seed = 0.5 } end,
      "Shuffle: seed: expected a seed (an integer in 0..2^64-1), got 0.5")
  end)

  it("check_params names the parameters with problems", function()
    local _, problems, bad = core.check_params(flow.Rebatch, { size = 0, drop_last = 3, nope = 1 })
    assert.are.equal(3, #problems)
    assert.are.same({ size = true, drop_last = true, nope = true }, bad)
  end)
end)

describe("what a function is a function of", function()
  it("is declared when registered, and refused by name where the other kind is called", function()
    core.register_function("checks_spec.rows", function(td) return td end, "batch")
    core.register_function("checks_spec.neg", function(t) return -t end, "tensors")
    core.register_function("checks_spec.any", function(x) return x end)
    assert.are.equal("batch", core.function_takes["checks_spec.rows"])
    H.raises(function() flow.build { type = "Map", fn = "checks_spec.neg" } end,
      "fn: 'checks_spec.neg' is a function of tensors (fn(leaf, ...)), but this parameter calls it with a batch "
      .. "(fn(td)) (a function of tensors goes in Apply or Module)")
    H.raises(function() flow.build { type = "Apply", keys = { "x" }, fn = "checks_spec.rows" } end,
      "fn: 'checks_spec.rows' is a function of a batch (fn(td))")
    H.raises(function() flow.build { type = "Filter", where = "Tensor.neg" } end,
      "where: 'Tensor.neg' is a function of tensors")
    assert.is_truthy(flow.build { type = "Map", fn = "checks_spec.any", workers = 0 })
    assert.is_truthy(flow.build { type = "Apply", keys = { "x" }, fn = "checks_spec.any" })
    H.raises(function() core.register_function("checks_spec.bad", function() end, "rows") end,
      "register_function: 'checks_spec.bad': takes must be \"batch\" or \"tensors\", got 'rows'")
  end)

  it("is declared by a plugin's takes, which must name its functions", function()
    local plugins = require("tensordict.host.plugins")
    local ok, err = pcall(plugins.register, { name = "checks_spec_p", functions = { f = function() end },
      takes = { f = "rows" } }, "p.lua")
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("plugin p.lua: takes.f must be \"batch\" or \"tensors\", got 'rows'", 1, true))
    ok, err = pcall(plugins.register, { name = "checks_spec_q", functions = {}, takes = { g = "batch" } }, "q.lua")
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("plugin q.lua: takes.g: the plugin has no function 'g'", 1, true))
    plugins.load_all()
    assert.are.equal("batch", core.function_takes["physics.features"])
    assert.are.equal("tensors", core.function_takes["physics.speed"])
  end)
end)

describe("KeySet", function()
  it("knows declared dtypes and who declared them, through removes and restricts", function()
    local ks = core.KeySet.new({ "a" })
    ks:add("b", false, "int64", "as the source declares it")
    ks:add({ "n", "x" }, true, "float32", "made here")
    assert.are.same({ "int64", "as the source declares it" }, { ks:dtype("b") })
    assert.are.same({ "float32", "made here" }, { ks:dtype({ "n", "x" }) })
    assert.is_nil(ks:dtype("a"))
    ks:add("b", true) -- written again by a step that does not declare a dtype: unknown
    assert.is_nil(ks:dtype("b"))
    ks:remove("n")
    assert.is_nil(ks:dtype({ "n", "x" }))
    assert.is_false(ks:known({ "n", "x" }))
    ks.open = true
    assert.is_true(ks:has("zzz"))
    assert.is_false(ks:known("zzz"))
  end)

  it("dtype_problem says the key, its dtype, who declared it and what the node wants", function()
    local ks = core.KeySet.new()
    ks:add("s", false, "int64", "as the source declares it")
    assert.are.equal("key 's' has dtype int64 (as the source declares it); wants a float",
      core.dtype_problem(ks, "s", function(dt) return dt == "float32" end, "wants a float"))
    assert.is_nil(core.dtype_problem(ks, "s", function(dt) return dt == "int64" end, "x"))
    assert.is_nil(core.dtype_problem(ks, "unknown", function() return false end, "x"))
  end)

  it("is what Normalize, Cast, Rename and the masks check and carry", function()
    local ks = core.KeySet.new()
    ks:add("x", false, "float16", "as the source declares it")
    ks:add("m", false, "float32", "as the source declares it")
    local norm = flow.Normalize { keys = "x", out_keys = "z" }
    assert.are.same({}, norm:check_dtypes(ks))
    core.keys_after(norm, ks, "steps[1]")
    assert.are.equal("float16", ks:dtype("z"))
    core.keys_after(flow.Cast { dtype = "float64" }, ks, "steps[2]")
    assert.are.same({ "float64", "cast by steps[2]" }, { ks:dtype("m") })
    core.keys_after(flow.Rename { keys = { m = "w" } }, ks, "steps[3]")
    assert.are.same({ "float64", "cast by steps[2]" }, { ks:dtype("w") })
    assert.are.same({ "key 'w' has dtype float64 (cast by steps[2]); where needs a bool leaf (make one with a "
      .. "comparison, e.g. Module with fn \"Tensor.gt\")" }, flow.Filter { where = "w" }:check_dtypes(ks))
  end)
end)

describe("build.lenient", function()
  it("builds a failed step without its wrong parameters, for the key checks", function()
    local node = build.lenient({ use = "Normalize", keys = { "a" }, eps = "x", out_keys = { "b" } })
    assert.are.same({ "a" }, node.in_keys)
    assert.are.same({ "b" }, node.out_keys)
    assert.are.equal(1e-5, node.p.eps)
    assert.is_nil(build.lenient({ use = "Normalize", keys = 3 }))    -- a required one is wrong
    assert.is_nil(build.lenient({ use = "Nope" }))
    assert.is_nil(build.lenient({ use = "Apply", keys = { "a", "b" }, out_keys = { "c" }, fn = "Tensor.neg" }))
  end)
end)

describe("sizes and numbers for messages", function()
  it("number_text shows a number as it is, bytes_text in binary units", function()
    assert.are.equal("18446744073709551616", util.number_text(2 ^ 64))
    assert.are.equal("0.1", util.number_text(0.1))
    assert.are.equal("1e+30", util.number_text(1e30))
    assert.are.equal("512 B", util.bytes_text(512))
    assert.are.equal("1.5 GiB", util.bytes_text(1.5 * 2 ^ 30))
    assert.are.equal("4.0 EiB", util.bytes_text(2 ^ 62))
  end)

  it("memory_problem compares with the machine's physical memory", function()
    local have = require("tensordict.tensor.memory").physical()
    assert.is_true(have > 0)
    assert.is_nil(core.memory_problem(1024, "a small thing"))
    assert.are.equal(("a big thing needs about 1.0 EiB of memory at once, more than this machine's %s")
      :format(util.bytes_text(have)), core.memory_problem(2 ^ 60, "a big thing"))
  end)

  it("ParticleSource, CsvSource and MemmapSource declare their dtypes and row sizes", function()
    local p = flow.ParticleSource { n = 10, steps = 4, batch_size = 5 }
    assert.are.same({ id = "int64", mass = "float32", pos = "float32", vel = "float32", energy = "float32" },
      p:key_dtypes())
    assert.are.equal(8 + 4 + 28 * 4, p:row_bytes())
    assert.are.same({}, p:preflight())
    local c = flow.CsvSource { path = "recipes/data/iris.csv", batch_size = 4,
      columns = { petal = { "petal_length", "petal_width" }, species = "int64" } }
    assert.are.same({ petal = "float32", species = "int64" }, c:key_dtypes())
    assert.are.equal(2 * 4 + 8, c:row_bytes())
    local dir = H.tmpdir()
    T.TensorDict({ a = T.zeros({ 6, 3 }, "float64"), b = T.zeros({ 6 }, "int16") }, { 6 }):memmap(dir .. "/m")
    local m = flow.MemmapSource { path = dir .. "/m", batch_size = 2, shuffle = true }
    assert.are.same({ a = "float64", b = "int16" }, m:key_dtypes())
    assert.are.equal(3 * 8 + 2, m:row_bytes())
    assert.are.same({}, m:preflight())
    local later = flow.MemmapSource { path = dir .. "/later", batch_size = 2, shuffle = true }
    assert.are.same({}, later:key_dtypes())
    assert.is_nil(later:row_bytes())
    H.rmtree(dir)
  end)

  it("physics.Histogram makes its counts with the first batch, not with the node", function()
    require("tensordict.host.plugins").load_all()
    local Histogram = core.registry["physics.Histogram"]
    local h = Histogram { key = "e", min = 0, max = 1, bins = 1e12 }
    assert.is_nil(h.counts)
    assert.is_truthy(h:preflight()[1]:find("bins = 1000000000000 needs about", 1, true))
    local small = Histogram { key = "e", min = 0, max = 1, bins = 4 }
    small:open()
    small:write(T.TensorDict({ e = T.tensor({ 0.1, 0.9, 0.95 }) }, { 3 }))
    assert.are.same({ 1, 0, 0, 2 }, small:finish().counts:totable())
    local none = Histogram { key = "e", min = 0, max = 1, bins = 3 }
    assert.are.same({ 0, 0, 0 }, none:finish().counts:totable())
  end)
end)
