-- host/report_command.lua: `tdflow report FILE [--metric NAME] [--png OUT.png]`. FILE is a
-- run report (`tdflow run --report FILE`: host/report.lua; it has "nodes") or a sweep
-- summary (`tdflow sweep`'s sweep.json: it has "variants"; host/report_sweep.lua). A run
-- report prints each step's share of the run's time as a bar chart, and with --png draws
-- it with gnuplot; anything else is refused naming what FILE is not.
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local util = require("tensordict.util")
local chart = require("tensordict.chart")
local progress = require("tensordict.host.progress")
local gnuplot = require("tensordict.host.gnuplot")
local report_sweep = require("tensordict.host.report_sweep")

local M = {}

function M.add_command(p)
  local r = p:command("report", "Chart a run report (tdflow run --report FILE) or a sweep summary (sweep.json).")
  r:argument("file", "A run report's JSON or a sweep's sweep.json.")
  r:option("--metric", "For a sweep: the metric to chart (default: the first)."):argname("NAME")
  r:option("--png", "Also draw the chart with gnuplot into OUT.png."):argname("OUT.png")
end

local NEITHER = "is neither a run report (tdflow run --report FILE) nor a sweep summary (tdflow sweep's sweep.json)"

-- The decoded document at path, and which kind it is ("run" or "sweep").
local function read(path)
  if fs.is_dir(path) then util.fail(("report: %s is a folder, not a file"):format(path)) end
  local f = io.open(path, "rb")
  if not f then util.fail(("report: %s: no such file"):format(path)) end
  local text = f:read("*a")
  f:close()
  local ok, doc = pcall(json.decode, text)
  if not ok then util.fail(("report: %s %s (not JSON: %s)"):format(path, NEITHER, doc)) end
  if type(doc) == "table" and type(doc.variants) == "table" and type(doc.metrics) == "table" then
    return doc, "sweep"
  end
  if type(doc) == "table" and type(doc.nodes) == "table" and type(doc.seconds) == "number" then
    for i, n in ipairs(doc.nodes) do
      if type(n) ~= "table" or type(n.where) ~= "string" or type(n.seconds) ~= "number" then
        util.fail(("report: %s: node %d has no 'where' and 'seconds'"):format(path, i))
      end
    end
    return doc, "run"
  end
  util.fail(("report: %s %s (a JSON %s without %s)"):format(path, NEITHER, json.is_array(doc) and "array"
    or type(doc) == "table" and "object" or type(doc), "'nodes' and 'seconds', or 'variants' and 'metrics'"))
end

local function share_of(n, busy)
  if type(n.share) == "number" then return n.share end
  return busy > 0 and n.seconds / busy or 0
end

-- A run report's text: a line on the run, then a bar per step of its share of the time.
local function run_text(rep, path)
  local busy = 0
  for _, n in ipairs(rep.nodes) do busy = busy + n.seconds end
  local labels, values, texts = {}, {}, {}
  for i, n in ipairs(rep.nodes) do
    labels[i] = n.type and ("%s (%s)"):format(n.where, n.type) or n.where
    values[i] = share_of(n, busy)
    texts[i] = ("%5.1f%%  %.3f s"):format(values[i] * 100, n.seconds)
  end
  local lines = chart.bars(labels, values, texts)
  table.insert(lines, 1, ("%s: run of %s, %s, %s rows in, %s rows out in %.3f s; share of the time per step:")
    :format(path, tostring(rep.recipe or "?"), tostring(rep.status or "ok"), progress.grouped(rep.rows_in or 0),
      progress.grouped(rep.rows_out or 0), rep.seconds))
  if rep.error then lines[#lines + 1] = "error: " .. tostring(rep.error) end
  return lines, labels, values
end

local function run_png(labels, values, out, path)
  local data = {}
  for i, l in ipairs(labels) do data[i] = ('"%s" %.17g'):format(l:gsub('"', "'"), values[i] * 100) end
  local body = ("set title %s noenhanced\nset ylabel 'share of the time (%%)'\nset style fill solid 0.8\n"
    .. "set boxwidth 0.7\nset grid ytics\nset yrange [0:*]\nset xtics rotate by -30 noenhanced\n"
    .. "plot $DATA using 0:2:xticlabels(1) with boxes notitle\n"):format(gnuplot.quote("time per step: " .. path))
  gnuplot.png(out, body, data, "--png " .. out)
end

-- tdflow report's handler: the exit code (errors raise; tdflow prints them).
function M.command(args, out)
  local doc, kind = read(args.file)
  local lines
  if kind == "sweep" then
    lines = report_sweep.lines(doc, args.file, args.metric, args.png)
  else
    if args.metric then
      util.fail(("report: --metric is for a sweep summary; %s is a run report"):format(args.file))
    end
    local labels, values
    lines, labels, values = run_text(doc, args.file)
    if args.png then run_png(labels, values, args.png, args.file) end
  end
  if args.png then lines[#lines + 1] = "wrote " .. args.png end
  out:write(table.concat(lines, "\n"), "\n")
  return 0
end

return M
