-- tensor/method_forms.lua: torch's other spellings of existing methods (NumPy's names
-- torch accepts: absolute, clip, arccos, ...) and its small methods that are one call
-- of others: square, positive, zero_, new_zeros/new_ones/new_full/new_empty/new_tensor,
-- is_floating_point, element_size, nelement, count_nonzero, aminmax, std_mean,
-- var_mean, logit, sinc, heaviside, rad2deg, deg2rad, float_power, fliplr, flipud,
-- rot90, diag_embed, diagflat. Methods only (T.<name> from the facade).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local dtypes = require("tensordict.tensor.dtype")
local ops = require("tensordict.tensor.ops")

local fail, describe, dim0 = util.fail, util.describe, util.dim0
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

-- The same method under torch's other name (the call's messages keep the first name).
for alias, name in pairs({
  absolute = "abs", absolute_ = "abs_", negative = "neg", negative_ = "neg_", clip = "clamp", clip_ = "clamp_",
  fix = "trunc", fix_ = "trunc_", true_divide = "div", true_divide_ = "div_", multiply = "mul", subtract = "sub",
  divide = "div", arccos = "acos", arcsin = "asin", arctan = "atan", arccosh = "acosh", arcsinh = "asinh",
  arctanh = "atanh", arctan2 = "atan2", greater = "gt", greater_equal = "ge", less = "lt", less_equal = "le",
  not_equal = "ne", nelement = "numel", argwhere = "nonzero",
}) do
  Tensor[alias] = assert(rawget(Tensor, name), name)
end

local function floating(t) return dtypes.is_floating(header(t).dtype) end

-- eq_(other), ne_, lt_, le_, gt_, ge_: the comparison written into self as 1 or 0 of
-- self's dtype (torch's in-place comparisons).
local C = require("tensordict.lib").C
for name, code in pairs(ops.BINARY) do
  if C.td_op_category(C.TD_OPS_BINARY, code) == C.TD_OPCAT_COMPARE then
    local compare = assert(rawget(Tensor, name), name)
    Tensor[name .. "_"] = function(self, other)
      header(self)
      return (self:copy_(compare(self, other)))
    end
  end
end

-- storage_offset(): where element [1, ..] sits in the storage, in elements (torch's, 0 at
-- the start).
function Tensor.storage_offset(self) return (tonumber(header(self).offset)) end

-- square(): self ^ 2 (torch.square is pow(self, 2)).
function Tensor.square(self)
  header(self)
  return (self:pow(2))
end

-- positive(): self (torch refuses bool).
function Tensor.positive(self)
  header(self)
  if self:dtype() == "bool" then fail("positive: not supported for bool tensors") end
  return self
end

function Tensor.zero_(self)
  header(self)
  return (self:fill_(0))
end

function Tensor.is_floating_point(self) return floating(self) end

-- element_size(): bytes per element.
function Tensor.element_size(self) return (tonumber(header(self).itemsize)) end

-- new_zeros(size [, dtype]), new_ones, new_full(size, value [, dtype]), new_empty: a new
-- tensor of self's dtype (unless given) and device; new_tensor(data [, dtype]).
local function new_filled(call, fill)
  return function(self, size, ...)
    header(self)
    if type(size) ~= "table" or is_tensor(size) then
      fail(("%s: size must be a shape table such as {2, 3}, got %s"):format(call, describe(size)))
    end
    local value, dtype = fill, ...
    if fill == nil then value, dtype = ... end
    dtype = dtype or self:dtype()
    local t = fill == false and create.empty(size, dtype) or create.full(size, value, dtype)
    local dev = self:device()
    return dev == "cpu" and t or t:to(dev)
  end
end
Tensor.new_zeros = new_filled("new_zeros", 0)
Tensor.new_ones = new_filled("new_ones", 1)
Tensor.new_empty = new_filled("new_empty", false)
Tensor.new_full = new_filled("new_full", nil)
function Tensor.new_tensor(self, data, dtype)
  header(self)
  local t = is_tensor(data) and data:to(dtype or data:dtype()):clone() or create.tensor(data, dtype or self:dtype())
  local dev = self:device()
  return dev == "cpu" and t or t:to(dev)
end

-- count_nonzero([dims]): how many elements are not zero (int64; a Lua value without dims).
function Tensor.count_nonzero(self, dims)
  header(self)
  local nz = self:ne(0)
  if dims == nil then return nz:sum() end
  return (nz:sum(dims))
end

-- aminmax([{dim =, keepdim =}]): the minimum and the maximum (over everything: Lua values).
function Tensor.aminmax(self, opts)
  header(self)
  opts = util.options("aminmax", opts, { dim = "number", keepdim = "boolean" })
  if opts.dim == nil then return self:amin(), self:amax() end
  return self:amin(opts.dim, opts.keepdim), self:amax(opts.dim, opts.keepdim)
end

-- std_mean([dims [, opts]]) and var_mean: the spread (std's options: keepdim, unbiased,
-- correction) and the mean over the same dims.
local function with_mean(spread)
  return function(self, dims, opts)
    header(self)
    local keepdim = opts == true or (type(opts) == "table" and opts.keepdim) or false
    return self[spread](self, dims, opts), self:mean(dims, keepdim)
  end
end
Tensor.std_mean = with_mean("std")
Tensor.var_mean = with_mean("var")

-- logit([eps]): log(p / (1 - p)), p clamped into [eps, 1 - eps] when eps is given.
function Tensor.logit(self, eps)
  header(self)
  local p = self
  if eps ~= nil then
    if type(eps) ~= "number" or eps < 0 or eps > 0.5 then
      fail(("logit: eps must be a number in [0, 0.5], got %s"):format(describe(eps)))
    end
    p = self:clamp(eps, 1 - eps)
  end
  return ((p / (1 - p)):log())
end

-- sinc(): sin(pi x) / (pi x), 1 at 0 (floats; integers give float32).
function Tensor.sinc(self)
  header(self)
  local x = floating(self) and self or self:to("float32")
  local px = x * math.pi
  local s = px:sin() / px
  return (s:masked_fill(x:eq(0), 1))
end

-- heaviside(values): 0 below zero, 1 above, values (broadcast) at zero.
function Tensor.heaviside(self, values)
  header(self)
  if not is_tensor(values) then fail(("heaviside: values must be a tensor, got %s"):format(describe(values))) end
  if values:dtype() ~= self:dtype() then
    fail(("heaviside: values must have self's dtype %s, got %s"):format(self:dtype(), values:dtype()))
  end
  local step = self:gt(0):to(self:dtype())
  return (ops.where(self:eq(0), values, step))
end

function Tensor.rad2deg(self)
  header(self)
  return (self * (180 / math.pi))
end
function Tensor.deg2rad(self)
  header(self)
  return (self * (math.pi / 180))
end

-- float_power(exponent): pow in float64.
function Tensor.float_power(self, e)
  header(self)
  if is_tensor(e) then e = e:to("float64") end
  return (self:to("float64"):pow(e))
end

-- fliplr(): columns reversed (dim 2); flipud(): rows (dim 1).
function Tensor.fliplr(self)
  header(self)
  if self:dim() < 2 then fail(("fliplr: expected a tensor of at least 2 dims, got %d"):format(self:dim())) end
  return (self:flip({ 2 }))
end
function Tensor.flipud(self)
  header(self)
  if self:dim() < 1 then fail("flipud: expected a tensor of at least 1 dim, got a 0-dim one") end
  return (self:flip({ 1 }))
end

-- rot90([k = 1 [, dims = {1, 2}]]): k quarter turns from the first dim towards the second.
function Tensor.rot90(self, k, dims)
  header(self)
  k = k == nil and 1 or k
  if not util.is_int(k) then fail(("rot90: k must be an integer, got %s"):format(describe(k))) end
  dims = dims or { 1, 2 }
  if type(dims) ~= "table" or #dims ~= 2 then
    fail(("rot90: dims must be a list of two dims, got %s"):format(describe(dims)))
  end
  if self:dim() < 2 then fail(("rot90: expected a tensor of at least 2 dims, got %d"):format(self:dim())) end
  local a, b = dim0("rot90", dims[1], self:dim()) + 1, dim0("rot90", dims[2], self:dim()) + 1
  if a == b then fail(("rot90: the two dims must differ, both are %d"):format(a)) end
  k = k % 4
  if k == 1 then return (self:flip({ b }):transpose(a, b)) end
  if k == 2 then return (self:flip({ a, b })) end
  if k == 3 then return (self:flip({ a }):transpose(a, b)) end
  return (self:clone())
end

-- diag_embed([offset = 0 [, dim1 = -2 [, dim2 = -1]]]): each vector along the last dim
-- onto a diagonal of a new matrix whose dims are dim1 and dim2 of the result.
function Tensor.diag_embed(self, offset, d1, d2)
  header(self)
  offset = offset == nil and 0 or offset
  if not util.is_int(offset) then fail(("diag_embed: offset must be an integer, got %s"):format(describe(offset))) end
  if self:dim() == 0 then fail("diag_embed: expected a tensor of at least 1 dim, got a 0-dim one") end
  local nd = self:dim() + 1
  local a, b = dim0("diag_embed", d1 == nil and -2 or d1, nd), dim0("diag_embed", d2 == nil and -1 or d2, nd)
  if a == b then fail(("diag_embed: dim1 and dim2 must be different dims, both are %d"):format(a + 1)) end
  local shape = self:shape()
  local n = table.remove(shape) + math.abs(offset)
  shape[#shape + 1], shape[#shape + 2] = n, n
  local out = create.zeros(shape, self:dtype())
  out:diagonal(offset, nd - 1, nd):copy_(self)
  return (out:movedim({ nd - 1, nd }, { a + 1, b + 1 }))
end

-- diagflat([offset]): the flattened tensor onto a diagonal.
function Tensor.diagflat(self, offset)
  header(self)
  return (self:reshape(-1):diag(offset))
end

return {}
