-- flow/meter.lua: run accounting, in one place. A meter holds what one place of a
-- pipeline (the source, a step, the sink, or the whole run) did: its own seconds, and
-- batches and rows in and out. flow.run and Seq's profile count into meters; hosts
-- (tdflow's report) only format them.
local now = require("tensordict.util").now

local M = {}

-- The rows a batch counts for: its first batch dim, or 1 for a batch of batch size []
-- (one item with no rows to split).
function M.rows(td)
  if td:batch_dims() == 0 then return 1 end
  return #td
end
local rows = M.rows

-- A meter at zero. where and type_name label it in reports ("steps[2]", "Apply"); the
-- run's own summary has neither.
function M.new(where, type_name)
  return { where = where, type = type_name, seconds = 0, batches_in = 0, rows_in = 0,
    batches_out = 0, rows_out = 0 }
end

-- td came into the place the meter counts.
function M.took(m, td)
  m.batches_in, m.rows_in = m.batches_in + 1, m.rows_in + rows(td)
end

-- td left it.
function M.gave(m, td)
  m.batches_out, m.rows_out = m.batches_out + 1, m.rows_out + rows(td)
end

-- Seconds since t0 (a util.now() reading) are added to the meter's own time.
function M.spent(m, t0)
  m.seconds = m.seconds + (now() - t0)
end

-- A copy of the counts under a label, for a report.
function M.labelled(m, where, type_name)
  local out = M.new(where, type_name)
  for _, k in ipairs({ "seconds", "batches_in", "rows_in", "batches_out", "rows_out" }) do out[k] = m[k] end
  return out
end

-- What a node counted besides rows (CsvSource's missing cells, DropNaN's dropped rows):
-- node:counts(), a table of name -> number, or nil for a node that counts nothing.
function M.counts_of(node)
  if type(node) == "table" and type(node.counts) == "function" then return node:counts() end
  return nil
end

M.now = now

return M
