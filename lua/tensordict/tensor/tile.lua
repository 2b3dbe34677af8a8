-- tensor/tile.lua: expand_as, repeat and repeat_interleave for tensors (torch's semantics).
-- Each is views (unsqueeze, expand) and one C copy (reshape of an expanded view), or an
-- index_select when the repeats differ per element. Lua reserves `repeat`, so it is
-- t["repeat"](t, ...) or t:repeat_tensor(...) (torch7's repeatTensor).
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")

local Tensor, header, adopt, is_tensor = tensor.Tensor, tensor.handle, tensor.adopt, tensor.is_tensor
local fail, describe, dim0 = util.fail, util.describe, util.dim0

local M = {}

function Tensor.expand_as(self, other)
  header(self)
  if not is_tensor(other) then
    fail(("expand_as: expected a tensor, got %s"):format(describe(other)))
  end
  return self:expand(other:shape())
end

-- The sizes of repeat(...): numbers or one table, each a non-negative integer.
local function repeat_sizes(call, ...)
  local sizes = util.list_args(call, ...)
  for i, r in ipairs(sizes) do
    if not util.is_int(r) or r < 0 then
      fail(("%s: repeats must be non-negative integers, got %s at position %d")
        :format(call, describe(r), i))
    end
  end
  return sizes
end

-- Sizes as integers: [2, 4611686018427387904], not tostring's 4.6116860184274e+18.
local function int_list(sizes)
  local parts = {}
  for i, v in ipairs(sizes) do parts[i] = ("%.0f"):format(v) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

-- Fails unless shape (a result's sizes, as Lua numbers, which do not wrap) is one a
-- tensor can have (the C rule of td_shape_is_valid: the product of the nonzero sizes
-- below 2^60, so that strides in bytes fit int64). cause says what made it, and call
-- names the caller, which expand would otherwise report under its own name, or a batch
-- size that wrapped in int64 as a negative size.
local function check_result(call, shape, cause)
  local span = 1
  for _, s in ipairs(shape) do span = span * math.max(s, 1) end
  if span >= 2 ^ 60 then
    fail(("%s: %s give shape %s, too large for a tensor (the product of its nonzero sizes "
      .. "must stay below 2^60)"):format(call, cause, int_list(shape)))
  end
end
M.check_result = check_result

-- The same for shape repeated reps[i] times along dim i.
local function check_repeat(call, shape, reps)
  local result = {}
  for i, s in ipairs(shape) do result[i] = s * (reps[i] or 1) end
  check_result(call, result, ("repeats %s of shape %s"):format(int_list(reps), int_list(shape)))
end
M.check_repeat = check_repeat

-- x tiled reps[i] times along dim i: a size-1 dim before every dim repeated, expanded to
-- the repeat count, then merged with the dim by reshape (the one copy).
local function tile(x, reps, call)
  local shape, expanded, merged = x:shape(), {}, {}
  check_repeat(call, shape, reps)
  local view, empty = x, false
  for i, s in ipairs(shape) do empty = empty or s * reps[i] == 0 end
  if empty then -- no elements: the expanded view could be too large to exist ([2^31, 2, 2^31, 0])
    for i, s in ipairs(shape) do merged[i] = s * reps[i] end
    local flat, none = x:flatten(), tensor.Header()
    tensor.check(C.td_tensor_slice(header(flat), 0, 0, 0, 1, none))
    return tensor.new_tensor(none, flat.o):reshape(merged):clone()
  end
  for i, s in ipairs(shape) do
    if reps[i] ~= 1 then
      view = view:unsqueeze(#expanded + 1)
      expanded[#expanded + 1] = reps[i]
    end
    expanded[#expanded + 1] = s
    merged[i] = s * reps[i]
  end
  return view:expand(expanded):reshape(merged)
end
M.tile = tile

-- repeat(sizes...): torch's Tensor.repeat: at least dim() sizes; extra ones add leading
-- dims. Always a copy.
local function repeat_tensor(self, ...)
  local h = header(self)
  local sizes = repeat_sizes("repeat", ...)
  if #sizes < h.ndim then
    fail(("repeat: %d repeats given for a tensor of %d dims (at least one per dim)")
      :format(#sizes, h.ndim))
  end
  local x = self
  for _ = 1, #sizes - h.ndim do x = x:unsqueeze(1) end
  if #sizes == 0 then return self:clone() end
  return tile(x, sizes, "repeat")
end
Tensor["repeat"] = repeat_tensor
Tensor.repeat_tensor = repeat_tensor

-- The repeats of repeat_interleave as a number (the same for every element) or a Lua
-- array of counts, one per element along the dim of size n.
local function interleave_counts(call, repeats, n)
  if util.is_int(repeats) then
    if repeats < 0 then fail(("%s: repeats must be non-negative, got %d"):format(call, repeats)) end
    return repeats
  end
  if not is_tensor(repeats) then
    fail(("%s: repeats must be an integer or an integer tensor, got %s"):format(call, describe(repeats)))
  end
  if not dtypes.is_integer(header(repeats).dtype) then
    fail(("%s: repeats must have an integer dtype, got %s"):format(call, repeats:dtype()))
  end
  if repeats:dim() > 1 then
    fail(("%s: repeats must be a 0-dim or 1-dim tensor, got %d dims"):format(call, repeats:dim()))
  end
  local counts = repeats:totable()
  if type(counts) == "number" then counts = { counts } end
  if #counts == 1 then return interleave_counts(call, counts[1], n) end
  if #counts ~= n then
    fail(("%s: repeats has %d elements but the dim has size %d"):format(call, #counts, n))
  end
  for _, r in ipairs(counts) do
    if r < 0 then fail(("%s: repeats must be non-negative, got %d"):format(call, r)) end
  end
  return counts
end

-- 0-based int64 positions: element i (0-based) counts[i + 1] times, in order.
local function positions(counts, total)
  local idx = adopt(C.td_tensor_empty(1, ffi.new("int64_t[1]", total), C.TD_INT64))
  local p = ffi.cast("int64_t *", C.td_tensor_data_borrow(header(idx)))
  local k = 0
  for i, r in ipairs(counts) do
    for _ = 1, r do
      p[k] = i - 1
      k = k + 1
    end
  end
  return idx
end

-- How repeat_interleave repeats a dim of size n: (r, n * r) when every element repeats
-- r times, else (index tensor, its length) to index_select with. Made once for all the
-- leaves of a TensorDict.
function M.interleave_plan(call, repeats, n)
  local counts = interleave_counts(call, repeats, n)
  if type(counts) == "number" then
    check_result(call, { n * counts }, ("repeats %.0f of a dim of size %d"):format(counts, n))
    return counts, n * counts
  end
  local total = 0
  for _, r in ipairs(counts) do total = total + r end
  check_result(call, { total }, ("repeats (%.0f in all) of a dim of size %d"):format(total, n))
  return positions(counts, total), total
end

-- x with each element along d0 (0-based) repeated as plan says (total elements in all).
function M.interleave(x, plan, d0, total)
  local result = x:shape()
  result[d0 + 1] = total
  check_result("repeat_interleave", result, ("repeats along dim %d of shape %s")
    :format(d0 + 1, int_list(x:shape())))
  if is_tensor(plan) then return adopt(C.td_index_select(header(x), d0, header(plan))) end
  local expanded, merged = {}, {}
  for i, s in ipairs(x:shape()) do
    expanded[#expanded + 1] = s
    if i == d0 + 1 then expanded[#expanded + 1] = plan end
    merged[i] = i == d0 + 1 and s * plan or s
  end
  return x:unsqueeze(d0 + 2):expand(expanded):reshape(merged)
end

-- repeat_interleave(repeats [, dim]): without a dim the tensor is flattened first.
function Tensor.repeat_interleave(self, repeats, dim)
  local h = header(self)
  local x = dim == nil and self:reshape(-1) or self
  local d0 = dim == nil and 0 or dim0("repeat_interleave", dim, h.ndim)
  local plan, total = M.interleave_plan("repeat_interleave", repeats, x:size(d0 + 1))
  return M.interleave(x, plan, d0, total)
end

return M
