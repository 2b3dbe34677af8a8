-- Reductions against the plain Lua model: random shapes (0-size and size-1 dims
-- included), dims given as one dim, a list or none, keepdim, every dtype each takes.
local T = require("tensordict")
local H = require("helpers")
local ref = require("ref")

local huge = math.huge
local function num(v) return type(v) == "boolean" and (v and 1 or 0) or v end

local function has_nan(list)
  for _, x in ipairs(list) do if x ~= x then return true end end
  return false
end

-- name -> model over the list of values reduced into one output element
local MODEL = {
  sum = function(l) local s = 0 for _, x in ipairs(l) do s = s + x end return s end,
  prod = function(l) local s = 1 for _, x in ipairs(l) do s = s * x end return s end,
  mean = function(l) local s = 0 for _, x in ipairs(l) do s = s + x end return s / #l end,
  max = function(l)
    if has_nan(l) then return 0 / 0 end
    local m = -huge for _, x in ipairs(l) do m = math.max(m, x) end return m
  end,
  min = function(l)
    if has_nan(l) then return 0 / 0 end
    local m = huge for _, x in ipairs(l) do m = math.min(m, x) end return m
  end,
  all = function(l) for _, x in ipairs(l) do if x == 0 then return false end end return true end,
  any = function(l) for _, x in ipairs(l) do if x ~= 0 then return true end end return false end,
  var = function(l, correction)
    local m = 0 for _, x in ipairs(l) do m = m + x end m = m / #l
    local s = 0 for _, x in ipairs(l) do s = s + (x - m) ^ 2 end
    return s / math.max(#l - correction, 0)
  end,
  logsumexp = function(l)
    local m = -huge for _, x in ipairs(l) do m = math.max(m, x) end
    if m == -huge or m == huge then return m end
    local s = 0 for _, x in ipairs(l) do s = s + math.exp(x - m) end
    return m + math.log(s)
  end,
  norm = function(l, p)
    if p == huge then local m = 0 for _, x in ipairs(l) do m = math.max(m, math.abs(x)) end return m end
    local s = 0 for _, x in ipairs(l) do s = s + math.abs(x) ^ p end
    return s ^ (1 / p)
  end,
}
MODEL.std = function(l, c) return math.sqrt(MODEL.var(l, c)) end

local function out_dtype(name, dtype)
  if name == "all" or name == "any" then return "bool" end
  if (name == "sum" or name == "prod") and not ref.is_float(dtype) then return "int64" end
  if name == "logsumexp" and not ref.is_float(dtype) then return "float32" end
  return dtype
end

local FLOAT_ONLY = { mean = true, std = true, var = true, norm = true }

-- The model's result of reducing values (shape) over dims (1-based list; nil = all).
local function model(name, values, shape, dims, keepdim, param)
  local reduced = {}
  for _, d in ipairs(dims or {}) do reduced[d] = true end
  if not dims then for d = 1, #shape do reduced[d] = true end end
  local out_shape = {}
  for d = 1, #shape do
    if not reduced[d] then
      out_shape[#out_shape + 1] = shape[d]
    elseif keepdim then
      out_shape[#out_shape + 1] = 1
    end
  end
  local groups = {}
  ref.generate(shape, function(index)
    local key = {}
    for d = 1, #shape do
      if not reduced[d] then key[#key + 1] = index[d] elseif keepdim then key[#key + 1] = 1 end
    end
    local k = table.concat(key, ",")
    groups[k] = groups[k] or {}
    table.insert(groups[k], num(ref.at(values, shape, index))) -- exact in dtype already
    return 0
  end)
  local result = ref.generate(out_shape, function(index)
    local list = groups[table.concat(index, ",")] or {}
    return MODEL[name](list, param)
  end)
  return result, out_shape
end

describe("reductions", function()
  it("match the model over random dims, shapes and dtypes", function()
    math.randomseed(11)
    local names = { "sum", "prod", "mean", "max", "min", "all", "any", "var", "std", "logsumexp", "norm" }
    for case = 1, 900 do
      local name = names[(case - 1) % #names + 1]
      local dtype = ref.ALL[math.random(#ref.ALL)]
      if FLOAT_ONLY[name] or name == "logsumexp" then dtype = ref.FLOATS[math.random(#ref.FLOATS)] end
      if (name == "max" or name == "min") and dtype == "bool" then dtype = "int8" end
      -- prod stays within int64 with at most 8 factors of |x| <= 9
      local shape = ref.random_shape(3, name == "prod" and 2 or 3)
      local values = ref.random_values(shape, dtype, ref.is_float(dtype) and name ~= "prod")
      local t = ref.tensor(values, shape, dtype)
      local dims
      if #shape > 0 and math.random() < 0.7 then
        dims = {}
        for d = 1, #shape do if math.random() < 0.5 then dims[#dims + 1] = d end end
        if #dims == 0 then dims = { math.random(#shape) } end
      end
      local keepdim = math.random() < 0.3
      local param = (name == "var" or name == "std") and math.random(0, 1)
        or name == "norm" and ({ 1, 2, 3, huge })[math.random(4)] or nil
      local empty_reduce = false
      if name == "max" or name == "min" then
        if dims and #dims > 1 then dims = { dims[1] } end
        if not dims then keepdim = false end -- max() is the one largest value
        for _, d in ipairs(dims or {}) do if shape[d] == 0 then empty_reduce = true end end
        if not dims and ref.numel(shape) == 0 then empty_reduce = true end
      end
      local where = ("case %d: %s(%s %s, dims %s, keepdim %s)"):format(case, name, dtype,
        table.concat(shape, "x"), dims and table.concat(dims, ",") or "all", tostring(keepdim))
      if empty_reduce then
        H.raises(function() local _ = t[name](t, dims and dims[1]) end, name)
      else
        local want, want_shape = model(name, values, shape, dims, keepdim, param)
        local got
        if name == "var" or name == "std" then
          got = t[name](t, dims, { keepdim = keepdim, correction = param })
        elseif name == "norm" then
          got = t:norm(param, dims, keepdim)
        elseif name == "max" or name == "min" then
          got = dims and t[name](t, dims[1], keepdim) or t[name](t)
        else
          got = t[name](t, dims, keepdim)
        end
        local out = out_dtype(name, dtype)
        local rtol = math.max(ref.rtol(out), ref.rtol(dtype)) * 16 + 1e-9
        if type(got) ~= "table" then
          assert(not dims and not keepdim, where)
          local ok, why = ref.close(got, ref.store(want, out), rtol, 1e-5)
          assert(ok, where .. ": " .. tostring(why))
        else
          assert.are.equal(out, got:dtype(), where)
          assert.are.same(want_shape, got:shape(), where)
          local stored = ref.map(want, function(v) return ref.store(v, out) end)
          local ok, why = ref.close(got:totable(), stored, rtol, 1e-5)
          assert(ok, where .. ": " .. tostring(why))
        end
      end
    end
  end)

  it("max and min along a dim give values and 1-based indices; argmax and argmin too", function()
    local t = T.tensor({ { 3, 7, 7 }, { 9, 1, 0 / 0 } })
    local v, i = t:max(2)
    H.assert_near({ 7, 0 / 0 }, v:totable())
    assert.are.same({ 2, 3 }, i:totable())
    assert.are.equal("int64", i:dtype())
    local v1, i1 = t:min(1, true)
    assert.are.same({ 1, 3 }, v1:shape())
    assert.are.same({ { 1, 2, 2 } }, i1:totable())
    assert.are.equal(6, t:argmax())        -- NaN counts as the largest, flat 1-based index
    assert.are.same({ 2, 3 }, t:argmax(2):totable())
    assert.are.equal(5, T.tensor({ 5, 4, 3, 2, 1 }):argmin())
    assert.is_true(t:max() ~= t:max())     -- NaN propagates
    assert.are.equal(1, T.tensor({ 3, 1, 2 }):min())
  end)

  it("return Lua values over every dim and tensors over dims", function()
    local t = T.arange(1, 6):view(2, 3)
    assert.are.equal(21, t:sum())
    assert.are.same({ 5, 7, 9 }, t:sum(1):totable())
    assert.are.same({ { 6 }, { 15 } }, t:sum(2, true):totable())
    assert.are.same({ 21 }, t:sum({ 1, 2 }):view(1):totable())
    assert.are.equal(720, t:prod())
    assert.are.equal(3.5, t:to("float64"):mean())
    assert.is_true(T.tensor({ true, true }):all())
    assert.is_false(T.tensor({ false, false }):any())
    assert.is_true(T.zeros(0):all())
    assert.are.equal(0, T.zeros(0):sum())
    H.assert_near(math.sqrt(3.5), T.tensor({ 1, 2, 3, 4, 5, 6 }, "float64"):std(), 1e-12)
    H.assert_near(17.5 / 6, T.tensor({ 1, 2, 3, 4, 5, 6 }, "float64"):var(nil, { unbiased = false }), 1e-12)
  end)

  it("cumsum along a dim", function()
    local t = T.arange(1, 6):view(2, 3)
    assert.are.same({ { 1, 3, 6 }, { 4, 9, 15 } }, t:cumsum(2):totable())
    assert.are.same({ { 1, 2, 3 }, { 5, 7, 9 } }, t:cumsum(1):totable())
    assert.are.equal("int64", T.tensor({ true, true }):cumsum(1):dtype())
    assert.are.same({ 1, 2 }, T.tensor({ true, true }):cumsum(1):totable())
    H.raises(function() t:cumsum() end, "cumsum: a dim is required")
  end)

  it("refuse bad dims and dtypes clearly", function()
    local t = T.zeros(2, 3)
    H.raises(function() t:sum(3) end, "sum: dim 3 is out of range for a tensor of 2 dims")
    H.raises(function() t:sum({ 1, 1 }) end, "sum")
    H.raises(function() T.zeros({ 2 }, "int32"):mean() end, "mean")
    H.raises(function() T.zeros({ 2 }, "int32"):std() end, "std")
    H.raises(function() T.zeros(0):max() end, "max")
    H.raises(function() t:max({ 1, 2 }) end, "max: dim must be a number")
  end)
end)
