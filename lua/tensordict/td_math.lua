-- td_math.lua: arithmetic, comparisons, masking and reductions over the leaves of a
-- TensorDict. Each is one call into core/dict/dict_math.c, which loops over every leaf
-- (nested ones too) with the tensor kernels; non-tensor values are carried over.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local ops = require("tensordict.ops")
local core = require("tensordict.td_core")

local TD, mt = core.methods, core.mt
local D, wrap, check, is_td = core.D, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor, H, adopt = tensor.is_tensor, tensor.handle, tensor.adopt
local scalar = ops.scalar
local type = type

local M = {}

-- The other operand as (container, tensor header, scalar, kind).
local function operand(call, x)
  if is_td(x) then return D(x), nil, 0, 0 end
  if is_tensor(x) then return nil, H(x), 0, 0 end
  local s, kind = scalar(x, call)
  return nil, nil, s, kind
end

-- a op b where at least one side is a TensorDict.
local function binary(op, call, a, b)
  if is_td(a) then
    local od, ot, s, kind = operand(call, b)
    return wrap(C.td_dict_binary(op, D(a), od, ot, s, kind, 0))
  end
  if is_tensor(a) then
    fail(("%s: a tensor cannot be the left operand of a TensorDict; write td %s t"):format(call,
      call))
  end
  local s, kind = scalar(a, call)
  return wrap(C.td_dict_binary(op, D(b), nil, nil, s, kind, 1))
end

-- tensor op td (the tensor's metamethod runs first and hands over): the tensor is the
-- left operand of every leaf.
ops.td_binary = function(op, _, a, b)
  return wrap(C.td_dict_binary(op, D(b), nil, H(a), 0, 0, 1))
end

local function binary_(op, call, self, b)
  local od, ot, s, kind = operand(call, b)
  check(C.td_dict_binary_(op, D(self), od, ot, s, kind))
  return self
end

for name, op in pairs(ops.BINARY) do
  TD[name] = function(self, other) return binary(op, name, self, other) end
  if not ops.NO_INPLACE[name] then
    TD[name .. "_"] = function(self, other) return binary_(op, name .. "_", self, other) end
  end
end

for name, op in pairs(ops.UNARY) do
  TD[name] = function(self) return wrap(C.td_dict_unary(op, D(self))) end
  if not ops.NO_UNARY_INPLACE[name] then
    TD[name .. "_"] = function(self)
      check(C.td_dict_unary_(op, D(self)))
      return self
    end
  end
end

ops.install_operators(mt, binary, function(a) return wrap(C.td_dict_unary(C.TD_UNARY_NEG, D(a))) end)

function TD.clamp(self, lo, hi)
  return wrap(C.td_dict_clamp(D(self), ops.clamp_bounds("clamp", lo, hi)))
end

------------------------------------------------------------------------- masking

local function mask_arg(call, mask)
  if not is_tensor(mask) then
    fail(("%s: mask must be a bool tensor, got %s"):format(call, describe(mask)))
  end
  if mask:dtype() ~= "bool" then
    fail(("%s: mask must be a bool tensor, got %s"):format(call, mask:dtype()))
  end
  return H(mask)
end

-- A number (or boolean) value to fill with.
local function fill_value(call, v)
  if type(v) ~= "number" and type(v) ~= "boolean" then
    fail(("%s: the value must be a number or a boolean, got %s"):format(call, describe(v)))
  end
  return (scalar(v, call))
end

-- The mask covers the leading batch dims; it is expanded over each leaf's other dims.
function TD.masked_fill(self, mask, value)
  local v = fill_value("masked_fill", value)
  return wrap(C.td_dict_masked_fill(D(self), mask_arg("masked_fill", mask), v))
end

function TD.masked_fill_(self, mask, value)
  local v = fill_value("masked_fill_", value)
  check(C.td_dict_masked_fill_(D(self), mask_arg("masked_fill_", mask), v))
  return self
end

-- The batch rows where mask is true: batch size [count, rest..] (a copy).
function TD.masked_select(self, mask)
  return wrap(C.td_dict_masked_select(D(self), mask_arg("masked_select", mask)))
end

-- T.where(mask, td, other): other a TensorDict with the same keys or a number.
function M.where(mask, a, b)
  local m = mask_arg("where", mask)
  if not is_td(a) then fail(("where: expected a TensorDict, got %s"):format(describe(a))) end
  if is_td(b) then return wrap(C.td_dict_where(m, D(a), D(b), 0, 0)) end
  if type(b) ~= "number" and type(b) ~= "boolean" then
    fail(("where: the other operand must be a TensorDict or a number, got %s"):format(describe(b)))
  end
  local s, kind = scalar(b, "where")
  return wrap(C.td_dict_where(m, D(a), nil, s, kind))
end

-- td:equal(other): same keys, shapes and values. allclose: within rtol/atol.
local flag = require("ffi").new("int32_t[1]")

function TD.equal(self, other)
  if not is_td(other) then return false end
  check(C.td_dict_equal(D(self), D(other), flag))
  return flag[0] ~= 0
end

function TD.allclose(self, other, rtol, atol)
  if not is_td(other) then
    fail(("allclose: expected a TensorDict, got %s"):format(describe(other)))
  end
  rtol, atol = rtol or 1e-5, atol or 1e-8
  if type(rtol) ~= "number" or type(atol) ~= "number" then
    fail(("allclose: rtol and atol must be numbers, got %s and %s"):format(describe(rtol),
      describe(atol)))
  end
  check(C.td_dict_allclose(D(self), D(other), rtol, atol, flag))
  return flag[0] ~= 0
end

---------------------------------------------------------------------- reductions

-- Reads reduction arguments: (dim), (dim, opts), (opts) with opts {keepdim =, reduce =}.
-- Dims are batch dims (1-based, negative from the end).
local REDUCE_OPTIONS = { keepdim = "boolean", correction = "number", p = "number", reduce = "boolean" }

local function reduce_args(call, self, dim, opts)
  if type(dim) == "table" and dim[1] == nil then dim, opts = nil, dim end
  opts = util.options(call, opts, REDUCE_OPTIONS)
  local dims = dim
  if type(dim) == "number" then dims = { dim } end
  local n = 0
  if dims ~= nil then
    if type(dims) ~= "table" then
      fail(("%s: dim must be a number or a table of numbers, got %s"):format(call, describe(dim)))
    end
    local seen = {}
    for i, d in ipairs(dims) do
      local d0 = core.batch_dim(call, self, d)
      if seen[d0] then
        fail(("%s: dim %d appears more than once in the dims %s"):format(call, d0 + 1,
          util.format_list(dims)))
      end
      seen[d0] = true
      util.dims_buf[i - 1] = d0
      n = i
    end
  end
  return n, opts
end

-- op over batch dims for each leaf; no dim: over every element of each leaf (a
-- TensorDict of 0-dim leaves); reduce = true: one tensor over all leaves.
local function reducer(op, call, param_default)
  return function(self, dim, opts, param)
    D(self)
    if type(param) ~= "nil" and type(param) ~= "number" then
      fail(("%s: argument 3 must be a number, got %s"):format(call, describe(param)))
    end
    local n
    n, opts = reduce_args(call, self, dim, opts)
    param = param or opts.correction or opts.p or param_default or 0
    if opts.reduce then
      if n > 0 then fail(("%s: reduce = true takes no dim"):format(call)) end
      return adopt(C.td_dict_reduce_all(op, D(self), param))
    end
    return wrap(C.td_dict_reduce(op, D(self), util.dims_buf, n, opts.keepdim and 1 or 0, param))
  end
end

TD.sum = reducer(C.TD_RED_SUM, "sum")
TD.mean = reducer(C.TD_RED_MEAN, "mean")
TD.prod = reducer(C.TD_RED_PROD, "prod")
TD.min = reducer(C.TD_RED_MIN, "min")
TD.max = reducer(C.TD_RED_MAX, "max")
TD.std = reducer(C.TD_RED_STD, "std", 1)
TD.var = reducer(C.TD_RED_VAR, "var", 1)
TD.norm = reducer(C.TD_RED_NORM, "norm", 2)
TD.logsumexp = reducer(C.TD_RED_LOGSUMEXP, "logsumexp")

-- all()/any(): a boolean over every element of every leaf; with a dim, a TensorDict.
local all_reduce, any_reduce = reducer(C.TD_RED_ALL, "all"), reducer(C.TD_RED_ANY, "any")
function TD.all(self, dim, opts)
  if dim == nil then return all_reduce(self, nil, { reduce = true }):item() end
  return all_reduce(self, dim, opts)
end
function TD.any(self, dim, opts)
  if dim == nil then return any_reduce(self, nil, { reduce = true }):item() end
  return any_reduce(self, dim, opts)
end

return M
