-- dict/math.lua: arithmetic, comparisons, masking and reductions over the leaves of a
-- TensorDict. Each is one call into core/dict/dict_math.c, which loops over every leaf
-- (nested ones too) with the tensor kernels; non-tensor values are carried over.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local ops = require("tensordict.tensor.ops")
local core = require("tensordict.dict.core")

local TD, mt = core.methods, core.mt
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor, header, adopt = tensor.is_tensor, tensor.handle, tensor.adopt
local unpack = unpack
local scalar = ops.scalar
local type = type

local M = {}

-- The other operand as (container, tensor header, scalar, kind).
local function operand(call, x)
  if is_td(x) then return cdict(x), nil, 0, 0 end
  if is_tensor(x) then return nil, header(x), 0, 0 end
  local s, kind = scalar(x, call)
  return nil, nil, s, kind
end

-- a op b where at least one side is a TensorDict.
local function binary(op, call, a, b)
  if is_td(a) then
    local od, ot, s, kind = operand(call, b)
    return wrap(C.td_dict_binary(op, cdict(a), od, ot, s, kind, 0))
  end
  if is_tensor(a) then
    fail(("%s: a tensor cannot be the left operand of a TensorDict; write td %s t"):format(call,
      call))
  end
  local s, kind = scalar(a, call)
  return wrap(C.td_dict_binary(op, cdict(b), nil, nil, s, kind, 1))
end

-- tensor op td (the tensor's metamethod runs first and hands over): the tensor is the
-- left operand of every leaf.
ops.td_binary = function(op, _, a, b)
  return wrap(C.td_dict_binary(op, cdict(b), nil, header(a), 0, 0, 1))
end

local function binary_(op, call, self, b)
  local od, ot, s, kind = operand(call, b)
  check(C.td_dict_binary_(op, cdict(self), od, ot, s, kind))
  return self
end

for name, op in pairs(ops.BINARY) do
  TD[name] = function(self, other) return binary(op, name, self, other) end
  if not ops.NO_INPLACE[name] then
    TD[name .. "_"] = function(self, other) return binary_(op, name .. "_", self, other) end
  end
end

for name, op in pairs(ops.UNARY) do
  TD[name] = function(self) return wrap(C.td_dict_unary(op, cdict(self))) end
  if not ops.NO_UNARY_INPLACE[name] then
    TD[name .. "_"] = function(self)
      check(C.td_dict_unary_(op, cdict(self)))
      return self
    end
  end
end

ops.install_operators(mt, binary, function(a) return wrap(C.td_dict_unary(C.TD_UNARY_NEG, cdict(a))) end)

function TD.clamp(self, lo, hi)
  return wrap(C.td_dict_clamp(cdict(self), ops.clamp_bounds("clamp", lo, hi)))
end

function TD.clamp_(self, lo, hi)
  ops.clamp_bounds("clamp_", lo, hi)
  return TD.apply_(self, function(x) return x:clamp_(lo, hi) end)
end

-- clamp_min(bound) / clamp_max: a number bound clamps every leaf (clamp's dtype rules);
-- a TensorDict (same keys) or a tensor (aligned with the batch dims) is maximum / minimum.
local function one_bound(call, is_min)
  local other_op = is_min and C.TD_BINARY_MAXIMUM or C.TD_BINARY_MINIMUM
  TD[call] = function(self, bound)
    if type(bound) ~= "number" then return binary(other_op, call, self, bound) end
    local lo, hi = ops.clamp_bounds(call, is_min and bound or nil, (not is_min) and bound or nil)
    return wrap(C.td_dict_clamp(cdict(self), lo, hi, is_min and 1 or 0, is_min and 0 or 1))
  end
  TD[call .. "_"] = function(self, bound)
    if type(bound) ~= "number" then return binary_(other_op, call .. "_", self, bound) end
    return TD.apply_(self, function(x) return x[call .. "_"](x, bound) end)
  end
end
one_bound("clamp_min", true)
one_bound("clamp_max", false)

-- A tensor operand of a leaf x: aligned with the batch dims (on the left), so it gets a
-- size-1 dim for each trailing dim of x.
local function batch_aligned(t, x)
  local shape = t:shape()
  for _ = #shape + 1, x:dim() do shape[#shape + 1] = 1 end
  return t:view(shape)
end

-- lerp(end, weight): end a TensorDict with the same keys (or a tensor aligned with the
-- batch dims); weight a number, a tensor (aligned the same way) or a TensorDict. Each
-- leaf is the tensor lerp (floating leaves, end and weight of their dtype).
local function lerp_leaves(call, self, stop, weight, method)
  if not is_td(stop) and not is_tensor(stop) then
    fail(("%s: end must be a TensorDict or a tensor, got %s"):format(call, describe(stop)))
  end
  local others = {}
  if is_td(stop) then others[#others + 1] = stop end
  if is_td(weight) then others[#others + 1] = weight end
  local walk = method == "lerp" and TD.apply or TD.apply_
  return walk(self, function(x, a, b) -- a, b: the leaves of others, in order
    local e, w = a, b
    if not is_td(stop) then e, w = batch_aligned(stop, x), a end
    if not is_td(weight) then w = is_tensor(weight) and batch_aligned(weight, x) or weight end
    return x[method](x, e, w)
  end, unpack(others))
end
function TD.lerp(self, stop, weight) return lerp_leaves("lerp", self, stop, weight, "lerp") end
function TD.lerp_(self, stop, weight) return lerp_leaves("lerp_", self, stop, weight, "lerp_") end

------------------------------------------------------------------------- masking

local function mask_arg(call, mask)
  if not is_tensor(mask) then
    fail(("%s: mask must be a bool tensor, got %s"):format(call, describe(mask)))
  end
  if mask:dtype() ~= "bool" then
    fail(("%s: mask must be a bool tensor, got %s"):format(call, mask:dtype()))
  end
  return header(mask)
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
  return wrap(C.td_dict_masked_fill(cdict(self), mask_arg("masked_fill", mask), v))
end

function TD.masked_fill_(self, mask, value)
  local v = fill_value("masked_fill_", value)
  check(C.td_dict_masked_fill_(cdict(self), mask_arg("masked_fill_", mask), v))
  return self
end

-- The batch rows where mask is true: batch size [count, rest..] (a copy).
function TD.masked_select(self, mask)
  return wrap(C.td_dict_masked_select(cdict(self), mask_arg("masked_select", mask)))
end

-- T.where(mask, td, other): other a TensorDict with the same keys or a number.
function M.where(mask, a, b)
  local m = mask_arg("where", mask)
  if not is_td(a) then fail(("where: expected a TensorDict, got %s"):format(describe(a))) end
  if is_td(b) then return wrap(C.td_dict_where(m, cdict(a), cdict(b), 0, 0)) end
  if type(b) ~= "number" and type(b) ~= "boolean" then
    fail(("where: the other operand must be a TensorDict or a number, got %s"):format(describe(b)))
  end
  local s, kind = scalar(b, "where")
  return wrap(C.td_dict_where(m, cdict(a), nil, s, kind))
end

-- td:equal(other): same keys, shapes and values. allclose: within rtol/atol.
local flag = require("ffi").new("int32_t[1]")

function TD.equal(self, other)
  if not is_td(other) then return false end
  check(C.td_dict_equal(cdict(self), cdict(other), flag))
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
  check(C.td_dict_allclose(cdict(self), cdict(other), rtol, atol, flag))
  return flag[0] ~= 0
end

---------------------------------------------------------------------- reductions

-- Reads reduction arguments: (dim), (dim, opts), (opts) with opts {keepdim =, reduce =}.
-- Dims are batch dims (1-based, negative from the end).
local REDUCE_OPTIONS = { keepdim = "boolean", correction = "number", p = "number", reduce = "boolean" }
local EXTREME_OPTIONS = { keepdim = "boolean", reduce = "boolean", return_indices = "boolean" }

local function reduce_args(call, self, dim, opts, fields)
  if type(dim) == "table" and dim[1] == nil then dim, opts = nil, dim end
  opts = util.options(call, opts, fields or REDUCE_OPTIONS)
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
local function reducer(op, call, param_default, fields)
  return function(self, dim, opts, param)
    cdict(self)
    if type(param) ~= "nil" and type(param) ~= "number" then
      fail(("%s: argument 3 must be a number, got %s"):format(call, describe(param)))
    end
    local n
    n, opts = reduce_args(call, self, dim, opts, fields)
    param = param or opts.correction or opts.p or param_default or 0
    if opts.reduce then
      if n > 0 then fail(("%s: reduce = true takes no dim"):format(call)) end
      return adopt(C.td_dict_reduce_all(op, cdict(self), param))
    end
    return wrap(C.td_dict_reduce(op, cdict(self), util.dims_buf, n, opts.keepdim and 1 or 0, param))
  end
end

-- max(dim [, opts]) / min: over one batch dim, the values and the 1-based indices, two
-- TensorDicts (Python 0.15 returns them as a namedtuple (values, indices); Lua returns
-- two values, as the tensor max(dim) does). opts.return_indices = false, a list of dims,
-- no dim or reduce = true: the values only (amax / amin).
local function extreme(values_of, call)
  return function(self, dim, opts, param)
    local values = values_of(self, dim, opts, param)
    local o = type(dim) == "table" and dim[1] == nil and dim or opts or {}
    if type(dim) ~= "number" or o.reduce or o.return_indices == false then return values end
    local d = core.batch_dim(call, self, dim) + 1
    local indices = TD.apply(self, function(x)
      local _, i = x[call](x, d, o.keepdim or false)
      return i
    end, { batch_size = values:batch_size() })
    return values, indices
  end
end

-- all()/any(): a boolean over every element of every leaf; with a dim, a TensorDict.
local function logical(op, call)
  local r = reducer(op, call)
  return function(self, dim, opts)
    if dim == nil then return r(self, nil, { reduce = true }):item() end
    return r(self, dim, opts)
  end
end

-- The methods of every reduction in C's op table but argmin / argmax (an index over
-- every leaf has no meaning), by its category. std / var default to the unbiased
-- correction, norm to p = 2, as torch's; max and min also give amax and amin.
local PARAM = { [C.TD_OPCAT_SPREAD] = 1, [C.TD_OPCAT_NORM] = 2 }
for name, op in pairs(ops.REDUCE) do
  local category = C.td_op_category(C.TD_OPS_REDUCE, op)
  if category == C.TD_OPCAT_EXTREME then
    TD[name] = extreme(reducer(op, name, nil, EXTREME_OPTIONS), name)
    TD["a" .. name] = reducer(op, "a" .. name)
  elseif category == C.TD_OPCAT_LOGICAL then
    TD[name] = logical(op, name)
  elseif category ~= C.TD_OPCAT_INDEX then
    TD[name] = reducer(op, name, PARAM[category])
  end
end

return M
