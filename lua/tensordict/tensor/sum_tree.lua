-- tensor/sum_tree.lua: the sum tree of core/kernels/sum_tree.c for Lua, over a float64
-- tensor of leaves (flow.ReplayBuffer's prioritized sampler keeps them in a mapped
-- file). Every batch is one C call. Failures come back as (nil, message), the
-- library's message without the C call's name, for a node to raise in its own name.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local tensor = require("tensordict.tensor.core")

local header = tensor.handle

local M = {}

local SumTree = {}
SumTree.__index = SumTree

local function c_message() return (ffi.string(C.td_last_error()):gsub("^td_sum_tree_%a+: ", "", 1)) end

-- A tree over leaves (a contiguous 1-D float64 tensor, kept alive by the tree), freed by
-- the GC; or nil and the message.
function M.new(leaves)
  local t = C.td_sum_tree_new(header(leaves))
  if t == nil then return nil, c_message() end
  return (setmetatable({ t = ffi.gc(t, C.td_sum_tree_free), leaves = leaves }, SumTree))
end

function SumTree:total() return (C.td_sum_tree_total(self.t)) end
function SumTree:min_positive() return (C.td_sum_tree_min_positive(self.t)) end

-- Leaves index (int64, 0-based) take priority (float64, one each or one for all).
-- true, or nil and the message (nothing changed then).
function SumTree:set(index, priority)
  if C.td_sum_tree_set(self.t, header(index), header(priority)) < 0 then return nil, c_message() end
  return true
end

-- The leaves (0-based, into index) of the draws u (float64 in [0, 1)), and their
-- importance weights into weight (float32 or float64; nil: none). true, or nil and the
-- message.
function SumTree:find(u, beta, index, weight)
  if C.td_sum_tree_find(self.t, header(u), beta, header(index), weight and header(weight) or nil) < 0 then
    return nil, c_message()
  end
  return true
end

return M
