-- tensor/hist.lua: T.hist(t [, opts]), a histogram of a tensor's values drawn in the
-- terminal. The counts are histc's (torch's bins: equal widths, the last bin closed on
-- the right) over the finite values' range, found first by leaf_stats so that NaN and
-- infinities (counted apart) cannot stretch it; bool and integer tensors are counted as
-- float64 (a copy: histc counts floating tensors).
-- opts: bins (default 10), min and max (the range; default the finite values'), width
-- (cells of the longest bar). Returns {counts =, edges = (bins + 1 numbers), total =,
-- nan =, inf =, outside =, dtype =}, which prints as the chart.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")
local leaf_stats = require("tensordict.tensor.leaf_stats")
local chart = require("tensordict.chart")

local M = {}

local OPTIONS = { bins = "number", min = "number", max = "number", width = "number" }

local function edge_text(v) return ("%.4g"):format(v) end

local function hist_text(h)
  local labels, texts = {}, {}
  for i = 1, #h.counts do
    local close = i == #h.counts and "]" or ")"
    labels[i] = ("[%s, %s%s"):format(edge_text(h.edges[i]), edge_text(h.edges[i + 1]), close)
    texts[i] = util.number_text(h.counts[i])
  end
  local left = {}
  if h.nan > 0 then left[#left + 1] = util.number_text(h.nan) .. " NaN" end
  if h.inf > 0 then left[#left + 1] = util.number_text(h.inf) .. " inf" end
  if h.outside > 0 then left[#left + 1] = util.number_text(h.outside) .. " outside the range" end
  local title = ("%s values (%s), %d bins%s"):format(util.number_text(h.total), h.dtype, #h.counts,
    #left > 0 and ("; not counted: " .. table.concat(left, ", ")) or "")
  local lines = chart.bars(labels, h.counts, texts, { width = h.width })
  table.insert(lines, 1, title)
  return (table.concat(lines, "\n"))
end

local MT = { __tostring = hist_text }

local function count_arg(name, v, min)
  if not (util.is_int(v) and v >= min and v <= 1e6) then
    util.fail(("hist: %s must be an integer in %d..1000000, got %s"):format(name, min, util.describe(v)))
  end
  return v
end

function M.hist(t, opts)
  if not tensor.is_tensor(t) then
    util.fail(("hist: expected a tensor, got %s"):format(util.describe(t)))
  end
  opts = util.options("hist", opts, OPTIONS)
  local bins = count_arg("bins", opts.bins or 10, 1)
  local width = count_arg("width", opts.width or chart.WIDTH, 1)
  local s = leaf_stats.of(t)
  local lo, hi = opts.min or s.min, opts.max or s.max
  if lo ~= lo then lo, hi = 0, 0 end -- no finite value: every bin is empty
  if not (lo <= hi) or lo - lo ~= 0 or hi - hi ~= 0 then
    util.fail(("hist: the range must be finite with min <= max, got [%s, %s]"):format(util.number_text(lo),
      util.number_text(hi)))
  end
  -- histc takes equal ends as "the tensor's own extremes", which NaN and inf would make
  -- NaN; one value alone gets a bin of width 1 around it, as torch widens it
  if lo == hi then lo, hi = lo - 0.5, hi + 0.5 end
  local code = dtypes.code(t:dtype())
  local x = dtypes.is_floating(code) and t or t:to("float64")
  local counts
  if hi - lo <= dtypes.max_value(dtypes.is_floating(code) and code or dtypes.code("float64")) then
    counts = x:histc(bins, lo, hi)
  else
    -- a range wider than the dtype holds (-3e38 .. 3e38 in float32): histc's width would
    -- be inf; a quarter of the values in float64 fall in the same bins
    counts = x:to("float64"):mul(0.25):histc(bins, lo / 4, hi / 4)
  end
  counts = counts:to("float64")
  local h = setmetatable({ counts = {}, edges = {}, total = s.count, nan = s.nan, inf = s.inf,
    dtype = t:dtype(), width = width }, MT)
  local counted = 0
  for i = 1, bins do
    h.counts[i] = counts[i]
    counted = counted + h.counts[i]
  end
  for i = 0, bins do
    local e = lo + (hi - lo) * i / bins
    h.edges[i + 1] = e - e == 0 and e or lo * (1 - i / bins) + hi * (i / bins) -- (hi - lo overflows)
  end
  h.outside = s.count - s.nan - s.inf - counted
  return h
end

return M
