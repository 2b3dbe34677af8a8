-- tensor/assemble.lua: torch's functions that build one tensor (or a list) from several:
-- atleast_1d/2d/3d, column_stack, row_stack, dstack, meshgrid, cartesian_prod,
-- block_diag, and the index lists tril_indices / triu_indices (1-based). T.<name>
-- functions (the facade exposes them).
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local join = require("tensordict.tensor.join")

local fail, describe = util.fail, util.describe
local is_tensor, header = tensor.is_tensor, tensor.handle

local M = {}

-- The tensors of a list (or of the varargs), checked; call names the function.
local function tensors(call, ...)
  local list = select("#", ...) == 1 and type((...)) == "table" and not is_tensor((...)) and (...) or { ... }
  if #list == 0 then fail(call .. ": expected at least one tensor") end
  for i, t in ipairs(list) do
    if not is_tensor(t) then fail(("%s: element %d is %s, not a tensor"):format(call, i, describe(t))) end
  end
  return list
end

-- atleast_Nd(t): t viewed with at least N dims (torch's placement: a vector becomes a
-- row [1, n], then [1, n, 1]; a matrix [m, n, 1]).
local function atleast(call, n)
  return function(t)
    if not is_tensor(t) then fail(("%s: expected a tensor, got %s"):format(call, describe(t))) end
    local d = t:dim()
    if d >= n then return t end
    if d == 0 then return t:reshape(n == 1 and { 1 } or n == 2 and { 1, 1 } or { 1, 1, 1 }) end
    if d == 1 then return n == 2 and t:unsqueeze(1) or t:unsqueeze(1):unsqueeze(3) end
    return t:unsqueeze(3)
  end
end
M.atleast_1d, M.atleast_2d, M.atleast_3d = atleast("atleast_1d", 1), atleast("atleast_2d", 2), atleast("atleast_3d", 3)

-- column_stack(list): vectors as columns (n -> [n, 1]), then joined along dim 2.
function M.column_stack(...)
  local cols = {}
  for i, t in ipairs(tensors("column_stack", ...)) do cols[i] = t:dim() <= 1 and t:reshape(t:numel(), 1) or t end
  return (join.cat(cols, 2))
end

-- dstack(list): each at least 3-D, joined along dim 3.
function M.dstack(...)
  local parts = {}
  for i, t in ipairs(tensors("dstack", ...)) do parts[i] = M.atleast_3d(t) end
  return (join.cat(parts, 3))
end

-- meshgrid(t1, t2, ... [, {indexing = "ij" | "xy"}]): 1-D tensors spread over a grid of
-- their lengths (views); "xy" swaps the first two dims, as NumPy's.
function M.meshgrid(...)
  local args = { ... }
  local opts
  if #args > 0 and type(args[#args]) == "table" and not is_tensor(args[#args]) and args[#args][1] == nil then
    opts = table.remove(args)
  end
  opts = util.options("meshgrid", opts, { indexing = "string" })
  local indexing = opts.indexing or "ij"
  if indexing ~= "ij" and indexing ~= "xy" then
    fail(("meshgrid: indexing must be 'ij' or 'xy', got %s"):format(describe(indexing)))
  end
  local list = tensors("meshgrid", unpack(args))
  local sizes = {}
  for i, t in ipairs(list) do
    if t:dim() > 1 then fail(("meshgrid: tensor %d has %d dims, expected 0 or 1"):format(i, t:dim())) end
    sizes[i] = t:numel()
  end
  local xy = indexing == "xy" and #list >= 2
  if xy then sizes[1], sizes[2] = sizes[2], sizes[1] end
  local out = {}
  for i, t in ipairs(list) do
    local pos = i
    if xy and i <= 2 then pos = 3 - i end
    local view = {}
    for k = 1, #list do view[k] = k == pos and sizes[k] or 1 end
    out[i] = t:reshape(view):expand(sizes)
  end
  return out
end

-- cartesian_prod(t1, t2, ...): every combination of the 1-D tensors' values, one per row.
function M.cartesian_prod(...)
  local list = tensors("cartesian_prod", ...)
  if #list == 1 then return list[1] end
  local grids, cols = M.meshgrid(unpack(list)), {}
  for i, g in ipairs(grids) do cols[i] = g:reshape(-1) end
  return (join.stack(cols, 2))
end

-- block_diag(t1, t2, ...): the matrices (vectors as rows, numbers as 1x1) along the
-- diagonal of one matrix, zero elsewhere; the dtypes promoted.
function M.block_diag(...)
  local list = tensors("block_diag", ...)
  local rows, cols, blocks = 0, 0, {}
  for i, t in ipairs(list) do
    if t:dim() > 2 then fail(("block_diag: tensor %d has %d dims, expected at most 2"):format(i, t:dim())) end
    blocks[i] = t:dim() == 2 and t or t:reshape(1, t:numel())
    rows, cols = rows + blocks[i]:size(1), cols + blocks[i]:size(2)
  end
  local code = header(list[1]).dtype
  for i = 2, #list do
    code = C.td_result_type(create.zeros(0, dtypes.name(code)).h, header(list[i]))
  end
  local out = create.zeros(rows, cols, dtypes.name(code))
  local r, c = 1, 1
  for _, b in ipairs(blocks) do
    local h, w = b:size(1), b:size(2)
    if h > 0 and w > 0 then out:narrow(1, r, h):narrow(2, c, w):copy_(b) end
    r, c = r + h, c + w
  end
  return out
end

-- tril_indices(rows, cols [, offset = 0]) and triu_indices: the 1-based [2, n] row and
-- column indices of a triangle, in row-major order (torch's, plus one).
local function triangle_indices(call, lower)
  return function(rows, cols, offset)
    offset = offset == nil and 0 or offset
    for _, v in ipairs({ rows, cols }) do
      if not util.is_int(v) or v < 0 then
        fail(("%s: rows and cols must be integers >= 0, got %s"):format(call, describe(v)))
      end
    end
    if not util.is_int(offset) then fail(("%s: offset must be an integer, got %s"):format(call, describe(offset))) end
    local keep = create.ones(rows, cols, "int64")
    keep = lower and keep:tril(offset) or keep:triu(offset)
    local at = keep:nonzero()
    return (at:t():contiguous())
  end
end
M.tril_indices, M.triu_indices = triangle_indices("tril_indices", true), triangle_indices("triu_indices", false)

return M
