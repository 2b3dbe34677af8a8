-- tensor/create.lua: the constructors: T.tensor, zeros, ones, empty, full, arange, from_file.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor.core")

local C = lib.C
local fail, describe = util.fail, util.describe
local shape_buf = util.shape_buf
local adopt, is_tensor, header = tensor.adopt, tensor.is_tensor, tensor.handle
local FLOAT32, FLOAT64, INT64, BOOL = dtypes.FLOAT32, dtypes.FLOAT64, dtypes.INT64, dtypes.BOOL

local M = {}

-- Reads "shape [, dtype [, opts]]" arguments; returns ndim (shape in shape_buf) and the rest.
local function shape_and_rest(call, ...)
  local n, nxt = util.read_shape(call, false, ...)
  return n, select(nxt, ...)
end

local function dtype_or(default, name, call)
  if name == nil then return default end
  return dtypes.code(name, call)
end

local function position(stack, depth)
  local parts = {}
  for i = 1, depth do parts[i] = "[" .. stack[i] .. "]" end
  return (table.concat(parts))
end

-- A tensor from a nested Lua table (or a number or boolean, giving 0 dims).
-- dtype: a code, or nil to infer (booleans only: bool, otherwise float32).
function M.from_table(data, dtype, call)
  local shape = {}
  local x = data
  while type(x) == "table" do
    if is_tensor(x) then break end
    shape[#shape + 1] = #x
    x = x[1]
  end
  if #shape > C.TD_MAX_DIMS then
    fail(("%s: the nested table has %d levels, at most %d supported"):format(call, #shape, C.TD_MAX_DIMS))
  end
  for i = 1, #shape do shape_buf[i - 1] = shape[i] end
  local staging = adopt(C.td_tensor_empty(#shape, shape_buf, FLOAT64))
  local out = ffi.cast("double *", C.td_tensor_data_borrow(staging.h))
  local pos, only_bools, stack = 0, true, {}
  local function store(v, depth)
    local tv = type(v)
    if tv == "number" then
      only_bools = false
      out[pos] = v
    elseif tv == "boolean" then
      out[pos] = v and 1 or 0
    else
      fail(("%s: non-number value %s at %s (expected numbers or booleans)")
        :format(call, describe(v), depth > 0 and position(stack, depth) or "the top"))
    end
    pos = pos + 1
  end
  local function walk(t, depth)
    if depth == #shape then return store(t, depth) end
    if type(t) ~= "table" then
      fail(("%s: ragged nested table: %s at %s where a table of %d entries was expected")
        :format(call, describe(t), position(stack, depth), shape[depth + 1]))
    end
    if #t ~= shape[depth + 1] then
      fail(("%s: ragged nested table: %d entries at %s, expected %d like the first")
        :format(call, #t, depth > 0 and position(stack, depth) or "the top", shape[depth + 1]))
    end
    for i = 1, #t do
      stack[depth + 1] = i
      walk(t[i], depth + 1)
    end
  end
  walk(data, 0)
  if dtype == nil then dtype = (only_bools and pos > 0) and BOOL or FLOAT32 end
  if dtype == FLOAT64 then return staging end
  local result = adopt(C.td_tensor_to_dtype(staging.h, dtype))
  staging:free()
  return result
end

-- T.tensor(nested_table [, dtype]): numbers give float32, booleans bool.
function M.tensor(data, dtype)
  local code = dtype ~= nil and dtypes.code(dtype, "tensor") or nil
  if is_tensor(data) then
    -- Always a copy, like torch.tensor(t): a cast copies, the same dtype clones.
    local h = header(data)
    if code == nil or code == h.dtype then return adopt(C.td_tensor_clone(h)) end
    return adopt(C.td_tensor_to_dtype(h, code))
  end
  local td = type(data)
  if td ~= "table" and td ~= "number" and td ~= "boolean" then
    fail(("tensor: expected a nested table of numbers, got %s"):format(describe(data)))
  end
  return M.from_table(data, code, "tensor")
end

function M.empty(...)
  local n, dtype, opts = shape_and_rest("empty", ...)
  local code = dtype_or(FLOAT32, dtype, "empty")
  if type(opts) == "table" and opts.shared then
    return adopt(C.td_tensor_empty_shared(n, shape_buf, code))
  end
  return adopt(C.td_tensor_empty(n, shape_buf, code))
end

local function filled(call, value, ...)
  local n, dtype = shape_and_rest(call, ...)
  return adopt(C.td_tensor_full(n, shape_buf, dtype_or(FLOAT32, dtype, call), value))
end

function M.zeros(...) return filled("zeros", 0, ...) end
function M.ones(...) return filled("ones", 1, ...) end

-- T.full(shape, value [, dtype]): booleans default to bool, numbers to float32.
function M.full(shape, value, dtype)
  if type(shape) ~= "table" then
    fail(("full: shape must be a table such as {2, 3}, got %s"):format(describe(shape)))
  end
  local n = util.read_shape("full", false, shape)
  local tv = type(value)
  if tv ~= "number" and tv ~= "boolean" then
    fail(("full: value must be a number or boolean, got %s"):format(describe(value)))
  end
  local code = dtype_or(tv == "boolean" and BOOL or FLOAT32, dtype, "full")
  if tv == "boolean" then value = value and 1 or 0 end
  return adopt(C.td_tensor_full(n, shape_buf, code, value))
end

-- T.arange(n) is 1..n; T.arange(a, b [, step]) runs from a to b inclusive, like Lua's
-- numeric for. A trailing string is the dtype; the default is int64 when every bound is
-- an integer, float32 otherwise (PyTorch's rule).
function M.arange(...)
  local args = { ... }
  local dtype
  if type(args[#args]) == "string" then dtype = table.remove(args) end
  local a, b, step = args[1], args[2], args[3]
  if #args == 1 then a, b = 1, args[1] end
  step = step or 1
  if #args < 1 or #args > 3 then
    fail(("arange: expected (n), (a, b) or (a, b, step) and an optional dtype, got %d numbers"):format(#args))
  end
  local bounds = { a, b, step }
  for i = 1, 3 do -- not ipairs: it would stop at a nil
    local v = bounds[i]
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then
      fail(("arange: bounds and step must be finite numbers, got %s"):format(describe(v)))
    end
  end
  if step == 0 then fail("arange: step must not be 0") end
  -- The count of a, a+step, ... up to b, tolerating rounding in the last step.
  local n = math.floor((b - a) / step + 1e-9) + 1
  if n < 0 then n = 0 end
  local integral = util.is_int(a) and util.is_int(b) and util.is_int(step)
  local code = dtype_or(integral and INT64 or FLOAT32, dtype, "arange")
  return adopt(C.td_tensor_arange(a, step, n, code))
end

-- T.linspace(start, stop, steps [, dtype]): steps values from start to stop, both
-- included, evenly spaced (float32 by default). As torch: the first half counts up from
-- start and the second down from stop, so both ends are exact.
function M.linspace(start, stop, steps, dtype)
  for _, v in pairs({ start, stop, false }) do -- (pairs: a nil must not end the loop)
    if v ~= false and (type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge) then
      fail(("linspace: start and stop must be finite numbers, got %s"):format(describe(v)))
    end
  end
  if start == nil or stop == nil then
    fail(("linspace: start and stop must be finite numbers, got %s and %s"):format(describe(start), describe(stop)))
  end
  if not util.is_int(steps) or steps < 0 then
    fail(("linspace: steps must be an integer >= 0, got %s"):format(describe(steps)))
  end
  return adopt(C.td_tensor_linspace(start, stop, steps, dtype_or(FLOAT32, dtype, "linspace")))
end

-- T.logspace(start, stop, steps [, base [, dtype]]): base ^ linspace(start, stop, steps)
-- (base 10 by default).
function M.logspace(start, stop, steps, base, dtype)
  if type(base) == "string" then base, dtype = nil, base end
  base = base == nil and 10 or base
  if type(base) ~= "number" or base ~= base then
    fail(("logspace: base must be a number, got %s"):format(describe(base)))
  end
  local exps = M.linspace(start, stop, steps, "float64")
  shape_buf[0] = exps:numel()
  local b = adopt(C.td_tensor_full(1, shape_buf, C.TD_FLOAT64, base))
  local out = b:pow(exps)
  local code = dtype_or(FLOAT32, dtype, "logspace")
  if code == C.TD_FLOAT64 then return out end
  return out:to(dtypes.name(code))
end

-- T.eye(n [, m] [, dtype]): n x m (m defaults to n) with ones on the diagonal.
function M.eye(n, m, dtype)
  if type(m) == "string" then m, dtype = nil, m end
  m = m == nil and n or m
  if not util.is_int(n) or n < 0 or not util.is_int(m) or m < 0 then
    fail(("eye: sizes must be integers >= 0, got %s and %s"):format(describe(n), describe(m)))
  end
  shape_buf[0], shape_buf[1] = n, m
  local t = adopt(C.td_tensor_full(2, shape_buf, dtype_or(FLOAT32, dtype, "eye"), 0))
  local k = math.min(n, m)
  if k > 0 then t:view(n * m)[{ { 1, (k - 1) * (m + 1) + 1, m + 1 } }]:fill_(1) end
  return t
end

local MAP_MODES = { r = C.TD_MAP_READ, ["r+"] = C.TD_MAP_READWRITE, ["w+"] = C.TD_MAP_CREATE }

-- T.from_file(path, shape, dtype [, mode]): a tensor over a file's bytes (raw,
-- C-contiguous, little-endian). mode "r" (read-only, the default), "r+" (writes reach
-- the file) or "w+" (create or truncate to the needed size).
function M.from_file(path, shape, dtype, mode)
  if type(path) ~= "string" then fail(("from_file: path must be a string, got %s"):format(describe(path))) end
  if type(shape) ~= "table" then
    fail(("from_file: shape must be a table such as {2, 3}, got %s"):format(describe(shape)))
  end
  local code = dtypes.code(dtype or "float32", "from_file")
  local map_mode = MAP_MODES[mode or "r"]
  if not map_mode then fail(("from_file: mode must be 'r', 'r+' or 'w+', got %s"):format(describe(mode))) end
  local n = util.read_shape("from_file", false, shape)
  local numel = 1
  for i = 0, n - 1 do numel = numel * tonumber(shape_buf[i]) end
  local storage = C.td_storage_map_file(path, numel * tonumber(C.td_dtype_itemsize(code)), map_mode)
  if storage == nil then util.c_fail() end
  local h = C.td_tensor_from_storage(storage, 0, n, shape_buf, nil, code)
  C.td_storage_release(storage) -- the tensor holds its own reference
  return adopt(h)
end

return M
