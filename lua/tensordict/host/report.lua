-- host/report.lua: what tdflow prints after a run: per node (and the source and the
-- sink) its share of the time, batches and rows in and out, and throughput; and the
-- same as a JSON document for --report, with the run's provenance record (what made
-- it: host/provenance.lua) and its status.
local json = require("tensordict.json")
local progress = require("tensordict.host.progress")
local flow_provenance = require("tensordict.flow.provenance")
local metrics = require("tensordict.host.metrics")

local M = {}

-- rows: the profile entries ({where, type, seconds, batches_in, rows_in, batches_out,
-- rows_out}), with the source's and sink's first and last. total: the run's seconds.
function M.build(info)
  local rows, total = info.rows, info.seconds
  local busy = 0
  for _, r in ipairs(rows) do busy = busy + r.seconds end
  for _, r in ipairs(rows) do
    r.share = busy > 0 and r.seconds / busy or 0
    r.rows_per_second = r.seconds > 0 and r.rows_in / r.seconds or nil
  end
  local record = info.provenance
  return {
    recipe = info.recipe, seed = info.seed, workers = info.workers,
    seconds = total, rows_in = info.rows_in, rows_out = info.rows_out,
    rows_per_second = total > 0 and info.rows_in / total or 0,
    nodes = rows, result = info.result,
    -- "ok", "failed" or "interrupted"; error: the message of a run that did not finish
    status = info.status or (record and record.status) or "ok",
    error = info.error or (record and record.error),
    provenance = record and flow_provenance.plain(record),
    metrics = info.metrics, -- the recipe's metrics block's values (host/metrics.lua)
  }
end

-- The report of a run from its provenance record alone: what a failed or interrupted
-- run leaves (flow.run fills the record, r.provenance, whatever the outcome; with
-- profiling its nodes too), with its status and error.
function M.of_record(record)
  local nodes = {}
  for i, n in ipairs(record.nodes or {}) do
    local copy = {}
    for k, v in pairs(n) do copy[k] = v end
    nodes[i] = copy
  end
  return M.build({ rows = nodes, seconds = record.seconds or 0, rows_in = record.rows_in or 0,
    rows_out = record.rows_out or 0, recipe = record.recipe_file, seed = record.seed, workers = record.workers,
    provenance = record })
end

local function rate(x)
  if not x then return "-" end
  if x >= 1e6 then return ("%.2fM"):format(x / 1e6) end
  if x >= 1e3 then return ("%.1fk"):format(x / 1e3) end
  return ("%.0f"):format(x)
end

-- The report as a text table.
function M.text(report)
  local lines = {}
  local fmt = "%-20s %-22s %9s %6s %15s %13s %13s %9s"
  lines[1] = fmt:format("step", "type", "time", "share", "batches in/out", "rows in", "rows out", "rows/s")
  for _, r in ipairs(report.nodes) do
    lines[#lines + 1] = fmt:format(r.where, r.type, ("%.3f s"):format(r.seconds), ("%.1f%%"):format(r.share * 100),
      ("%d/%d"):format(r.batches_in, r.batches_out), progress.grouped(r.rows_in), progress.grouped(r.rows_out),
      rate(r.rows_per_second))
  end
  for _, r in ipairs(report.nodes) do -- what nodes counted besides rows, by name
    local names = {}
    for k, v in pairs(r.counts or {}) do
      if v ~= 0 then names[#names + 1] = k end -- the JSON keeps the zeros
    end
    table.sort(names)
    for i, k in ipairs(names) do names[i] = ("%s: %s"):format(k:gsub("_", " "), progress.grouped(r.counts[k])) end
    if #names > 0 then lines[#lines + 1] = ("%s %s: %s"):format(r.where, r.type, table.concat(names, ", ")) end
  end
  lines[#lines + 1] = ("total: %s rows in, %s rows out in %.3f s (%s rows/s)"):format(progress.grouped(report.rows_in),
    progress.grouped(report.rows_out), report.seconds, rate(report.rows_per_second))
  if report.metrics then lines[#lines + 1] = "metrics: " .. metrics.text(report.metrics) end
  return (table.concat(lines, "\n"))
end

function M.json(report)
  local plain = {}
  for k, v in pairs(report) do
    if k ~= "result" then plain[k] = v end
  end
  return json.encode(plain)
end

return M
