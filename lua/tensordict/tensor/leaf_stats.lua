-- tensor/leaf_stats.lua: a tensor's summary over all its elements (core/kernels/leaf_stats.c),
-- for T.describe and `tdflow inspect --stats`: count, mean, std (n - 1, as torch and
-- pandas), min and max of the finite values, NaN and infinity counts, and for bool and
-- integer tensors the number of distinct values (the string "> 1000" past
-- TD_LEAF_DISTINCT_MAX). A state spans calls, so a file read a slab at a time (HDF5) is
-- summarised as it streams.
local ffi = require("ffi")
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")

local C = lib.C
local header = tensor.handle

local M = {}

M.DISTINCT_MAX = tonumber(C.TD_LEAF_DISTINCT_MAX)
M.MORE = "> " .. M.DISTINCT_MAX

local State = {}
State.__index = State

-- An empty state for tensors of dtype (a name: "float32").
function M.new(dtype)
  local s = setmetatable({ dtype = dtype, c = ffi.new("td_leaf_stats") }, State)
  C.td_leaf_stats_init(s.c, dtypes.code(dtype))
  return s
end

-- Adds t's elements (t's dtype must be the state's).
function State:add(t)
  if t:dtype() ~= self.dtype then
    util.fail(("describe: a %s leaf's summary was given a %s tensor"):format(self.dtype, t:dtype()))
  end
  if C.td_leaf_stats_add(self.c, header(t)) ~= 0 then util.c_fail() end
  return self
end

-- The summary as a plain table (key: the leaf's name in a container, or nil).
function State:summary(key)
  local c = self.c
  local finite = tonumber(c.finite)
  local integral = not dtypes.is_floating(dtypes.code(self.dtype))
  local distinct
  if integral then distinct = c.distinct >= 0 and tonumber(c.distinct) or M.MORE end
  return {
    key = key, dtype = self.dtype, count = tonumber(c.count), nan = tonumber(c.nan), inf = tonumber(c.inf),
    min = c.min, max = c.max, mean = c.mean,
    std = finite > 1 and math.sqrt(c.m2 / (finite - 1)) or 0 / 0,
    distinct = distinct,
  }
end

-- Running summaries by key, in the order the keys first come, for containers read in
-- parts (an HDF5 file a slab of rows at a time, a lazy stack member by member). parts
-- names the parts in the message for a key whose dtype changes between them.
local Keyed = {}
Keyed.__index = Keyed

function M.keyed(parts)
  return (setmetatable({ parts = parts, states = {}, order = {} }, Keyed))
end

function Keyed:add(key, t)
  local s = self.states[key]
  if not s then
    s = M.new(t:dtype())
    self.states[key], self.order[#self.order + 1] = s, key
  elseif s.dtype ~= t:dtype() then
    util.fail(("describe: %s hold '%s' as %s and as %s"):format(self.parts, key, s.dtype, t:dtype()))
  end
  s:add(t)
end

-- The summaries (each with its key), in key order.
function Keyed:summaries()
  local rows = {}
  for i, k in ipairs(self.order) do rows[i] = self.states[k]:summary(k) end
  return rows
end

-- The summary of one tensor.
function M.of(t)
  return M.new(t:dtype()):add(t):summary()
end

-- A number as the table shows it: integers of integer leaves in full, others in 6
-- significant digits; "-" for what there is none of (the mean of no finite value).
local function cell(v, integral)
  if v ~= v then return "-" end
  if integral and v % 1 == 0 then return util.number_text(v) end
  return ("%.6g"):format(v)
end

local COLUMNS = { "dtype", "count", "mean", "std", "min", "max", "nan", "inf", "distinct" }

-- The summaries (an array of summary tables) as a text table, one row per leaf; keyed
-- rows get a first column of their keys.
function M.text(rows)
  local keyed = rows[1] and rows[1].key ~= nil
  local head = keyed and { "key" } or {}
  for _, c in ipairs(COLUMNS) do head[#head + 1] = c end
  local cells = { head }
  for _, r in ipairs(rows) do
    local integral = not dtypes.is_floating(dtypes.code(r.dtype))
    local line = keyed and { r.key } or {}
    for _, c in ipairs({ r.dtype, util.number_text(r.count), cell(r.mean), cell(r.std), cell(r.min, integral),
      cell(r.max, integral), util.number_text(r.nan), util.number_text(r.inf),
      r.distinct == nil and "-" or tostring(r.distinct) }) do
      line[#line + 1] = c
    end
    cells[#cells + 1] = line
  end
  local width = {}
  for _, line in ipairs(cells) do
    for i, s in ipairs(line) do width[i] = math.max(width[i] or 0, #s) end
  end
  local out = {}
  for n, line in ipairs(cells) do
    local parts = {}
    for i, s in ipairs(line) do
      -- the key and dtype columns read left to right, numbers line up on the right
      parts[i] = (i <= (keyed and 2 or 1)) and s .. (" "):rep(width[i] - #s) or (" "):rep(width[i] - #s) .. s
    end
    out[n] = (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  return (table.concat(out, "\n"))
end

return M
