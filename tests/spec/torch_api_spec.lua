-- torch_api_spec.lua: torch's everyday functions that issue 30 adds, in Lua's 1-based
-- manners: the views narrow, select, movedim, swapaxes, broadcast_to, view_as; the
-- constructors linspace, logspace, eye and the *_like ones. Values, shapes, dtypes,
-- views sharing their source's memory, and the errors.
local T = require("tensordict")
local H = require("helpers")

local function grid() return T.arange(1, 24):view(2, 3, 4) end

-- A tensor's shape as a plain list.
local function dims(t)
  local size, out = t:size(), {}
  for i = 1, #size do out[i] = size[i] end
  return out
end

describe("views", function()
  it("narrow(dim, start, length): 1-based start, negative from the end, a view", function()
    local t = grid()
    local n = t:narrow(3, 2, 2)
    assert.are.same({ 2, 3, 2 }, dims(n))
    assert.are.same({ { 2, 3 }, { 6, 7 }, { 10, 11 } }, n[1]:totable())
    assert.are.same({ 3, 4 }, t:narrow(3, -2, 2)[1][1]:totable())
    assert.are.same({ 0, 3, 4 }, dims(t:narrow(1, 2, 0)))
    n:fill_(0)
    assert.are.same({ 1, 0, 0, 4 }, t[1][1]:totable()) -- writes reach the source
    H.raises(function() t:narrow(3, 4, 2) end,
      "narrow: start 4 and length 2 do not fit dim 3 of size 4 (start in 1..4 or -4..-1)")
    H.raises(function() t:narrow(3, 0, 1) end, "narrow: start 0 and length 1 do not fit")
    H.raises(function() t:narrow(3, 1, -1) end, "narrow: start and length must be integers (length >= 0)")
    H.raises(function() t:narrow(4, 1, 1) end, "narrow")
  end)

  it("select(dim, index): the dim goes, a view", function()
    local t = grid()
    assert.are.same({ 2, 4 }, dims(t:select(2, 3)))
    assert.are.same({ 9, 10, 11, 12 }, t:select(2, -1)[1]:totable())
    assert.are.same({ { 13, 14, 15, 16 }, { 17, 18, 19, 20 }, { 21, 22, 23, 24 } }, t:select(1, 2):totable())
    t:select(3, 1):fill_(-1)
    assert.are.equal(-1, t[2][3][1])
    H.raises(function() t:select(2, 4) end,
      "select: index 4 is out of range for dim 2 of size 3 (valid: 1..3 or -3..-1)")
    H.raises(function() t:select(2, 0) end, "select: index 0 is out of range")
  end)

  it("movedim, swapaxes, broadcast_to, view_as", function()
    local t = grid()
    assert.are.same({ 3, 4, 2 }, dims(t:movedim(1, 3)))
    assert.are.same({ 3, 4, 2 }, dims(t:movedim({ 1, 2 }, { 3, 1 })))
    assert.are.equal(t[2][3][4], t:movedim(1, 3)[3][4][2])
    assert.are.same({ 4, 2, 3 }, dims(t:moveaxis(-1, 1)))
    assert.are.same({ 4, 3, 2 }, dims(t:swapaxes(1, 3)))
    assert.are.equal(t[1][2][3], t:swapdims(1, 3)[3][2][1])
    local b = T.tensor({ 1, 2, 3 }):broadcast_to(2, 3)
    assert.are.same({ { 1, 2, 3 }, { 1, 2, 3 } }, b:totable())
    assert.are.same({ 4, 6 }, dims(t:view_as(T.zeros(4, 6))))
    H.raises(function() t:movedim({ 1, 1 }, { 2, 3 }) end, "movedim: source dim 1 appears twice")
    H.raises(function() t:movedim({ 1, 2 }, { 3 }) end, "movedim: 2 source dims but 1 destinations")
    H.raises(function() t:view_as(3) end, "view_as: expected a tensor, got 3")
    H.raises(function() T.zeros(3):broadcast_to(2, 4) end, "expand")
  end)
end)

describe("constructors", function()
  it("linspace: both ends exact, float32 by default", function()
    assert.are.same({ 0, 0.25, 0.5, 0.75, 1 }, T.linspace(0, 1, 5):totable())
    local l = T.linspace(-1, 1, 4, "float64")
    assert.are.equal("float64", l:dtype())
    H.assert_near({ -1, -1 / 3, 1 / 3, 1 }, l:totable(), 1e-15)
    local big = T.linspace(0, 0.1, 1001, "float64"):totable()
    assert.are.equal(0.1, big[1001]) -- counted down from stop: exact
    assert.are.equal(0, big[1])
    assert.are.same({ 3 }, T.linspace(3, 7, 1):totable())
    assert.are.same({ 0 }, dims(T.linspace(0, 1, 0)))
    H.raises(function() T.linspace(0, 1, -1) end, "linspace: steps must be an integer >= 0, got -1")
    H.raises(function() T.linspace(0, 1 / 0, 3) end, "linspace: start and stop must be finite numbers")
  end)

  it("logspace: base ^ linspace", function()
    assert.are.same({ 1, 10, 100 }, T.logspace(0, 2, 3):totable())
    assert.are.same({ 1, 2, 4, 8 }, T.logspace(0, 3, 4, 2, "float64"):totable())
    assert.are.equal("float64", T.logspace(0, 1, 2, "float64"):dtype())
  end)

  it("eye: ones on the diagonal, any n x m and dtype", function()
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, T.eye(3):totable())
    assert.are.same({ { 1, 0, 0 }, { 0, 1, 0 } }, T.eye(2, 3, "int32"):totable())
    assert.are.same({ { 1, 0 }, { 0, 1 }, { 0, 0 } }, T.eye(3, 2):totable())
    assert.are.same({ 0, 0 }, dims(T.eye(0)))
    assert.are.equal("bool", T.eye(2, "bool"):dtype())
    H.raises(function() T.eye(-1) end, "eye: sizes must be integers >= 0, got -1")
  end)

  it("*_like: the shape, and the dtype unless given", function()
    local x = T.ones(2, 3, "int16")
    for _, name in ipairs({ "zeros_like", "ones_like", "empty_like" }) do
      local y = T[name](x)
      assert.are.same({ 2, 3 }, dims(y), name)
      assert.are.equal("int16", y:dtype(), name)
    end
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, T.zeros_like(x):totable())
    assert.are.same({ { 7, 7, 7 }, { 7, 7, 7 } }, T.full_like(x, 7):totable())
    assert.are.equal("float64", T.ones_like(x, "float64"):dtype())
    local r = T.rand_like(T.zeros(1000))
    assert.is_true(r:min() >= 0 and r:max() < 1)
    assert.are.equal("float64", T.randn_like(T.zeros(3), "float64"):dtype())
    H.raises(function() T.zeros_like(3) end, "zeros_like: expected a tensor, got 3")
  end)
end)
