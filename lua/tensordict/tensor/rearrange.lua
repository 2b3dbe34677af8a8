-- tensor/rearrange.lua: torch's copies that move elements around: flip, roll (composed
-- of the library's C gathers and joins, no per-element Lua), tril, triu (one C pass,
-- core/kernels/triangle.c). Methods only.
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local join = require("tensordict.tensor.join")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor = tensor.Tensor

-- A list of dims from one dim or a table of them, 0-based and checked (none twice).
local function dim_list(call, dims, ndim)
  local list = type(dims) == "table" and dims or { dims }
  local out, seen = {}, {}
  for i, d in ipairs(list) do
    local d0 = dim0(call, d, ndim)
    if seen[d0] then fail(("%s: dim %s appears twice"):format(call, describe(d))) end
    seen[d0], out[i] = true, d0
  end
  return out
end

-- flip(dims): a copy with the order of the elements along dims reversed.
function Tensor.flip(self, dims)
  header(self)
  if dims == nil then fail("flip: expected the dims to flip (a dim or a table of dims)") end
  local out = self
  for _, d in ipairs(dim_list("flip", dims, self:dim())) do
    local n = self:size(d + 1)
    if n > 1 then
      local key = {}
      for k = 1, d do key[k] = {} end
      key[d + 1] = create.arange(n, 1, -1, "int64")
      out = out[key]
    end
  end
  return out == self and self:clone() or out
end

-- roll(shifts [, dims]): a copy with the elements shifted along dims, those pushed off
-- one end coming back at the other; without dims the flattened tensor rolls and keeps
-- its shape.
function Tensor.roll(self, shifts, dims)
  header(self)
  if dims == nil then
    if type(shifts) ~= "number" then
      fail(("roll: without dims shifts must be one integer, got %s"):format(describe(shifts)))
    end
    return (Tensor.roll(self:flatten(), shifts, 1):view(self:size()))
  end
  local s = type(shifts) == "table" and shifts or { shifts }
  local ds = dim_list("roll", dims, self:dim())
  if #s ~= #ds then fail(("roll: %d shifts but %d dims"):format(#s, #ds)) end
  local out = self
  for i, d in ipairs(ds) do
    if not util.is_int(s[i]) then fail(("roll: shifts must be integers, got %s"):format(describe(s[i]))) end
    local n = self:size(d + 1)
    local k = n > 0 and s[i] % n or 0
    if k ~= 0 then
      out = join.cat({ out:narrow(d + 1, n - k + 1, k), out:narrow(d + 1, 1, n - k) }, d + 1)
    end
  end
  return out == self and self:clone() or out
end

-- The triangle of the last two dims (core/kernels/triangle.c), the rest zero.
local function triangle(call, self, k, lower)
  local h = header(self)
  if h.ndim < 2 then fail(("%s: expected a tensor of 2 or more dims, got %d"):format(call, h.ndim)) end
  k = k == nil and 0 or k
  if not util.is_int(k) then fail(("%s: diagonal must be an integer, got %s"):format(call, describe(k))) end
  return (tensor.adopt(C.td_tensor_triangle(h, k, lower and 1 or 0)))
end

-- tril([k]) and triu([k]): the lower (upper) triangle of the last two dims, from the k-th
-- diagonal (0: the main one, positive above it), the rest zero.
function Tensor.tril(self, k) return (triangle("tril", self, k, true)) end
function Tensor.triu(self, k) return (triangle("triu", self, k, false)) end

return {}
