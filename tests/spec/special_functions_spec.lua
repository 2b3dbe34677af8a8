-- erfinv and digamma (core/include/special_math.h): exact values (mpmath, 30 digits) to
-- ~2 ulp in float64, torch's values at the edges, the dtypes (integers and bool give
-- float32), round trips through erf, and the in-place forms. torch_ops_spec checks them
-- against torch on every dtype.
local T = require("tensordict")
local H = require("helpers")

local function nan(v) return v ~= v end
-- Each value within rtol of the wanted one, relatively (5e-16: 2 ulp of float64).
local function assert_rel(want, got, rtol)
  for i = 1, #want do
    local ok = math.abs(got[i] - want[i]) <= rtol * math.abs(want[i])
    assert(ok, ("element %d: %.17g, want %.17g"):format(i, got[i], want[i]))
  end
end

describe("erfinv", function()
  it("matches exact values to 2 ulp in float64", function()
    local x = T.tensor({ 0.5, -0.25, 0.999, 1 - 2 ^ -40, 1e-300 }, "float64")
    local want = { 0.4769362762044699, -0.2253120550121781, 2.326753765513524,
      5.051254085249390, 8.862269254527580e-301 }
    assert_rel(want, x:erfinv():totable(), 5e-16)
  end)

  it("gives torch's values at the edges, on every floating dtype", function()
    for _, dtype in ipairs({ "float16", "bfloat16", "float32", "float64" }) do
      local r = T.tensor({ 0, -0.0, 1, -1, 1.5, -2, 0 / 0 }, dtype):erfinv():totable()
      assert.are.same({ 0, 0, 1 / 0, -1 / 0 }, { r[1], r[2], r[3], r[4] }, dtype)
      assert.are.equal(-1 / 0, 1 / r[2], dtype .. ": erfinv(-0) is -0")
      assert.is_true(nan(r[5]) and nan(r[6]) and nan(r[7]), dtype .. ": NaN outside [-1, 1]")
    end
  end)

  it("inverts erf, and gives float32 for integers and bool", function()
    local y = T.linspace(-0.99, 0.99, 199, "float64")
    H.assert_near(y:totable(), y:erfinv():erf():totable(), 1e-15)
    local f = T.linspace(-0.9, 0.9, 19, "float32")
    H.assert_near(f:totable(), f:erfinv():erf():totable(), 3e-7)
    local i = T.tensor({ 0, 1, -1 }, "int32"):erfinv()
    assert.are.equal("float32", i:dtype())
    assert.are.same({ 0, 1 / 0, -1 / 0 }, i:totable())
    assert.are.same({ 1 / 0, 0 }, T.tensor({ true, false }):erfinv():totable())
    local t = T.tensor({ 0.5 }, "float64")
    assert.are.equal(t, t:erfinv_())
    H.assert_near({ 0.4769362762044699 }, t:totable(), 5e-16)
    H.raises(function() T.tensor({ 1 }, "int32"):erfinv_() end, "erfinv_")
  end)
end)

describe("digamma", function()
  it("matches exact values to 2 ulp in float64, next to its zero too", function()
    local x = T.tensor({ 1, 2.5, 1e-3, -0.5, -2.5, -0.999, 1e10, 1.4616321449683622 }, "float64")
    local want = { -0.5772156649015329, 0.7031566406452432, -1000.5755719318103, 0.03648997397857652,
      1.103156640645243, -999.5745709308084, 23.025850929890457, -9.241265521729427e-17 }
    assert_rel(want, x:digamma():totable(), 5e-16)
  end)

  it("gives torch's values at zero, the poles and the infinities", function()
    for _, dtype in ipairs({ "float16", "bfloat16", "float32", "float64" }) do
      local r = T.tensor({ 0, -0.0, -1, -2, 1 / 0, -1 / 0, 0 / 0 }, dtype):digamma():totable()
      assert.are.equal(-1 / 0, r[1], dtype .. ": psi(+0) = -inf")
      assert.are.equal(1 / 0, r[2], dtype .. ": psi(-0) = +inf")
      assert.is_true(nan(r[3]) and nan(r[4]), dtype .. ": NaN at the negative integers")
      assert.are.equal(1 / 0, r[5], dtype)
      assert.is_true(nan(r[6]) and nan(r[7]), dtype .. ": NaN at -inf and NaN")
    end
  end)

  it("satisfies the recurrence, and gives float32 for integers and bool", function()
    local x = T.linspace(-9.7, 20.3, 121, "float64") -- no integer among them
    local lhs = (x + 1):digamma()
    local rhs = x:digamma() + x:pow(-1)
    H.assert_near(rhs:totable(), lhs:totable(), 1e-12)
    local i = T.tensor({ 0, 1, 2 }, "int64"):digamma()
    assert.are.equal("float32", i:dtype())
    H.assert_near({ -1 / 0, -0.5772157, 0.4227843 }, i:totable(), 1e-6)
    assert.are.equal("float32", T.tensor({ true }):digamma():dtype())
    local t = T.tensor({ 1, 2 }, "float32")
    t:digamma_()
    H.assert_near({ -0.5772157, 0.4227843 }, t:totable(), 1e-6)
  end)
end)
