-- host/inspect_head.lua: `tdflow inspect PATH --head N`, the first N rows of the batch as
-- a table: a column per tensor leaf (nested keys with dots), a row per batch row. A leaf
-- with trailing dims shows each row's values as [x, y, z] while that fits CELL_WIDTH
-- characters, else as its row shape and dtype ("[3, 64] float32"). Only N rows are read
-- (a narrow of the mapped leaves; an HDF5 file's first N rows).
local util = require("tensordict.util")
local h5 = require("tensordict.h5.dict")
local inspect_leaves = require("tensordict.host.inspect_leaves")

local M = {}

M.CELL_WIDTH = 32

local function number_cell(v, floating)
  if type(v) == "boolean" then return (tostring(v)) end
  if floating then return ("%.4g"):format(v) end
  return util.number_text(v)
end

-- Row i's cell of leaf t (rows first).
local function cell(t, i)
  local floating = t:is_floating_point()
  local row = t:select(1, i)
  if row:dim() == 0 then return number_cell(row:item(), floating) end
  local text
  if row:dim() == 1 and row:numel() <= M.CELL_WIDTH / 2 then
    local parts = {}
    for k, v in ipairs(row:totable()) do parts[k] = number_cell(v, floating) end
    text = "[" .. table.concat(parts, ", ") .. "]"
  end
  if not text or #text > M.CELL_WIDTH then text = util.format_list(row:shape()) .. " " .. t:dtype() end
  return text
end

-- The text of the first n rows of the opened container c (from path).
function M.text(c, n, path)
  local batch = c:batch_size()
  if #batch == 0 then
    util.fail(("inspect --head: %s has no batch dims (batch size []), so it has no rows"):format(path))
  end
  local rows = math.min(n, batch[1])
  local leaves
  if h5.is_h5(c) then
    leaves = inspect_leaves.tensors(c:read_rows(1, rows))
  else
    leaves = inspect_leaves.tensors(c)
    for _, leaf in ipairs(leaves) do leaf.tensor = leaf.tensor:narrow(1, 1, rows) end
  end
  local grid = { { "row" } }
  for i = 1, rows do grid[i + 1] = { tostring(i) } end
  for _, leaf in ipairs(leaves) do
    grid[1][#grid[1] + 1] = leaf.key
    for i = 1, rows do grid[i + 1][#grid[i + 1] + 1] = cell(leaf.tensor, i) end
  end
  local width = {}
  for _, line in ipairs(grid) do
    for k, s in ipairs(line) do width[k] = math.max(width[k] or 0, #s) end
  end
  local out = { ("%s: rows 1-%d of %d"):format(path, rows, batch[1]) }
  for _, line in ipairs(grid) do
    local parts = {}
    for k, s in ipairs(line) do parts[k] = s .. (" "):rep(width[k] - #s) end
    out[#out + 1] = (table.concat(parts, "  "):gsub("%s+$", ""))
  end
  return (table.concat(out, "\n"))
end

return M
