-- matmul and friends against a triple loop in Lua.
local T = require("tensordict")
local H = require("helpers")
local ref = require("ref")

local function model_mm(a, b, n, k, m)
  local out = {}
  for i = 1, n do
    out[i] = {}
    for j = 1, m do
      local s = 0
      for p = 1, k do s = s + a[i][p] * b[p][j] end
      out[i][j] = s
    end
  end
  return out
end

describe("matmul", function()
  it("matches the model for random 2-D shapes, dtypes and layouts", function()
    math.randomseed(41)
    for case = 1, 150 do
      local dtype = ({ "float32", "float64", "int32", "int64" })[math.random(4)]
      local n, k, m = math.random(0, 5), math.random(0, 5), math.random(0, 5)
      local av, bv = ref.random_values({ n, k }, dtype), ref.random_values({ k, m }, dtype)
      local a, b = ref.tensor(av, { n, k }, dtype), ref.tensor(bv, { k, m }, dtype)
      if math.random() < 0.3 then a = a:t():contiguous():t() end -- column-major operand
      local got = T.matmul(a, b)
      assert.are.equal(dtype, got:dtype())
      assert.are.same({ n, m }, got:shape(), "case " .. case)
      local ok, why = ref.close(got:totable(), model_mm(av, bv, n, k, m), 1e-6, 1e-6)
      if n > 0 and m > 0 then assert(ok, "case " .. case .. ": " .. tostring(why)) end
    end
  end)

  it("follows torch's rules for 1-D and batched operands", function()
    local v = T.tensor({ 1, 2, 3 })
    local m = T.arange(1, 6, "float32"):view(2, 3)
    assert.are.equal(14, v:dot(v))
    assert.are.same({}, T.matmul(v, v):shape())
    assert.are.same({ 14, 32 }, m:matmul(v):totable())
    assert.are.same({ 14, 32 }, m:mv(v):totable())
    assert.are.same({ 9, 12, 15 }, T.matmul(T.tensor({ 1, 2 }), m):totable())
    local batch = T.ones(4, 1, 2, 3)
    local rhs = T.ones(5, 3, 2)
    local out = T.matmul(batch, rhs)
    assert.are.same({ 4, 5, 2, 2 }, out:shape())
    assert.are.same({ { 3, 3 }, { 3, 3 } }, out[{ 4, 5 }]:totable())
    assert.are.same({ 2, 2, 2 }, T.ones(2, 2, 3):bmm(T.ones(2, 3, 2)):shape())
    assert.are.same({ { 14 } }, T.tensor({ { 1, 2, 3 } }):mm(T.tensor({ { 1 }, { 2 }, { 3 } })):totable())
    assert.are.same({ 3, 2 }, m:t():shape())
  end)

  it("reports shapes that do not multiply and mixed dtypes", function()
    H.raises(function() T.matmul(T.zeros(2, 3), T.zeros(4, 5)) end, "matmul", "[2, 3]", "[4, 5]")
    H.raises(function() T.zeros(2, 3):mm(T.zeros(2, 3, "float64")) end, "mm")
    H.raises(function() T.zeros(2):dot(T.zeros(3)) end, "dot")
    H.raises(function() T.zeros(2, 2, 2):t() end, "t: expects a tensor of at most 2 dims")
    H.raises(function() T.matmul(T.zeros(2), 3) end, "matmul: expected two tensors")
  end)
end)
