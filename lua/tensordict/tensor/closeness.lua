-- tensor/closeness.lua: torch's comparisons of whole tensors and its NaN-aware
-- functions, composed of the elementwise kernels (each step one vectorised C loop):
-- isclose, allclose, equal, nan_to_num, nansum, nanmean. Methods only.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local dtypes = require("tensordict.tensor.dtype")

local fail, describe = util.fail, util.describe
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

-- other as a tensor (a number or boolean becomes a 0-dim one of self's dtype).
local function operand(call, self, other)
  if is_tensor(other) then return other end
  local t = type(other)
  if t == "number" or t == "boolean" then return (create.tensor(other, self:dtype())) end
  fail(("%s: expected a tensor, number or boolean to compare with, got %s"):format(call, describe(other)))
end

local function tolerances(call, rtol, atol)
  rtol, atol = rtol == nil and 1e-5 or rtol, atol == nil and 1e-8 or atol
  if type(rtol) ~= "number" or type(atol) ~= "number" or not (rtol >= 0) or not (atol >= 0) then
    fail(("%s: rtol and atol must be numbers >= 0, got %s and %s"):format(call, describe(rtol), describe(atol)))
  end
  return rtol, atol
end

-- isclose(other [, rtol = 1e-5 [, atol = 1e-8 [, equal_nan = false]]]): bool, broadcast:
-- a == b (infinities of one sign included), or |a - b| <= atol + rtol * |b| where b is
-- finite, computed in float64; NaN is close to NaN only with equal_nan.
function Tensor.isclose(self, other, rtol, atol, equal_nan)
  header(self)
  rtol, atol = tolerances("isclose", rtol, atol)
  local b = operand("isclose", self, other)
  local x, y = self:to("float64"), b:to("float64")
  -- the tolerance only between finite values: |-inf - inf| <= inf would hold
  local near = (x - y):abs():le(y:abs() * rtol + atol):logical_and(y:isfinite())
  local close = x:eq(y):logical_or(near)
  if equal_nan then close = close:logical_or(x:isnan():logical_and(y:isnan())) end
  return close
end

-- allclose(...): isclose everywhere, a Lua boolean.
function Tensor.allclose(self, other, rtol, atol, equal_nan)
  return (Tensor.isclose(self, other, rtol, atol, equal_nan):all())
end

-- equal(other): the same shape and the same values (after promotion; NaN is unequal).
function Tensor.equal(self, other)
  header(self)
  if not is_tensor(other) then fail(("equal: expected a tensor, got %s"):format(describe(other))) end
  local a, b = self:size(), other:size()
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return (self:eq(other):all())
end

-- The largest finite value of a floating dtype (nan_to_num's default for infinities),
-- nil for the others.
local function finite_max(name)
  local code = dtypes.code(name, "nan_to_num")
  return dtypes.is_floating(code) and dtypes.max_value(code) or nil
end

-- nan_to_num([nan = 0 [, posinf [, neginf]]]): NaN, +inf and -inf replaced (by default
-- with 0 and the dtype's largest and lowest finite values); integers come back copied.
function Tensor.nan_to_num(self, nan, posinf, neginf)
  header(self)
  for _, v in ipairs({ nan or 0, posinf or 0, neginf or 0 }) do
    if type(v) ~= "number" then
      fail(("nan_to_num: replacements must be numbers, got %s"):format(describe(v)))
    end
  end
  local big = finite_max(self:dtype())
  local out = self:clone()
  if not big then return out end
  local inf = math.huge
  out:masked_fill_(self:isnan(), nan or 0)
  out:masked_fill_(self:eq(inf), posinf or big)
  out:masked_fill_(self:eq(-inf), neginf or -big)
  return out
end

-- nansum([dims [, keepdim]]) and nanmean: sum and mean with NaN left out (nanmean of
-- only NaN is NaN, as torch's).
function Tensor.nansum(self, ...)
  header(self)
  if not finite_max(self:dtype()) then return self:sum(...) end
  return self:masked_fill(self:isnan(), 0):sum(...)
end

function Tensor.nanmean(self, ...)
  header(self)
  if not finite_max(self:dtype()) then
    fail(("nanmean: not supported for %s tensors (it takes floating point ones)"):format(self:dtype()))
  end
  local nan = self:isnan()
  local total = self:masked_fill(nan, 0):sum(...)
  local count = nan:logical_not():sum(...)
  if type(total) == "number" then return total / count end
  return total / count:to(total:dtype())
end

return {}
