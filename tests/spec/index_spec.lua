local T = require("tensordict")
local H = require("helpers")

-- 3 x 4 matrix of 1..12 (float32) and a 2 x 3 x 4 int64 cube of 1..24.
local function matrix() return T.arange(1, 12, "float32"):view(3, 4) end
local function cube() return T.arange(24):view(2, 3, 4) end

describe("indexing", function()
  it("t[i] on a 1-D tensor gives a Lua number, or a boolean for bool", function()
    local v = T.tensor({ 10, 20, 30 })
    assert.are.equal(10, v[1])
    assert.are.equal(30, v[-1])
    assert.are.equal(20, v[-2])
    assert.are.equal(true, T.tensor({ false, true })[2])
  end)

  it("t[i] on an n-D tensor selects a view along dim 1", function()
    local m = matrix()
    local row = m[2]
    assert.are.same({ 4 }, row:shape())
    assert.are.same({ 5, 6, 7, 8 }, row:totable())
    row[1] = 100
    assert.are.equal(100, m[2][1]) -- shares memory
    assert.are.same({ 9, 10, 11, 12 }, m[-1]:totable())
  end)

  it("takes one entry per dim, missing trailing dims meaning all", function()
    local c = cube()
    assert.are.equal(7, c[{ 1, 2, 3 }])
    assert.are.same({ 5, 6, 7, 8 }, c[{ 1, 2 }]:totable())
    assert.are.same({ 3, 4 }, c[{ 2 }]:shape())
  end)

  it("reads inclusive ranges, with steps and negatives", function()
    local m = matrix()
    assert.are.same({ { 2, 3 }, { 6, 7 } }, m[{ { 1, 2 }, { 2, 3 } }]:totable())
    assert.are.same({ { 1, 3 }, { 9, 11 } }, m[{ { 1, -1, 2 }, { 1, 4, 2 } }]:totable())
    assert.are.same({ { 11, 12 } }, m[{ { -1, -1 }, { -2, -1 } }]:totable())
    assert.are.same({ { 5, 6, 7, 8 } }, m[{ { 2 } }]:totable()) -- {a} is {a, a}
    assert.are.same({ 3 }, m[{ {}, 1 }]:shape())
    assert.are.same({ 1, 5, 9 }, m[{ {}, 1 }]:totable())
  end)

  it("clamps range ends past the size like string.sub", function()
    local m = matrix()
    assert.are.same({ 2, 4 }, m[{ { 2, 100 } }]:shape())
    assert.are.same({ 0, 4 }, m[{ { 4, 10 } }]:shape())
    assert.are.same({ 0, 4 }, m[{ { 3, 2 } }]:shape())
  end)

  it("inserts dims for newaxis and fills with ellipsis", function()
    local c = cube()
    assert.are.same({ 1, 2, 3, 4 }, c[{ T.newaxis }]:shape())
    assert.are.same({ 2, 3, 1, 4 }, c[{ {}, {}, T.newaxis }]:shape())
    assert.are.same({ 2, 3 }, c[{ T.ellipsis, 1 }]:shape())
    assert.are.same({ { 1, 5, 9 }, { 13, 17, 21 } }, c[{ T.ellipsis, 1 }]:totable())
    assert.are.same({ 3 }, c[{ 1, T.ellipsis, 2 }]:shape())
    assert.are.same({ 2, 3, 4, 1 }, c[{ T.ellipsis, T.newaxis }]:shape())
    assert.are.same({ 2, 3, 4 }, c[{}]:shape())
  end)

  it("returns a Lua value when every dim is selected", function()
    assert.are.equal(12, matrix()[{ 3, 4 }])
    assert.are.equal(5, T.tensor(5)[{}])
  end)

  it("reports out-of-range indices with index, dim and size", function()
    local m = matrix()
    H.raises(function() return m[4] end, "index 4 is out of range for dim 1 of size 3")
    H.raises(function() return m[{ 1, 5 }] end, "index 5 is out of range for dim 2 of size 4")
    H.raises(function() return m[{ 1, -5 }] end, "index -5 is out of range for dim 2 of size 4")
    H.raises(function() return m[0] end, "index 0 is out of range for dim 1 of size 3")
    H.raises(function() return T.tensor({ 1 })[2] end, "index 2 is out of range for dim 1 of size 1")
  end)

  it("rejects malformed entries clearly", function()
    local m = matrix()
    H.raises(function() return m[{ 1, 1, 1 }] end, "3 indices for a tensor of 2 dims")
    H.raises(function() return m[{ { 0, 2 } }] end, "indices are 1-based")
    H.raises(function() return m[{ { 1, 2, 0 } }] end, "range step must be positive, got 0")
    H.raises(function() return m[{ { 1, 2, -1 } }] end, "range step must be positive, got -1")
    H.raises(function() return m[{ { 1, 2.5 } }] end, "must be {a, b} or {a, b, step} with integers")
    H.raises(function() return m[{ T.ellipsis, T.ellipsis }] end, "at most one ellipsis")
    H.raises(function() return m[1.5] end, "1.5 is not an integer index")
    H.raises(function() return m[{ "x" }] end, "entry 1 is 'x'")
    H.raises(function() return m[true] end, "cannot index a tensor with true")
    H.raises(function() return m.nosuch end, "Tensor has no method or field 'nosuch'")
    H.raises(function() return T.tensor(1)[1] end, "cannot index a 0-dim tensor")
  end)
end)

describe("assignment through an index", function()
  it("fills with a number or boolean", function()
    local m = matrix()
    m[{ {}, 2 }] = 0
    assert.are.same({ 1, 0, 3, 4 }, m[1]:totable())
    assert.are.same({ 9, 0, 11, 12 }, m[3]:totable())
    m[{ 2, 3 }] = -1
    assert.are.equal(-1, m[{ 2, 3 }])
    local b = T.zeros({ 3 }, "bool")
    b[2] = true
    assert.are.same({ false, true, false }, b:totable())
  end)

  it("copies a tensor, broadcasting and casting", function()
    local m = matrix()
    m[{ { 1, 2 } }] = T.tensor({ 7, 8, 9, 10 }, "int32")
    assert.are.same({ { 7, 8, 9, 10 }, { 7, 8, 9, 10 }, { 9, 10, 11, 12 } }, m:totable())
    m[3] = T.tensor(0.5, "float64")
    assert.are.same({ 0.5, 0.5, 0.5, 0.5 }, m[3]:totable())
  end)

  it("copies a nested table in the target's dtype", function()
    local c = cube()
    c[{ 1, 1 }] = { 1.9, 2, 3, 4 }
    assert.are.same({ 1, 2, 3, 4 }, c[{ 1, 1 }]:totable())
  end)

  it("rejects shapes that do not broadcast, naming both", function()
    local m = matrix()
    H.raises(function() m[1] = T.tensor({ 1, 2, 3 }) end, "[3]", "[4]")
    H.raises(function() m[{ {}, 1 }] = T.zeros(2, 3) end, "[2, 3]", "[3]")
    H.raises(function() m[1] = "x" end, "assignment: value must be a number or boolean, got 'x'")
  end)
end)
