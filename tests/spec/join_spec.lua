-- Joins (stack, cat, pad) and splits (split, chunk, unbind).
local T = require("tensordict")
local H = require("helpers")
local ref = require("ref")

describe("stack and cat", function()
  it("stack along any dim, promoting dtypes", function()
    local a, b = T.tensor({ 1, 2 }, "int32"), T.tensor({ 3, 4 }, "int64")
    local s = T.stack({ a, b })
    assert.are.same({ { 1, 2 }, { 3, 4 } }, s:totable())
    assert.are.equal("int64", s:dtype())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, T.stack({ a, b }, 2):totable())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, T.stack({ a, b }, -1):totable())
    assert.are.equal("float32", T.stack({ a, T.tensor({ 0.5, 1 }) }):dtype())
  end)

  it("cat along any dim, matching the model for random shapes and layouts", function()
    math.randomseed(31)
    for case = 1, 200 do
      local ndim = math.random(1, 3)
      local d = math.random(ndim)
      local parts, tensors, total = {}, {}, 0
      local base = {}
      for i = 1, ndim do base[i] = math.random(1, 3) end
      for p = 1, math.random(1, 4) do
        local shape = {}
        for i = 1, ndim do shape[i] = base[i] end
        shape[d] = math.random(0, 3)
        total = total + shape[d]
        parts[p] = { shape = shape, values = ref.random_values(shape, "float32") }
        tensors[p] = ref.tensor(parts[p].values, shape, "float32")
      end
      local out_shape = {}
      for i = 1, ndim do out_shape[i] = base[i] end
      out_shape[d] = total
      local want = ref.generate(out_shape, function(index)
        local k = index[d]
        for _, part in ipairs(parts) do
          if k <= part.shape[d] then
            local src = {}
            for i, v in ipairs(index) do src[i] = v end
            src[d] = k
            return ref.at(part.values, part.shape, src)
          end
          k = k - part.shape[d]
        end
      end)
      local got = T.cat(tensors, d)
      assert.are.same(out_shape, got:shape(), "case " .. case)
      if ref.numel(out_shape) > 0 then assert.are.same(want, got:totable(), "case " .. case) end
    end
  end)

  it("say which shapes differ", function()
    H.raises(function() T.stack({ T.zeros(2), T.zeros(3) }) end, "stack", "[2]", "[3]")
    H.raises(function() T.cat({ T.zeros(2, 2), T.zeros(3, 3) }, 1) end, "cat", "[2, 2]", "[3, 3]")
    H.raises(function() T.stack({}) end, "stack: the list of tensors is empty")
    H.raises(function() T.cat({ T.zeros(2), "x" }) end, "cat: element 2 of the list is 'x', not a tensor")
    H.raises(function() T.stack({ T.zeros(2) }, 3) end, "stack: dim 3 is out of range")
  end)
end)

describe("pad", function()
  it("pads the last dims like torch.nn.functional.pad, negative pads crop", function()
    local t = T.tensor({ { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 0, 1, 2, 0, 0 }, { 0, 3, 4, 0, 0 } }, T.pad(t, { 1, 2 }):totable())
    assert.are.same({ { 9, 9 }, { 1, 2 }, { 3, 4 } }, T.pad(t, { 0, 0, 1, 0 }, 9):totable())
    assert.are.same({ { 2 }, { 4 } }, T.pad(t, { -1, 0 }):totable())
    H.raises(function() T.pad(t, { 1 }) end, "pad")
    H.raises(function() T.pad(t, { 1, 1, 1, 1, 1, 1 }) end, "pad")
  end)
end)

describe("split, chunk, unbind", function()
  it("give views of consecutive pieces", function()
    local t = T.arange(1, 10)
    local parts = t:split(4)
    assert.are.equal(3, #parts)
    assert.are.same({ 9, 10 }, parts[3]:totable())
    parts[1][1] = 100
    assert.are.equal(100, t[1]) -- views
    local sized = t:split({ 2, 8 })
    assert.are.same({ 100, 2 }, sized[1]:totable())
    assert.are.equal(8, sized[2]:size(1))
    assert.are.equal(4, #t:chunk(4))
    assert.are.same({ 3, 3, 3, 1 }, (function()
      local sizes = {}
      for i, c in ipairs(t:chunk(4)) do sizes[i] = c:size(1) end
      return sizes
    end)())
    local m = T.arange(1, 6):view(2, 3)
    local cols = m:unbind(2)
    assert.are.equal(3, #cols)
    assert.are.same({ 2, 5 }, cols[2]:totable())
    H.raises(function() t:split({ 2, 3 }) end, "split: sizes [2, 3] must sum to 10, the size of dim 1 of shape [10]")
    H.raises(function() t:split(0) end, "split: size must be a positive integer")
    H.raises(function() t:chunk(0) end, "chunk: the number of chunks must be a positive integer")
  end)
end)

describe("split and chunk of an empty dim", function()
  it("split gives one empty piece and chunk(n) n empty pieces, as torch and td:split do", function()
    local pieces = T.zeros(0):split(2)
    assert.are.equal(1, #pieces)
    assert.are.same({ 0 }, pieces[1]:shape())
    assert.are.equal(2, #T.zeros(0, 3):chunk(2))
    assert.are.same({ 0, 3 }, T.zeros(0, 3):chunk(2)[1]:shape())
    local td = T.TensorDict({ a = T.zeros(0, 3) }, { 0 })
    assert.are.equal(1, #td:split(2))
  end)
end)
