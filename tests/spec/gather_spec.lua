-- Masks and index tensors: methods and the grammar's mask and index entries, against
-- plain Lua models, with 1-based indices (negative from the end).
local T = require("tensordict")
local H = require("helpers")
local ref = require("ref")

describe("masked_select and nonzero", function()
  it("select in row-major order, broadcasting the mask", function()
    local t = T.arange(1, 6):view(2, 3)
    assert.are.same({ 2, 4, 6 }, t:masked_select(t:remainder(2):eq(0)):totable())
    assert.are.same({ 1, 3, 4, 6 }, t:masked_select(T.tensor({ true, false, true })):totable())
    assert.are.same({}, t:masked_select(t:gt(10)):totable())
    H.raises(function() t:masked_select(T.tensor({ 1, 0, 1 })) end, "masked_select")
    H.raises(function() t:masked_select(T.tensor({ true, false })) end, "masked_select")
  end)

  it("nonzero gives 1-based positions", function()
    local t = T.tensor({ { 0, 5 }, { 7, 0 } })
    assert.are.same({ { 1, 2 }, { 2, 1 } }, t:nonzero():totable())
    assert.are.equal("int64", t:nonzero():dtype())
    assert.are.same({ 0, 2 }, T.zeros(2, 2):nonzero():shape())
  end)
end)

describe("index_select, gather, scatter_, index_add_", function()
  it("index_select matches the model for random shapes and dims", function()
    math.randomseed(21)
    for case = 1, 300 do
      local dtype = ref.ALL[math.random(#ref.ALL)]
      local shape = ref.random_shape(3, 3)
      if #shape == 0 then shape = { 2 } end
      local d = math.random(#shape)
      if shape[d] == 0 then shape[d] = 1 end
      local values = ref.random_values(shape, dtype)
      local t = ref.tensor(values, shape, dtype)
      local idx = {}
      for i = 1, math.random(0, 4) do
        local j = math.random(1, shape[d])
        idx[i] = math.random() < 0.3 and j - shape[d] - 1 or j
      end
      local got = t:index_select(d, idx)
      local out_shape = {}
      for i, s in ipairs(shape) do out_shape[i] = s end
      out_shape[d] = #idx
      local want = ref.generate(out_shape, function(index)
        local src = {}
        for i, v in ipairs(index) do src[i] = v end
        local j = idx[index[d]]
        src[d] = j > 0 and j or shape[d] + j + 1
        return ref.at(values, shape, src)
      end)
      assert.are.same(out_shape, got:shape(), "case " .. case)
      assert.are.same(want, got:totable(), "case " .. case)
      assert.are.same(want, t:index_select(d, T.tensor(#idx > 0 and idx or {}, "int64")):totable())
    end
  end)

  it("gather and scatter_ follow torch with 1-based indices", function()
    local t = T.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 1, 1 }, { 4, 3 } }, t:gather(2, T.tensor({ { 1, 1 }, { 2, 1 } }, "int64")):totable())
    assert.are.same({ { 3, 2 } }, t:gather(1, T.tensor({ { 2, 1 } }, "int64")):totable())
    local z = T.zeros(2, 3)
    z:scatter_(2, T.tensor({ { 3 }, { 1 } }, "int64"), T.tensor({ { 5 }, { 6 } }))
    assert.are.same({ { 0, 0, 5 }, { 6, 0, 0 } }, z:totable())
    z:scatter_(1, T.tensor({ { 2, 2, 2 } }, "int64"), 9)
    assert.are.same({ { 0, 0, 5 }, { 9, 9, 9 } }, z:totable())
  end)

  it("index_add_ accumulates duplicates", function()
    local t = T.zeros(3, 2)
    t:index_add_(1, { 1, 3, 1 }, T.tensor({ { 1, 1 }, { 2, 2 }, { 3, 3 } }))
    assert.are.same({ { 4, 4 }, { 0, 0 }, { 2, 2 } }, t:totable())
  end)

  it("report bad indices in the user's terms", function()
    local t = T.zeros(3, 2)
    H.raises(function() t:index_select(1, { 4 }) end, "index_select: index 4 is out of range for dim 1 of size 3")
    H.raises(function() t:index_select(2, { -3 }) end, "index_select: index -3 is out of range for dim 2 of size 2")
    H.raises(function() t:index_select(1, { 0 }) end, "index 0", "1-based")
    H.raises(function() t:index_select(1, T.tensor({ 1.5 })) end, "index must have an integer dtype, got float32")
    H.raises(function() t:index_select(3, { 1 }) end, "index_select: dim 3 is out of range")
    H.raises(function() t:gather(1, T.tensor({ { 4, 1 } }, "int64")) end, "gather: index 4 is out of range")
  end)
end)

describe("mask and index entries of the grammar", function()
  it("t[mask] selects rows where the mask is true, as a copy", function()
    local t = T.arange(1, 6):view(3, 2)
    local rows = t[T.tensor({ true, false, true })]
    assert.are.same({ { 1, 2 }, { 5, 6 } }, rows:totable())
    rows[1][1] = 100
    assert.are.equal(1, t[{ 1, 1 }]) -- a copy
    assert.are.same({ 2, 4, 6 }, t[t:remainder(2):eq(0)]:totable()) -- a full mask: 1-D
  end)

  it("t[idx] and t[{ {}, idx }] gather positions", function()
    local t = T.arange(1, 6):view(3, 2)
    assert.are.same({ { 5, 6 }, { 1, 2 }, { 5, 6 } }, t[T.tensor({ 3, 1, -1 }, "int64")]:totable())
    assert.are.same({ { 2 }, { 4 }, { 6 } }, t[{ {}, T.tensor({ 2 }, "int64") }]:totable())
    assert.are.same({ 2, 2 }, t[{ { 1, 2 }, T.tensor({ 2, 1 }, "int64") }]:shape())
    assert.are.same({ { 2, 1 }, { 4, 3 } }, t[{ { 1, 2 }, T.tensor({ 2, 1 }, "int64") }]:totable())
    assert.are.same({ 2, 2, 2 }, t[T.tensor({ { 1, 2 }, { 3, 1 } }, "int64")]:shape())
  end)

  it("assignment through masks and index tensors", function()
    local t = T.arange(1, 6):view(3, 2)
    t[T.tensor({ true, false, true })] = 0
    assert.are.same({ { 0, 0 }, { 3, 4 }, { 0, 0 } }, t:totable())
    t[t:eq(0)] = -1
    assert.are.same({ { -1, -1 }, { 3, 4 }, { -1, -1 } }, t:totable())
    t[T.tensor({ 2 }, "int64")] = T.tensor({ { 7, 8 } }, "int64")
    assert.are.same({ 7, 8 }, t[2]:totable())
    t[{ {}, T.tensor({ 1 }, "int64") }] = 5
    assert.are.same({ { 5, -1 }, { 5, 8 }, { 5, -1 } }, t:totable())
    t[T.tensor({ false, true, false })] = T.tensor({ 1, 2 }, "int64")
    assert.are.same({ 1, 2 }, t[2]:totable())
  end)

  it("random masks and index tensors match the model", function()
    math.randomseed(22)
    for case = 1, 200 do
      local shape = { math.random(1, 4), math.random(1, 3), math.random(0, 3) }
      local values = ref.random_values(shape, "int32")
      local t = ref.tensor(values, shape, "int32")
      local maskv = ref.random_values({ shape[1], shape[2] }, "bool")
      local got = t[T.tensor(maskv, "bool")]
      local want = {}
      for i = 1, shape[1] do
        for j = 1, shape[2] do
          if maskv[i][j] then want[#want + 1] = values[i][j] end
        end
      end
      assert.are.same({ #want, shape[3] }, got:shape(), "case " .. case)
      if shape[3] > 0 then assert.are.same(want, got:totable(), "case " .. case) end
    end
  end)

  it("refuses two tensor entries and mismatched masks", function()
    local t = T.zeros(3, 2)
    local i = T.tensor({ 1 }, "int64")
    H.raises(function() return t[{ i, i }] end, "at most one mask or index tensor")
    H.raises(function() return t[T.tensor({ true, false })] end, "[2]", "[3")
    H.raises(function() return t[T.tensor({ 4 }, "int64")] end, "index 4 is out of range for dim 1 of size 3")
  end)
end)
