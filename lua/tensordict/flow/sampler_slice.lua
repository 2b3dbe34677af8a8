-- flow/sampler_slice.lua: flow.ReplayBuffer's sampler = "slice", torchrl's SliceSampler
-- on the ring: sample(n) draws num_slices pieces of slice_len consecutive steps, each
-- inside one trajectory, and returns them one after the other as n = num_slices *
-- slice_len rows (torchrl's flat layout: result:view(num_slices, slice_len) gives one
-- piece per row), with "index" (1-based ring positions).
--
-- Trajectories are read in the ring's order, oldest row first: with traj_key, a run of
-- rows with equal ids is one; with end_key, a true marks a trajectory's last step. The
-- newest row always ends one (the write cursor: after it come the oldest rows, which
-- belong to another time), so no piece wraps from the newest rows into the oldest. As
-- torchrl does (strict_length), a piece's trajectory is drawn uniformly among those of
-- at least slice_len steps, then its start uniformly inside it.
local append = require("tensordict.dict.append")
local create = require("tensordict.tensor.create")
local join = require("tensordict.tensor.join")
local is_tensor = require("tensordict.tensor").is_tensor
local flow_core = require("tensordict.flow.core")

local M = {}

local Slice = {}
Slice.__index = Slice

function M.new(rb, base)
  setmetatable(Slice, base)
  local p = rb.p
  if (p.traj_key == nil) == (p.end_key == nil) then
    rb:fail("sampler = \"slice\" needs traj_key (rows with equal ids are one trajectory) or end_key (a bool leaf "
      .. "marking each trajectory's last step)%s", p.traj_key and ", not both" or "")
  end
  if (p.slice_len == nil) == (p.num_slices == nil) then
    rb:fail("sampler = \"slice\" needs slice_len (steps per piece) or num_slices (pieces per sample)%s",
      p.slice_len and ", not both" or "")
  end
  return (setmetatable({}, Slice))
end

-- The leaf key of rb's ring in ring order (oldest row first), one value per row.
local function in_ring_order(rb, key, what)
  local leaf = rb.buf:get(key)
  local cap, filled, pos = rb.p.capacity, rb.filled, rb.pos
  if not is_tensor(leaf) then
    rb:fail("sample: %s %s is not a tensor leaf of the buffer", what, flow_core.key_text(key))
  end
  if leaf:numel() ~= cap then
    rb:fail("sample: %s %s must hold one value per row, got shape [%s]", what, flow_core.key_text(key),
      table.concat(leaf:size(), ", "))
  end
  leaf = leaf:view(-1)
  if filled < cap or pos == 0 then return leaf:narrow(1, 1, filled) end
  return join.cat({ leaf:narrow(1, pos + 1, cap - pos), leaf:narrow(1, 1, pos) })
end

-- The trajectories of the ring as two arrays, their first row (0-based, ring order) and
-- their length; recomputed after each extend.
local function trajectories(self, rb)
  if self.made_at == rb.extends then return self.starts, self.lens end
  local p, filled = rb.p, rb.filled
  local last -- a bool per row (ring order): the row ends a trajectory
  if p.traj_key then
    local ids = in_ring_order(rb, p.traj_key, "traj_key")
    last = create.empty({ filled }, "bool")
    if filled > 1 then
      last:narrow(1, 1, filled - 1):copy_(ids:narrow(1, 1, filled - 1):ne(ids:narrow(1, 2, filled - 1)))
    end
  else
    last = in_ring_order(rb, p.end_key, "end_key"):ne(0)
  end
  last[filled] = true
  local ends = last:nonzero():view(-1):totable() -- 1-based: row ends[i] is a last step
  local starts, lens, from = {}, {}, 0
  for i, e in ipairs(ends) do
    starts[i], lens[i] = from, e - from
    from = e
  end
  self.starts, self.lens, self.made_at = starts, lens, rb.extends
  return starts, lens
end

-- The trajectories of lens at least len steps long (their positions in lens), and the
-- longest length; kept while the trajectories and len stay the same.
local function long_enough(self, lens, len)
  if self.fit_of ~= lens or self.fit_len ~= len then
    local fit, longest = {}, 0
    for i, l in ipairs(lens) do
      if l >= len then fit[#fit + 1] = i end
      longest = math.max(longest, l)
    end
    self.fit, self.longest, self.fit_of, self.fit_len = fit, longest, lens, len
  end
  return self.fit, self.longest
end

function Slice:sample(rb, n, gen)
  local p = rb.p
  local len, count = p.slice_len, p.num_slices
  if len then count = n / len else len = n / count end
  if count % 1 ~= 0 then
    rb:fail("sample: n = %d is not a multiple of %s = %d", n, p.slice_len and "slice_len" or "num_slices",
      p.slice_len or p.num_slices)
  end
  local starts, lens = trajectories(self, rb)
  local fit, longest = long_enough(self, lens, len)
  if #fit == 0 then
    rb:fail("sample: no trajectory has slice_len = %d steps (the longest of the %d has %d)", len, #lens, longest)
  end
  local u = create.empty({ 2 * count }, "float64"):uniform_(0, 1, gen):totable()
  -- ring order to ring rows: the oldest row is at the cursor once the ring is full
  local cap = p.capacity
  local shift = rb.filled == cap and rb.pos or 0
  local pos = {}
  for s = 0, count - 1 do
    local t = fit[math.floor(u[2 * s + 1] * #fit) + 1]
    local first = starts[t] + math.floor(u[2 * s + 2] * (lens[t] - len + 1))
    for j = 0, len - 1 do pos[s * len + j + 1] = (first + j + shift) % cap end
  end
  local index = create.tensor(pos, "int64")
  local rows = append.gather_rows(rb.buf, index)
  rows:set("index", index:add(1))
  return rows
end

return M
