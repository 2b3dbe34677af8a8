-- flow/samplers.lua: how flow.ReplayBuffer draws its rows (its sampler parameter), as
-- torchrl's samplers do: "uniform" (with replacement, the default), "without_replacement"
-- (a permutation of the filled rows per epoch), "prioritized" (flow/sampler_prioritized.lua)
-- and "slice" (contiguous pieces of trajectories, flow/sampler_slice.lua).
--
-- A sampler is made from the buffer's parameters and told what happens to the ring:
--   sampler:ring_ready(rb, made)  the ring is mapped (made: a new, empty one)
--   sampler:extended(rb, at, n)   n rows were written from 0-based row at, wrapping
--   sampler:sample(rb, n, gen)    n rows drawn (rb checked n, gen and the fill already)
--   sampler:update_priority(rb, index, priority), sampler:sync(rb)
-- Every sampler but "uniform" adds "index" to its result: each row's position in the
-- ring, 1-based as every index of this library (torchrl's "index" counts from 0).
local util = require("tensordict.util")
local append = require("tensordict.dict.append")
local random = require("tensordict.tensor.random")
local prioritized = require("tensordict.flow.sampler_prioritized")
local slice = require("tensordict.flow.sampler_slice")

local M = {}

M.NAMES = { "uniform", "without_replacement", "prioritized", "slice" }

-- The parameters only one sampler takes.
local OWN = {
  alpha = "prioritized", beta = "prioritized", eps = "prioritized",
  drop_last = "without_replacement",
  traj_key = "slice", end_key = "slice", slice_len = "slice", num_slices = "slice",
}
local OWN_ORDER = { "alpha", "beta", "eps", "drop_last", "traj_key", "end_key", "slice_len", "num_slices" }

-- What every sampler does not care about.
local Base = {}
Base.__index = Base
function Base.ring_ready() end
function Base.extended() end
function Base.sync() end
function Base.update_priority(_, rb)
  rb:fail("update_priority: sampler %q keeps no priorities (sampler = \"prioritized\" does)", rb.p.sampler)
end

---------------------------------------------------------------- uniform (today's)

local Uniform = setmetatable({}, Base)
Uniform.__index = Uniform

-- n rows drawn uniformly with replacement. The index tensor is kept while n stays the
-- same (append.sample_rows: the positions go straight to the C gather, cheaper than the
-- index grammar for a few hundred rows).
function Uniform:sample(rb, n, gen)
  local idx = self.idx
  if idx == nil or self.idx_n ~= n then
    idx = append.sample_index(n)
    self.idx, self.idx_n = idx, n
  end
  local out, msg = append.sample_rows(rb.buf, rb.filled, idx, gen)
  if not out then rb:fail("sample: %s", msg) end
  return out
end

----------------------------------------------------------- without replacement

local Permuted = setmetatable({}, Base)
Permuted.__index = Permuted

-- Rows of a permutation of the filled rows, each once per epoch, as torchrl's
-- SamplerWithoutReplacement: a new permutation when the last one is used up, when the
-- fill count changed since it was drawn, or (drop_last) when fewer than n rows are left
-- in it; without drop_last an epoch's last sample may have fewer than n rows.
function Permuted:sample(rb, n, gen)
  local filled = rb.filled
  if self.drop_last and n > filled then
    rb:fail("sample: %d rows without replacement and drop_last = true need at least %d filled rows, the buffer "
      .. "has %d", n, n, filled)
  end
  local left = self.perm and self.perm:numel() - self.used or 0
  if self.perm == nil or self.perm_of ~= filled or left == 0 or (self.drop_last and left < n) then
    self.perm, self.perm_of, self.used = random.randperm(filled, gen), filled, 0
    left = filled
  end
  local take = math.min(n, left)
  local index = self.perm:narrow(1, self.used + 1, take):clone()
  self.used = self.used + take
  local out = append.gather_rows(rb.buf, index:sub(1))
  out:set("index", index)
  return out
end

------------------------------------------------------------------------ making

-- A number parameter a sampler takes: finite (the kinds' checks let NaN and inf by).
local function finite(rb, name)
  local v = rb.p[name]
  if v ~= nil and (v ~= v or v == math.huge) then
    rb:fail("%s: expected a finite number >= 0, got %s", name, util.number_text(v))
  end
end

-- The sampler of rb's parameters; raises naming a parameter given to a sampler that
-- does not take it.
function M.new(rb)
  local p, name = rb.p, rb.p.sampler
  for _, k in ipairs(OWN_ORDER) do
    if p[k] ~= nil and OWN[k] ~= name then
      rb:fail("%s: only sampler = %q takes it (this buffer's sampler is %q)", k, OWN[k], name)
    end
  end
  for _, k in ipairs({ "alpha", "beta", "eps" }) do finite(rb, k) end
  if name == "prioritized" then return prioritized.new(rb, Base) end
  if name == "slice" then return slice.new(rb, Base) end
  if name == "without_replacement" then return (setmetatable({ drop_last = p.drop_last == true }, Permuted)) end
  return (setmetatable({}, Uniform))
end

return M
