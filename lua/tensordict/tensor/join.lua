-- tensor/join.lua: T.stack, T.cat, T.pad (copies, in C) and split, chunk, unbind (views).
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local split_rule = require("tensordict.tensor.split_rule")
local device = require("tensordict.tensor.device")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, adopt, is_tensor, header = tensor.Tensor, tensor.adopt, tensor.is_tensor, tensor.handle

local M = {}

-- The headers of a Lua list of tensors, as a C array (kept alive by the list).
local function handles(call, list)
  if type(list) ~= "table" or is_tensor(list) then
    fail(("%s: expected a list of tensors, got %s"):format(call, describe(list)))
  end
  local n = #list
  if n == 0 then fail(call .. ": the list of tensors is empty") end
  local array = ffi.new("const td_tensor *[?]", n)
  for i = 1, n do
    if not is_tensor(list[i]) then
      fail(("%s: element %d of the list is %s, not a tensor"):format(call, i, describe(list[i])))
    end
    array[i - 1] = header(list[i])
  end
  return array, n
end

-- T.stack(list, dim): dim 1..dim()+1 of the elements (default 1).
function M.stack(list, dim)
  local array, n = handles("stack", list)
  local d = dim0("stack", dim or 1, array[0].ndim, 1)
  return adopt(device.pick_array("stack", array, n).td_stack(array, n, d))
end

function M.cat(list, dim)
  local array, n = handles("cat", list)
  local d = dim0("cat", dim or 1, math.max(array[0].ndim, 1))
  return adopt(device.pick_array("cat", array, n).td_cat(array, n, d))
end

-- T.pad(t, pads, value): pads = {last_before, last_after, prev_before, ...} as in
-- torch.nn.functional.pad; negative pads crop.
-- pad's arguments, checked, for tensors and TensorDicts: the amounts as int64 and
-- their count, and the fill value.
function M.pad_args(pads, value)
  if type(pads) ~= "table" then fail(("pad: pads must be a table of integers, got %s"):format(describe(pads))) end
  local buf = ffi.new("int64_t[?]", math.max(#pads, 1))
  for i, p in ipairs(pads) do
    if not util.is_int(p) then fail(("pad: pad %d is %s, not an integer"):format(i, describe(p))) end
    buf[i - 1] = p
  end
  if value == nil then value = 0 end
  if type(value) ~= "number" then fail(("pad: value must be a number, got %s"):format(describe(value))) end
  return buf, #pads, value
end

function M.pad(t, pads, value)
  local h = header(t)
  local buf, n, v = M.pad_args(pads, value)
  return adopt(C.td_pad(h, buf, n, v))
end

-- Views of consecutive slices along dim, of the given lengths.
local function slices(self, lengths, d)
  local h = header(self)
  local views, start = {}, 0
  for i, len in ipairs(lengths) do
    local out = tensor.Header()
    tensor.check(C.td_tensor_slice(h, d, start, start + len, 1, out))
    views[i] = tensor.new_tensor(out, self.o)
    start = start + len
  end
  return views
end

-- The name of dim 0-based d of a shape, for split's messages: "dim 1 of shape [10]".
local function dim_of_shape(h, d)
  local shape = {}
  for i = 0, h.ndim - 1 do shape[i + 1] = tonumber(h.shape[i]) end
  return ("dim %d of shape %s"):format(d + 1, util.format_list(shape))
end

-- split(size, dim): pieces of size (the last may be smaller); split({sizes}, dim):
-- pieces of those sizes, which must add up to the dim's size (tensor/split_rule.lua).
function Tensor.split(self, size, dim)
  local h = header(self)
  local d = dim0("split", dim or 1, h.ndim)
  return slices(self, split_rule.split(size, tonumber(h.shape[d]), dim_of_shape, h, d), d)
end

-- chunk(n, dim): at most n pieces of equal size (the last may be smaller), like torch.
function Tensor.chunk(self, n, dim)
  local h = header(self)
  local d = dim0("chunk", dim or 1, h.ndim)
  return slices(self, split_rule.chunk(n, tonumber(h.shape[d])), d)
end

-- tensor_split(sections [, dim = 1]): sections views whose sizes differ by at most one
-- (the first ones larger), as torch; tensor_split({starts} [, dim]): a piece begins at
-- each 1-based start (negative from the end; past the end: empty pieces), so {2, 6}
-- is torch's [1, 5]. Starts need not grow: a piece that would end before it begins is
-- empty (torch's slices).
function Tensor.tensor_split(self, what, dim)
  local h = header(self)
  if h.ndim == 0 then fail("tensor_split: expected a tensor of at least 1 dim, got a 0-dim one") end
  local d = dim0("tensor_split", dim or 1, h.ndim)
  local total = tonumber(h.shape[d])
  local bounds = { 0 }
  if util.is_int(what) then
    if what < 1 or what > split_rule.MAX_PIECES then
      fail(("tensor_split: sections must be an integer in 1..%d, got %d"):format(split_rule.MAX_PIECES, what))
    end
    local q, r = math.floor(total / what), total % what
    for i = 1, what do bounds[i + 1] = bounds[i] + q + (i <= r and 1 or 0) end
  else
    local starts = is_tensor(what) and what:dim() == 1 and what:totable() or what
    if type(starts) ~= "table" or is_tensor(starts) then
      fail(("tensor_split: expected a number of sections or a list of 1-based starts, got %s"):format(describe(what)))
    end
    for i, s in ipairs(starts) do
      if not util.is_int(s) or s == 0 then
        fail(("tensor_split: start %d is %s; starts are 1-based integers (negative from the end)")
          :format(i, describe(s)))
      end
      local b = s > 0 and s - 1 or total + s
      bounds[i + 1] = math.max(0, math.min(total, b))
    end
    bounds[#bounds + 1] = total
  end
  local views = {}
  for i = 1, #bounds - 1 do
    local out = tensor.Header()
    local from = bounds[i]
    tensor.check(C.td_tensor_slice(h, d, from, math.max(from, bounds[i + 1]), 1, out))
    views[i] = tensor.new_tensor(out, self.o)
  end
  return views
end

-- unbind(dim): the slices along dim with that dim removed.
function Tensor.unbind(self, dim)
  local h = header(self)
  local d = dim0("unbind", dim or 1, h.ndim)
  local views = {}
  for i = 1, tonumber(h.shape[d]) do
    local out = tensor.Header()
    tensor.check(C.td_tensor_select(h, d, i - 1, out))
    views[i] = tensor.new_tensor(out, self.o)
  end
  return views
end

return M
