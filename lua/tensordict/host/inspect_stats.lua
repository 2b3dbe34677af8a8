-- host/inspect_stats.lua: `tdflow inspect PATH --stats`, T.describe's table for every tensor
-- leaf of a memmap folder, a consolidated file or an HDF5 file. The first two are mapped,
-- so each leaf is one streamed pass in C over the page cache (folders larger than memory
-- work); an HDF5 file is read a slab of rows at a time (about SLAB_BYTES), each slab's
-- leaves added to running summaries (tensor/leaf_stats.lua), so it never sits in memory.
local T = require("tensordict")
local dtypes = require("tensordict.tensor.dtype")
local leaf_stats = require("tensordict.tensor.leaf_stats")
local util = require("tensordict.util")
local h5 = require("tensordict.h5.dict")
local inspect = require("tensordict.host.inspect")
local inspect_leaves = require("tensordict.host.inspect_leaves")

local M = {}

M.SLAB_BYTES = 64 * 1024 * 1024

-- The bytes of one row of every tensor leaf of an HDF5 container (groups walked).
local function h5_row_bytes(h)
  local bytes = 0
  for _, k in ipairs(h:keys()) do
    if h:kind(k) == "group" then
      bytes = bytes + h5_row_bytes(h:get(k))
    elseif h:kind(k) == "tensor" then
      local n = dtypes.itemsize(h:dtype(k))
      local shape = h:shape(k)
      for i = 2, #shape do n = n * shape[i] end
      bytes = bytes + n
    end
  end
  return bytes
end

-- Summaries of an HDF5 container, read SLAB_BYTES of rows at a time.
local function h5_rows(h)
  local batch = h:batch_size()
  if #batch == 0 then return T.describe(h:to_tensordict()) end
  local slab = math.max(1, math.floor(M.SLAB_BYTES / math.max(1, h5_row_bytes(h))))
  local keyed = leaf_stats.keyed("the slabs")
  for row0 = 1, batch[1], slab do
    local part = h:read_rows(row0, math.min(slab, batch[1] - row0 + 1))
    for _, leaf in ipairs(inspect_leaves.tensors(part)) do keyed:add(leaf.key, leaf.tensor) end
  end
  return keyed:summaries()
end

-- The text for path: a title line, then one row per tensor leaf.
function M.text(path)
  local td, what = inspect.open(path)
  local rows = h5.is_h5(td) and h5_rows(td) or T.describe(td)
  local title = ("%s  (%s, batch size %s, %d tensor leaves; min, max, mean and std of the finite values)")
    :format(path, what, util.format_list(td:batch_size()), #rows)
  if #rows == 0 then return title end
  return title .. "\n" .. leaf_stats.text(rows)
end

return M
