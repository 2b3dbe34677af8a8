-- tensor/sorting.lua: sort, argsort, topk, kthvalue (core/kernels/sort.c, torch.sort's
-- order: NaN greatest, ties in their first order), in torch7's manners: dims and the
-- returned indices 1-based (int64). Methods only.
local ffi = require("ffi")
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor.core")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, adopt, header = tensor.Tensor, tensor.adopt, tensor.handle

local indices_out = ffi.new("td_tensor *[1]")

-- values, 1-based indices of self sorted along 0-based d.
local function sorted(self, d, descending)
  local h = header(self)
  local v = C.td_sort(h, d, descending and 1 or 0, indices_out)
  if v == nil then util.c_fail() end
  local i = adopt(indices_out[0])
  return adopt(v), i:add_(1)
end

local function dim_arg(call, self, dim)
  header(self) -- raises, naming the method, for a self that is no live tensor
  local nd = self:dim()
  return dim0(call, dim == nil and -1 or dim, nd == 0 and 1 or nd)
end

-- sort([dim = -1 [, descending = false]]): values and indices, a copy.
function Tensor.sort(self, dim, descending)
  return sorted(self, dim_arg("sort", self, dim), descending)
end

-- argsort([dim = -1 [, descending = false]]): the indices alone.
function Tensor.argsort(self, dim, descending)
  local _, i = sorted(self, dim_arg("argsort", self, dim), descending)
  return i
end

local function count_arg(call, k, n, what)
  if not util.is_int(k) or k < 0 or k > n then
    fail(("%s: k must be an integer in 0..%d (the size of the dim), got %s"):format(call, n, describe(k)))
  end
  if what == "kth" and k == 0 then fail(("%s: k must be an integer in 1..%d, got 0"):format(call, n)) end
end

-- topk(k [, dim = -1 [, largest = true]]): the k largest (smallest) values along dim,
-- in order, and their indices.
function Tensor.topk(self, k, dim, largest)
  local d = dim_arg("topk", self, dim)
  local n = self:dim() == 0 and 1 or self:size(d + 1)
  count_arg("topk", k, n)
  local v, i = sorted(self, d, largest ~= false)
  if self:dim() == 0 then return v, i end
  return v:narrow(d + 1, 1, k):contiguous(), i:narrow(d + 1, 1, k):contiguous()
end

-- kthvalue(k [, dim = -1 [, keepdim = false]]): the k-th smallest value along dim and
-- its index.
function Tensor.kthvalue(self, k, dim, keepdim)
  local d = dim_arg("kthvalue", self, dim)
  local n = self:dim() == 0 and 1 or self:size(d + 1)
  count_arg("kthvalue", k, n, "kth")
  local v, i = sorted(self, d, false)
  if self:dim() == 0 then return v, i end
  v, i = v:select(d + 1, k), i:select(d + 1, k)
  if keepdim then v, i = v:unsqueeze(d + 1), i:unsqueeze(d + 1) end
  return v:contiguous(), i:contiguous()
end

return {}
