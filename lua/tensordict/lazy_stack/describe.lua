-- lazy_stack/describe.lua: T.describe of a lazy stack (Python's LazyStackedTensorDict; a
-- folder Python wrote one into loads as one): each member's leaves added to one running
-- summary per key (tensor/leaf_stats.lua), so members of different shapes, which the
-- stack cannot give as one tensor, are summarised all the same. Keys come in the order
-- the members first show them; members that are stacks themselves are walked too.
-- Anything else goes to dict/describe.lua.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local describe = require("tensordict.dict.describe")
local leaf_stats = require("tensordict.tensor.leaf_stats")
local core = require("tensordict.lazy_stack.core")

local M = {}

local function add_members(ls, keyed)
  for _, m in ipairs(ls:tensordicts()) do
    if core.is_lazy_stack(m) then
      add_members(m, keyed)
    else
      for _, leaf in ipairs(describe.leaves(m)) do keyed:add(leaf.key, leaf.tensor) end
    end
  end
end

function M.describe(x)
  if tensor.is_tensor(x) or td_core.is_td(x) then return describe.describe(x) end
  if not core.is_lazy_stack(x) then
    util.fail(("describe: expected a tensor, a TensorDict or a lazy stack, got %s"):format(util.describe(x)))
  end
  local keyed = leaf_stats.keyed("the members of the stack")
  add_members(x, keyed)
  return describe.rows(keyed:summaries())
end

return M
