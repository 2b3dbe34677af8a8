-- tensor/print.lua: tostring(t), in PyTorch's repr layout:
--   tensor([[ 1.5000,  2.0000],
--           [-3.0000,  4.2500]], shape=[2, 2], dtype=float32)
-- Tensors of more than 1000 elements are summarised: the first and last 3 entries of
-- each dim around "...". Only the shown elements are read.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local dtypes = require("tensordict.tensor.dtype")
local util = require("tensordict.util")

local M = {}
local SUMMARY_THRESHOLD, EDGE_ITEMS, LINE_WIDTH = 1000, 3, 80
local PREFIX = "tensor("

-- The positions (0-based) shown along a dim of this size, with false marking "...".
local function shown(size, summarise)
  local list = {}
  if summarise and size > 2 * EDGE_ITEMS then
    for i = 0, EDGE_ITEMS - 1 do list[#list + 1] = i end
    list[#list + 1] = false
    for i = size - EDGE_ITEMS, size - 1 do list[#list + 1] = i end
  else
    for i = 0, size - 1 do list[#list + 1] = i end
  end
  return list
end

-- The element at idx of h as a Lua number, or as an int64 cdata for int64 tensors,
-- whose values beyond 2^53 a double would round (int64 max printed as -2^63).
local function reader(h, ndim)
  if h.dtype ~= dtypes.INT64 then
    local out = ffi.new("double[1]")
    return function(idx)
      assert(C.td_tensor_read_f64(h, idx, out) == 0)
      return out[0]
    end
  end
  local base = ffi.cast("const int64_t *", C.td_tensor_data_borrow(h))
  return function(idx)
    local off = 0
    for d = 0, ndim - 1 do off = off + idx[d] * h.strides[d] end
    return base[off]
  end
end

-- Collects the shown values into nested tables (false for "..."), reading each once.
local function collect(h, shape, ndim, summarise)
  local idx = ffi.new("int64_t[?]", math.max(ndim, 1))
  local read = reader(h, ndim)
  local values = {}
  local function walk(d)
    local node = {}
    for _, p in ipairs(shown(shape[d + 1], summarise)) do
      if p == false then
        node[#node + 1] = false
      else
        idx[d] = p
        if d == ndim - 1 then
          local v = read(idx)
          node[#node + 1] = v
          values[#values + 1] = v
        else
          node[#node + 1] = walk(d + 1)
        end
      end
    end
    return node
  end
  return walk(0), values
end

-- One formatter for all shown values, so columns line up.
local function formatter(values, dtype)
  if dtype == dtypes.BOOL then
    return function(v) return v ~= 0 and "true" or "false" end
  end
  if dtype == dtypes.INT64 then -- int64 cdata, printed exactly
    return function(v) return (tostring(v):gsub("LL$", "")) end
  end
  local floating = dtypes.is_floating(dtype)
  local integral, max_abs, min_abs = true, 0, math.huge
  for _, v in ipairs(values) do
    if v == v and v ~= math.huge and v ~= -math.huge then
      local a = math.abs(v)
      if v % 1 ~= 0 then integral = false end
      if a > max_abs then max_abs = a end
      if a > 0 and a < min_abs then min_abs = a end
    end
  end
  local fmt
  if not floating then
    fmt = "%d"
  elseif integral and max_abs < 1e8 then
    fmt = "%.0f."
  elseif max_abs >= 1e8 or min_abs < 1e-4 or max_abs / min_abs > 1e5 then
    fmt = "%.4e"
  else
    fmt = "%.4f"
  end
  return function(v)
    if v ~= v then return "nan" end
    if v == math.huge then return "inf" end
    if v == -math.huge then return "-inf" end
    return (fmt:format(v))
  end
end

local function render(node, depth, ndim, fmt, width)
  local indent = (" "):rep(#PREFIX + depth + 1)
  local parts = {}
  if depth == ndim - 1 then
    -- The innermost dim: as many entries per line as fit the width.
    local per_line = math.max(1, math.floor((LINE_WIDTH - #indent) / (width + 2)))
    local line, lines = {}, {}
    for _, v in ipairs(node) do
      line[#line + 1] = v == false and "..." or ("%" .. width .. "s"):format(fmt(v))
      if #line == per_line then
        lines[#lines + 1] = table.concat(line, ", ")
        line = {}
      end
    end
    if #line > 0 then lines[#lines + 1] = table.concat(line, ", ") end
    return "[" .. table.concat(lines, ",\n" .. indent) .. "]"
  end
  for _, child in ipairs(node) do
    parts[#parts + 1] = child == false and "..." or render(child, depth + 1, ndim, fmt, width)
  end
  local gap = ",\n" .. ("\n"):rep(ndim - depth - 2)
  return "[" .. table.concat(parts, gap .. indent) .. "]"
end

function M.tensor(t)
  local h = t.h
  local ndim, dtype = h.ndim, h.dtype
  local shape = util.int64_list(h.shape, ndim)
  local numel = tonumber(C.td_tensor_numel(h))
  local suffix = ("shape=%s, dtype=%s)"):format(util.format_list(shape), dtypes.name(dtype))
  if ndim == 0 then
    local v = reader(h, 0)(nil)
    return PREFIX .. formatter({ v }, dtype)(v) .. ", " .. suffix
  end
  if numel == 0 then return PREFIX .. "[], " .. suffix end
  local tree, values = collect(h, shape, ndim, numel > SUMMARY_THRESHOLD)
  local fmt = formatter(values, dtype)
  local width = 0
  for _, v in ipairs(values) do width = math.max(width, #fmt(v)) end
  return PREFIX .. render(tree, 0, ndim, fmt, width) .. ", " .. suffix
end

return M
