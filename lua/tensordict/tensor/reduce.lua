-- tensor/reduce.lua: reductions (sum, mean, max, amax, std, all, ...), cumsum, cumprod,
-- logsumexp, softmax and log_softmax.
-- Over every dim they return a Lua value, as torch7 did; over dims a tensor.
-- Dims are 1-based (negative from the end) and may be one dim or a list; indices that
-- reductions return (argmax, max(dim)) are 1-based too.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local device = require("tensordict.tensor.device")
local ops = require("tensordict.tensor.ops")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, adopt, header, check = tensor.Tensor, tensor.adopt, tensor.handle, tensor.check
local value_of = tensor.value_of
local dims_buf = util.dims_buf

-- Reads dims (nil, a number, or a list) into dims_buf; returns the count (0: all).
local function read_dims(call, h, dims)
  if dims == nil then return 0 end
  local list = type(dims) == "table" and dims or { dims }
  if #list == 0 then fail(call .. ": the list of dims is empty") end
  if #list > h.ndim then
    fail(("%s: %d dims given for a tensor of %d dims"):format(call, #list, h.ndim))
  end
  for i, d in ipairs(list) do dims_buf[i - 1] = dim0(call, d, h.ndim) end
  return #list
end

-- min, max and their arg forms have no value over nothing: say so in 1-based terms
-- (the C message would name a 0-based dim).
local function check_not_empty(call, h, dims, n)
  for i = 0, n - 1 do
    local d = dims[i]
    if h.shape[d] == 0 then
      fail(("%s: cannot reduce over dim %d of size 0 (input shape %s)")
        :format(call, d + 1, util.format_list(util.int64_list(h.shape, h.ndim))))
    end
  end
end

-- keepdim given as a boolean or inside an options table (read only).
local KEEPDIM, NO_KEEPDIM = { keepdim = true }, { keepdim = false }
local function options(call, opts)
  if opts == nil or type(opts) == "boolean" then return opts and KEEPDIM or NO_KEEPDIM end
  if type(opts) ~= "table" then
    fail(("%s: expected keepdim (a boolean) or an options table, got %s"):format(call, describe(opts)))
  end
  return opts
end

-- A 0-dim result as a Lua value (freed at once), any other as a tensor.
local function value_or_tensor(t)
  if t.h.ndim ~= 0 then return t end
  local v = t:item()
  t:free()
  return v
end

local function reduce(op, call, self, dims, opts, param)
  local h = header(self)
  local n = read_dims(call, h, dims)
  local o = options(call, opts)
  local kernels = device.pick(call, h)
  local p = kernels.td_reduce(op, h, dims_buf, n, o.keepdim and 1 or 0, param or 0)
  -- A host result's number is read without making a tensor; a device one is copied.
  if n == 0 and not o.keepdim and p ~= nil and p.ndim == 0 then
    if kernels == C then return value_of(p) end
    return value_or_tensor(adopt(p))
  end
  return adopt(p)
end

-- sum, mean, prod, all, any, logsumexp: (dims, opts).
local function simple(op, call)
  return function(self, dims, opts)
    -- not a tail call, so an error's message can find the method in the stack
    local r = reduce(op, call, self, dims, opts)
    return r
  end
end

-- 0-based int64 indices -> 1-based, in place (they are fresh tensors).
local function one_based(t)
  check(device.pick("add_", t.h).td_binary_scalar_(C.TD_BINARY_ADD, t.h, 1, C.TD_SCALAR_INT))
  return t
end

-- max() is the largest element; max(dim [, keepdim]) gives values and 1-based indices.
local function extreme(red, call)
  return function(self, dim, opts)
    local h = header(self)
    if dim == nil then return reduce(red, call, self) end
    if type(dim) ~= "number" then
      fail(("%s: dim must be a number, got %s (use %s(dim) one dim at a time)"):format(call, describe(dim), call))
    end
    local o = options(call, opts)
    local d = dim0(call, dim, h.ndim)
    dims_buf[0] = d
    check_not_empty(call, h, dims_buf, 1)
    local values, indices = ffi.new("td_tensor *[1]"), ffi.new("td_tensor *[1]")
    check(device.pick(call, h).td_reduce_with_index(red, h, d, o.keepdim and 1 or 0, values, indices))
    return adopt(values[0]), one_based(adopt(indices[0]))
  end
end

local function arg_extreme(op, call)
  return function(self, dim, opts)
    local h = header(self)
    if dim ~= nil and type(dim) ~= "number" then
      fail(("%s: dim must be a number, got %s"):format(call, describe(dim)))
    end
    local n = read_dims(call, h, dim)
    check_not_empty(call, h, dims_buf, n)
    local o = options(call, opts)
    local kernels = device.pick(call, h)
    local result = one_based(adopt(kernels.td_reduce(op, h, dims_buf, n, o.keepdim and 1 or 0, 0)))
    if n == 0 and not o.keepdim then return value_or_tensor(result) end
    return result
  end
end

-- std and var: unbiased by default (correction 1), like torch. Options: keepdim,
-- unbiased (boolean), correction (number).
local function spread(op, call)
  return function(self, dims, opts)
    local o = options(call, opts)
    local correction = o.correction
    if correction == nil then correction = (o.unbiased == false) and 0 or 1 end
    if type(correction) ~= "number" then
      fail(("%s: correction must be a number, got %s"):format(call, describe(correction)))
    end
    return reduce(op, call, self, dims, o, correction)
  end
end

-- norm([p [, dims [, keepdim]]]): p defaults to 2; math.huge is the max norm.
local function norm(op, call)
  return function(self, p, dims, opts)
    p = p or 2
    if type(p) ~= "number" then fail(("%s: p must be a number, got %s"):format(call, describe(p))) end
    return reduce(op, call, self, dims, opts, p)
  end
end

-- amax/amin(dims [, keepdim]): torch's names for the extreme over several dims at once
-- (no indices); NaN propagates. Over every dim a Lua value, as max() is.
local function extreme_values(op, call)
  return function(self, dims, opts)
    local h = header(self)
    local n = read_dims(call, h, dims)
    if n == 0 then
      for i = 0, h.ndim - 1 do dims_buf[i] = i end
      check_not_empty(call, h, dims_buf, h.ndim)
    else
      check_not_empty(call, h, dims_buf, n)
    end
    return reduce(op, call, self, dims, opts)
  end
end

-- The methods of every reduction in C's op table, by its category: max and min also
-- give amax and amin.
local METHOD = {
  [C.TD_OPCAT_ARITH] = simple, [C.TD_OPCAT_FLOAT] = simple, [C.TD_OPCAT_LOGICAL] = simple,
  [C.TD_OPCAT_EXTREME] = extreme, [C.TD_OPCAT_INDEX] = arg_extreme,
  [C.TD_OPCAT_SPREAD] = spread, [C.TD_OPCAT_NORM] = norm,
}
-- ops.REDUCE_PARAM_FIRST: the reductions whose first argument is their parameter, not the
-- dims (norm's p), for callers that reduce by name (flow/expr_ops.lua).
ops.REDUCE_PARAM_FIRST = {}
for name, op in pairs(ops.REDUCE) do
  local category = C.td_op_category(C.TD_OPS_REDUCE, op)
  if category == C.TD_OPCAT_NORM then ops.REDUCE_PARAM_FIRST[name] = true end
  Tensor[name] = METHOD[category](op, name)
  if category == C.TD_OPCAT_EXTREME then Tensor["a" .. name] = extreme_values(op, "a" .. name) end
end

-- The one dim of cumsum, softmax, ...: a 0-dim tensor takes dim 1 (or -1), as torch's
-- takes 0 (or -1).
local function line_dim(call, h, dim)
  if dim == nil then fail(call .. ": a dim is required") end
  return dim0(call, dim, h.ndim, h.ndim == 0 and 1 or nil)
end

-- A running sum or product along dim (bool and integers give int64, as in torch).
local function running(call)
  local fn = "td_" .. call
  return function(self, dim)
    local h = header(self)
    return adopt(device.pick(call, h)[fn](h, line_dim(call, h, dim)))
  end
end
Tensor.cumsum = running("cumsum")
Tensor.cumprod = running("cumprod")

-- cummax(dim) and cummin(dim): the running extreme and its 1-based index (int64);
-- logcumsumexp(dim): log(cumsum(exp(self))) without overflow (core/kernels/scan.c).
local scan_indices = ffi.new("td_tensor *[1]")
local function running_extreme(call)
  local fn = "td_" .. call
  return function(self, dim)
    local h = header(self)
    local v = C[fn](h, line_dim(call, h, dim), scan_indices)
    if v == nil then util.c_fail() end
    return adopt(v), adopt(scan_indices[0]):add_(1)
  end
end
Tensor.cummax = running_extreme("cummax")
Tensor.cummin = running_extreme("cummin")
function Tensor.logcumsumexp(self, dim)
  local h = header(self)
  return adopt(C.td_logcumsumexp(h, line_dim("logcumsumexp", h, dim)))
end

-- softmax(dim [, dtype]) and log_softmax: floating tensors only, as torch; dtype casts
-- first (torch's dtype= argument), which is how an integer tensor gets one.
local function softmax(log, call)
  return function(self, dim, dtype)
    local h = header(self)
    local d = line_dim(call, h, dim)
    if dtype == nil then return adopt(device.pick(call, h).td_softmax(h, d, log)) end
    local x = self:to(dtype)
    local hx = header(x)
    local r = adopt(device.pick(call, hx).td_softmax(hx, d, log))
    if x.o ~= self.o then x:free() end -- a cast copy (the same dtype shares self)
    return r
  end
end
Tensor.softmax = softmax(0, "softmax")
Tensor.log_softmax = softmax(1, "log_softmax")

return {}
