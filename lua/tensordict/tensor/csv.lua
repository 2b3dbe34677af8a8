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

local BAD = { error = C.TD_CSV_BAD_ERROR, nan = C.TD_CSV_BAD_MISSING, skip_row = C.TD_CSV_BAD_SKIP_ROW }

-- A reader of path, closed by the GC unless closed first; or nil and the message.
-- opts: delimiter (one character), header (the first record names the columns),
-- comment (nil or one character), on_bad_cell ("error", "nan", "skip_row"),
-- na_values (a list of texts), skip_lines (a list of 1-based line numbers).
function M.open(path, opts)
  local na, skip = opts.na_values or {}, opts.skip_lines or {}
  local o = ffi.new("td_csv_options")
  o.delimiter, o.has_header = opts.delimiter:byte(), opts.header and 1 or 0
  o.comment = opts.comment and opts.comment:byte() or 0
  o.on_bad_cell = BAD[opts.on_bad_cell or "error"]
  -- the texts stay referenced until the open returns (C copies them)
  local na_c = ffi.new("const char *[?]", math.max(#na, 1), na)
  o.n_na, o.na_values = #na, na_c
  local skip_c = ffi.new("int64_t[?]", math.max(#skip, 1), skip)
  o.n_skip_lines, o.skip_lines = #skip, skip_c
  local r = C.td_csv_open_opts(path, o)
  if r == nil then return nil, c_message() end
  return (setmetatable({ r = ffi.gc(r, C.td_csv_close) }, Reader))
end

-- text fills the missing cells of column col (1-based), parsed for its dtype when used.
function Reader:set_default(col, text)
  if C.td_csv_set_default(self.r, col - 1, text) ~= 0 then return nil, c_message() end
  return true
end

-- Reads take at most n more records (stored or dropped).
function Reader:limit_records(n) C.td_csv_limit_records(self.r, n) end

-- Counts since open: records consumed, missing cells stored (NaN or default), bad cells
-- replaced, rows dropped.
function Reader:counts()
  local out = ffi.new("int64_t[?]", C.TD_CSV_NCOUNTS)
  C.td_csv_counts(self.r, out)
  return { records = tonumber(out[C.TD_CSV_COUNT_RECORDS]), missing = tonumber(out[C.TD_CSV_COUNT_MISSING]),
    replaced = tonumber(out[C.TD_CSV_COUNT_REPLACED]), skipped_rows = tonumber(out[C.TD_CSV_COUNT_SKIPPED_ROWS]) }
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
