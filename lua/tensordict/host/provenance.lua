-- host/provenance.lua: what tdflow records of a run beside flow.run's part
-- (flow/provenance.lua: library, host, seed, workers, times, status, rows, per-node
-- report): the command, the recipe as read (before --set and $vars), the overrides as
-- given, the options that changed it, and the effective recipe (after both). The record
-- goes into --report and, committed with the rows, into the output folder as
-- %provenance.json; `tdflow inspect` shows it, `tdflow rerun` runs it again and a
-- resume checks that it continues the same run.
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local core = require("tensordict.flow.core")
local flow_provenance = require("tensordict.flow.provenance")
local MemmapSink = require("tensordict.flow").MemmapSink

local M = {}

M.FILE = MemmapSink.PROVENANCE_FILE

-- A recipe value as plain data: functions by their registered names (what a recipe
-- writes), what has no plain form as "<...>" text and its path in unplain.
local function plain(v, where, unplain)
  local t = type(v)
  if t == "function" then
    local name = core.function_name(v)
    if name then return name end
    unplain[#unplain + 1] = where
    return "<an unnamed function>"
  end
  if t == "table" and not core.is_node(v) and (getmetatable(v) == nil or getmetatable(v) == json.array_mt
    or getmetatable(v) == json.object_mt) then
    local out = setmetatable({}, getmetatable(v))
    for k, x in pairs(v) do
      out[k] = plain(x, type(k) == "number" and ("%s[%d]"):format(where, k) or (where == "" and k or where .. "." .. k),
        unplain)
    end
    return out
  end
  if t == "string" or t == "boolean" or t == "number" then return flow_provenance.plain(v) end
  unplain[#unplain + 1] = where
  return flow_provenance.plain(v)
end

-- The host's part of a run's record. r: the prepared recipe (recipe.prepare keeps the
-- document as read and the effective one); opts: command (the argv), set (the
-- overrides as given), seed, workers, checkpoint (the options given), rerun_of.
function M.record(r, opts)
  local unplain = {}
  local rec = {
    command = opts.command,
    recipe_file = r.path,
    recipe = plain(r.document, "", unplain),
    overrides = opts.set or {},
    options = { seed = opts.seed, workers = opts.workers, checkpoint = opts.checkpoint },
    effective = plain(r.effective, "", {}), -- its unplain places are the recipe's
    rerun_of = opts.rerun_of,
  }
  if #unplain > 0 then rec.unplain = unplain end
  return rec
end

-- The first place where plain values a and b differ ("steps[4].size"), and both values
-- as JSON; nil when they are equal.
local function first_difference(a, b, where)
  if type(a) == "table" and type(b) == "table" then
    local keys, seen = {}, {}
    for k in pairs(a) do keys[#keys + 1], seen[k] = k, true end
    for k in pairs(b) do if not seen[k] then keys[#keys + 1] = k end end
    table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
    for _, k in ipairs(keys) do
      local sub = type(k) == "number" and ("%s[%d]"):format(where, k) or (where == "" and k or where .. "." .. k)
      local p, x, y = first_difference(a[k], b[k], sub)
      if p then return p, x, y end
    end
    return nil
  end
  local function text(v) return v == nil and "nothing" or json.encode(v) end
  if text(a) ~= text(b) then return where, text(a), text(b) end
  return nil
end

-- Nil when saved (a checkpoint's record) and rec are of the same run; else what
-- differs. Worker counts, the checkpoint interval and existsok may change: the bytes
-- do not (the seed is flow.run's to compare).
function M.difference(saved, rec)
  if type(saved) ~= "table" or type(saved.effective) ~= "table" then
    return "the checkpoint has no recipe record (it was not made by tdflow run)"
  end
  local function what_counts(t)
    local out = { source = t.source, steps = t.steps, batch_size = t.batch_size }
    if type(t.sink) == "table" then
      local sink = {}
      for k, v in pairs(t.sink) do sink[k] = v end
      sink.checkpoint, sink.existsok, sink.workers = nil, nil, nil
      out.sink = sink
    end
    return out
  end
  local where, there, here = first_difference(what_counts(saved.effective), what_counts(rec.effective), "")
  if where then
    return ("the recipe differs from the checkpointed run's at %s: %s there, %s here"):format(where, there, here)
  end
  return nil
end

-- The record in folder path (a run's output), or nil and why.
function M.read(path)
  local f = io.open(path .. "/" .. M.FILE, "rb")
  if not f then
    if not fs.is_dir(path) then return nil, ("'%s' is not a folder"):format(path) end
    return nil, ("'%s' has no provenance record (%s): it was not written by tdflow run"):format(path, M.FILE)
  end
  local text = f:read("*a")
  f:close()
  local ok, rec = pcall(json.decode, text)
  if not ok or type(rec) ~= "table" then
    return nil, ("%s/%s does not read as JSON: %s"):format(path, M.FILE, tostring(rec):gsub("^.-json: ", ""))
  end
  return rec
end

local function list_text(list)
  local parts = {}
  for i, x in ipairs(list or {}) do parts[i] = tostring(x) end
  return (table.concat(parts, " "))
end

local function rows_text(n) return n and require("tensordict.host.progress").grouped(n) or "?" end

-- The record as the lines `tdflow inspect` shows below the tree.
function M.text(rec)
  local lines = { "provenance:" }
  local function add(fmt, ...) lines[#lines + 1] = "  " .. fmt:format(...) end
  if rec.command then
    add("command   %s", type(rec.command) == "table" and list_text(rec.command) or tostring(rec.command))
  end
  if rec.recipe_file then add("recipe    %s", rec.recipe_file) end
  if rec.overrides and #rec.overrides > 0 then add("overrides %s", list_text(rec.overrides)) end
  if rec.rerun_of then add("rerun of  %s", rec.rerun_of) end
  add("seed %s, workers %s", tostring(rec.seed), tostring(rec.workers or "default"))
  local lib = rec.library or {}
  add("library   tensordict %s (ABI %s), commit %s%s", tostring(lib.version), tostring(lib.abi),
    lib.commit or "unknown", lib.branch and (" (" .. lib.branch .. ")") or "")
  local host = rec.host or {}
  add("host      %s (pid %s)", tostring(host.name), tostring(host.pid))
  add("ran       %s -> %s, %s (%.3f s%s)", tostring(rec.started), tostring(rec.finished), tostring(rec.status),
    rec.seconds or 0, rec.resumed and " in the last process" or "")
  for _, r in ipairs(rec.resumed or {}) do
    add("resumed   %s at row %s on %s", tostring(r.at), rows_text(r.rows), tostring(r.host))
  end
  add("rows      %s in, %s out", rows_text(rec.rows_in), rows_text(rec.rows_out))
  for _, n in ipairs(rec.nodes or {}) do
    add("  %-20s %-22s %9.3f s %13s in %13s out", tostring(n.where), tostring(n.type), n.seconds or 0,
      rows_text(n.rows_in), rows_text(n.rows_out))
  end
  return (table.concat(lines, "\n"))
end

return M
