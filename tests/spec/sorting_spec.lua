-- sorting_spec.lua: sorting, selection and counting (tensor/sorting.lua over
-- core/kernels/sort.c, select.c, unique.c, histogram.c, search.c): exact values and
-- 1-based indices, every dtype, 0-dim, empty and non-contiguous inputs, NaN, -0.0, ties,
-- the paths long rows take (the radix sort's 11-bit digits, topk's heap and selection,
-- unique's counting and sorting) and every error message. torch_sorting_spec.lua
-- checks the same functions against torch itself.
local T = require("tensordict")
local H = require("helpers")

local nan, inf = 0 / 0, 1 / 0
local DTYPES = { "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64" }

local function dims(t)
  local size, out = t:size(), {}
  for i = 1, #size do out[i] = size[i] end
  return out
end

-- The stable order of a Lua list by torch.sort's rule (NaN greatest), 1-based positions.
local function stable_order(list, descending)
  local order = {}
  for i = 1, #list do order[i] = i end
  local function key(v) return v ~= v and math.huge or v end
  table.sort(order, function(a, b)
    local x, y = list[a], list[b]
    local xn, yn = x ~= x, y ~= y
    if xn ~= yn then
      if descending then return xn end
      return yn
    end
    if not xn and key(x) ~= key(y) then
      if descending then return key(x) > key(y) end
      return key(x) < key(y)
    end
    return a < b
  end)
  return order
end

describe("sort and argsort", function()
  it("NaN greatest, stable, -0.0 equal to 0.0, any dim, 1-based int64 indices", function()
    local t = T.tensor({ { 3, 1, nan, 2 }, { 5, 5, -1, 0 } })
    local v, i = t:sort()
    H.assert_near({ { 1, 2, 3, nan }, { -1, 0, 5, 5 } }, v:totable(), 0)
    assert.are.same({ { 2, 4, 1, 3 }, { 3, 4, 1, 2 } }, i:totable())
    assert.are.equal("int64", i:dtype())
    v, i = t:sort(2, true)
    H.assert_near({ { nan, 3, 2, 1 }, { 5, 5, 0, -1 } }, v:totable(), 0)
    assert.are.same({ { 3, 1, 4, 2 }, { 1, 2, 4, 3 } }, i:totable())
    i = select(2, t:sort(1))
    assert.are.same({ { 1, 1, 2, 2 }, { 2, 2, 1, 1 } }, i:totable())
    assert.are.same({ { 1, 1, 2, 2 }, { 2, 2, 1, 1 } }, t:argsort(1):totable())
    -- -0.0 and 0.0 tie: their first order, each keeping its sign
    local z = T.tensor({ 0, -0.0, -1, 0 })
    v, i = z:sort()
    assert.are.same({ 3, 1, 2, 4 }, i:totable())
    assert.are.equal(-math.huge, 1 / v[3]) -- -0.0 stays -0.0
    i = select(2, z:sort(1, true))
    assert.are.same({ 1, 2, 4, 3 }, i:totable())
    -- infinities around everything, NaN past +inf
    v = T.tensor({ inf, nan, -inf, 1 }):sort()
    H.assert_near({ -inf, 1, inf, nan }, v:totable(), 0)
  end)

  it("every dtype keeps its dtype; int64 past 2^53 compared as int64", function()
    for _, dtype in ipairs(DTYPES) do
      local x = T.tensor({ 1, 0, 1, 0 }, dtype)
      local sv, si = x:sort()
      assert.are.equal(dtype, sv:dtype())
      assert.are.same({ 2, 4, 1, 3 }, si:totable(), dtype)
      assert.are.same({ 1, 3, 2, 4 }, x:argsort(1, true):totable(), dtype)
    end
    for _, dtype in ipairs({ "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64" }) do
      local x = T.tensor({ 3, -2, 0, -7, 5 }, dtype)
      assert.are.same({ -7, -2, 0, 3, 5 }, x:sort():totable(), dtype)
      assert.are.same({ 5, 3, 0, -2, -7 }, x:sort(1, true):totable(), dtype)
    end
    assert.are.same({ 0, 7, 200, 255 }, T.tensor({ 255, 0, 200, 7 }, "uint8"):sort():totable())
    local big = T.tensor({ 2 ^ 53, 2 ^ 53 }, "int64") + T.tensor({ 1, 0 }, "int64")
    assert.are.same({ 2, 1 }, big:argsort():totable())
    local ext = T.tensor({ 0, -1, 1 }, "int64")
    ext[2] = -2 ^ 63
    ext[3] = 2 ^ 63 - 1024
    assert.are.same({ 2, 1, 3 }, ext:argsort():totable())
  end)

  it("0-dim, empty and non-contiguous inputs", function()
    local s0, i0 = T.tensor(5):sort()
    assert.are.same({ 5, 1 }, { s0:item(), i0:item() })
    assert.are.same({}, dims(s0))
    local e, ei = T.zeros(0, 3):sort(1)
    assert.are.same({ 0, 3 }, dims(e))
    assert.are.same({ 0, 3 }, dims(ei))
    assert.are.same({ 4, 0 }, dims(T.zeros(4, 0):sort()))
    local m = T.tensor({ { 4, 1, 3 }, { 2, 6, 5 } })
    local v, i = m:t():sort(1) -- transposed: columns of m sorted
    assert.are.same({ { 1, 2 }, { 3, 5 }, { 4, 6 } }, v:totable())
    assert.are.same({ { 2, 1 }, { 3, 3 }, { 1, 2 } }, i:totable())
    local stepped = T.arange(10, 1, -1)[{ { 1, 10, 3 } }] -- 10, 7, 4, 1
    assert.are.same({ 1, 4, 7, 10 }, stepped:sort():totable())
    assert.are.same({ 4, 3, 2, 1 }, stepped:argsort():totable())
    local x = T.arange(1, 24):view(2, 3, 4)
    v = x:sort(2, true)
    assert.are.same({ 9, 10, 11, 12 }, v[1][1]:totable())
    assert.is_true(v:is_contiguous())
  end)

  it("long rows (radix digits of 11 bits, the pool's chunks) give the stable order, at any thread count", function()
    local n = 70000
    local x = (T.randn(n) * 4):round() -- many ties
    x[7] = nan
    x[n - 3] = nan
    local list = x:totable()
    local want = stable_order(list, false)
    local threads = T.get_num_threads()
    for _, th in ipairs({ 1, 2, 3 }) do
      T.set_num_threads(th)
      local v, i = x:sort()
      assert.are.same(want, i:totable())
      assert.are.equal(list[want[100]], v[100])
      local _, di = x:sort(1, true)
      assert.are.same(stable_order(list, true), di:totable())
    end
    T.set_num_threads(threads)
  end)

  it("raises for a bad dim or descending", function()
    local t = T.ones(2, 3)
    H.raises(function() t:sort(3) end, "sort: dim 3 is out of range for a tensor of 2 dims (expected 1..2 or -2..-1)")
    H.raises(function() t:sort(1, 1) end, "sort: descending must be a boolean, got 1")
    H.raises(function() t:argsort(0) end, "sort: dim 0 is out of range")
    H.raises(function() T.Tensor.sort(3) end, "sort: expected a tensor, got 3")
  end)
end)

describe("topk and kthvalue", function()
  it("the k largest (smallest) in order, ties to the lower index", function()
    local t = T.tensor({ { 3, 1, 4, 2 }, { 8, 6, 7, 5 } })
    local v, i = t:topk(2)
    assert.are.same({ { 4, 3 }, { 8, 7 } }, v:totable())
    assert.are.same({ { 3, 1 }, { 1, 3 } }, i:totable())
    v, i = t:topk(1, 1, false)
    assert.are.same({ { 3, 1, 4, 2 } }, v:totable())
    assert.are.same({ { 1, 1, 1, 1 } }, i:totable())
    v, i = T.tensor({ 2, 5, 5, 1, 5 }):topk(2)
    assert.are.same({ 5, 5 }, v:totable())
    assert.are.same({ 2, 3 }, i:totable())
    v, i = T.tensor({ 2, 5, nan, 1, 5 }):topk(2) -- NaN the largest
    H.assert_near({ nan, 5 }, v:totable(), 0)
    assert.are.same({ 3, 2 }, i:totable())
    v, i = T.tensor({ 2, 5, nan, 1, 5 }):topk(2, 1, false, true)
    assert.are.same({ 1, 2 }, v:totable())
    assert.are.same({ 4, 1 }, i:totable())
    assert.are.same({ 2, 0 }, dims(t:topk(0)))
    assert.are.same({ 2, 4 }, dims(t:topk(4)))
    local s0, i0 = T.tensor(7):topk(1)
    assert.are.same({ 7, 1 }, { s0:item(), i0:item() })
    v, i = t:t():topk(1, 2) -- non-contiguous: the columns of t
    assert.are.same({ { 8 }, { 6 }, { 7 }, { 5 } }, v:totable())
    assert.are.same({ { 2 }, { 2 }, { 2 }, { 2 } }, i:totable())
  end)

  it("the heap (small k of a long row) and the selection (large k) agree with the sort", function()
    local threads = T.get_num_threads()
    for _, dtype in ipairs({ "float32", "int32", "float64", "int64", "float16", "uint8" }) do
      local x = (T.randn(20000) * 50):to(dtype)
      local sv, si = x:sort(1, true)
      local av, ai = x:sort()
      for _, th in ipairs({ 1, 2 }) do
        T.set_num_threads(th)
        for _, k in ipairs({ 1, 10, 1000, 5000, 20000 }) do
          local v, i = x:topk(k)
          assert.are.same(si:narrow(1, 1, k):totable(), i:totable(), dtype .. " k " .. k)
          H.assert_near(sv:narrow(1, 1, k):totable(), v:totable(), 0)
          _, i = x:topk(k, 1, false)
          assert.are.same(ai:narrow(1, 1, k):totable(), i:totable(), dtype .. " smallest k " .. k)
        end
        local kv, ki = x:kthvalue(777)
        assert.are.equal(ai[777], ki:item())
        assert.are.equal(av[777], kv:item())
      end
    end
    T.set_num_threads(threads)
  end)

  it("kthvalue: the stable sort's k-th, keepdim", function()
    local t = T.tensor({ { 3, 1, 4, 2 }, { 8, 6, 7, 5 } })
    local v, i = t:kthvalue(2)
    assert.are.same({ 2, 6 }, v:totable())
    assert.are.same({ 4, 2 }, i:totable())
    v, i = t:kthvalue(1, 1, true)
    assert.are.same({ { 3, 1, 4, 2 } }, v:totable())
    assert.are.same({ { 1, 1, 1, 1 } }, i:totable())
    v, i = T.tensor({ 2, 1, 2, 2, 1 }):kthvalue(3) -- ties: the first 2
    assert.are.same({ 2, 1 }, { v:item(), i:item() })
    v, i = T.tensor({ 1, nan, 0 }):kthvalue(3)
    assert.is_true(v:item() ~= v:item())
    assert.are.equal(2, i:item())
    v = T.tensor(4):kthvalue(1)
    assert.are.equal(4, v:item())
  end)

  it("raises for k out of range and bad flags", function()
    local t = T.ones(2, 4)
    H.raises(function() t:topk(5) end, "topk: k must be an integer in 0..4 (the size of the dim), got 5")
    H.raises(function() t:topk(-1) end, "topk: k must be an integer in 0..4 (the size of the dim), got -1")
    H.raises(function() t:topk(1.5) end, "topk: k must be an integer in 0..4")
    H.raises(function() t:topk(1, 3) end, "topk: dim 3 is out of range")
    H.raises(function() t:topk(1, 1, "yes") end, "topk: largest must be a boolean, got 'yes'")
    H.raises(function() t:topk(1, 1, true, 0) end, "topk: sorted must be a boolean, got 0")
    H.raises(function() t:kthvalue(0) end, "kthvalue: k must be an integer in 1..4, got 0")
    H.raises(function() t:kthvalue(5) end, "kthvalue: k must be an integer in 0..4 (the size of the dim), got 5")
    H.raises(function() T.zeros(0):kthvalue(1) end, "kthvalue: k must be an integer in 0..0")
  end)
end)

describe("median, nanmedian and mode", function()
  it("median: the lower median, NaN propagates; over everything a Lua value", function()
    assert.are.equal(2, T.tensor({ 3, 1, 2, 4 }):median())
    assert.are.equal(3, T.tensor({ 3, 1, 5 }):median())
    assert.are.equal(2, T.tensor({ 3, 1, 2, 4 }, "int64"):median())
    local m = T.tensor({ 1, nan, 3 }):median()
    assert.is_true(m ~= m)
    local e = T.tensor({}):median()
    assert.is_true(e ~= e)
    assert.are.equal(3, T.tensor(3):median())
    local v, i = T.tensor({ { 2, 1, 2, 2, 1 }, { 5, 4, 3, 2, 1 } }):median(2)
    assert.are.same({ 2, 3 }, v:totable())
    assert.are.same({ 1, 3 }, i:totable()) -- ties: the first of the stable order
    v, i = T.tensor({ 3, nan, 2, nan }):median(1)
    assert.is_true(v:item() ~= v:item())
    assert.are.equal(2, i:item()) -- the first NaN
    v, i = T.tensor({ { 1, 2, 3 } }):median(2, true)
    assert.are.same({ { 2 } }, v:totable())
    assert.are.same({ { 2 } }, i:totable())
    v, i = T.tensor(4.5):median(1)
    assert.are.same({ 4.5, 1 }, { v:item(), i:item() })
    assert.are.same({ 1, "float16" }, { T.tensor({ 3, 1 }, "float16"):median(1):item(),
      T.tensor({ 3, 1 }, "float16"):median(1):dtype() })
  end)

  it("nanmedian leaves NaN out (NaN for a row of NaN)", function()
    assert.are.equal(1, T.tensor({ 1, nan, 2, nan, 0 }):nanmedian())
    local v, i = T.tensor({ { 3, nan, 2, nan }, { nan, nan, nan, nan } }):nanmedian(2)
    H.assert_near({ 2, nan }, v:totable(), 0)
    assert.are.equal(3, i[1])
    v, i = T.tensor({ nan, 3, nan, 1, 2, 2 }):nanmedian(1)
    assert.are.same({ 2, 5 }, { v:item(), i:item() })
    local e = T.tensor({}):nanmedian()
    assert.is_true(e ~= e)
  end)

  it("mode: the smallest most frequent value, at its last index; each NaN once", function()
    local v, i = T.tensor({ 3, 1, 3, 1, 2 }):mode()
    assert.are.same({ 1, 4 }, { v:item(), i:item() })
    v, i = T.tensor({ { 1, 2, 2, 1, 5, 5 }, { 7, 7, 7, 0, 0, 1 } }, "int64"):mode(2)
    assert.are.same({ 1, 7 }, v:totable())
    assert.are.same({ 4, 3 }, i:totable())
    v, i = T.tensor({ nan, nan, 1, 1, nan }):mode()
    assert.are.same({ 1, 4 }, { v:item(), i:item() })
    v, i = T.tensor({ true, false, true }):mode()
    assert.are.same({ true, 3 }, { v:item(), i:item() })
    v, i = T.tensor({ 0, -0.0, 1 }):mode()
    assert.are.equal(-math.huge, 1 / v:item()) -- the last of the run: -0.0
    assert.are.equal(2, i:item())
    v, i = T.tensor({ { 1, 2 }, { 1, 3 } }):mode(1, true)
    assert.are.same({ { 1, 2 } }, v:totable())
    assert.are.same({ { 2, 1 } }, i:totable())
    v, i = T.tensor(3):mode()
    assert.are.same({ 3, 1 }, { v:item(), i:item() })
  end)

  it("raises for bool medians, empty dims and keepdim without dim", function()
    H.raises(function() T.tensor({ true }):median() end, "median: bool tensors have no median (torch refuses them too)")
    H.raises(function() T.tensor({ true }):nanmedian(1) end, "nanmedian: bool tensors have no median")
    H.raises(function() T.zeros(0, 3):median(1) end, "median: cannot reduce over dim 1 of size 0")
    H.raises(function() T.zeros(0, 3):mode(1) end, "mode: cannot reduce over dim 1 of size 0")
    H.raises(function() T.ones(3):median(nil, true) end, "median: keepdim needs a dim")
    H.raises(function() T.ones(3):mode(2) end, "mode: dim 2 is out of range")
    assert.are.same({ 0 }, dims(T.zeros(3, 0):median(1)))
  end)
end)

describe("quantile and nanquantile", function()
  it("every interpolation, torch's ranks and rounding (nearest: half to even)", function()
    local x = T.tensor({ 0, 1, 2, 3, 4 })
    local q = { 0.1, 0.125, 0.375, 0.5, 0.625, 0.9 }
    local want = {
      linear = { 0.4, 0.5, 1.5, 2, 2.5, 3.6 }, lower = { 0, 0, 1, 2, 2, 3 },
      higher = { 1, 1, 2, 2, 3, 4 }, midpoint = { 0.5, 0.5, 1.5, 2, 2.5, 3.5 },
      nearest = { 0, 0, 2, 2, 2, 4 },
    }
    for mode, values in pairs(want) do
      H.assert_near(values, x:quantile(q, nil, false, mode):totable(), 1e-6)
      H.assert_near(values, x:quantile(T.tensor(q), 1, false, mode):totable(), 1e-6)
    end
    assert.is_true(math.abs(T.tensor({ 1, 2, 3, 4 }):quantile(0.4) - 2.2) < 1e-6)
    assert.are.equal(2.5, T.tensor({ 4, 1, 3, 2 }, "float64"):quantile(0.5))
    assert.are.equal(3, T.tensor(3):quantile(0.3))
  end)

  it("dims, keepdim, NaN", function()
    local m = T.tensor({ { 1, 2, 3, 4 }, { 10, 20, 30, 40 } })
    assert.are.same({ 2.5, 25 }, m:quantile(0.5, 2):totable())
    assert.are.same({ { 2.5 }, { 25 } }, m:quantile(0.5, 2, true):totable())
    local r = m:quantile({ 0, 1 }, 2, true)
    assert.are.same({ 2, 2, 1 }, dims(r))
    assert.are.same({ { { 1 }, { 10 } }, { { 4 }, { 40 } } }, r:totable())
    assert.are.same({ 2, 4 }, dims(m:quantile({ 0.1, 0.9 }, 1)))
    assert.are.same({ 1, 1 }, dims(m:quantile(0.5, nil, true)))
    assert.are.same({ 2, 1, 1 }, dims(m:quantile({ 0.25, 0.5 }, nil, true)))
    local n = T.tensor({ { 1, nan, 3 }, { nan, nan, nan } })
    H.assert_near({ nan, nan }, n:quantile(0.5, 2):totable(), 0)
    H.assert_near({ { 1.5, nan }, { 2, nan } }, n:nanquantile({ 0.25, 0.5 }, 2):totable(), 1e-6)
    assert.are.equal(2, T.tensor({ 1, nan, 3 }):nanquantile(0.5))
  end)

  it("raises for bad inputs, q and interpolation", function()
    local x = T.tensor({ 1, 2, 3 })
    H.raises(function() T.tensor({ 1, 2 }, "int64"):quantile(0.5) end,
      "quantile: the input must be float32 or float64, got int64")
    H.raises(function() T.tensor({ 1, 2 }, "float16"):quantile(0.5) end, "got float16")
    H.raises(function() x:quantile(1.5) end, "quantile: q must be in [0, 1], got 1.5")
    H.raises(function() x:quantile(nan) end, "quantile: q must be in [0, 1], got nan")
    H.raises(function() x:nanquantile({ 0.5, -1 }) end, "nanquantile: q must be in [0, 1], got -1")
    H.raises(function() x:quantile(T.tensor({ 0.5 }, "float64")) end,
      "quantile: q must have the input's dtype float32, got float64")
    H.raises(function() x:quantile(T.tensor({ { 0.5 } })) end,
      "quantile: q must be a number or a 0-D or 1-D tensor, got 2 dims")
    H.raises(function() x:quantile({ 0.5, "a" }) end, "quantile: q[2] must be a number, got 'a'")
    H.raises(function() x:quantile(true) end, "quantile: q must be a number, a list of numbers or a tensor, got true")
    H.raises(function() x:quantile(0.5, 1, false, "foo") end,
      "quantile: interpolation must be one of linear, lower, higher, midpoint or nearest, got 'foo'")
    H.raises(function() x:quantile(0.5, 1, 1) end, "quantile: keepdim must be a boolean, got 1")
    H.raises(function() x:quantile(0.5, 2) end, "quantile: dim 2 is out of range")
    H.raises(function() T.tensor({}):quantile(0.5) end, "quantile: the input is empty")
    H.raises(function() T.zeros(0, 3):quantile(0.5, 2) end, "quantile: the input is empty")
  end)
end)

describe("unique and unique_consecutive", function()
  it("sorted values, 1-based inverse, counts; NaN each its own, last; -0.0 the first of its run", function()
    local x = T.tensor({ 3, nan, 1, nan, 1, 0, -0.0 })
    local v, i, c = x:unique(true, true, true)
    H.assert_near({ 0, 1, 3, nan, nan }, v:totable(), 0)
    assert.are.same({ 3, 4, 2, 5, 2, 1, 1 }, i:totable())
    assert.are.same({ 2, 2, 1, 1, 1 }, c:totable())
    assert.are.equal(math.huge, 1 / T.tensor({ 0, -0.0, 1 }):unique()[1])
    assert.are.equal(-math.huge, 1 / T.tensor({ -0.0, 0, 1 }):unique()[1])
    v, c = T.tensor({ 3, 1, 3 }):unique({ return_counts = true })
    assert.are.same({ 1, 3 }, v:totable())
    assert.are.same({ 1, 2 }, c:totable())
    v, i = T.tensor({ 3, 1, 3 }):unique({ return_inverse = true, sorted = false })
    assert.are.same({ 1, 3 }, v:totable())
    assert.are.same({ 2, 1, 2 }, i:totable())
    v = T.tensor({ { 2, 1 }, { 1, 2 } }):unique()
    assert.are.same({ 1, 2 }, v:totable())
    i = select(2, T.tensor({ { 2, 1 }, { 1, 5 } }):unique(true, true))
    assert.are.same({ { 2, 1 }, { 1, 3 } }, i:totable()) -- the input's shape
  end)

  it("every dtype; integers by counting or by sorting; 0-dim, empty, non-contiguous", function()
    for _, dtype in ipairs(DTYPES) do
      local x = T.tensor({ 1, 0, 1, 1 }, dtype)
      local v, i, c = x:unique(true, true, true)
      assert.are.equal(dtype, v:dtype())
      assert.are.same({ 2, 1, 2, 2 }, i:totable(), dtype)
      assert.are.same({ 1, 3 }, c:totable(), dtype)
    end
    -- a wide range: sorted, not counted
    local w = T.tensor({ 5e9, -3, 5e9, 7, -3 }, "int64")
    local v, i, c = w:unique(true, true, true)
    assert.are.same({ -3, 7, 5e9 }, v:totable())
    assert.are.same({ 3, 1, 3, 2, 1 }, i:totable())
    assert.are.same({ 2, 1, 2 }, c:totable())
    -- a long narrow one: counted on the pool's chunks
    local r = T.randint(-50, 50, { 100000 }, "int32")
    v, i, c = r:unique(true, true, true)
    assert.are.equal(r:max() - r:min() + 1, v:numel())
    assert.are.equal(100000, c:sum())
    assert.are.same(r:totable(), v:index_select(1, i):totable())
    v, i, c = T.tensor(5):unique(true, true, true)
    assert.are.same({ { 5 }, 1, { 1 } }, { v:totable(), i:item(), c:totable() })
    v, i, c = T.tensor({}):unique(true, true, true)
    assert.are.same({ { 0 }, { 0 }, { 0 } }, { dims(v), dims(i), dims(c) })
    local t = T.tensor({ { 3, 1 }, { 2, 3 } }):t()
    v, i = t:unique(true, true)
    assert.are.same({ 1, 2, 3 }, v:totable())
    assert.are.same({ { 3, 2 }, { 1, 3 } }, i:totable())
  end)

  it("dim: distinct slices in lexicographic order", function()
    local x = T.tensor({ { 1, 2 }, { 0, 5 }, { 1, 2 } }, "int64")
    local v, i, c = x:unique(true, true, true, 1)
    assert.are.same({ { 0, 5 }, { 1, 2 } }, v:totable())
    assert.are.same({ 2, 1, 2 }, i:totable())
    assert.are.same({ 1, 2 }, c:totable())
    v, i, c = T.tensor({ { 1, 2, 1 }, { 0, 5, 0 } }):unique({ dim = 2, return_inverse = true, return_counts = true })
    assert.are.same({ { 1, 2 }, { 0, 5 } }, v:totable())
    assert.are.same({ 1, 2, 1 }, i:totable())
    assert.are.same({ 2, 1 }, c:totable())
    c = select(2, T.tensor({ { 1, nan }, { 1, nan } }):unique({ dim = 1, return_counts = true }))
    assert.are.same({ 1, 1 }, c:totable()) -- a slice with a NaN equals no other
    assert.are.same({ 0, 3 }, dims(T.zeros(0, 3):unique(true, false, false, 1)))
  end)

  it("unique_consecutive: runs collapsed in order", function()
    local v, i, c = T.tensor({ 1, 1, nan, nan, 2, 2, 1 }):unique_consecutive(true, true)
    H.assert_near({ 1, nan, nan, 2, 1 }, v:totable(), 0)
    assert.are.same({ 1, 1, 2, 3, 4, 4, 5 }, i:totable())
    assert.are.same({ 2, 1, 1, 2, 1 }, c:totable())
    v = T.tensor({ 3, -0.0, 0, 0 }):unique_consecutive()
    assert.are.same({ 3, 0 }, v:totable())
    assert.are.equal(-math.huge, 1 / v[2])
    v, i, c = T.tensor({ { 1, 2 }, { 1, 2 }, { 0, 5 }, { 1, 2 } }):unique_consecutive({ dim = 1, return_inverse = true,
      return_counts = true })
    assert.are.same({ { 1, 2 }, { 0, 5 }, { 1, 2 } }, v:totable())
    assert.are.same({ 1, 1, 2, 3 }, i:totable())
    assert.are.same({ 2, 1, 1 }, c:totable())
    v, i = T.tensor({ { 1, 1 }, { 2, 1 } }, "int64"):unique_consecutive(true)
    assert.are.same({ 1, 2, 1 }, v:totable())
    assert.are.same({ { 1, 1 }, { 2, 3 } }, i:totable())
    local long = T.arange(1, 100000):div(7):floor()
    v, c = long:unique_consecutive({ return_counts = true })
    assert.are.equal(long[-1] + 1, v:numel())
    assert.are.equal(100000, c:sum())
  end)

  it("raises for bad options and dims", function()
    local x = T.ones(2, 3)
    H.raises(function() x:unique({ foo = 1 }) end,
      "unique: unknown option 'foo' (options: dim, return_counts, return_inverse, sorted)")
    H.raises(function() x:unique(1) end, "unique: sorted must be a boolean, got 1")
    H.raises(function() x:unique(true, "y") end, "unique: return_inverse must be a boolean, got 'y'")
    H.raises(function() x:unique(true, false, 0) end, "unique: return_counts must be a boolean, got 0")
    H.raises(function() x:unique(true, false, false, 3) end, "unique: dim 3 is out of range for a tensor of 2 dims")
    H.raises(function() T.tensor(1):unique(true, false, false, 1) end, "unique: dim 1 given for a tensor of 0 dims")
    H.raises(function() T.zeros(0, 3):unique(true, false, false, 2) end,
      "unique: the slices along dim 2 are empty (another dim has size 0)")
    H.raises(function() x:unique_consecutive({ sorted = true }) end,
      "unique_consecutive: unknown option 'sorted' (options: dim, return_counts, return_inverse)")
    H.raises(function() x:unique_consecutive(2) end, "unique_consecutive: return_inverse must be a boolean, got 2")
  end)
end)

describe("histc and bincount", function()
  it("histc: torch's bins in the input's dtype, auto range, the last bin closed", function()
    assert.are.same({ 0, 2, 1, 0 }, T.tensor({ 1, 2, 1, nan, 4 }):histc(4, 0, 3):totable())
    assert.are.same({ 2, 1, 0, 1 }, T.tensor({ 1, 2, 1, 4 }):histc(4):totable())
    assert.are.same({ 0, 0, 2, 0 }, T.tensor({ 2, 2 }):histc(4):totable()) -- [1, 3]
    assert.are.same({ 0, 0, 2, 0 }, T.tensor({ 2, 2 }):histc(4, 2, 2):totable())
    assert.are.same({ 1, 1, 2 }, T.tensor({ 0.3, 0.6, 0.9, 0.1 }):histc(3, 0, 0.9):totable())
    assert.are.same({ 2, 1, 1 }, T.tensor({ { 1, 2 }, { 1, 4 } }):histc(3):totable())
    assert.are.same({ 0, 0, 0 }, T.tensor({}):histc(3):totable())
    assert.are.equal(100, T.randn(50):histc():numel())
    for _, dtype in ipairs({ "float16", "bfloat16", "float64" }) do
      local h = T.tensor({ 1, 2, 1, 4 }, dtype):histc(4)
      assert.are.equal(dtype, h:dtype())
      assert.are.same({ 2, 1, 0, 1 }, h:totable())
    end
    local big = T.rand(100000)
    local h = big:histc(10, 0, 1)
    assert.are.equal(100000, h:sum())
    local threads = T.get_num_threads()
    T.set_num_threads(1)
    local h1 = big:histc(10, 0, 1)
    T.set_num_threads(threads)
    assert.are.same(h1:totable(), h:totable())
  end)

  it("bincount: counts, weights, minlength", function()
    assert.are.same({ 1, 2, 0, 1 }, T.tensor({ 1, 3, 1, 0 }, "int64"):bincount():totable())
    assert.are.equal("int64", T.tensor({ 1 }, "int64"):bincount():dtype())
    assert.are.same({ 1, 2, 0, 1, 0, 0, 0 }, T.tensor({ 1, 3, 1, 0 }, "int64"):bincount(nil, 7):totable())
    local w = T.tensor({ 1, 3, 1, 0 }, "int64"):bincount(T.tensor({ 0.5, 1, 2, 3 }))
    assert.are.same({ 3, 2.5, 0, 1 }, w:totable())
    assert.are.equal("float32", w:dtype())
    assert.are.equal("float64", T.tensor({ 1 }, "int64"):bincount(T.tensor({ 2 }, "int32")):dtype())
    assert.are.equal("float64", T.tensor({ 1 }, "int64"):bincount(T.tensor({ 2 }, "float16")):dtype())
    for _, dtype in ipairs({ "uint8", "int8", "int16", "int32" }) do
      assert.are.same({ 0, 1, 1 }, T.tensor({ 1, 2 }, dtype):bincount():totable(), dtype)
    end
    assert.are.same({ 0, 0, 0 }, T.tensor({}, "int64"):bincount(nil, 3):totable())
    local r = T.randint(0, 1000, { 200000 })
    local c = r:bincount()
    assert.are.equal(200000, c:sum())
    assert.are.equal(r:eq(17):sum(), c[18])
  end)

  it("raises for bad inputs", function()
    H.raises(function() T.tensor({ 1, 2 }, "int64"):histc(4) end,
      "histc: the input must be floating (float16, bfloat16, float32, float64), got int64")
    H.raises(function() T.tensor({ 1.5 }):histc(0) end, "histc: bins must be > 0, got 0")
    H.raises(function() T.tensor({ 1.5 }):histc(1.5) end, "histc: bins must be an integer, got 1.5")
    H.raises(function() T.tensor({ 1.5 }):histc(4, "a") end, "histc: min must be a number, got 'a'")
    H.raises(function() T.tensor({ 1.5 }):histc(4, 3, 1) end, "histc: max must be larger than min (got min 3, max 1)")
    H.raises(function() T.tensor({ nan }):histc(4) end, "histc: range of [nan, nan] is not finite")
    H.raises(function() T.tensor({ 1, inf }):histc(4) end, "histc: range of [1, inf] is not finite")
    H.raises(function() T.tensor({ 1.5 }):bincount() end,
      "bincount: expected a 1-D tensor of integers >= 0, got 1 dims of float32")
    H.raises(function() T.tensor({ true }):bincount() end, "got 1 dims of bool")
    H.raises(function() T.tensor({ { 1 } }, "int64"):bincount() end, "got 2 dims of int64")
    H.raises(function() T.tensor({ 1, -3 }, "int64"):bincount() end,
      "bincount: the input must hold integers >= 0, got -3")
    H.raises(function() T.tensor({ 1, 2 }, "int64"):bincount(T.ones(3)) end,
      "bincount: weights must be 1-D and as long as the input (2)")
    H.raises(function() T.tensor({ 1, 2 }, "int64"):bincount(1) end, "bincount: weights must be a tensor, got 1")
    H.raises(function() T.tensor({ 1, 2 }, "int64"):bincount(nil, -1) end, "bincount: minlength must be >= 0, got -1")
    H.raises(function() T.tensor({ 1, 2 }, "int64"):bincount(nil, 0.5) end,
      "bincount: minlength must be an integer, got 0.5")
  end)
end)

describe("searchsorted and bucketize", function()
  it("1-based slots 1..n+1, left and right, NaN past the end", function()
    local s = T.tensor({ 1, 3, 5, 7, 9 })
    assert.are.same({ 2, 4, 5, 1, 6, 6 }, s:searchsorted(T.tensor({ 3, 6, 9, 0, 10, nan })):totable())
    assert.are.same({ 3, 4, 6, 1, 6, 6 }, s:searchsorted(T.tensor({ 3, 6, 9, 0, 10, nan }), { right = true }):totable())
    assert.are.same({ 3, 4, 6 }, s:searchsorted(T.tensor({ 3, 6, 9 }), { side = "right" }):totable())
    assert.are.same({ 2, 4, 5 }, s:searchsorted(T.tensor({ 3, 6, 9 }), { side = "left", right = false }):totable())
    assert.are.same({ 3, 4, 6 }, T.searchsorted(s, T.tensor({ 3, 6, 9 }), true):totable())
    assert.are.equal(3, T.searchsorted(s, 4))
    local r = s:searchsorted(T.tensor(4))
    assert.are.same({}, dims(r))
    assert.are.equal(3, r:item())
    local i32 = s:searchsorted(T.tensor({ 4 }), { out_int32 = true })
    assert.are.equal("int32", i32:dtype())
    assert.are.same({ 3 }, i32:totable())
    assert.are.same({ 1 }, T.tensor({}):searchsorted(T.tensor({ 1 })):totable())
  end)

  it("rows, sorters, dtypes promoted as torch does, a NaN in the sequence", function()
    local seq = T.tensor({ { 1, 3, 5 }, { 2, 4, 6 } }, "int64")
    assert.are.same({ { 2, 4 }, { 1, 2 } }, seq:searchsorted(T.tensor({ { 3, 6 }, { 1, 4 } }, "int64")):totable())
    local flat = T.tensor({ 1, 3, 5 }, "int64")
    assert.are.same({ { 2, 4 }, { 1, 3 } }, flat:searchsorted(T.tensor({ { 3, 6 }, { 1, 4 } }, "int64")):totable())
    local unsorted = T.tensor({ 5, 1, 3 }, "int64")
    local r = unsorted:searchsorted(T.tensor({ 3, 6, 0 }, "int64"), { sorter = unsorted:argsort() })
    assert.are.same({ 2, 4, 1 }, r:totable())
    assert.are.same({ 2, 2 }, T.tensor({ 1, 3, 5 }, "int64"):searchsorted(T.tensor({ 2.5, 3.0 })):totable())
    assert.are.same({ 2, 2 }, T.tensor({ 1, 3, 5 }):searchsorted(T.tensor({ 2, 3 }, "int64")):totable())
    assert.are.equal(2, T.tensor({ 1, 3, 5 }, "int64"):searchsorted(2.5))
    local nseq = T.tensor({ 1, 2, nan })
    assert.are.same({ 1, 2, 2, 4, 4 }, nseq:searchsorted(T.tensor({ 0, 1.5, 2, 3, nan })):totable())
    assert.are.same({ 1, 2, 4, 4, 4 }, nseq:searchsorted(T.tensor({ 0, 1.5, 2, 3, nan }), { right = true }):totable())
    for _, dtype in ipairs({ "uint8", "int8", "int16", "int32", "float16", "bfloat16", "float64" }) do
      local s = T.tensor({ 1, 3 }, dtype)
      assert.are.same({ 1, 2, 3 }, s:searchsorted(T.tensor({ 0, 2, 4 }, dtype)):totable(), dtype)
    end
    local big = T.arange(1, 100000)
    local vals = T.rand(50000):mul(100001)
    assert.are.same(vals:ceil():clamp(1, 100001):to("int64"):totable(), big:searchsorted(vals):totable())
  end)

  it("bucketize: searchsorted of the boundaries", function()
    local b = T.tensor({ 1, 3, 5, 7, 9 })
    assert.are.same({ 2, 4, 5, 1, 6 }, T.tensor({ 3, 6, 9, 0, 10 }):bucketize(b):totable())
    assert.are.same({ 3, 4, 6, 1, 6 }, T.bucketize(T.tensor({ 3, 6, 9, 0, 10 }), b, true):totable())
    assert.are.same({ 3, 4, 6, 1, 6 }, T.tensor({ 3, 6, 9, 0, 10 }):bucketize(b, { right = true }):totable())
    assert.are.equal(2, T.bucketize(3, b))
    assert.are.same({ { 2, 4 } }, T.tensor({ { 3, 6 } }, "int64"):bucketize(b):totable())
    assert.are.equal(2, T.tensor(3):bucketize(b):item())
  end)

  it("raises for bad sequences, values, options and sorters", function()
    local s = T.tensor({ 1, 3, 5 })
    H.raises(function() T.tensor(1):searchsorted(T.tensor({ 1 })) end,
      "searchsorted: the sorted sequence must have at least one dim")
    H.raises(function() T.tensor({ { 1, 3, 5 }, { 2, 4, 6 } }):searchsorted(T.tensor({ { 3, 6 } })) end,
      "searchsorted: a sequence of 2 dims needs values with the same leading dims: sequence [2, 3], values [1, 2]")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { side = "foo" }) end,
      "searchsorted: side must be 'left' or 'right', got 'foo'")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { side = "left", right = true }) end,
      "searchsorted: side 'left' and right = true disagree")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { sorter = T.tensor({ 1, 2, 5 }, "int64") }) end,
      "searchsorted: sorter holds 5, out of range for a dim of size 3 (1-based)")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { sorter = T.tensor({ 0, 1, 2 }, "int64") }) end,
      "searchsorted: sorter holds 0, out of range")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { sorter = T.tensor({ 1, 2, 3 }) }) end,
      "searchsorted: sorter must be an integer tensor, got float32")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { sorter = T.tensor({ 1, 2 }, "int64") }) end,
      "searchsorted: sorter must be an int64 tensor of the sequence's shape")
    H.raises(function() s:searchsorted("x") end, "searchsorted: the values must be a tensor or a number, got 'x'")
    H.raises(function() T.tensor({ false, true }):searchsorted(T.tensor({ true })) end,
      "searchsorted: bool values are not searched (torch refuses them too)")
    H.raises(function() s:searchsorted(T.tensor({ 1 }), { foo = 1 }) end,
      "searchsorted: unknown option 'foo' (options: out_int32, right, side, sorter)")
    H.raises(function() T.tensor({ 1 }):bucketize(T.ones(2, 2)) end,
      "bucketize: boundaries must be a 1-D tensor, got 2 dims")
    H.raises(function() T.tensor({ 1 }):bucketize({ 1, 2 }) end, "bucketize: boundaries must be a tensor, got a table")
    H.raises(function() T.bucketize("x", s) end, "bucketize: expected a tensor or a number, got 'x'")
  end)
end)

describe("the T.<name> forms", function()
  it("give every result of the method", function()
    local x = T.tensor({ 3, 1, 2, 1 })
    local v, i = T.sort(x, 1, true)
    assert.are.same({ 3, 2, 1, 1 }, v:totable())
    assert.are.same({ 1, 3, 2, 4 }, i:totable())
    assert.are.same({ 2, 4, 3, 1 }, T.argsort(x):totable())
    v, i = T.topk(x, 1)
    assert.are.same({ 3, 1 }, { v[1], i[1] })
    v, i = T.kthvalue(x, 2)
    assert.are.same({ 1, 4 }, { v:item(), i:item() })
    assert.are.equal(1, T.median(x))
    v, i = T.median(x, 1)
    assert.are.same({ 1, 4 }, { v:item(), i:item() })
    assert.are.equal(1, T.nanmedian(x))
    v, i = T.mode(x)
    assert.are.same({ 1, 4 }, { v:item(), i:item() })
    assert.are.equal(1.5, T.quantile(x, 0.5))
    assert.are.equal(1.5, T.nanquantile(x, 0.5))
    local u, inv, c = T.unique(x, true, true, true)
    assert.are.same({ { 1, 2, 3 }, { 3, 1, 2, 1 }, { 2, 1, 1 } }, { u:totable(), inv:totable(), c:totable() })
    u, c = T.unique_consecutive(x, false, true)
    assert.are.same({ { 3, 1, 2, 1 }, { 1, 1, 1, 1 } }, { u:totable(), c:totable() })
    assert.are.same({ 2, 1, 1 }, T.histc(x, 3):totable())
    assert.are.same({ 0, 1, 1 }, T.bincount(T.tensor({ 1, 2 }, "int64")):totable())
    assert.are.same({ 2 }, T.searchsorted(T.tensor({ 1, 3 }), T.tensor({ 2 })):totable())
    H.raises(function() T.sort(3) end, "sort: expected a tensor, got 3")
    H.raises(function() T.unique({}) end, "unique: expected a tensor, got a table")
  end)
end)
