-- flow/sampler_prioritized.lua: flow.ReplayBuffer's sampler = "prioritized", torchrl's
-- PrioritizedSampler (proportional prioritized replay) on the ring: row i is drawn with
-- P(i) = p_i^alpha / sum_j p_j^alpha; a sample carries "index" (1-based) and
-- "priority_weight" (float32), the importance weight (N P(i))^-beta divided by the
-- largest one, i.e. (q_i / min q)^-beta of the tree's values q = (p + eps)^alpha.
-- New rows get the largest priority given so far (1 before any); update_priority sets
-- others.
--
-- The tree (core/kernels/sum_tree.c) sums the values q of a float64 file in the ring's
-- folder, PRIORITY_FILE: capacity + 2 little-endian doubles {alpha, the largest raw
-- priority, q of each row}, mapped read-write, so a reopened ring keeps its priorities
-- (written like the ring's counters: atomically at first, in place after).
local ffi = require("ffi")
local util = require("tensordict.util")
local fs = require("tensordict.fs")
local create = require("tensordict.tensor.create")
local sum_tree = require("tensordict.tensor.sum_tree")
local append = require("tensordict.dict.append")
local is_tensor = require("tensordict.tensor").is_tensor

local M = {}

M.PRIORITY_FILE = "%priorities"
-- torchrl's PrioritizedSampler has no defaults for alpha and beta: these are the PER
-- paper's (Schaul et al. 2016, proportional variant); eps is torchrl's.
M.ALPHA, M.BETA, M.EPS = 0.6, 0.4, 1e-8

local Prioritized = {}
Prioritized.__index = Prioritized

function M.new(rb, base)
  setmetatable(Prioritized, base)
  local p = rb.p
  return (setmetatable({ alpha = p.alpha or M.ALPHA, beta = p.beta or M.BETA, eps = p.eps or M.EPS }, Prioritized))
end

-- The tree's value of a raw priority.
function Prioritized:value(priority) return (priority + self.eps) ^ self.alpha end

-- The priorities' file for a ring of capacity rows: every row 0, or (a ring made
-- without priorities) its filled rows at the default priority 1.
local function new_file(self, path, capacity, filled, fsync)
  local q = ffi.new("double[?]", capacity + 2)
  q[0], q[1] = self.alpha, 1
  local v = self:value(1)
  for i = 0, filled - 1 do q[2 + i] = v end
  return fs.write_atomic(path, ffi.string(q, (capacity + 2) * 8), fsync)
end

function Prioritized:ring_ready(rb, made)
  local path, cap = rb.p.path .. "/" .. M.PRIORITY_FILE, rb.p.capacity
  if made or not fs.exists(path) then
    local ok, err = new_file(self, path, cap, made and 0 or rb.filled, rb.p.fsync)
    if not ok then rb:fail("%s", err) end
  end
  local ok, all = pcall(create.from_file, path, { cap + 2 }, "float64", "r+")
  if not ok then rb:fail("'%s': %s", path, (tostring(all):gsub("^.-tensordict: ", ""))) end
  if all[1] ~= self.alpha then
    rb:fail("'%s' holds priorities for alpha = %s, not %s (pass that alpha, or existsok = true for a new ring)",
      path, util.number_text(all[1]), util.number_text(self.alpha))
  end
  local tree, err = sum_tree.new(all:narrow(1, 3, cap))
  if not tree then rb:fail("'%s': %s", path, err) end
  self.file, self.tree = all, tree
end

-- New rows: the largest priority so far.
function Prioritized:extended(rb, at, n)
  local cap = rb.p.capacity
  local index = create.arange(at, at + n - 1, "int64")
  if at + n > cap then index:remainder_(cap) end
  local ok, err = self.tree:set(index, create.full({ 1 }, self:value(self.file[2]), "float64"))
  if not ok then rb:fail("extend: %s", err) end
end

function Prioritized:sample(rb, n, gen)
  local u, index = self.u, self.index
  if u == nil or u:numel() ~= n then
    u, index = create.empty({ n }, "float64"), create.empty({ n }, "int64")
    self.u, self.index = u, index
  end
  u:uniform_(0, 1, gen)
  local weight = create.empty({ n }, "float32")
  local ok, err = self.tree:find(u, self.beta, index, weight)
  if not ok then rb:fail("sample: %s", err) end
  local out = append.gather_rows(rb.buf, index)
  out:set("index", index:add(1))
  out:set("priority_weight", weight)
  return out
end

-- A tensor of the values given (a tensor, a number or a Lua array), as dtype, flat.
local function as_flat(rb, what, v, dtype)
  if type(v) == "number" then v = { v } end
  if type(v) == "table" and not is_tensor(v) then
    local ok, t = pcall(create.tensor, v, dtype)
    if not ok then rb:fail("update_priority: %s: %s", what, (tostring(t):gsub("^.-tensordict: ", ""))) end
    v = t
  end
  if not is_tensor(v) then rb:fail("update_priority: %s must be a tensor, a number or an array, got %s", what,
    util.describe(v)) end
  return v:to(dtype):contiguous():view(-1)
end

-- rb:update_priority(index, priority): rows index (1-based, as a sample's "index")
-- take priority (one each, or one for all). Everything is checked before anything
-- changes.
function Prioritized:update_priority(rb, index, priority)
  if is_tensor(index) and index:dtype():match("float") then
    rb:fail("update_priority: index must hold integers (a sample's \"index\"), got dtype %s", index:dtype())
  end
  if type(index) == "number" or (type(index) == "table" and not is_tensor(index)) then
    for _, i in ipairs(type(index) == "number" and { index } or index) do
      if not util.is_int(i) then
        rb:fail("update_priority: index must hold integers (a sample's \"index\"), got %s", util.describe(i))
      end
    end
  end
  index = as_flat(rb, "index", index, "int64")
  priority = as_flat(rb, "priority", priority, "float64"):clone()
  local n, np = index:numel(), priority:numel()
  if np ~= n and np ~= 1 then
    rb:fail("update_priority: %d priorities for %d indices (give one, or one each)", np, n)
  end
  if n == 0 then return end
  local lo, hi = index:min(), index:max()
  if lo < 1 or hi > rb.filled then
    rb:fail("update_priority: index %d is out of range [1, %d] (the filled rows)", lo < 1 and lo or hi, rb.filled)
  end
  local pmin, pmax = priority:min(), priority:max()
  if pmin ~= pmin or pmin < 0 or pmax == math.huge then
    rb:fail("update_priority: priorities must be finite and >= 0, got %s",
      util.number_text(pmin ~= pmin and pmin or pmin < 0 and pmin or pmax))
  end
  if pmax > self.file[2] then self.file[2] = pmax end
  local ok, err = self.tree:set(index:sub(1), priority:add_(self.eps):pow_(self.alpha))
  if not ok then rb:fail("update_priority: %s", err) end
end

-- The priorities durable (msync), with the ring's counters.
function Prioritized:sync(rb)
  if self.file then
    local ok, err = append.sync_counters(self.file)
    if not ok then rb:fail("sync: %s", err) end
  end
end

return M
