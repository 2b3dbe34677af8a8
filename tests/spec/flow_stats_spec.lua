-- flow.Normalize and flow.RunningStats (lua/tensordict/flow/stats.lua): running
-- statistics against a float64 reference computed here in Lua, merges, online versus
-- fitted normalisation, 0-row batches, errors, saved statistics and spec round trips.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local stats = require("tensordict.flow.stats")
require("tensordict.flow.sources")
local json = require("tensordict.json")

local RunningStats, Normalize = stats.RunningStats, stats.Normalize

local tmpdir = H.tmpdir

-- Rows of x ([n, f] after flattening the features) as Lua tables.
local function rows_of(x)
  local n = x:size(1)
  local flat = x:reshape(n, -1):to("float64"):totable()
  return flat
end

-- Reference mean and population variance per feature (two passes in Lua doubles).
local function reference(rows)
  local n, f = #rows, #rows[1]
  local mean, var = {}, {}
  for j = 1, f do
    local s = 0
    for i = 1, n do s = s + rows[i][j] end
    mean[j] = s / n
    local q = 0
    for i = 1, n do q = q + (rows[i][j] - mean[j]) ^ 2 end
    var[j] = q / n
  end
  return mean, var
end

local function flat(t) return t:reshape(-1):totable() end

local function close_lists(a, b, rel)
  assert.are.equal(#a, #b)
  for i = 1, #a do
    local tol = rel * math.max(1, math.abs(b[i]))
    if math.abs(a[i] - b[i]) > tol then
      error(("element %d: %.17g vs %.17g"):format(i, a[i], b[i]), 2)
    end
  end
end

local function data(n, shape, seed, dtype)
  local g = T.Generator(seed)
  local full = { n }
  for _, s in ipairs(shape) do full[#full + 1] = s end
  return (T.randn(full, "float64", g) * 3 + 5):to(dtype or "float32")
end

describe("flow.RunningStats", function()
  it("matches a two-pass float64 reference, for flat and nested feature shapes", function()
    for _, shape in ipairs({ { 3 }, { 2, 3 }, {} }) do
      local x = data(257, shape, 1)
      local rs = RunningStats():update(x)
      local rows = #shape == 0 and rows_of(x:view(257, 1)) or rows_of(x)
      local mean, var = reference(rows)
      assert.are.equal(257, rs:count())
      assert.are.same(shape, rs:feature_shape())
      assert.are.same(shape, rs:mean():shape())
      assert.are.equal("float64", rs:mean():dtype())
      close_lists(flat(rs:mean()), mean, 1e-12)
      close_lists(flat(rs:var()), var, 1e-12)
      local unbiased = {}
      for i, v in ipairs(var) do unbiased[i] = v * 257 / 256 end
      close_lists(flat(rs:var(true)), unbiased, 1e-12)
      local std = {}
      for i, v in ipairs(var) do std[i] = math.sqrt(v) end
      close_lists(flat(rs:std()), std, 1e-12)
    end
  end)

  it("accepts integer and strided inputs, and batch_dims", function()
    local x = T.arange(1, 24, "int64"):view(2, 3, 4)
    local rs = RunningStats():update(x, 2) -- 6 rows of 4 features
    assert.are.equal(6, rs:count())
    close_lists(flat(rs:mean()), { 11, 12, 13, 14 }, 1e-15)
    local xt = data(40, { 5 }, 2):t() -- [5, 40]: rows are the 5 columns' entries
    local ref = RunningStats():update(xt:contiguous())
    local got = RunningStats():update(xt)
    assert.are.same(flat(ref:mean()), flat(got:mean()))
    close_lists(flat(got:var()), flat(ref:var()), 1e-13)
  end)

  it("merges to what one pass gives", function()
    local x = data(1000, { 4 }, 3)
    local one = RunningStats():update(x)
    local a = RunningStats():update(x[{ { 1, 137 } }])
    local b = RunningStats():update(x[{ { 138, 600 } }]):update(x[{ { 601, 1000 } }])
    a:merge(b)
    assert.are.equal(1000, a:count())
    close_lists(flat(a:mean()), flat(one:mean()), 1e-13)
    close_lists(flat(a:var()), flat(one:var()), 1e-12)
    -- merging into an empty state copies; merging an empty one changes nothing
    local e = RunningStats():merge(one)
    assert.are.same(flat(one:mean()), flat(e:mean()))
    one:merge(RunningStats())
    assert.are.equal(1000, one:count())
  end)

  it("is bit-identical for any thread count", function()
    local x = data(30000, { 40 }, 4)
    local saved = T.get_num_threads()
    T.set_num_threads(1)
    local a = RunningStats():update(x)
    T.set_num_threads(2)
    local b = RunningStats():update(x)
    T.set_num_threads(saved)
    assert.are.same(flat(a:mean()), flat(b:mean()))
    assert.are.same(flat(a:m2()), flat(b:m2()))
  end)

  it("counts 0-row updates as nothing", function()
    local rs = RunningStats():update(T.zeros({ 0, 3 }))
    assert.are.equal(0, rs:count())
    assert.are.same({ 3 }, rs:feature_shape())
    rs:update(T.ones({ 2, 3 }))
    assert.are.equal(2, rs:count())
    assert.are.same({ 1, 1, 1 }, flat(rs:mean()))
  end)

  it("builds from given statistics and raises on misuse", function()
    local rs = RunningStats{ mean = { 1, 2 }, var = { 4, 9 }, count = 10 }
    assert.are.same({ 2 }, rs:feature_shape())
    assert.are.same({ 4, 9 }, flat(rs:var()))
    assert.are.same({ 0, 0.5 }, flat(rs:normalize(T.tensor({ { 1, 3.5 } }), 1, 0)))
    H.raises(function() RunningStats():update(T.ones(2, 3)):update(T.ones(2, 4)) end,
      "RunningStats:update: the tensor's features have shape [4] (shape [2, 4] after 1 batch dims) "
        .. "but the statistics have [3]")
    H.raises(function() RunningStats():update(T.ones(2, 3), 3) end,
      "RunningStats:update: batch_dims 3 is out of range for a tensor of shape [2, 3] (0..2)")
    H.raises(function() RunningStats():update("x") end, "RunningStats:update: expected a tensor, got 'x'")
    H.raises(function() RunningStats():merge(5) end, "RunningStats:merge: expected a RunningStats, got 5")
    H.raises(function() RunningStats():update(T.ones(2, 3)):merge(RunningStats():update(T.ones(2, 2))) end,
      "RunningStats:merge: feature shapes differ: [3] and [2]")
    H.raises(function() RunningStats():mean() end, "RunningStats:mean: no data yet")
    H.raises(function() RunningStats{ mean = { 1 } } end, "the statistics need both mean and var")
    H.raises(function() RunningStats{ mean = { 1, 2 }, var = { 1, 2, 3 } } end, "var has shape [3], expected [2]")
    H.raises(function() RunningStats{ mean = 0, var = 1 }:update(T.ones(2)) end, "cannot be updated")
  end)
end)

-- A source of rows of x (and an int64 key) in batches of b.
local function source(x, b)
  local n = x:size(1)
  return flow.TensorSource{ td = T.TensorDict({ x = x, n = T.arange(1, n, "int64") }, { n }), batch_size = b }
end

describe("flow.Normalize", function()
  it("online: each batch with the statistics of every row so far, this batch included", function()
    local x = data(50, { 3 }, 5)
    local node = Normalize{ keys = "x", eps = 1e-3 }
    assert.is_true(node.update)
    assert.are.same({ "x" }, node.in_keys)
    local rows = rows_of(x)
    local it = source(x, 16):iter({})
    local seen = 0
    for td in it do
      local out = node(td)
      local n = #td
      seen = seen + n
      local so_far = {}
      for i = 1, seen do so_far[i] = rows[i] end
      local mean, var = reference(so_far)
      local got = out.x:totable()
      for i = 1, n do
        for j = 1, 3 do
          local want = (rows[seen - n + i][j] - mean[j]) / math.sqrt(var[j] + 1e-3)
          assert(math.abs(got[i][j] - want) <= 1e-5 * math.max(1, math.abs(want)),
            ("row %d: %g vs %g"):format(i, got[i][j], want))
        end
      end
      assert.are.equal("float32", out.x:dtype())
      assert.are.equal("int64", out.n:dtype()) -- other keys pass through
    end
    assert.are.equal(50, node.stats:get("x"):count())
  end)

  it("fitted: fit() makes the statistics of a first pass, applied unchanged", function()
    local x = data(100, { 2, 2 }, 6, "float64")
    local fitted = Normalize.fit(source(x, 32), { "x" })
    assert.are.equal(100, fitted:get("x"):count())
    local node = Normalize{ keys = { "x" }, stats = fitted }
    assert.is_false(node.update)
    local mean, var = reference(rows_of(x))
    local outs = {}
    for td in source(x, 40):iter({}) do outs[#outs + 1] = node(td).x end
    local out = T.cat(outs, 1)
    assert.are.same({ 100, 2, 2 }, out:shape())
    assert.are.equal("float64", out:dtype())
    local got = rows_of(out)
    local xr = rows_of(x)
    for i = 1, 100, 7 do
      for j = 1, 4 do
        local want = (xr[i][j] - mean[j]) / math.sqrt(var[j] + 1e-5)
        assert(math.abs(got[i][j] - want) <= 1e-12 * math.max(1, math.abs(want)))
      end
    end
    assert.are.equal(100, node.stats:get("x"):count()) -- not updated
    -- the standardised data: mean 0, variance ~1 (eps aside)
    local check = RunningStats():update(out)
    close_lists(flat(check:mean()), { 0, 0, 0, 0 }, 1e-12)
    for _, v in ipairs(flat(check:var())) do assert(math.abs(v - 1) < 1e-4) end
  end)

  it("online with the same data in two workers' halves merges to the one-pass statistics", function()
    local x = data(64, { 3 }, 7)
    local a, b = Normalize{ keys = "x" }, Normalize{ keys = "x" }
    a(T.TensorDict({ x = x[{ { 1, 20 } }] }, { 20 }))
    b(T.TensorDict({ x = x[{ { 21, 64 } }] }, { 44 }))
    a:merge(b)
    local one = RunningStats():update(x)
    close_lists(flat(a.stats:get("x"):mean()), flat(one:mean()), 1e-13)
    close_lists(flat(a.stats:get("x"):var()), flat(one:var()), 1e-12)
    H.raises(function() a:merge(3) end, "Normalize: merge: expected a Normalize node or a StatsSet, got 3")
  end)

  it("takes stats as plain tables, TensorDicts, folders; scalars broadcast", function()
    local x = T.tensor({ { 1, 2 }, { 3, 4 } })
    local td = T.TensorDict({ x = x }, { 2 })
    local plain = Normalize{ keys = "x", stats = { x = { mean = { 2, 3 }, var = { 1, 1 }, count = 2 } }, eps = 0 }
    assert.are.same({ { -1, -1 }, { 1, 1 } }, plain(td):get("x"):totable())
    local scalar = Normalize{ keys = "x", stats = { x = { mean = 1, var = 4 } }, eps = 0 }
    assert.are.same({ { 0, 0.5 }, { 1, 1.5 } }, scalar(T.TensorDict({ x = x }, { 2 })).x:totable())
    local as_td = Normalize{ keys = "x", eps = 0, stats = T.TensorDict({ x = { mean = T.tensor({ 2, 3 }, "float64"),
      var = T.tensor({ 1, 4 }, "float64"), count = T.tensor(2, "int64") } }) }
    assert.are.same({ { -1, -0.5 }, { 1, 0.5 } }, as_td(T.TensorDict({ x = x }, { 2 })).x:totable())
    -- a folder written by save_stats
    local dir = tmpdir()
    as_td:save_stats(dir .. "/stats")
    local loaded = T.load_memmap(dir .. "/stats")
    assert.are.same({ 2, 3 }, loaded:get({ "x", "mean" }):totable())
    assert.are.equal(2, loaded:get({ "x", "count" }):item())
    local from_dir = Normalize{ keys = "x", stats = dir .. "/stats", eps = 0 }
    assert.are.same({ { -1, -0.5 }, { 1, 0.5 } }, from_dir(T.TensorDict({ x = x }, { 2 })).x:totable())
    H.rmtree(dir)
  end)

  it("handles 0-row batches", function()
    local node = Normalize{ keys = "x" }
    local out = node(T.TensorDict({ x = T.zeros(0, 3) }, { 0 }))
    assert.are.same({ 0, 3 }, out.x:shape())
    assert.are.equal(0, node.stats:get("x"):count())
    node(T.TensorDict({ x = T.ones(3, 3) }, { 3 }))
    assert.are.equal(3, node.stats:get("x"):count())
    local fixed = Normalize{ keys = "x", stats = { x = { mean = { 0, 0, 0 }, var = { 1, 1, 1 } } } }
    assert.are.same({ 0, 3 }, fixed(T.TensorDict({ x = T.zeros(0, 3) }, { 0 })).x:shape())
  end)

  it("works on nested keys, out_keys, float16 and locked batches", function()
    local x = T.tensor({ { 1 }, { 3 } }, "float16")
    local td = T.TensorDict({ next = { obs = x } }, { 2 })
    td:lock()
    local node = Normalize{ keys = { { "next", "obs" } }, out_keys = { "z" }, eps = 0 }
    local out = node(td)
    assert.are.equal("float16", out.z:dtype())
    assert.are.same({ { -1 }, { 1 } }, out.z:totable())
    assert.are.same({ { 1 }, { 3 } }, out:get({ "next", "obs" }):totable())
    assert.is_nil(td:get("z")) -- the locked batch was copied, not changed
  end)

  it("raises naming the node, the key and the problem", function()
    local node = Normalize{ keys = "x" }
    H.raises(function() node(T.TensorDict({ x = T.ones(2, 3, "int64") }, { 2 })) end,
      "Normalize: 'x' has dtype int64; Normalize works on float leaves (cast it first")
    H.raises(function() node(T.TensorDict({ y = T.ones(2) }, { 2 })) end,
      "Normalize: key 'x' is missing from the batch (its keys: 'y')")
    node(T.TensorDict({ x = T.ones(2, 3) }, { 2 }))
    H.raises(function() node(T.TensorDict({ x = T.ones(2, 4) }, { 2 })) end,
      "Normalize: 'x': the tensor's features have shape [4] (shape [2, 4] after 1 batch dims) "
        .. "but the statistics have [3]")
    H.raises(function() Normalize{ keys = "x", stats = { y = { mean = 0, var = 1 } } } end,
      "Normalize: stats has no entry for key 'x' and update is false")
    H.raises(function() Normalize{ keys = "x", stats = 5 } end,
      "stats must be a table per key, a TensorDict, a folder path or a StatsSet, got 5")
    H.raises(function() Normalize{ keys = "x", stats = "/nonexistent/stats" } end,
      "Normalize: cannot load the statistics folder '/nonexistent/stats'")
    H.raises(function() Normalize{ keys = "x", stats = { x = { mean = 0, var = 1 } }, update = true } end,
      "have no count, so they cannot be updated")
    H.raises(function() Normalize{ keys = "x", eps = -1 } end, "Normalize: eps: expected number >= 0, got -1")
    H.raises(function() Normalize{ keys = "x", out_keys = { "a", "b" } } end, "keys has 1 keys but out_keys has 2")
  end)

  it("round-trips through spec(), with stats as numbers or as a folder", function()
    local x = data(30, { 2 }, 8)
    local node = Normalize{ keys = "x", eps = 0.5 }
    local td = T.TensorDict({ x = x }, { 30 })
    node(td)
    local spec = node:spec()
    assert.are.equal("Normalize", spec.type)
    assert.are.equal(30, spec.stats.x.count)
    assert.is_true(spec.update)
    local text = json.encode(spec) -- plain, JSON-safe data
    local again = flow.build(json.decode(text))
    assert.are.same(flat(node.stats:get("x"):mean()), flat(again.stats:get("x"):mean()))
    local probe = data(5, { 2 }, 9)
    again.update, node.update = false, false
    local function run(nd) return nd(T.TensorDict({ x = probe }, { 5 })).x:totable() end
    assert.are.same(run(node), run(again))
    -- a folder stays a folder in the spec
    local dir = tmpdir()
    node:save_stats(dir .. "/s")
    local from_dir = Normalize{ keys = "x", stats = dir .. "/s" }
    assert.are.same({ type = "Normalize", keys = { "x" }, stats = dir .. "/s", update = false }, from_dir:spec())
    assert.are.same(flat(from_dir.stats:get("x"):var()), flat(flow.build(from_dir:spec()).stats:get("x"):var()))
    -- an untouched online node: no stats in its spec
    assert.are.same({ type = "Normalize", keys = { "x" }, update = true }, Normalize{ keys = "x" }:spec())
    H.rmtree(dir)
  end)

  it("saves its statistics at close() when given a path, inside flow.run", function()
    local dir = tmpdir()
    local x = data(40, { 3 }, 10)
    local node = Normalize{ keys = "x", path = dir .. "/stats" }
    local out = flow.run(source(x, 16), node, flow.Collect{ cat = true })
    assert.are.same({ 40, 3 }, out.x:shape())
    local saved = T.load_memmap(dir .. "/stats")
    assert.are.equal(40, saved:get({ "x", "count" }):item())
    close_lists(saved:get({ "x", "mean" }):totable(), flat(RunningStats():update(x):mean()), 1e-13)
    H.rmtree(dir)
  end)
end)

describe("flow.ParticleSource", function()
  local ParticleSource = require("tensordict.flow.synthetic").ParticleSource

  local function everything(src, ctx)
    local list = {}
    for td in src:iter(ctx or {}) do list[#list + 1] = td end
    return list
  end

  it("yields the documented keys, shapes and dtypes, with a last partial batch", function()
    local src = ParticleSource{ n = 10, steps = 6, batch_size = 4, seed = 1 }
    assert.are.equal(10, src:len())
    assert.are.same({ "id", "mass", "pos", "vel", "energy" }, src.out_keys)
    local b = everything(src)
    assert.are.equal(3, #b)
    assert.are.same({ 2 }, b[3]:batch_size())
    local td = b[1]
    assert.are.same({ "id", "mass", "pos", "vel", "energy" }, td:keys())
    assert.are.same({ 4 }, td.id:shape()); assert.are.equal("int64", td.id:dtype())
    assert.are.same({ 4 }, td.mass:shape()); assert.are.equal("float32", td.mass:dtype())
    assert.are.same({ 4, 6, 3 }, td.pos:shape()); assert.are.equal("float32", td.pos:dtype())
    assert.are.same({ 4, 6, 3 }, td.vel:shape()); assert.are.equal("float32", td.vel:dtype())
    assert.are.same({ 4, 6 }, td.energy:shape()); assert.are.equal("float32", td.energy:dtype())
    assert.are.same({ 9, 10 }, b[3].id:totable())
    assert.is_true(td.mass:ge(0.5):all() and td.mass:lt(2):all())
    assert.are.equal(0, #everything(ParticleSource{ n = 0, steps = 3, batch_size = 4 }))
  end)

  it("follows the documented draws and integration rule", function()
    local dt, seed = 0.05, 7
    local td = T.cat(everything(ParticleSource{ n = 3, steps = 4, batch_size = 2, seed = seed, dt = dt }), 1)
    local g = T.Generator(seed)
    local pos0 = T.randn({ 3, 3 }, "float64", g)
    local vel0 = T.randn({ 3, 3 }, "float64", g) * 0.5
    local mass = T.rand({ 3 }, "float64", g) * 1.5 + 0.5
    for i = 1, 3 do
      local x, v, m = pos0[i]:totable(), vel0[i]:totable(), mass[i]
      for k = 1, 4 do
        H.assert_near(td.pos[{ i, k }]:totable(), x, 1e-6)
        H.assert_near(td.vel[{ i, k }]:totable(), v, 1e-6)
        local e = 0
        for j = 1, 3 do e = e + 0.5 * m * v[j] ^ 2 + 0.5 * x[j] ^ 2 end
        assert(math.abs(td.energy[{ i, k }] - e) <= 1e-5 * e)
        -- F = -x - 0.1 v + v x (0, 0, 1); v += F / m dt; x += v dt
        local cross = { v[2], -v[1], 0 }
        local nv = {}
        for j = 1, 3 do nv[j] = v[j] + (-x[j] - 0.1 * v[j] + cross[j]) / m * dt end
        for j = 1, 3 do x[j] = x[j] + nv[j] * dt end
        v = nv
      end
      assert(math.abs(td.mass[i] - m) < 1e-6)
    end
  end)

  it("is determined by the seed alone: any batch size, any thread count; ctx.seed by default", function()
    local a = T.cat(everything(ParticleSource{ n = 50, steps = 20, batch_size = 50, seed = 3 }), 1)
    local saved = T.get_num_threads()
    T.set_num_threads(1)
    local b = T.cat(everything(ParticleSource{ n = 50, steps = 20, batch_size = 7, seed = 3 }), 1)
    T.set_num_threads(saved)
    assert.is_true(a:equal(b))
    local c = T.cat(everything(ParticleSource{ n = 50, steps = 20, batch_size = 50 }, { seed = 3 }), 1)
    assert.is_true(a:equal(c))
    local d = T.cat(everything(ParticleSource{ n = 50, steps = 20, batch_size = 50, seed = 4 }), 1)
    assert.is_false(a.pos:eq(d.pos):all())
    -- damping takes energy away
    assert.is_true(a.energy[{ {}, 20 }]:lt(a.energy[{ {}, 1 }]):all())
  end)

  it("normalises through flow.run and round-trips through spec()", function()
    local src = ParticleSource{ n = 64, steps = 5, batch_size = 16, seed = 2, dt = 0.02 }
    local spec = src:spec()
    assert.are.same({ type = "ParticleSource", n = 64, steps = 5, batch_size = 16, seed = 2, dt = 0.02 }, spec)
    local fitted = Normalize.fit(flow.build(spec), { "pos", "energy" })
    assert.are.equal(64, fitted:get("pos"):count())
    assert.are.same({ 5, 3 }, fitted:get("pos"):feature_shape())
    local out = flow.run(src, Normalize{ keys = { "pos", "energy" }, stats = fitted }, flow.Collect{ cat = true })
    assert.are.same({ 64, 5, 3 }, out.pos:shape())
    local check = RunningStats():update(out.pos)
    for _, v in ipairs(flat(check:mean())) do assert(math.abs(v) < 1e-5) end
    H.raises(function() ParticleSource{ n = 1, steps = 1, batch_size = 1, dt = 0 } end,
      "ParticleSource: dt must be a finite number > 0, got 0")
    H.raises(function() ParticleSource{ n = -1, steps = 1, batch_size = 1 } end, "n: expected integer >= 0, got -1")
  end)
end)
