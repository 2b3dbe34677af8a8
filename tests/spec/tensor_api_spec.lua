-- Tensor methods of issue 12's "Missing API": cumprod, softmax, log_softmax, amax/amin,
-- clamp_min/clamp_max, lerp, the cast methods, tolist, expand_as, repeat and
-- repeat_interleave. Expected values, dtypes and shapes are torch 2.15's (printed
-- from Python); messages are this library's.
local T = require("tensordict")
local H = require("helpers")

local nan, inf = 0 / 0, math.huge

local function t23() return T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }) end
local function i23() return T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "int64") end

describe("cumprod", function()
  it("runs along a dim, as torch", function()
    assert.same({ { 1, 2, 6 }, { 4, 20, 120 } }, t23():cumprod(2):totable())
    assert.same({ { 1, 2, 3 }, { 4, 10, 18 } }, t23():cumprod(1):totable())
    assert.same({ { 1, 2, 6 }, { 4, 20, 120 } }, t23():cumprod(-1):totable())
  end)

  it("gives int64 for integers and bool, the dtype for floats, and wraps like int64", function()
    assert.equal("int64", i23():cumprod(2):dtype())
    assert.equal("int64", T.tensor({ true, false }):cumprod(1):dtype())
    assert.equal("int64", T.tensor({ 1, 2 }, "int8"):cumprod(1):dtype())
    assert.equal("float16", T.tensor({ 1 }, "float16"):cumprod(1):dtype())
    assert.same({ 2 ^ 40, 0 }, T.tensor({ 2 ^ 40, 2 ^ 40 }, "int64"):cumprod(1):totable())
    -- down columns (the column kernel starts integer accumulators at 1 too)
    assert.same({ { 1, 2, 3 }, { 4, 10, 18 } }, i23():cumprod(1):totable())
    assert.same({ { 1, 0 }, { 1, 0 }, { 0, 0 } },
      T.tensor({ { true, false }, { true, true }, { false, true } }):cumprod(1):totable())
  end)

  it("walks strided and wide layouts alike (line and column kernels)", function()
    local x = T.rand({ 40, 3000 }):add_(0.5)
    local by_rows = x:cumprod(1)
    local by_cols = x:t():contiguous():cumprod(2):t()
    assert.is_true(by_rows:eq(by_cols):all())
    local col = x[{ {}, 7 }]:totable()
    local p = 1
    for r = 1, 40 do
      p = p * col[r]
      assert.is_true(math.abs(by_rows[{ r, 7 }] - p) <= 1e-5 * math.abs(p))
    end
  end)

  it("takes dim 1 on a 0-dim tensor and refuses other dims", function()
    assert.equal(3, T.tensor(3):cumprod(1):item())
    H.raises(function() t23():cumprod(3) end, "cumprod: dim 3 is out of range")
    H.raises(function() t23():cumprod() end, "cumprod: a dim is required")
  end)
end)

describe("softmax and log_softmax", function()
  local row = { 0.09003057330846786, 0.2447284758090973, 0.6652409434318542 }
  local col = { 0.04742587357759476, 0.9525741338729858 }
  local log_row = { -2.4076058864593506, -1.4076058864593506, -0.40760594606399536 }

  it("match torch along either dim", function()
    H.assert_near({ row, row }, t23():softmax(2):totable(), 1e-7)
    H.assert_near({ row, row }, t23():softmax(-1):totable(), 1e-7)
    H.assert_near({ { col[1], col[1], col[1] }, { col[2], col[2], col[2] } },
      t23():softmax(1):totable(), 1e-7)
    H.assert_near({ log_row, log_row }, t23():log_softmax(2):totable(), 1e-6)
    assert.equal("float32", t23():softmax(2):dtype())
  end)

  it("keeps float16 and float64, computing float16 in float32", function()
    local h = t23():half():softmax(2)
    assert.equal("float16", h:dtype())
    H.assert_near({ { 0.09002685546875, 0.2447509765625, 0.6650390625 },
      { 0.09002685546875, 0.2447509765625, 0.6650390625 } }, h:totable(), 0)
    assert.equal("float64", t23():double():log_softmax(1):dtype())
  end)

  it("refuses integers unless a dtype is given, as torch", function()
    H.raises(function() i23():softmax(2) end,
      "softmax: expected a floating tensor (float16, bfloat16, float32, float64), got int64")
    H.raises(function() i23():log_softmax(2) end, "log_softmax: expected a floating tensor")
    local s = i23():softmax(2, "float64")
    assert.equal("float64", s:dtype())
    H.assert_near({ row, row }, s:totable(), 1e-7)
  end)

  it("give NaN where torch does, and 1 / 0 on a 0-dim tensor", function()
    H.assert_near({ nan, nan }, T.tensor({ -inf, -inf }):softmax(1):totable())
    H.assert_near({ nan, nan }, T.tensor({ inf, 1 }):softmax(1):totable())
    H.assert_near({ nan, nan }, T.tensor({ nan, 1 }):softmax(1):totable())
    assert.equal(1, T.tensor(3):softmax(1):item())
    assert.equal(0, T.tensor(3):log_softmax(-1):item())
  end)

  it("sum to 1 over the dim for every layout (lines, column blocks, strided input)", function()
    local x = T.randn({ 7, 300, 5 })
    for d = 1, 3 do
      local s = x:softmax(d)
      H.assert_near(T.ones(s:sum(d):shape()):totable(), s:sum(d):totable(), 1e-5)
      local ls = x:log_softmax(d)
      H.assert_near(s:totable(), ls:exp():totable(), 1e-6)
      -- the composition it replaces
      local e = x:sub(x:amax(d, true)):exp()
      H.assert_near(e:div(e:sum(d, true)):totable(), s:totable(), 1e-6)
    end
    local strided = x:permute(3, 1, 2)
    H.assert_near(strided:contiguous():softmax(2):totable(), strided:softmax(2):totable(), 0)
    assert.same({ 0, 3 }, T.zeros(0, 3):softmax(1):shape())
  end)
end)

describe("amax and amin", function()
  it("reduce one or several dims without indices, as torch", function()
    assert.same({ 3, 6 }, t23():amax(2):totable())
    assert.same({ 1, 2, 3 }, i23():amin(1):totable())
    assert.equal("int64", i23():amin(1):dtype())
    assert.equal(6, t23():amax({ 1, 2 }):item())
    assert.same({ 2, 1 }, t23():amax(2, true):shape())
    assert.equal(6, t23():amax())
    assert.equal(true, T.tensor({ true, false }):amax())
  end)

  it("propagate NaN and refuse an empty dim", function()
    assert.is_true(T.tensor({ 1, nan }):amax() ~= T.tensor({ 1, nan }):amax())
    H.raises(function() T.zeros(0, 3):amax(1) end, "amax: cannot reduce over dim 1 of size 0")
    H.raises(function() T.zeros(0, 3):amin() end, "amin: cannot reduce over dim 1 of size 0")
  end)
end)

describe("clamp_min and clamp_max", function()
  it("follow clamp's dtype rules with a number bound", function()
    assert.same({ { 2.5, 2.5, 3 }, { 4, 5, 6 } }, t23():clamp_min(2.5):totable())
    assert.equal("float32", i23():clamp_min(2.5):dtype())
    assert.same({ { 1, 2, 2 }, { 2, 2, 2 } }, i23():clamp_max(2):totable())
    assert.equal("int64", i23():clamp_max(2):dtype())
    assert.equal("int64", T.tensor({ true, false }):clamp_min(0):dtype())
  end)

  it("broadcast a tensor bound, as torch", function()
    assert.same({ { 2, 5, 3 }, { 4, 5, 6 } }, t23():clamp_min(T.tensor({ 2, 5, 1 })):totable())
    assert.equal("float32", i23():clamp_min(T.tensor({ 2, 5, 1 })):dtype())
    assert.same({ { 1, 2, 1 }, { 2, 5, 1 } }, t23():clamp_max(T.tensor({ 2, 5, 1 })):totable())
  end)

  it("work in place", function()
    local x = t23()
    assert.equal(x, x:clamp_min_(3))
    assert.same({ { 3, 3, 3 }, { 4, 5, 6 } }, x:totable())
    x:clamp_max_(T.tensor({ 4, 4, 5 }))
    assert.same({ { 3, 3, 3 }, { 4, 4, 5 } }, x:totable())
    H.raises(function() t23():clamp_min("a") end, "clamp_min: the bound must be a number or a tensor")
  end)
end)

describe("lerp", function()
  it("matches torch for scalar and tensor weights, with broadcasting", function()
    local t = t23()
    assert.same({ { 1.5, 3, 4.5 }, { 6, 7.5, 9 } }, t:lerp(t * 3, 0.25):totable())
    assert.same({ { 2.5, 5, 7.5 }, { 10, 12.5, 15 } }, t:lerp(t * 3, 0.75):totable())
    assert.same({ { 1, 4, 9 }, { 4, 10, 18 } }, t:lerp(t * 3, T.tensor({ 0, 0.5, 1 })):totable())
    assert.same({ { 2, 2.5 }, { 3, 3.5 } }, T.tensor({ 1, 2 }):lerp(T.tensor({ { 3 }, { 5 } }), 0.5):totable())
    assert.same({ { 1.5, 3, 4.5 }, { 6, 7.5, 9 } }, t:half():lerp(t:half() * 3, 0.25):totable())
    assert.equal("float16", t:half():lerp(t:half(), 1):dtype())
  end)

  it("is exact at both ends", function()
    local a, b = T.tensor({ 0.1, 1e8, -3 }), T.tensor({ 0.7, -1e-8, 2 })
    assert.same(a:totable(), a:lerp(b, 0):totable())
    assert.same(b:totable(), a:lerp(b, 1):totable())
  end)

  it("refuses integers and mixed dtypes, as torch", function()
    local t, i = t23(), i23()
    H.raises(function() i:lerp(i, 0.5) end, "lerp: expected a floating tensor, got int64")
    H.raises(function() t:lerp(t:double(), 0.5) end, "lerp: expected dtype float32 for end but got float64")
    H.raises(function() t:lerp(t, T.tensor({ 0.5 }, "float64")) end,
      "lerp: expected dtype float32 for weight but got float64")
    H.raises(function() t:lerp(t, "x") end, "lerp: weight must be a number or a tensor")
  end)

  it("works in place when the result keeps the shape", function()
    local x = t23()
    assert.equal(x, x:lerp_(x * 2, 0.5))
    assert.same({ { 1.5, 3, 4.5 }, { 6, 7.5, 9 } }, x:totable())
    H.raises(function() T.tensor({ 1, 2 }):lerp_(T.tensor({ { 3 }, { 5 } }), 0.5) end,
      "lerp_: the result's shape [2, 2] (broadcast) differs from the tensor's [2]")
  end)
end)

describe("cast methods and tolist", function()
  it("cast with torch's names", function()
    local t = t23()
    local want = { float = "float32", double = "float64", half = "float16", bfloat16 = "bfloat16",
      int = "int32", long = "int64", short = "int16", char = "int8", byte = "uint8", bool = "bool" }
    for name, dtype in pairs(want) do assert.equal(dtype, t[name](t):dtype()) end
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, t:long():totable())
    t:float()[{ 1, 1 }] = 9 -- the same dtype shares memory, as torch
    assert.equal(9, t[{ 1, 1 }])
  end)

  it("tolist is totable", function()
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, i23():tolist())
    assert.equal(3, T.tensor(3):tolist())
  end)
end)

describe("expand_as, repeat and repeat_interleave", function()
  it("expand_as views other's shape", function()
    local c = T.tensor({ { 1 }, { 2 } }, "int64")
    assert.same({ { 1, 1, 1 }, { 2, 2, 2 } }, c:expand_as(t23()):totable())
    H.raises(function() c:expand_as({ 2, 3 }) end, "expand_as: expected a tensor")
  end)

  it("repeat tiles, as torch (both spellings)", function()
    local v = T.tensor({ 1, 2, 3 }, "int64")
    assert.same({ { 1, 2, 3, 1, 2, 3 }, { 1, 2, 3, 1, 2, 3 } }, v["repeat"](v, 2, 2):totable())
    assert.same({ { 1, 2, 3, 1, 2, 3 }, { 1, 2, 3, 1, 2, 3 } }, v:repeat_tensor({ 2, 2 }):totable())
    assert.same({ 2, 6 }, t23():repeat_tensor(1, 2):shape())
    assert.same({ 2, 2, 3 }, t23():repeat_tensor(2, 1, 1):shape())
    assert.same({ 0, 3 }, t23():repeat_tensor(0, 1):shape())
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 1, 2, 3 }, { 4, 5, 6 } },
      t23():t():repeat_tensor(1, 2):t():totable()) -- strided input
    H.raises(function() t23():repeat_tensor(2) end,
      "repeat: 1 repeats given for a tensor of 2 dims (at least one per dim)")
    H.raises(function() t23():repeat_tensor(2, -1) end,
      "repeat: repeats must be non-negative integers, got -1 at position 2")
  end)

  it("repeat_interleave repeats elements, as torch", function()
    local t = t23()
    assert.same({ 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6 }, t:repeat_interleave(2):totable())
    assert.same({ { 1, 2, 3 }, { 1, 2, 3 }, { 4, 5, 6 }, { 4, 5, 6 } }, t:repeat_interleave(2, 1):totable())
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 4, 5, 6 } },
      t:repeat_interleave(T.tensor({ 1, 2 }, "int64"), 1):totable())
    assert.same({ { 1, 3, 3 }, { 4, 6, 6 } }, t:repeat_interleave(T.tensor({ 1, 0, 2 }, "int64"), 2):totable())
    assert.same({ { 1, 1, 2, 2, 3, 3 }, { 4, 4, 5, 5, 6, 6 } },
      t:repeat_interleave(T.tensor({ 2 }, "int64"), 2):totable())
  end)

  it("repeat_interleave refuses what torch refuses", function()
    local t = t23()
    H.raises(function() t:repeat_interleave(-1) end, "repeat_interleave: repeats must be non-negative, got -1")
    H.raises(function() t:repeat_interleave(T.tensor({ 1, 2, 3 }, "int64"), 1) end,
      "repeat_interleave: repeats has 3 elements but the dim has size 2")
    H.raises(function() t:repeat_interleave(T.tensor({ 1, 2 }), 1) end,
      "repeat_interleave: repeats must have an integer dtype, got float32")
    H.raises(function() t:repeat_interleave(T.tensor({ 1, -1 }, "int64"), 1) end,
      "repeat_interleave: repeats must be non-negative, got -1")
    H.raises(function() t:repeat_interleave(2, 3) end, "repeat_interleave: dim 3 is out of range")
    H.raises(function() t:repeat_interleave(T.tensor({ { 1, 2 } }, "int64"), 1) end,
      "repeat_interleave: repeats must be a 0-dim or 1-dim tensor, got 2 dims")
  end)
end)
