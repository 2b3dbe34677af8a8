-- tensor/split_rule.lua: the piece sizes of split and chunk, one rule for tensors and
-- TensorDicts (torch's):
--   split(size)     pieces of size, the last smaller; an empty dim gives one empty piece;
--                   size 0 splits only an empty dim;
--   split({sizes})  pieces of those non-negative sizes, which must add up to the dim;
--   chunk(n)        split(ceil(total / n)): at most n pieces; an empty dim gives n empty
--                   pieces.
-- where(x, d) names dim d of x in messages ("dim 1 of shape [10]", "dim 2 of batch
-- size [4, 5]"); it is called only to raise, so a split that succeeds builds no string.
local util = require("tensordict.util")

local fail, describe, is_int = util.fail, util.describe, util.is_int

local M = {}

-- The piece lengths of split(size) along a dim of `total` elements.
function M.split(size, total, where, x, d)
  if type(size) == "table" then
    local sum = 0
    for i, s in ipairs(size) do
      if not is_int(s) or s < 0 then
        fail(("split: size %d is %s; sizes are non-negative integers"):format(i, describe(s)))
      end
      sum = sum + s
    end
    if sum ~= total then
      fail(("split: sizes %s must sum to %d, the size of %s"):format(util.format_list(size), total, where(x, d)))
    end
    return { unpack(size) }
  end
  if not is_int(size) or size < 0 then
    fail(("split: size must be a positive integer or a table of sizes, got %s"):format(describe(size)))
  end
  if size == 0 and total > 0 then
    fail(("split: size must be a positive integer or a table of sizes, got 0 (0 splits only an empty dim, "
      .. "and %s has %d)"):format(where(x, d), total))
  end
  if total == 0 then return { 0 } end
  local lengths = {}
  for start = 0, total - 1, size do lengths[#lengths + 1] = math.min(size, total - start) end
  return lengths
end

local MAX_PIECES = 2 ^ 26
M.MAX_PIECES = MAX_PIECES -- the most pieces a split makes (a Lua table holds at most 2^27)

-- The piece lengths of chunk(n) along a dim of `total` elements.
function M.chunk(n, total)
  if not is_int(n) or n < 1 then
    fail(("chunk: the number of chunks must be a positive integer, got %s"):format(describe(n)))
  end
  if total == 0 then
    -- torch makes n empty pieces; a Lua table holds at most 2^27 entries
    if n > MAX_PIECES then
      fail(("chunk: %d chunks of an empty dim would be %d empty pieces, more than %d")
        :format(n, n, MAX_PIECES))
    end
    local lengths = {}
    for i = 1, n do lengths[i] = 0 end
    return lengths
  end
  return M.split(math.ceil(total / n), total)
end

return M
