-- tensor/csv.lua: the CSV reader (core/store/csv.c) for Lua: a file's numeric columns
-- read straight into tensors, a batch of rows at a time. flow/csv.lua's CsvSource maps
-- columns to leaves and batches to TensorDicts on top of it. Failures come back as
-- (nil, message), the C reader's message without its "csv: " prefix, for the caller to
-- raise in its own name.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local tensor = require("tensordict.tensor.core")

local header = tensor.handle

local M = {}

local Reader = {}
Reader.__index = Reader

local function c_message() return (ffi.string(C.td_last_error()):gsub("^csv: ", "")) end

-- A reader of path (delimiter: one character; header: the first record names the
-- columns), closed by the GC unless closed first; or nil and the message.
function M.open(path, delimiter, has_header)
  local r = C.td_csv_open(path, delimiter:byte(), has_header and 1 or 0)
  if r == nil then return nil, c_message() end
  return (setmetatable({ r = ffi.gc(r, C.td_csv_close) }, Reader))
end

function Reader:close()
  local r = self.r
  if r ~= nil then
    self.r = nil
    ffi.gc(r, nil)
    C.td_csv_close(r)
  end
end

-- The header's names, one per column (false where the file has no header).
function Reader:column_names()
  local names = {}
  for c = 1, C.td_csv_num_columns(self.r) do
    local nm = C.td_csv_column_name_borrow(self.r, c - 1)
    names[c] = nm ~= nil and ffi.string(nm)
  end
  return names
end

-- Data rows in the whole file (a scan of its own; the reader does not move).
function Reader:count_rows()
  local n = C.td_csv_count_rows(self.r)
  if n < 0 then return nil, c_message() end
  return (tonumber(n))
end

-- Moves past n data rows without parsing them.
function Reader:skip_rows(n)
  if C.td_csv_skip_rows(self.r, n) < 0 then return nil, c_message() end
  return true
end

-- Where each field read goes, made once for many reads: dests[j] = {column = 0-based
-- column of the file, offset = the element of a row of its tensor it fills}.
function M.plan(dests)
  local n = #dests
  local p = { n = n, cols = ffi.new("int32_t[?]", math.max(n, 1)),
              outs = ffi.new("td_tensor *[?]", math.max(n, 1)),
              offs = ffi.new("int64_t[?]", math.max(n, 1)) }
  for j, d in ipairs(dests) do p.cols[j - 1], p.offs[j - 1] = d.column, d.offset end
  return p
end

-- Reads up to max_rows records, field plan's j-th into row k of outs[j] (a tensor of
-- max_rows rows or more). The rows read (0 at the end), or nil and the message.
function Reader:read(max_rows, plan, outs)
  for j = 1, plan.n do plan.outs[j - 1] = header(outs[j]) end
  local n = C.td_csv_read(self.r, max_rows, plan.n, plan.cols, plan.outs, plan.offs)
  if n < 0 then return nil, c_message() end
  return (tonumber(n))
end

return M
