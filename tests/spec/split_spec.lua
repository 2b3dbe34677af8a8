-- split and chunk follow one rule (torch's, lua/tensordict/tensor/split_rule.lua) for tensors
-- and TensorDicts: each case below runs on a tensor and on a TensorDict of the same
-- shape, and both must give the same piece sizes or the same error.
local T = require("tensordict")
local H = require("helpers")

-- A tensor and a TensorDict whose batch size is that tensor's shape.
local function both(shape)
  local t = T.zeros(unpack(shape))
  return { tensor = t, td = T.TensorDict({ x = t:clone() }, shape) }
end

-- The sizes along dim d (1-based, negative from the end) of each piece.
local function lengths(pieces, d)
  local out = {}
  for i, p in ipairs(pieces) do
    local shape = T.is_tensor(p) and p:shape() or p:batch_size()
    out[i] = shape[d > 0 and d or #shape + 1 + d]
  end
  return out
end

-- Runs call(x) on both kinds; gives the piece lengths along d (the same for both).
local function same_lengths(shape, d, call)
  local got = {}
  for kind, x in pairs(both(shape)) do got[kind] = lengths(call(x), d) end
  assert.are.same(got.tensor, got.td)
  return got.tensor
end

-- call(x) raises on both kinds, with messages containing every text.
local function both_raise(shape, call, ...)
  for _, x in pairs(both(shape)) do
    local texts = { ... }
    H.raises(function() call(x) end, unpack(texts))
  end
end

describe("split(size)", function()
  it("gives pieces of size, the last smaller", function()
    assert.are.same({ 2, 2, 1 }, same_lengths({ 5 }, 1, function(x) return x:split(2) end))
    assert.are.same({ 5 }, same_lengths({ 5 }, 1, function(x) return x:split(5) end))
  end)

  it("gives one piece when size is larger than the dim", function()
    assert.are.same({ 5 }, same_lengths({ 5 }, 1, function(x) return x:split(7) end))
  end)

  it("gives one empty piece of an empty dim, whatever the size (0 included)", function()
    assert.are.same({ 0 }, same_lengths({ 0 }, 1, function(x) return x:split(2) end))
    assert.are.same({ 0 }, same_lengths({ 3, 0 }, 2, function(x) return x:split(4, 2) end))
    assert.are.same({ 0 }, same_lengths({ 0 }, 1, function(x) return x:split(0) end))
  end)

  it("splits along a later or negative dim", function()
    assert.are.same({ 2, 1 }, same_lengths({ 4, 3 }, 2, function(x) return x:split(2, 2) end))
    assert.are.same({ 2, 1 }, same_lengths({ 4, 3 }, -1, function(x) return x:split(2, -1) end))
    assert.are.same({ 3, 1 }, same_lengths({ 4, 3 }, 1, function(x) return x:split(3, -2) end))
  end)

  it("refuses size 0 of a non-empty dim, negative and non-integer sizes", function()
    both_raise({ 5 }, function(x) return x:split(0) end,
      "split: size must be a positive integer or a table of sizes, got 0", "0 splits only an empty dim")
    both_raise({ 5 }, function(x) return x:split(-1) end,
      "split: size must be a positive integer or a table of sizes, got -1")
    both_raise({ 5 }, function(x) return x:split(1.5) end, "got 1.5")
    both_raise({ 5 }, function(x) return x:split("2") end, "got '2'")
  end)

  it("refuses a dim out of range", function()
    both_raise({ 5 }, function(x) return x:split(2, 2) end, "split: dim 2 is out of range")
  end)
end)

describe("split({sizes})", function()
  it("gives pieces of those sizes, empty ones included", function()
    assert.are.same({ 2, 0, 3 }, same_lengths({ 5 }, 1, function(x) return x:split({ 2, 0, 3 }) end))
    assert.are.same({ 0, 0 }, same_lengths({ 0 }, 1, function(x) return x:split({ 0, 0 }) end))
    assert.are.same({ 1, 2 }, same_lengths({ 4, 3 }, -1, function(x) return x:split({ 1, 2 }, -1) end))
  end)

  it("refuses sizes that do not sum to the dim, naming it", function()
    both_raise({ 5 }, function(x) return x:split({ 2, 2 }) end, "split: sizes [2, 2] must sum to 5, the size of dim 1")
    both_raise({ 5 }, function(x) return x:split({ 3, 3 }) end, "split: sizes [3, 3] must sum to 5")
    both_raise({ 4, 3 }, function(x) return x:split({ 1 }, 2) end, "must sum to 3, the size of dim 2 of")
    H.raises(function() T.zeros(4, 3):split({ 1 }, 2) end, "the size of dim 2 of shape [4, 3]")
    H.raises(function() T.TensorDict({}, { 4, 3 }):split({ 1 }, -1) end, "the size of dim 2 of batch size [4, 3]")
  end)

  it("refuses negative and non-integer sizes, naming the piece", function()
    both_raise({ 5 }, function(x) return x:split({ -1, 6 }) end, "split: size 1 is -1; sizes are non-negative integers")
    both_raise({ 5 }, function(x) return x:split({ 2, 2.5 }) end, "split: size 2 is 2.5")
  end)
end)

describe("chunk(n)", function()
  it("gives pieces of ceil(size / n), maybe fewer than n", function()
    assert.are.same({ 2, 2, 1 }, same_lengths({ 5 }, 1, function(x) return x:chunk(3) end))
    assert.are.same({ 2, 2, 2 }, same_lengths({ 6 }, 1, function(x) return x:chunk(4) end))
    assert.are.same({ 1, 1 }, same_lengths({ 2 }, 1, function(x) return x:chunk(5) end))
    assert.are.same({ 2, 1 }, same_lengths({ 4, 3 }, -1, function(x) return x:chunk(2, -1) end))
  end)

  it("gives n empty pieces of an empty dim", function()
    assert.are.same({ 0, 0, 0 }, same_lengths({ 0 }, 1, function(x) return x:chunk(3) end))
  end)

  it("refuses n that is not a positive integer", function()
    both_raise({ 5 }, function(x) return x:chunk(0) end,
      "chunk: the number of chunks must be a positive integer, got 0")
    both_raise({ 5 }, function(x) return x:chunk(-2) end, "got -2")
  end)
end)
