-- host/sweep_summary.lua: what `tdflow sweep` says at the end: a table (one row per
-- variant: its overrides, status, rows in and out, time and every metric), and the same
-- as OUT/sweep.json and OUT/sweep.csv, each committed whole (a temporary sibling,
-- renamed). sweep.json's shape is fixed (`tdflow report` reads it):
--   {"recipe": PATH, "out": OUT, "metrics": [NAME, ...], "variants": [{"id", "path",
--    "overrides": {PATH: value}, "status": "ok"|"failed"|"skipped"|"interrupted",
--    "rows_in", "rows_out", "seconds", "metrics": {NAME: number}, "error" (failed only)}]}
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local util = require("tensordict.util")
local progress = require("tensordict.host.progress")

local M = {}

M.JSON, M.CSV = "sweep.json", "sweep.csv"

-- The override paths (in order of first appearance) and metric names (sorted) of rows.
local function columns(rows)
  local paths, seen, names, seen_name = {}, {}, {}, {}
  for _, row in ipairs(rows) do
    local own = {}
    for path in pairs(row.overrides) do own[#own + 1] = path end
    table.sort(own)
    for _, p in ipairs(own) do
      if not seen[p] then paths[#paths + 1], seen[p] = p, true end
    end
    for name in pairs(row.metrics or {}) do
      if not seen_name[name] then names[#names + 1], seen_name[name] = name, true end
    end
  end
  table.sort(names)
  return paths, names
end

local function value_text(v)
  if v == nil then return "" end
  if v == json.null then return "null" end
  if type(v) == "number" then return util.number_text(v) end
  if type(v) == "string" then return v end
  return json.encode(v)
end

-- The document of sweep.json.
function M.document(recipe, out, rows)
  local _, names = columns(rows)
  local variants = {}
  for i, row in ipairs(rows) do
    variants[i] = { id = row.id, path = row.path, overrides = row.overrides, status = row.status,
      rows_in = row.rows_in, rows_out = row.rows_out, seconds = row.seconds,
      metrics = row.metrics or setmetatable({}, json.object_mt), error = row.error }
  end
  return { recipe = recipe, out = out, metrics = setmetatable(names, json.array_mt), variants = variants }
end

local function csv_field(s)
  if s:find('[,"\n\r]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- The text of sweep.csv: id, path, one column per override path, status, rows_in,
-- rows_out, seconds, one column per metric, error.
function M.csv(rows)
  local paths, names = columns(rows)
  local header = { "id", "path" }
  for _, p in ipairs(paths) do header[#header + 1] = p end
  for _, h in ipairs({ "status", "rows_in", "rows_out", "seconds" }) do header[#header + 1] = h end
  for _, n in ipairs(names) do header[#header + 1] = n end
  header[#header + 1] = "error"
  local lines = {}
  local function line(fields)
    for i, f in ipairs(fields) do fields[i] = csv_field(f) end
    lines[#lines + 1] = table.concat(fields, ",")
  end
  line(header)
  for _, row in ipairs(rows) do
    local f = { row.id, row.path }
    for _, p in ipairs(paths) do f[#f + 1] = value_text(row.overrides[p]) end
    for _, v in ipairs({ row.status, row.rows_in, row.rows_out, row.seconds }) do f[#f + 1] = value_text(v) end
    for _, n in ipairs(names) do f[#f + 1] = value_text((row.metrics or {})[n]) end
    f[#f + 1] = row.error or ""
    line(f)
  end
  return table.concat(lines, "\n") .. "\n"
end

-- Writes OUT/sweep.json and OUT/sweep.csv; true, or nil and why.
function M.write(out, recipe, rows)
  local ok, why = fs.write_atomic(out .. "/" .. M.JSON, json.encode(M.document(recipe, out, rows)) .. "\n")
  if ok then ok, why = fs.write_atomic(out .. "/" .. M.CSV, M.csv(rows)) end
  return ok, why
end

-- The table printed at the end.
function M.table_text(rows)
  local paths, names = columns(rows)
  local header = {}
  for _, p in ipairs(paths) do header[#header + 1] = p end
  for _, h in ipairs({ "status", "rows in", "rows out", "time" }) do header[#header + 1] = h end
  for _, n in ipairs(names) do header[#header + 1] = n end
  local body = {}
  for i, row in ipairs(rows) do
    local f = {}
    for _, p in ipairs(paths) do f[#f + 1] = value_text(row.overrides[p]) end
    f[#f + 1] = row.status
    f[#f + 1] = progress.grouped(row.rows_in)
    f[#f + 1] = progress.grouped(row.rows_out)
    f[#f + 1] = ("%.2f s"):format(row.seconds)
    for _, n in ipairs(names) do
      local v = (row.metrics or {})[n]
      f[#f + 1] = v == nil and "" or v == json.null and "-" or ("%.6g"):format(v)
    end
    body[i] = f
  end
  local width = {}
  for j, h in ipairs(header) do
    width[j] = #h
    for _, f in ipairs(body) do width[j] = math.max(width[j], #f[j]) end
  end
  local npaths = #paths
  local function fmt(f)
    local cells = {}
    for j, cell in ipairs(f) do
      -- overrides and the status to the left, numbers to the right
      cells[j] = j <= npaths + 1 and cell .. (" "):rep(width[j] - #cell) or (" "):rep(width[j] - #cell) .. cell
    end
    return (table.concat(cells, "  "):gsub("%s+$", ""))
  end
  local lines = { fmt(header) }
  for _, f in ipairs(body) do lines[#lines + 1] = fmt(f) end
  return (table.concat(lines, "\n"))
end

-- "tdflow: sweep: 8 variants: 7 ok, 1 failed (OUT/sweep.json, OUT/sweep.csv)".
function M.counts_text(rows, out)
  local counts, order = {}, { "ok", "skipped", "failed", "interrupted" }
  for _, row in ipairs(rows) do counts[row.status] = (counts[row.status] or 0) + 1 end
  local parts = {}
  for _, s in ipairs(order) do
    if counts[s] then parts[#parts + 1] = ("%d %s"):format(counts[s], s) end
  end
  return ("tdflow: sweep: %d variant%s: %s (%s/%s, %s/%s)"):format(#rows, #rows == 1 and "" or "s",
    table.concat(parts, ", "), out, M.JSON, out, M.CSV)
end

-- The last line of a variant's log that is not empty, without "tdflow: " (what a child
-- that wrote no report said last).
function M.last_line(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local last
  for line in f:lines() do
    if line:match("%S") then last = line end
  end
  f:close()
  return last and (last:gsub("^tdflow: ", ""))
end

return M
