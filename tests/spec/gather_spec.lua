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

describe("int64 and int32 index tensors, taken 1-based by C as they are", function()
  local t = T.arange(1, 12):view(4, 3) -- {{1,2,3},{4,5,6},{7,8,9},{10,11,12}}

  it("index_select and gather give what Lua arrays give, negatives from the end", function()
    for _, dt in ipairs({ "int64", "int32" }) do
      local rows = t:index_select(1, T.tensor({ 4, 1, -1, -4, 2 }, dt))
      assert.are.same(t:index_select(1, { 4, 1, -1, -4, 2 }):totable(), rows:totable())
      assert.are.same({ { 10, 11, 12 }, { 1, 2, 3 }, { 10, 11, 12 }, { 1, 2, 3 }, { 4, 5, 6 } }, rows:totable())
      assert.are.same({ { 3, 1 }, { 6, 4 }, { 9, 7 }, { 12, 10 } },
        t:index_select(2, T.tensor({ -1, 1 }, dt)):totable())
      assert.are.same({ { 3, 1, 2 }, { 4, 4, 6 } }, t:gather(2, T.tensor({ { 3, 1, -2 }, { 1, -3, 3 } }, dt)):totable())
      -- a strided index (a column of a [n, 2] tensor)
      local idx = T.tensor({ { 2, 0 }, { 3, 0 }, { 1, 0 } }, dt)[{ {}, 1 }]
      assert.are.same({ { 4, 5, 6 }, { 7, 8, 9 }, { 1, 2, 3 } }, t:index_select(1, idx):totable())
      assert.are.equal(t:dtype(), t:index_select(1, T.tensor({ 1 }, dt)):dtype())
    end
  end)

  it("gather of a 1-D tensor, any element size, strided, in one pass", function()
    for _, dt in ipairs({ "uint8", "int16", "float16", "float32", "int64", "float64" }) do
      local src = T.tensor({ 5, 6, 7, 8 }, dt)
      for _, it in ipairs({ "int64", "int32" }) do
        local got = src:gather(1, T.tensor({ 4, -4, 2, -1, 3 }, it))
        assert.are.equal(dt, got:dtype())
        assert.are.same({ 8, 5, 6, 8, 7 }, got:tolist())
      end
    end
    local col = T.arange(1, 12):view(4, 3)[{ {}, 2 }] -- {2, 5, 8, 11}, stride 3
    assert.are.same({ 11, 2, 8 }, col:gather(1, T.tensor({ 4, 1, -2 }, "int64")):tolist())
    assert.are.same({ 0 }, col:gather(1, T.tensor({}, "int64")):shape())
    H.raises(function() T.tensor({}, "float32"):gather(1, T.tensor({ 1 }, "int64")) end,
      "gather: index 1 is out of range for dim 1 of size 0")
  end)

  it("bad values are named as for Lua arrays: the largest past the end, else the smallest, else 0", function()
    for _, dt in ipairs({ "int64", "int32" }) do
      H.raises(function() t:index_select(1, T.tensor({ 1, 7, 5, -9 }, dt)) end,
        "index_select: index 7 is out of range for dim 1 of size 4 (valid: 1..4 or -4..-1)")
      H.raises(function() t:index_select(2, T.tensor({ 1, -4, 0 }, dt)) end,
        "index_select: index -4 is out of range for dim 2 of size 3 (valid: 1..3 or -3..-1)")
      H.raises(function() t:gather(1, T.tensor({ { 1, 0, 2 } }, dt)) end,
        "gather: index 0 in dim 1: indices are 1-based (negative from the end)")
    end
    -- past the thread pool's grain: the chunks' extremes are combined
    local big = T.ones(70000, "int64")
    big[{ { 40000, 40000 } }] = 5
    big[{ { 69999, 69999 } }] = -6
    H.raises(function() T.zeros(4):gather(1, big) end, "gather: index 5 is out of range for dim 1 of size 4")
    assert.are.equal(70000, T.arange(1, 5):gather(1, T.ones(70000, "int64")):sum())
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
