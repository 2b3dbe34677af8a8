-- flow/csv.lua: CsvSource, batches of rows of a numeric CSV file. The parsing is in C
-- (core/store/csv.c: large reads, RFC 4180 quotes, exact fast number parsing); this file
-- maps columns to leaves and batches to TensorDicts.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local csv = require("tensordict.tensor.csv")
local dtypes = require("tensordict.tensor.dtype")
local td_core = require("tensordict.dict")
local core = require("tensordict.flow.core")
local shard_rows = require("tensordict.flow.sources").shard_rows
local options = require("tensordict.flow.csv_options")

local describe = util.describe
local is_tensor, is_td = tensor.is_tensor, td_core.is_td

local CsvSource = core.define("CsvSource", {
  kind = "source",
  doc = "Batches of rows of a numeric CSV file: one leaf per column ([batch]) or per group of columns ([batch, k]).",
  params = {
    { "path", "string", required = true, doc = "the CSV file (it must exist when the node is made)" },
    { "batch_size", "integer", required = true, min = 1, doc = "rows per batch (the last one may be smaller)" },
    { "columns", "any", doc = "which columns, as what: a list of names or 1-based numbers, or a table "
      .. "key -> dtype | {names...} | {dtype =, default =} | {columns = {...}, dtype =, default =} (default: every "
      .. "column); default fills the column's missing cells" },
    { "usecols", "any", doc = "pandas' name for a list of columns (names only: pandas counts from 0); "
      .. "give it or columns" },
    { "header", "boolean", default = true,
      doc = "the first line names the columns (without it they are col1, col2, ...)" },
    { "delimiter", "string", default = ",", doc = "one ASCII character (\"\\t\" for TSV)" },
    { "dtype", "dtype", default = "float32", doc = "the dtype of columns that do not name one (any numeric dtype)" },
    { "na_values", "any", default = options.NA_VALUES,
      doc = "cells equal to one of these texts are missing: the column's default, else NaN (an integer column "
        .. "without a default: an error, or the row skipped with on_bad_cell = \"skip_row\")" },
    { "on_bad_cell", "string", default = "error", one_of = { "error", "nan", "skip_row" },
      doc = "a cell that does not parse as its column's dtype: fail naming it, take it as missing, or skip its row" },
    { "comment", "string", doc = "one character: a line starting with it, or the rest of a line after it "
      .. "(outside quotes), is ignored" },
    { "skip_rows", "any", doc = "N: skip the first N data rows; a list: skip the records starting on these "
      .. "lines of the file (from 1, the header's line included)" },
  },
})

-- Opens a reader (closed by the GC unless closed first).
local function open_reader(self)
  local r, msg = csv.open(self.p.path, self.reader_opts)
  if not r then self:fail("%s", msg) end
  return r
end

local is_list = options.is_list

-- Resolves the columns parameter against the file's header into leaves:
-- { key =, dtype =, cols = {0-based column numbers}, grouped = bool, default = text or nil }.
function CsvSource:resolve(r)
  local p = self.p
  local names, index = r:column_names(), {}
  local ncols = #names
  for c = 1, ncols do
    local nm = names[c]
    if not nm or nm == "" then nm = "col" .. c end
    names[c] = nm
    if index[nm] then index[nm] = -1 else index[nm] = c end -- -1: the name repeats
  end
  self.column_names = names
  local function column(ref, where)
    if util.is_int(ref) then
      if ref < 1 or ref > ncols then
        self:fail("columns%s: column %d is out of range (%s has %d columns)", where, ref, p.path, ncols)
      end
      return ref
    end
    if type(ref) ~= "string" then
      self:fail("columns%s: expected a column name or a 1-based number, got %s", where, describe(ref))
    end
    local c = index[ref]
    if c == -1 then
      self:fail("columns%s: the name '%s' names several columns of %s; select it by number", where, ref, p.path)
    end
    if not c then
      local list = {}
      for i = 1, math.min(#names, 30) do list[i] = "'" .. names[i] .. "'" end
      self:fail("columns%s: no column '%s' in %s%s (columns: %s)", where, ref, p.path,
        util.did_you_mean(ref, names),
        ncols == 0 and "none: the file is empty" or table.concat(list, ", "))
    end
    return c
  end
  local function dtype_of(v, where)
    local ok, code = pcall(dtypes.code, v, "dtype")
    if type(v) ~= "string" or not ok then
      self:fail("columns%s: expected a dtype name, got %s", where, describe(v))
    end
    if code == dtypes.BOOL then self:fail("columns%s: bool is not a numeric dtype", where) end
    return dtypes.name(code)
  end
  local leaves = {}
  local cols = options.columns(self)
  local function default_of(v, where, dt)
    if v == nil then return nil end
    return options.default_text(self, where, v, dt, dtypes.is_floating(dtypes.code(dt, "dtype")))
  end
  if cols == nil then
    for c = 1, ncols do
      if index[names[c]] == -1 then
        self:fail("the column name '%s' repeats in %s; select columns by number (columns = {1, 2, ...})",
          names[c], p.path)
      end
      leaves[c] = { key = names[c], dtype = p.dtype, cols = { c - 1 } }
    end
  elseif type(cols) == "string" or util.is_int(cols) then
    local c = column(cols, "")
    leaves[1] = { key = names[c], dtype = p.dtype, cols = { c - 1 } }
  elseif type(cols) == "table" and not is_tensor(cols) and not is_td(cols) and is_list(cols) then
    for i, ref in ipairs(cols) do
      local c = column(ref, ("[%d]"):format(i))
      leaves[i] = { key = names[c], dtype = p.dtype, cols = { c - 1 } }
    end
  elseif type(cols) == "table" and not is_tensor(cols) and not is_td(cols) then
    local keys = {}
    for k in pairs(cols) do
      if type(k) ~= "string" then
        self:fail("columns: a table mixing a list and named entries; got the key %s", describe(k))
      end
      keys[#keys + 1] = k
    end
    table.sort(keys) -- a Lua table has no order: sorted, as TensorDicts from tables are
    for _, k in ipairs(keys) do
      local v, where = cols[k], ("." .. k)
      if type(v) == "string" then
        leaves[#leaves + 1] = { key = k, dtype = dtype_of(v, where), cols = { column(k, where) - 1 } }
      elseif type(v) == "table" and not is_tensor(v) and not is_td(v) and v.columns == nil and #v == 0
          and (v.dtype ~= nil or v.default ~= nil) then -- {dtype =, default =}: the column named k
        local dt = v.dtype ~= nil and dtype_of(v.dtype, where .. ".dtype") or p.dtype
        leaves[#leaves + 1] = { key = k, dtype = dt, cols = { column(k, where) - 1 },
          default = default_of(v.default, where, dt) }
      elseif type(v) == "table" and not is_tensor(v) and not is_td(v) then
        local list, dt = v, p.dtype
        if v.columns ~= nil then
          list = v.columns
          if v.dtype ~= nil then dt = dtype_of(v.dtype, where .. ".dtype") end
          if type(list) ~= "table" then
            self:fail("columns%s.columns: expected a list of columns, got %s", where, describe(list))
          end
        end
        if #list == 0 then self:fail("columns%s: an empty list of columns", where) end
        local leaf = { key = k, dtype = dt, cols = {}, grouped = true, default = default_of(v.default, where, dt) }
        for i, ref in ipairs(list) do leaf.cols[i] = column(ref, ("%s[%d]"):format(where, i)) - 1 end
        leaves[#leaves + 1] = leaf
      else
        self:fail("columns%s: expected a dtype name, a list of columns, {dtype =, default =} or "
          .. "{columns =, dtype =}, got %s", where, describe(v))
      end
    end
  else
    self:fail("columns: expected a list of columns or a table of leaves, got %s", describe(cols))
  end
  local seen = {}
  for _, leaf in ipairs(leaves) do
    if seen[leaf.key] then self:fail("columns: two leaves are named '%s'", leaf.key) end
    seen[leaf.key] = true
  end
  -- Where the reader puts each field (one destination per column of every leaf).
  local dests = {}
  for _, leaf in ipairs(leaves) do
    for i, c in ipairs(leaf.cols) do dests[#dests + 1] = { column = c, offset = leaf.grouped and i - 1 or 0 } end
  end
  self.plan = csv.plan(dests)
  self.columns_read = #dests
  return leaves
end

function CsvSource:init()
  self.reader_opts = options.reader_options(self)
  local r = open_reader(self)
  local ok, leaves = pcall(self.resolve, self, r)
  r:close()
  if not ok then error(leaves, 0) end
  self.leaves = leaves
  self.out_keys = {}
  for i, leaf in ipairs(leaves) do self.out_keys[i] = leaf.key end
  self.readers = {}
  self.tally = options.zero_tally()
end

-- A run's counts start at zero (flow.run opens the source).
function CsvSource:open() self.tally = options.zero_tally() end

-- What the messy-file options did in this run: missing cells stored (NaN or default),
-- bad cells replaced (on_bad_cell = "nan"), rows skipped (on_bad_cell = "skip_row"); the
-- passes that ended and the ones in progress.
function CsvSource:counts()
  local out = {}
  for k, v in pairs(self.tally) do out[k] = v end
  for state in pairs(self.readers) do
    if state.r then options.tally(out, state.r:counts()) end
  end
  return out
end

function CsvSource:keys() return self.out_keys end

-- Each leaf's dtype, as columns (or dtype) declares it: checked against the steps.
function CsvSource:key_dtypes()
  local out = {}
  for _, leaf in ipairs(self.leaves) do out[leaf.key] = leaf.dtype end
  return out
end

function CsvSource:row_bytes()
  local bytes = 0
  for _, leaf in ipairs(self.leaves) do bytes = bytes + #leaf.cols * dtypes.itemsize(leaf.dtype) end
  return bytes
end

-- Before any data moves: a batch is allocated whole (batch_size rows of every leaf).
function CsvSource:preflight()
  return { core.memory_problem(self.p.batch_size * self:row_bytes(), ("batch_size = %.0f rows of %d columns")
    :format(self.p.batch_size, self.columns_read)) }
end

-- Data rows in the file (less skip_rows): one scan the first time, remembered. Rows
-- that on_bad_cell = "skip_row" will drop are counted: len() is what a pass may read.
function CsvSource:len()
  if self.rows == nil then
    local r = open_reader(self)
    local n, msg = r:count_rows()
    r:close()
    if not n then self:fail("%s", msg) end
    self.rows = math.max(n - self.skip_leading, 0)
  end
  return self.rows
end

-- A fresh pass over the file each call. Each pass holds its reader in a state table
-- that close() can empty, so an iterator used after close() ends instead of reading a
-- closed reader. Under ctx.dist (mpirun) each rank reads its share of the rows
-- (sources.shard_rows): it skips the rows before its range without parsing them.
function CsvSource:iter(ctx)
  local state = { r = open_reader(self) }
  self.readers[state] = true
  local leaves, b = self.leaves, self.p.batch_size
  local plan = self.plan
  local function finish()
    self.readers[state] = nil
    if state.r then
      options.tally(self.tally, state.r:counts())
      state.r:close()
    end
    state.r = nil
  end
  local function fail_with(msg)
    finish()
    self:fail("%s", msg)
  end
  options.set_defaults(self, state.r, leaves)
  local ok, msg = state.r:skip_rows(self.skip_leading)
  if not ok then fail_with(msg) end
  local left -- records this pass may still read (rows yielded, or dropped as bad)
  if ctx and ctx.dist and ctx.dist.size > 1 then
    local lo, hi = shard_rows(self:len(), ctx)
    ok, msg = state.r:skip_rows(lo - 1)
    if not ok then fail_with(msg) end
    left = hi - lo + 1
  end
  local base = 0 -- records before this pass's reads: a checkpoint's position counts records
  if self.from then -- a checkpoint's position: its rows are skipped, not parsed
    ok, msg = state.r:skip_rows(self.from.rows)
    if not ok then fail_with(msg) end
    base = self.from.rows
    if left then left = left - self.from.rows end
  end
  if left then state.r:limit_records(math.max(left, 0)) end
  self.from = nil
  local done = base -- records this pass has consumed
  self.position = function() return { rows = done } end
  return function()
    local r = state.r
    if r == nil then return nil end
    local tensors, outs = {}, {}
    for i, leaf in ipairs(leaves) do
      local t = leaf.grouped and create.empty({ b, #leaf.cols }, leaf.dtype) or create.empty({ b }, leaf.dtype)
      tensors[i] = t
      for _ = 1, #leaf.cols do outs[#outs + 1] = t end
    end
    local n, err = r:read(b, plan, outs)
    if not n then fail_with(err) end
    done = base + r:counts().records
    if n == 0 then
      finish()
      return nil
    end
    local td = td_core.construct(nil, { n })
    for i, leaf in ipairs(leaves) do
      local t = tensors[i]
      if n < b then t = t[{ { 1, n } }] end
      td:set(leaf.key, t)
    end
    if n < b then finish() end -- a short batch is the last one (the reader fills a batch past dropped rows)
    return td
  end
end

function CsvSource:close()
  for state in pairs(self.readers) do
    if state.r then
      options.tally(self.tally, state.r:counts())
      state.r:close()
    end
    state.r = nil
  end
  self.readers = {}
end

-- Checkpoints: the data rows the pass in progress has yielded; restore makes the next
-- iter() skip them (without parsing) and go on.
function CsvSource:state() return self.position and self.position() end
function CsvSource:restore(state) self.from = state end

return { CsvSource = CsvSource }
