-- Normalize's nan policy and the kernels under it (issue 27, item 3): "error" (the
-- default) refuses a batch holding NaNs or infinities, naming the key, the batch and the
-- count, and leaves the statistics as they were; "ignore" takes the statistics over the
-- finite values, each feature counting its own, and lets NaN through; "propagate" is the
-- plain update. Statistics over finite values match a reference in Lua, keep their bits
-- for any thread count, merge, save, load and travel as plain data with their counts.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local stats = require("tensordict.flow.stats")

local RunningStats, Normalize, StatsSet = stats.RunningStats, stats.Normalize, stats.StatsSet

local function flat(t) return t:reshape(-1):totable() end

-- [n, 3] float64 data with NaNs at (5, 2), (7, 1), (8, 2) and +inf at (9, 3).
local function dirty(n, seed)
  local x = T.randn({ n, 3 }, "float64", T.Generator(seed or 1)) * 2 + 1
  x[{ 5, 2 }] = 0 / 0
  x[{ 7, 1 }] = 0 / 0
  x[{ 8, 2 }] = 0 / 0
  x[{ 9, 3 }] = math.huge
  return x
end

-- Per feature: count, mean and population variance of the finite values (Lua doubles).
local function finite_reference(x)
  local rows = x:totable()
  local count, mean, var = {}, {}, {}
  for j = 1, #rows[1] do
    local s, n = 0, 0
    for i = 1, #rows do
      local v = rows[i][j]
      if v == v and v ~= math.huge and v ~= -math.huge then s, n = s + v, n + 1 end
    end
    mean[j], count[j] = s / n, n
    local q = 0
    for i = 1, #rows do
      local v = rows[i][j]
      if v == v and v ~= math.huge and v ~= -math.huge then q = q + (v - mean[j]) ^ 2 end
    end
    var[j] = q / n
  end
  return count, mean, var
end

local function close(a, b, rel)
  assert.are.equal(#a, #b)
  for i = 1, #a do
    if math.abs(a[i] - b[i]) > rel * math.max(1, math.abs(b[i])) then
      error(("element %d: %.17g vs %.17g"):format(i, a[i], b[i]), 2)
    end
  end
end

local function batch(x) return T.TensorDict({ x = x }, { x:size(1) }) end

describe("Normalize nan = \"error\" (the default)", function()
  it("refuses the batch with its key, number and counts, and folds nothing in", function()
    local node = Normalize { keys = "x" }
    assert.are.equal("error", node.p.nan)
    local clean = T.randn({ 20, 3 }, "float32", T.Generator(2))
    node(batch(clean))
    local before_mean, before_m2 = flat(node.stats:get("x"):mean()), flat(node.stats:get("x"):m2())
    local err = H.raises(function() node(batch(dirty(50):to("float32"))) end,
      "Normalize: key 'x': batch 2 holds 3 NaN values and 1 infinite value (of 150 values); nothing was "
      .. "normalised. Clean the data upstream, or give nan = \"ignore\" (statistics over the finite values, "
      .. "NaN passes through) or nan = \"propagate\" (folded in: every later row becomes NaN)")
    assert.is_truthy(err:find("_spec.lua:%d+: tensordict: Normalize:"))
    local rs = node.stats:get("x")
    assert.are.equal(20, rs:count())
    assert.are.same(before_mean, flat(rs:mean()))
    assert.are.same(before_m2, flat(rs:m2()))
    -- a clean batch after the refused one goes on from the same state
    local out = node(batch(clean))
    assert.are.same({ 20, 3 }, out.x:shape())
    assert.are.equal("float32", out.x:dtype())
    assert.are.equal(40, node.stats:get("x"):count())
  end)

  it("names only what is there: NaNs alone, infinities alone", function()
    local x = T.zeros({ 4, 2 }, "float64")
    x[{ 1, 1 }] = 0 / 0
    H.raises(function() Normalize { keys = "x" }(batch(x)) end, "batch 1 holds 1 NaN value (of 8 values)")
    x[{ 1, 1 }] = -math.huge
    x[{ 2, 2 }] = math.huge
    H.raises(function() Normalize { keys = "x" }(batch(x)) end, "batch 1 holds 2 infinite values (of 8 values)")
  end)

  it("a refused later key puts the earlier keys' statistics back", function()
    local node = Normalize { keys = { "a", "b" } }
    local a, b = T.randn({ 10, 2 }, "float64", T.Generator(3)), T.randn({ 10, 2 }, "float64", T.Generator(4))
    node(T.TensorDict({ a = a, b = b }, { 10 }))
    local mean_a = flat(node.stats:get("a"):mean())
    local bad = b:clone()
    bad[{ 1, 1 }] = 0 / 0
    H.raises(function() node(T.TensorDict({ a = a * 3, b = bad }, { 10 })) end,
      "Normalize: key 'b': batch 2 holds 1 NaN value (of 20 values)")
    assert.are.equal(10, node.stats:get("a"):count())
    assert.are.same(mean_a, flat(node.stats:get("a"):mean()))
  end)

  it("checks fixed statistics' inputs too", function()
    local node = Normalize { keys = "x", stats = { x = { mean = { 0, 0, 0 }, var = { 1, 1, 1 } } } }
    H.raises(function() node(batch(dirty(12))) end,
      "Normalize: key 'x': batch 1 holds 3 NaN values and 1 infinite value (of 36 values)")
  end)

  it("is what tdflow and flow.run report, with the node's place", function()
    local src = flow.TensorSource { td = batch(dirty(40)), batch_size = 16 }
    local ok, err = pcall(flow.run, src, flow.Seq { Normalize { keys = "x" } }, flow.Discard {})
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find(
      "steps[1] (Normalize): key 'x': batch 1 holds 3 NaN values and 1 infinite value (of 48 values)", 1, true))
  end)
end)

describe("Normalize nan = \"ignore\"", function()
  it("takes the statistics over the finite values, per feature, and lets NaN through", function()
    local x = dirty(300)
    local node = Normalize { keys = "x", nan = "ignore", eps = 0 }
    local out = node(batch(x)).x
    local count, mean, var = finite_reference(x)
    local rs = node.stats:get("x")
    assert.are.equal(300, rs:count())
    assert.are.same(count, flat(rs:counts()))
    assert.are.equal("int64", rs:counts():dtype())
    close(flat(rs:mean()), mean, 1e-13)
    close(flat(rs:var()), var, 1e-12)
    assert.is_true(out[{ 5, 2 }] ~= out[{ 5, 2 }])
    assert.are.equal(math.huge, out[{ 9, 3 }])
    local v = x[{ 1, 1 }]
    assert.is_true(math.abs(out[{ 1, 1 }] - (v - mean[1]) / math.sqrt(var[1])) < 1e-12)
  end)

  it("gives the same bits for 1, 2 and 4 threads, contiguous or strided", function()
    local big = T.randn({ 70000, 9 }, "float32", T.Generator(5))
    big[{ 100, 3 }] = 0 / 0
    big[{ 40000, 3 }] = -math.huge
    big[{ 65000, 9 }] = 0 / 0
    local results = {}
    local saved = T.get_num_threads()
    for _, threads in ipairs({ 1, 2, 4 }) do
      T.set_num_threads(threads)
      local a = RunningStats():update(big, 1, "ignore")
      local b = RunningStats():update(big:t():contiguous():t(), 1, "ignore") -- strided features
      results[#results + 1] = { flat(a:mean()), flat(a:m2()), flat(a:counts()), flat(b:mean()), flat(b:m2()) }
    end
    T.set_num_threads(saved)
    assert.are.same(results[1], results[2])
    assert.are.same(results[1], results[3])
    assert.are.same(results[1][1], results[1][4])
    assert.are.same({ 70000, 70000, 69998, 70000, 70000, 70000, 70000, 70000, 69999 }, results[1][3])
  end)

  it("merges batch by batch as one pass does, and with plain statistics", function()
    local x = dirty(200)
    local one = RunningStats():update(x, 1, "ignore")
    local parts = RunningStats()
    for i = 1, 200, 37 do parts:update(x[{ { i, math.min(i + 36, 200) } }], 1, "ignore") end
    assert.are.same(flat(one:counts()), flat(parts:counts()))
    close(flat(parts:mean()), flat(one:mean()), 1e-13)
    close(flat(parts:m2()), flat(one:m2()), 1e-12)
    -- a plain state (one count) merged into a per-feature one, and the reverse
    local clean = T.randn({ 30, 3 }, "float64", T.Generator(7))
    local a = RunningStats():update(x, 1, "ignore"):merge(RunningStats():update(clean))
    local b = RunningStats():update(clean):merge(RunningStats():update(x, 1, "ignore"))
    local count = finite_reference(x)
    for j = 1, 3 do count[j] = count[j] + 30 end
    assert.are.same(count, flat(a:counts()))
    assert.are.same(count, flat(b:counts()))
    assert.are.equal(230, a:count())
    close(flat(a:mean()), flat(b:mean()), 1e-13)
    -- "propagate" and "error" into per-feature counts: the batch's rows count for each feature
    local c = RunningStats():update(x, 1, "ignore"):update(clean, 1, "error")
    assert.are.same(count, flat(c:counts()))
  end)

  it("saves, loads, and travels as plain data with its counts", function()
    local node = Normalize { keys = "x", nan = "ignore" }
    node(batch(dirty(60)))
    local dir = H.tmpdir()
    node:save_stats(dir .. "/s")
    local loaded = T.load_memmap(dir .. "/s")
    assert.are.same({ 3 }, loaded.x.counts:shape())
    assert.are.same(flat(node.stats:get("x"):counts()), flat(loaded.x.counts))
    local again = Normalize { keys = "x", stats = dir .. "/s", update = true, nan = "ignore" }
    assert.are.same(flat(node.stats:get("x"):counts()), flat(again.stats:get("x"):counts()))
    close(flat(again.stats:get("x"):var()), flat(node.stats:get("x"):var()), 1e-15)
    local plain = node.stats:to_plain()
    assert.are.same(flat(node.stats:get("x"):counts()), plain.x.counts)
    local back = RunningStats.from(plain.x)
    assert.are.same(plain.x.counts, flat(back:counts()))
    local spec = node:spec()
    assert.are.equal("ignore", spec.nan)
    assert.are.same(plain.x.counts, spec.stats.x.counts)
    H.raises(function()
      RunningStats.from { mean = { 0, 0 }, var = { 1, 1 }, count = 3, counts = { 4, 1 } }
    end,
      "RunningStats.from: counts must be integers in 0..count (3), one per feature")
    H.rmtree(dir)
  end)

  it("StatsSet and Normalize.fit take the policy", function()
    local x = dirty(50)
    local set = StatsSet({ "x" }):update(batch(x), "ignore")
    assert.are.same((finite_reference(x)), flat(set:get("x"):counts()))
    local src = flow.TensorSource { td = batch(x), batch_size = 20 }
    H.raises(function() Normalize.fit(src, "x") end,
      "Normalize.fit: batch 1: RunningStats:update: the tensor holds 3 NaN values and 1 infinite value; "
      .. "nothing was folded in")
    local fitted = Normalize.fit(src, "x", { nan = "ignore" })
    assert.are.same(flat(set:get("x"):counts()), flat(fitted:get("x"):counts()))
    H.raises(function() Normalize.fit(src, "x", { nan = "skip" }) end,
      "RunningStats:update: nan must be \"error\", \"ignore\", \"propagate\", got 'skip'")
    H.raises(function() Normalize.fit(src, "x", { nans = "skip" }) end, "Normalize.fit: unknown option 'nans'")
  end)
end)

describe("Normalize nan = \"propagate\"", function()
  it("is today's plain update, chosen explicitly: every row becomes NaN", function()
    local node = Normalize { keys = "x", nan = "propagate" }
    assert.are.same({ type = "Normalize", keys = { "x" }, update = true, nan = "propagate" }, node:spec())
    local out = node(batch(dirty(30))).x
    for _, v in ipairs(flat(out)) do assert.is_true(v ~= v) end
    assert.are.equal(30, node.stats:get("x"):count())
  end)

  it("refuses an unknown policy by name", function()
    H.raises(function() Normalize { keys = "x", nan = "skip" } end,
      "Normalize: nan: expected one of \"error\", \"ignore\", \"propagate\", got \"skip\"")
    H.raises(function() RunningStats():update(T.zeros({ 2 }), 1, 3) end,
      "RunningStats:update: nan must be \"error\", \"ignore\", \"propagate\", got 3")
  end)

  it("RunningStats:update keeps propagate as its default; error refuses without folding in", function()
    local x = dirty(10)
    local rs = RunningStats():update(x)
    assert.is_true(flat(rs:mean())[1] ~= flat(rs:mean())[1])
    local clean = RunningStats():update(T.ones({ 3, 3 }, "float64"))
    H.raises(function() clean:update(x, 1, "error") end,
      "RunningStats:update: the tensor holds 3 NaN values and 1 infinite value; nothing was folded in")
    assert.are.same({ 1, 1, 1 }, flat(clean:mean()))
    assert.are.equal(3, clean:count())
  end)
end)
