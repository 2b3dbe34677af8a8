-- tensor/index_forms.lua: torch's other forms of the gathers and scatters, on the C
-- gathers and the index grammar's assignments (indices 1-based, as everywhere here):
-- the out-of-place scatter and index_add, index_fill(_), index_copy(_), take and
-- take_along_dim, masked_scatter(_). Methods only.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")

local fail, describe, dim0 = util.fail, util.describe, util.dim0
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

-- scatter(dim, index, src) and index_add(dim, index, src): the in-place forms on a copy.
function Tensor.scatter(self, dim, index, src)
  header(self)
  return (self:clone():scatter_(dim, index, src))
end
function Tensor.index_add(self, dim, index, src)
  header(self)
  return (self:clone():index_add_(dim, index, src))
end

-- The index key selecting positions index (a 1-D integer tensor) along dim.
local function along(call, self, dim, index)
  local d = dim0(call, dim, self:dim())
  if not is_tensor(index) or index:dim() ~= 1 then
    fail(("%s: index must be a 1-D integer tensor, got %s"):format(call, describe(index)))
  end
  local key = {}
  for k = 1, d do key[k] = {} end
  key[d + 1] = index
  return key
end

-- index_fill_(dim, index, value): value at those positions along dim (every other dim
-- whole); index_copy_(dim, index, src): src's slices there, src shaped like the selection.
function Tensor.index_fill_(self, dim, index, value)
  header(self)
  if type(value) ~= "number" and type(value) ~= "boolean" then
    fail(("index_fill_: value must be a number or boolean, got %s"):format(describe(value)))
  end
  self[along("index_fill_", self, dim, index)] = value
  return self
end
function Tensor.index_copy_(self, dim, index, src)
  header(self)
  if not is_tensor(src) then fail(("index_copy_: src must be a tensor, got %s"):format(describe(src))) end
  self[along("index_copy_", self, dim, index)] = src
  return self
end
function Tensor.index_fill(self, dim, index, value)
  header(self)
  return (self:clone():index_fill_(dim, index, value))
end
function Tensor.index_copy(self, dim, index, src)
  header(self)
  return (self:clone():index_copy_(dim, index, src))
end

-- masked_scatter_(mask, source): source's first elements, in order, written where mask
-- (bool, broadcast to self's shape) is true; masked_scatter: on a copy.
function Tensor.masked_scatter_(self, mask, source)
  header(self)
  if not is_tensor(mask) or mask:dtype() ~= "bool" then
    fail(("masked_scatter_: mask must be a bool tensor, got %s"):format(describe(mask)))
  end
  if not is_tensor(source) then fail(("masked_scatter_: source must be a tensor, got %s"):format(describe(source))) end
  local m = mask:broadcast_to(self:shape())
  local n = m:sum()
  if n > source:numel() then
    fail(("masked_scatter_: the mask selects %d elements, source has %d"):format(n, source:numel()))
  end
  if n > 0 then self[m:contiguous()] = source:reshape(-1):narrow(1, 1, n) end
  return self
end
function Tensor.masked_scatter(self, mask, source)
  header(self)
  return (self:clone():masked_scatter_(mask, source))
end

-- take(index): the elements at index (1-based, negative from the end) of the flattened
-- tensor, shaped like index.
function Tensor.take(self, index)
  header(self)
  if not is_tensor(index) then fail(("take: index must be an integer tensor, got %s"):format(describe(index))) end
  local flat = self:flatten()
  if index:dim() == 0 then return (flat:index_select(1, index:view(1)):view()) end
  return (flat:index_select(1, index:flatten()):view(index:size()))
end

-- take_along_dim(indices, dim): gather along dim, indices broadcast against self on the
-- other dims (torch's); without dim, take of the flattened tensor.
function Tensor.take_along_dim(self, indices, dim)
  header(self)
  if not is_tensor(indices) then
    fail(("take_along_dim: indices must be an integer tensor, got %s"):format(describe(indices)))
  end
  if dim == nil then return (self:flatten():gather(1, indices:flatten())) end
  local d = dim0("take_along_dim", dim, self:dim())
  if indices:dim() ~= self:dim() then
    fail(("take_along_dim: indices have %d dims, the tensor %d"):format(indices:dim(), self:dim()))
  end
  local shape_s, shape_i = {}, {}
  for k = 1, self:dim() do
    local a, b = self:size(k), indices:size(k)
    if k - 1 == d then
      shape_s[k], shape_i[k] = a, b
    else
      local m = a == 1 and b or (b == 1 and a or a)
      if a ~= b and a ~= 1 and b ~= 1 then
        fail(("take_along_dim: dim %d: sizes %d and %d do not broadcast"):format(k, a, b))
      end
      shape_s[k], shape_i[k] = m, m
    end
  end
  return (self:expand(shape_s):gather(dim, indices:expand(shape_i)))
end

return {}
