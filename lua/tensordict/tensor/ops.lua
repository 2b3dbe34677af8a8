-- tensor/ops.lua: elementwise methods and operators (add, exp, eq, where, masked_fill, ...).
-- Each is one call into core/kernels/elementwise*.c, which broadcasts and promotes
-- dtypes with torch's rules. A Lua number is a scalar operand: integral values count
-- as integers, others as floats; booleans as bool.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")
local device = require("tensordict.tensor.device")

local C = lib.C
local fail, describe = util.fail, util.describe
local Tensor, adopt, is_tensor, check = tensor.Tensor, tensor.adopt, tensor.is_tensor, tensor.check
local header = tensor.handle -- the C header of a live tensor
local mt = tensor.metatable
local type = type
local pick = device.pick -- C, or the CUDA kernels for device operands

local M = {}

-- A Lua scalar as (value, td_scalar_kind); raises naming the call otherwise.
local function scalar(x, call)
  local tx = type(x)
  if tx == "number" then
    return x, (x % 1 == 0) and C.TD_SCALAR_INT or C.TD_SCALAR_FLOAT
  elseif tx == "boolean" then
    return x and 1 or 0, C.TD_SCALAR_BOOL
  end
  fail(("%s: expected a tensor, number or boolean operand, got %s"):format(call, describe(x)))
end

-- a op b for any mix of tensors and scalars (at least one tensor). A TensorDict on
-- the right goes to M.td_binary (set by dict/math.lua).
local function binary(op, call, a, b)
  if is_tensor(a) then
    if is_tensor(b) then
      local ha, hb = header(a), header(b)
      return adopt(pick(call, ha, hb).td_binary(op, ha, hb))
    end
    if type(b) == "cdata" and M.td_binary then return M.td_binary(op, call, a, b) end
    local s, kind = scalar(b, call)
    local ha = header(a)
    return adopt(pick(call, ha).td_binary_scalar(op, ha, s, kind, 0))
  end
  if not is_tensor(b) then
    fail(("%s: expected a tensor operand, got %s and %s"):format(call, describe(a), describe(b)))
  end
  local s, kind = scalar(a, call)
  local hb = header(b)
  return adopt(pick(call, hb).td_binary_scalar(op, hb, s, kind, 1))
end

local function binary_(op, call, self, b)
  local h = header(self)
  if is_tensor(b) then
    local hb = header(b)
    check(pick(call, h, hb).td_binary_(op, h, hb))
  else
    local s, kind = scalar(b, call)
    check(pick(call, h).td_binary_scalar_(op, h, s, kind))
  end
  return self
end

-- The ops of a kind by name (name -> code), from C's op table (core/include/op_table.h),
-- and the names of those whose results are bool: comparisons and logical ops. An in-place
-- form of those would have to cast bool back, which torch allows but nobody means: they
-- have no `_` form here.
local BOOL_RESULT = {
  [C.TD_OPCAT_COMPARE] = true, [C.TD_OPCAT_LOGICAL] = true, [C.TD_OPCAT_TEST] = true,
}
local function op_table(kind, count)
  local codes, no_inplace = {}, {}
  for op = 0, count - 1 do
    local name = ffi.string(C.td_op_name(kind, op, 0))
    codes[name] = op
    if BOOL_RESULT[C.td_op_category(kind, op)] then no_inplace[name] = true end
  end
  return codes, no_inplace
end
local BINARY, NO_INPLACE = op_table(C.TD_OPS_BINARY, C.TD_BINARY_COUNT)
local UNARY, NO_UNARY_INPLACE = op_table(C.TD_OPS_UNARY, C.TD_UNARY_COUNT)
local REDUCE = op_table(C.TD_OPS_REDUCE, C.TD_RED_COUNT)

for name, op in pairs(BINARY) do
  Tensor[name] = function(self, other) return binary(op, name, self, other) end
  if not NO_INPLACE[name] then
    Tensor[name .. "_"] = function(self, other) return binary_(op, name .. "_", self, other) end
  end
end

for name, op in pairs(UNARY) do
  Tensor[name] = function(self)
    local h = header(self)
    return adopt(pick(name, h).td_unary(op, h))
  end
  if not NO_UNARY_INPLACE[name] then
    Tensor[name .. "_"] = function(self)
      local h = header(self)
      check(pick(name .. "_", h).td_unary_(op, h))
      return self
    end
  end
end

-- clamp(min, max): either bound may be nil (but not both).
local function clamp_bounds(call, lo, hi)
  if lo == nil and hi == nil then fail(call .. ": at least one of min and max must be given") end
  for _, v in ipairs({ lo or 0, hi or 0 }) do
    if type(v) ~= "number" then fail(("%s: bounds must be numbers, got %s"):format(call, describe(v))) end
  end
  return lo or 0, hi or 0, lo ~= nil and 1 or 0, hi ~= nil and 1 or 0
end

function Tensor.clamp(self, lo, hi)
  local h = header(self)
  return adopt(pick("clamp", h).td_clamp(h, clamp_bounds("clamp", lo, hi)))
end

function Tensor.clamp_(self, lo, hi)
  local h = header(self)
  check(pick("clamp_", h).td_clamp_(h, clamp_bounds("clamp_", lo, hi)))
  return self
end

-- clamp_min(bound) / clamp_max(bound): a number bound clamps as clamp does (its dtype
-- rules); a tensor bound is broadcast, as torch's, which is maximum / minimum.
local function one_bound(call, is_min, inplace)
  local tensor_op = is_min and C.TD_BINARY_MAXIMUM or C.TD_BINARY_MINIMUM
  return function(self, bound)
    local h = header(self)
    if is_tensor(bound) then
      if inplace then return binary_(tensor_op, call, self, bound) end
      return binary(tensor_op, call, self, bound)
    end
    if type(bound) ~= "number" then
      fail(("%s: the bound must be a number or a tensor, got %s"):format(call, describe(bound)))
    end
    local lo, hi = clamp_bounds(call, is_min and bound or nil, (not is_min) and bound or nil)
    if inplace then
      check(pick(call, h).td_clamp_(h, lo, hi, is_min and 1 or 0, is_min and 0 or 1))
      return self
    end
    return adopt(pick(call, h).td_clamp(h, lo, hi, is_min and 1 or 0, is_min and 0 or 1))
  end
end
Tensor.clamp_min, Tensor.clamp_min_ = one_bound("clamp_min", true), one_bound("clamp_min_", true, true)
Tensor.clamp_max, Tensor.clamp_max_ = one_bound("clamp_max", false), one_bound("clamp_max_", false, true)

-- lerp(end, weight): self + weight * (end - self) for weight < 0.5, else
-- end - (end - self) * (1 - weight), torch's two forms (each exact at its end). self,
-- end and a tensor weight must share one floating dtype, as torch requires; all
-- broadcast.
local function lerp_operands(call, self, stop, weight)
  local h = header(self)
  local dt = self:dtype()
  if not dtypes.is_floating(h.dtype) then
    fail(("%s: expected a floating tensor, got %s"):format(call, dt))
  end
  if not is_tensor(stop) then
    fail(("%s: end must be a tensor, got %s"):format(call, describe(stop)))
  end
  if stop:dtype() ~= dt then
    fail(("%s: expected dtype %s for end but got %s"):format(call, dt, stop:dtype()))
  end
  if is_tensor(weight) then
    if weight:dtype() ~= dt then
      fail(("%s: expected dtype %s for weight but got %s"):format(call, dt, weight:dtype()))
    end
  elseif type(weight) ~= "number" then
    fail(("%s: weight must be a number or a tensor, got %s"):format(call, describe(weight)))
  end
end

local function lerp(self, stop, weight)
  local diff = stop:sub(self)
  if type(weight) == "number" then
    if math.abs(weight) < 0.5 then return diff:mul_(weight):add_(self) end
    return diff:mul_(1 - weight):neg_():add_(stop)
  end
  local near_start = self:add(weight:mul(diff))
  local near_end = stop:sub(diff:mul_(weight:neg():add_(1)))
  return M.where(weight:abs():lt(0.5), near_start, near_end)
end

function Tensor.lerp(self, stop, weight)
  lerp_operands("lerp", self, stop, weight)
  return lerp(self, stop, weight)
end

function Tensor.lerp_(self, stop, weight)
  lerp_operands("lerp_", self, stop, weight)
  local r = lerp(self, stop, weight)
  if r:shape() ~= self:shape() then -- shapes compare by value
    fail(("lerp_: the result's shape %s (broadcast) differs from the tensor's %s")
      :format(util.format_list(r:shape()), util.format_list(self:shape())))
  end
  return self:copy_(r)
end

local function bool_mask(mask, call)
  if not is_tensor(mask) then
    fail(("%s: mask must be a bool tensor, got %s"):format(call, describe(mask)))
  end
  return header(mask)
end

function Tensor.masked_fill(self, mask, value)
  local h, m = header(self), bool_mask(mask, "masked_fill")
  return adopt(pick("masked_fill", h, m).td_masked_fill(h, m, (scalar(value, "masked_fill"))))
end

function Tensor.masked_fill_(self, mask, value)
  local h, m = header(self), bool_mask(mask, "masked_fill_")
  check(pick("masked_fill_", h, m).td_masked_fill_(h, m, (scalar(value, "masked_fill_"))))
  return self
end

-- T.where(mask, a, b): a where mask is true, else b; a and b are tensors or scalars.
function M.where(mask, a, b)
  local m = bool_mask(mask, "where")
  local ha, hb, sa, sb, ka, kb = nil, nil, 0, 0, 0, 0
  if is_tensor(a) then ha = header(a) else sa, ka = scalar(a, "where") end
  if is_tensor(b) then hb = header(b) else sb, kb = scalar(b, "where") end
  return adopt(pick("where", m, ha, hb).td_where(m, ha, sa, ka, hb, sb, kb))
end

-- Lua operators: + - * / % ^ and unary minus. (== and < cannot be elementwise in Lua:
-- it turns their results into booleans; use eq, lt, ...)
-- Installs + - * / % ^ on a metatable from binary(op, name, a, b) and neg(a); the
-- TensorDict type installs its own the same way.
function M.install_operators(meta, bin, neg)
  local function operator(op)
    local name = ffi.string(C.td_op_name(C.TD_OPS_BINARY, op, 0))
    return function(a, b) return bin(op, name, a, b) end
  end
  meta.__add = operator(C.TD_BINARY_ADD)
  meta.__sub = operator(C.TD_BINARY_SUB)
  meta.__mul = operator(C.TD_BINARY_MUL)
  meta.__div = operator(C.TD_BINARY_DIV)
  meta.__mod = operator(C.TD_BINARY_REMAINDER)
  meta.__pow = operator(C.TD_BINARY_POW)
  meta.__unm = neg
end
M.install_operators(mt, binary, function(a)
  local h = header(a)
  return adopt(pick("neg", h).td_unary(C.TD_UNARY_NEG, h))
end)

-- Shared with the TensorDict methods (dict/math.lua).
M.scalar, M.clamp_bounds = scalar, clamp_bounds
M.BINARY, M.NO_INPLACE, M.UNARY, M.NO_UNARY_INPLACE = BINARY, NO_INPLACE, UNARY, NO_UNARY_INPLACE
M.REDUCE = REDUCE -- the reductions by name (tensor/reduce.lua and dict/math.lua make their methods)

return M
