-- Bitwise ops (bitwise_and, _or, _xor, _left_shift, _right_shift, _not): torch's values
-- on every integer dtype and bool, shift counts out of range, scalars, promotion, the
-- in-place forms, T.<op>, and the refusals of floats (and of bool for shifts).
-- torch_ops_spec checks them against torch itself on random values.
local T = require("tensordict")
local H = require("helpers")

local INTS = { "uint8", "int8", "int16", "int32", "int64" }
local WIDTH = { uint8 = 8, int8 = 8, int16 = 16, int32 = 32, int64 = 64 }

describe("bitwise ops", function()
  it("and, or, xor, not on every integer dtype and bool", function()
    for _, dtype in ipairs(INTS) do
      local a, b = T.tensor({ 12, 10, 0, 7 }, dtype), T.tensor({ 10, 6, 5, 7 }, dtype)
      assert.are.same({ 8, 2, 0, 7 }, a:bitwise_and(b):totable(), dtype)
      assert.are.same({ 14, 14, 5, 7 }, a:bitwise_or(b):totable(), dtype)
      assert.are.same({ 6, 12, 5, 0 }, a:bitwise_xor(b):totable(), dtype)
      assert.are.equal(dtype, a:bitwise_and(b):dtype())
    end
    assert.are.same({ -13, -1, 0, 99 }, T.tensor({ 12, 0, -1, -100 }, "int32"):bitwise_not():totable())
    assert.are.same({ 243, 255, 0 }, T.tensor({ 12, 0, 255 }, "uint8"):bitwise_not():totable())
    local p, q = T.tensor({ true, true, false, false }), T.tensor({ true, false, true, false })
    assert.are.same({ true, false, false, false }, p:bitwise_and(q):totable())
    assert.are.same({ true, true, true, false }, p:bitwise_or(q):totable())
    assert.are.same({ false, true, true, false }, p:bitwise_xor(q):totable())
    assert.are.same({ false, false, true, true }, p:bitwise_not():totable()) -- logical not
    assert.are.equal("bool", p:bitwise_xor(q):dtype())
  end)

  it("shifts give torch's values for counts below 0 and at or past the width", function()
    for _, dtype in ipairs(INTS) do
      local w = WIDTH[dtype]
      local signed = dtype ~= "uint8"
      local x = T.tensor(signed and { 5, -5 } or { 5, 200 }, dtype)
      local counts = { -1, 0, 1, w - 1, w, w + 1 }
      if w < 64 then counts[#counts + 1] = 100 end
      for _, c in ipairs(counts) do
        if not (dtype == "uint8" and c < 0) then
          local n = T.full({ 2 }, c, dtype)
          local l, r = x:bitwise_left_shift(n):totable(), x:bitwise_right_shift(n):totable()
          local where = ("%s count %d"):format(dtype, c)
          if c < 0 or c >= w then
            assert.are.same({ 0, 0 }, l, where)
            -- past the width, >> gives the sign: 0, or -1 for a negative signed value
            assert.are.same(signed and { 0, -1 } or { 0, 0 }, r, where)
          elseif c == 0 then
            assert.are.same(x:totable(), l, where)
            assert.are.same(x:totable(), r, where)
          elseif c == 1 then
            assert.are.same(signed and { 10, -10 } or { 10, 144 }, l, where) -- 400 wraps in uint8
            assert.are.same(signed and { 2, -3 } or { 2, 100 }, r, where) -- floor for negatives
          end
        end
      end
    end
    -- the top bit: 1 << 7 is -128 in int8, 1 << 63 is INT64_MIN
    assert.are.same({ -128 }, T.tensor({ 1 }, "int8"):bitwise_left_shift(7):totable())
    local top = T.tensor({ 1 }, "int64"):bitwise_left_shift(63)
    assert.are.equal("int64", top:dtype())
    assert.is_true(top:lt(0):item(), "1 << 63 is negative in int64")
    -- a uint8 count of 255 (-1 wrapped) is past the width
    assert.are.same({ 0 }, T.tensor({ 200 }, "uint8"):bitwise_right_shift(T.tensor({ 255 }, "uint8")):totable())
  end)

  it("promote like the other binary ops and take scalars", function()
    local i8 = T.tensor({ 5, -3 }, "int8")
    assert.are.same({ 4, 44 }, i8:bitwise_and(300):totable()) -- 300 wraps to 44 in int8, as torch
    assert.are.equal("int8", i8:bitwise_and(300):dtype())
    local wide = i8:bitwise_left_shift(T.tensor({ 2, 2 }, "int32"))
    assert.are.equal("int32", wide:dtype())
    assert.are.same({ 20, -12 }, wide:totable())
    local mask = T.tensor({ true, false })
    assert.are.same({ 1, 0 }, mask:bitwise_and(3):totable()) -- bool and an int scalar: int64
    assert.are.equal("int64", mask:bitwise_and(3):dtype())
    assert.are.same({ true, false }, mask:bitwise_and(true):totable())
    assert.are.same({ 2, 0 }, mask:bitwise_left_shift(1):totable()) -- computes in int64
    local m = T.tensor({ { 1 }, { 2 } }, "int16"):bitwise_or(T.tensor({ 4, 8 }, "int16"))
    assert.are.same({ { 5, 9 }, { 6, 10 } }, m:totable())
  end)

  it("in-place forms and T.<op>", function()
    local x = T.tensor({ 5, 12 }, "int8")
    assert.are.equal(x, x:bitwise_and_(T.tensor({ 3, 7 }, "int32"))) -- computed in int32, cast back
    assert.are.same({ 1, 4 }, x:totable())
    x:bitwise_left_shift_(2)
    assert.are.same({ 4, 16 }, x:totable())
    x:bitwise_not_()
    assert.are.same({ -5, -17 }, x:totable())
    local b = T.tensor({ true, false })
    b:bitwise_xor_(T.tensor({ true, true }))
    assert.are.same({ false, true }, b:totable())
    assert.are.same({ 3 }, T.bitwise_or(T.tensor({ 1 }, "int32"), 2):totable())
    assert.are.same({ -2 }, T.bitwise_not(T.tensor({ 1 }, "int32")):totable())
    assert.are.same({ 1 }, T.bitwise_right_shift(T.tensor({ 4 }, "int64"), 2):totable())
    local td = T.TensorDict({ a = T.tensor({ 6 }, "int32") }, { 1 })
    assert.are.same({ 2 }, td:bitwise_and(3):get("a"):totable())
  end)

  it("refuse floats, and bool for shifts, naming the call and the dtype", function()
    for _, dtype in ipairs({ "float16", "bfloat16", "float32", "float64" }) do
      local f = T.tensor({ 1 }, dtype)
      local tail = ": not supported for " .. dtype .. " tensors (it takes integer and bool ones)"
      H.raises(function() f:bitwise_and(f) end, "tensordict: bitwise_and" .. tail)
      H.raises(function() f:bitwise_xor(1) end, "tensordict: bitwise_xor" .. tail)
      H.raises(function() f:bitwise_left_shift(1) end, "tensordict: bitwise_left_shift" .. tail)
      H.raises(function() f:bitwise_not() end, "tensordict: bitwise_not" .. tail)
      H.raises(function() f:bitwise_not_() end, "tensordict: bitwise_not_" .. tail)
    end
    local i = T.tensor({ 1 }, "int32")
    H.raises(function() i:bitwise_or(0.5) end,
      "tensordict: bitwise_or: not supported for float32 tensors (it takes integer and bool ones)")
    H.raises(function() i:bitwise_or_(0.5) end, "tensordict: bitwise_or_: not supported for float32")
    local b = T.tensor({ true })
    H.raises(function() b:bitwise_left_shift(b) end, "tensordict: bitwise_left_shift: not supported for bool tensors")
    H.raises(function() b:bitwise_right_shift(true) end,
      "tensordict: bitwise_right_shift: not supported for bool tensors")
  end)
end)
