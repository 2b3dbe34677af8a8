-- flow/provenance.lua: the record of what made a run (flow.run's provenance option;
-- docs/flow.md, "Provenance"). The caller hands flow.run a table, with fields of its own
-- (tdflow: the recipe as read, the overrides, the effective recipe); the run adds what
-- it knows: the library (version, ABI, commit), the host, the seed and worker count,
-- start and end times, the status (ok, failed, interrupted) with the error, the rows
-- and the per-node report. A sink that keeps files (MemmapSink) commits the record with
-- its output; a checkpoint carries it, so a resumed run's record starts when the first
-- run started and lists each resume.
local util = require("tensordict.util")
local json = require("tensordict.json")
local about = require("tensordict.about")

local M = {}

M.FORMAT = "tensordict.provenance/1"

-- Wall-clock time as ISO 8601 UTC with milliseconds.
function M.now_text()
  local s, ns = util.wall_clock()
  return os.date("!%Y-%m-%dT%H:%M:%S", s) .. (".%03dZ"):format(math.floor(ns / 1e6))
end

-- A run begins: record gets the library, the host, the settings and the start time.
function M.start(record, seed, workers)
  record.format = M.FORMAT
  local lib = about.library()
  record.library = { version = lib.version, abi = lib.abi, commit = lib.commit, branch = lib.branch,
    commit_from = lib.commit_from }
  record.host = about.host()
  record.seed, record.workers = seed, workers
  record.started = M.now_text()
  record.status = "running"
end

-- "interrupted" for Ctrl-C and the signals hosts turn into errors ({interrupted = true},
-- or a message ending in "interrupted"); "failed" for anything else.
function M.status_of(err)
  if type(err) == "table" and err.interrupted then return "interrupted" end
  local text = tostring(err)
  if text:match("interrupted%s*%b()$") or text:match("interrupted!?$") then return "interrupted" end
  return "failed"
end

local NODE_FIELDS = { "where", "type", "seconds", "batches_in", "rows_in", "batches_out", "rows_out", "counts" }

-- The run ends (or reaches its commit, for the copy the sink keeps): status, error,
-- end time, rows, and the per-node report when the run was profiled.
function M.finish(record, status, err, summary, nodes)
  record.status = status
  if err ~= nil then
    record.error = type(err) == "table" and err.interrupted and "interrupted" or tostring(err)
  else
    record.error = nil
  end
  record.finished = M.now_text()
  record.seconds = summary.seconds
  record.batches_in, record.rows_in = summary.batches_in, summary.rows_in
  record.batches_out, record.rows_out = summary.batches_out, summary.rows_out
  if nodes then
    local list = {}
    for i, n in ipairs(nodes) do
      local entry = {}
      for _, k in ipairs(NODE_FIELDS) do entry[k] = n[k] end
      list[i] = entry
    end
    record.nodes = list
  end
end

-- A plain deep copy of v: what JSON can hold (functions and other Lua objects as the
-- text "<function>"..., which a rerun refuses to build).
local function plain(v, seen)
  local t = type(v)
  if t == "string" or t == "boolean" then return v end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return (tostring(v)) end
    return v
  end
  local mt = t == "table" and getmetatable(v)
  if t == "table" and (mt == nil or mt == json.object_mt or mt == json.array_mt) then
    if seen[v] then return "<a circular table>" end
    seen[v] = true
    local out = setmetatable({}, mt)
    for k, x in pairs(v) do
      if type(k) == "string" or type(k) == "number" then out[k] = plain(x, seen) end
    end
    seen[v] = nil
    return out
  end
  return ("<%s>"):format(util.describe(v))
end
M.plain = function(v) return plain(v, {}) end

-- The record as JSON text (what the sink commits and --report holds).
function M.json(record)
  return json.encode(M.plain(record)) .. "\n"
end

-- What a checkpoint keeps of the record: all of it so far, plain.
function M.resumable(record) return M.plain(record) end

-- A resumed run: the first run's start and resumes are kept, and this resume added
-- (when, at which row of the output).
function M.resumed(record, saved, rows)
  local resumes = {}
  if type(saved) == "table" then
    record.started = saved.started or record.started
    for i, r in ipairs(saved.resumed or {}) do resumes[i] = r end
  end
  resumes[#resumes + 1] = { at = M.now_text(), rows = rows, host = record.host and record.host.name }
  record.resumed = resumes
end

return M
