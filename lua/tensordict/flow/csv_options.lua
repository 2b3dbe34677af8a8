-- flow/csv_options.lua: CsvSource's options for messy files, checked and turned into
-- the reader's (tensor/csv.lua over core/store/csv.c): NA texts, what a bad cell does,
-- comments, skipped rows or lines, pandas' usecols, and the per-column defaults of
-- `columns`. The rules themselves (what is missing, what is dropped) are the C reader's.
local util = require("tensordict.util")

local describe = util.describe

local M = {}

-- pandas' default NA texts, less its rarer spellings (#N/A, -1.#IND, ...): give them in
-- na_values where a file has them.
M.NA_VALUES = { "", "NA", "NaN", "nan", "null" }

local function is_list(t)
  if type(t) ~= "table" then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end
M.is_list = is_list

-- One ASCII character other than a quote or a line end (the delimiter's rule), or fail.
local function one_char(node, name, v)
  if #v ~= 1 or v == '"' or v == "\n" or v == "\r" or v:byte() > 127 then
    node:fail("%s must be one ASCII character other than a quote or a line end, got %q", name, v)
  end
end
M.one_char = one_char

-- The reader's options from node.p; node.skip_leading: the data rows a pass skips first.
function M.reader_options(node)
  local p = node.p
  one_char(node, "delimiter", p.delimiter)
  if p.comment ~= nil then
    one_char(node, "comment", p.comment)
    if p.comment == p.delimiter then node:fail("comment and delimiter are both %q", p.comment) end
  end
  local na = p.na_values
  if not is_list(na) then node:fail("na_values: expected a list of texts, got %s", describe(na)) end
  for i, v in ipairs(na) do
    if type(v) ~= "string" then node:fail("na_values[%d]: expected a text, got %s", i, describe(v)) end
  end
  local skip, lines = p.skip_rows, {}
  node.skip_leading = 0
  if util.is_int(skip) then
    if skip < 0 then node:fail("skip_rows: expected a count >= 0 or a list of line numbers, got %d", skip) end
    node.skip_leading = skip
  elseif is_list(skip) then
    for i, line in ipairs(skip) do
      if not util.is_int(line) or line < 1 then
        node:fail("skip_rows[%d]: expected a line number of the file (from 1), got %s", i, describe(line))
      end
      lines[i] = line
    end
  elseif skip ~= nil then
    node:fail("skip_rows: expected a count of leading data rows or a list of line numbers, got %s", describe(skip))
  end
  return { delimiter = p.delimiter, header = p.header, comment = p.comment, on_bad_cell = p.on_bad_cell,
    na_values = na, skip_lines = lines }
end

-- columns, or usecols (pandas' name for a list of columns; by name only, since pandas
-- counts columns from 0 and `columns` from 1: a number would be read one off).
function M.columns(node)
  local p = node.p
  if p.usecols == nil then return p.columns end
  if p.columns ~= nil then node:fail("usecols and columns both select columns; give one of them") end
  local u = type(p.usecols) == "string" and { p.usecols } or p.usecols
  if not is_list(u) then node:fail("usecols: expected a list of column names, got %s", describe(p.usecols)) end
  for i, name in ipairs(u) do
    if type(name) ~= "string" then
      node:fail("usecols[%d]: expected a column name, got %s (pandas counts columns from 0, columns = {...} "
        .. "from 1: select by number there)", i, describe(name))
    end
  end
  return u
end

-- The text of a leaf's default (where), checked against its dtype.
function M.default_text(node, where, v, dtype, is_floating)
  if type(v) ~= "number" then node:fail("columns%s.default: expected a number, got %s", where, describe(v)) end
  if not is_floating and not util.is_int(v) then
    node:fail("columns%s.default: %s is not an integer, and the column is %s", where, util.number_text(v), dtype)
  end
  return util.number_text(v)
end

-- Sets each leaf's default on the reader r (leaf.default: a text).
function M.set_defaults(node, r, leaves)
  for _, leaf in ipairs(leaves) do
    if leaf.default then
      for _, c in ipairs(leaf.cols) do
        local ok, msg = r:set_default(c + 1, leaf.default)
        if not ok then node:fail("%s", msg) end
      end
    end
  end
end

-- The counts a run reports, from the reader's.
function M.tally(into, c)
  into.missing_cells = into.missing_cells + c.missing
  into.bad_cells_replaced = into.bad_cells_replaced + c.replaced
  into.bad_rows_skipped = into.bad_rows_skipped + c.skipped_rows
end

function M.zero_tally() return { missing_cells = 0, bad_cells_replaced = 0, bad_rows_skipped = 0 } end

return M
