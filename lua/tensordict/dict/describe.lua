-- dict/describe.lua: T.describe(x), pandas' describe() for a tensor or every tensor leaf
-- of a TensorDict (nested keys joined with dots, in key order; non-tensor values have no
-- statistics and are left out). One streamed pass per leaf in C (tensor/leaf_stats.lua), so
-- a memory-mapped container larger than memory is summarised from the page cache.
-- A tensor gives one summary table; a TensorDict an array of them (each with its key),
-- also indexed by key (d["obs.x"].mean). Both print as a table (tdrepl shows that).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local leaf_stats = require("tensordict.tensor.leaf_stats")

local M = {}

local function one_text(s) return leaf_stats.text({ s }) end
local ONE = { __tostring = one_text }

local by_key = {
  __tostring = function(rows) return rows[1] and leaf_stats.text(rows) or "(no tensor leaves)" end,
  __index = function(rows, key)
    for _, r in ipairs(rows) do
      if r.key == key then return r end
    end
    return nil
  end,
}

-- The tensor leaves of td as {key = "a.b", tensor =}, in key order.
function M.leaves(td)
  local out = {}
  for _, path in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(path)
    if tensor.is_tensor(v) then
      out[#out + 1] = { key = type(path) == "table" and table.concat(path, ".") or path, tensor = v }
    end
  end
  return out
end

-- rows (summaries with keys) as describe returns them: printable, indexed by key.
function M.rows(rows) return (setmetatable(rows, by_key)) end

function M.describe(x)
  if tensor.is_tensor(x) then return (setmetatable(leaf_stats.of(x), ONE)) end
  if not td_core.is_td(x) then
    util.fail(("describe: expected a tensor or a TensorDict, got %s"):format(util.describe(x)))
  end
  local rows = {}
  for i, leaf in ipairs(M.leaves(x)) do
    rows[i] = leaf_stats.of(leaf.tensor)
    rows[i].key = leaf.key
  end
  return M.rows(rows)
end

return M
