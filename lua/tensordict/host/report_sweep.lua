-- host/report_sweep.lua: `tdflow report sweep.json`: the variants of a sweep (tdflow sweep's
-- summary: {recipe, out, metrics, variants = [{id, path, overrides, status, rows_in,
-- rows_out, seconds, metrics, error}]}) as a table with every metric, then a bar chart of
-- one metric (--metric, default the first) per variant, and with --png the same chart
-- drawn by gnuplot. Variants without the metric (failed, skipped) show "-" and no bar.
local util = require("tensordict.util")
local chart = require("tensordict.chart")
local progress = require("tensordict.host.progress")
local gnuplot = require("tensordict.host.gnuplot")

local M = {}

local function metric_text(v)
  if type(v) ~= "number" then return "-" end
  return ("%.6g"):format(v)
end

local function overrides_text(o)
  if type(o) ~= "table" then return "" end
  local keys = {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = ("%s=%s"):format(k, tostring(o[k])) end
  return (table.concat(keys, " "))
end

-- Lines of text in columns (the first left-aligned, the rest right-aligned but the last).
local function columns(grid)
  local width = {}
  for _, line in ipairs(grid) do
    for k, s in ipairs(line) do width[k] = math.max(width[k] or 0, #s) end
  end
  local out = {}
  for i, line in ipairs(grid) do
    local parts = {}
    for k, s in ipairs(line) do
      local pad = (" "):rep(width[k] - #s)
      parts[k] = (k == 1 or k == 2 or k == #line) and s .. pad or pad .. s
    end
    out[i] = (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  return out
end

local function png(doc, metric, labels, values, out)
  local data, lowest = {}, 0
  for i, l in ipairs(labels) do
    if values[i] < lowest then lowest = values[i] end
    data[i] = ('"%s" %s'):format(l:gsub('"', "'"), values[i] == values[i] and ("%.17g"):format(values[i]) or "NaN")
  end
  local body = ("set title %s noenhanced\nset ylabel %s noenhanced\nset style fill solid 0.8\nset boxwidth 0.7\n"
    .. "set grid ytics\n%sset xtics rotate by -30 noenhanced\nplot $DATA using 0:2:xticlabels(1) with boxes notitle\n")
    :format(gnuplot.quote(("%s per variant: %s"):format(metric, tostring(doc.recipe or "sweep"))),
      gnuplot.quote(metric), lowest >= 0 and "set yrange [0:*]\n" or "")
  -- (bars start at 0: a metric of positive values is not drawn from its smallest)
  gnuplot.png(out, body, data, "--png " .. out)
end

function M.lines(doc, path, metric, png_out)
  local metrics = {}
  for i, m in ipairs(doc.metrics) do metrics[i] = tostring(m) end
  if metric == nil then metric = metrics[1] end
  if metric == nil then util.fail(("report: %s: the sweep has no metrics to chart"):format(path)) end
  local known = false
  for _, m in ipairs(metrics) do known = known or m == metric end
  if not known then
    util.fail(("report: --metric %s: the sweep has no such metric (metrics: %s)%s"):format(metric,
      table.concat(metrics, ", "), util.did_you_mean(metric, metrics)))
  end
  local grid = { { "variant", "status", "rows out", "seconds" } }
  for _, m in ipairs(metrics) do grid[1][#grid[1] + 1] = m end
  grid[1][#grid[1] + 1] = "overrides"
  local labels, values, texts, failures = {}, {}, {}, {}
  for i, v in ipairs(doc.variants) do
    if type(v) ~= "table" then util.fail(("report: %s: variant %d is not an object"):format(path, i)) end
    local id, ms = tostring(v.id or i), type(v.metrics) == "table" and v.metrics or {}
    local line = { id, tostring(v.status or "?"), type(v.rows_out) == "number" and progress.grouped(v.rows_out) or "-",
      type(v.seconds) == "number" and ("%.3f"):format(v.seconds) or "-" }
    for _, m in ipairs(metrics) do line[#line + 1] = metric_text(ms[m]) end
    line[#line + 1] = overrides_text(v.overrides)
    grid[#grid + 1] = line
    labels[i], values[i] = id, type(ms[metric]) == "number" and ms[metric] or 0 / 0
    texts[i] = type(ms[metric]) == "number" and metric_text(ms[metric]) or ("- (" .. tostring(v.status or "?") .. ")")
    if v.error then failures[#failures + 1] = ("%s: %s"):format(id, tostring(v.error)) end
  end
  local lines = { ("%s: sweep of %s, %d variants"):format(path, tostring(doc.recipe or "?"), #doc.variants) }
  for _, l in ipairs(columns(grid)) do lines[#lines + 1] = l end
  for _, l in ipairs(failures) do lines[#lines + 1] = l end
  lines[#lines + 1] = ""
  lines[#lines + 1] = metric .. " per variant:"
  for _, l in ipairs(chart.bars(labels, values, texts)) do lines[#lines + 1] = l end
  if png_out then png(doc, metric, labels, values, png_out) end
  return lines
end

return M
