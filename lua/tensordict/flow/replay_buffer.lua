-- flow/replay_buffer.lua: flow.ReplayBuffer, a preallocated ring of rows on disk (the RL
-- use case) that is also a sink; its counters and its sampler's state live in the
-- ring's folder. How sample draws is flow/samplers.lua's; the rank-parallel extend is
-- flow/replay_ranks.lua's; the ring's files are dict/append.lua's (core/store/append.c).
-- (Split from flow/memmap.lua, which re-exports it, when the samplers came.)
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local append = require("tensordict.dict.append")
local random = require("tensordict.tensor.random")
local core = require("tensordict.flow.core")
local fs = require("tensordict.fs")
local replay_ranks = require("tensordict.flow.replay_ranks")
local samplers = require("tensordict.flow.samplers")

local describe = util.describe
local is_td = td_core.is_td

local GENERATOR_MT = getmetatable(random.Generator(0))

local ReplayBuffer = core.define("ReplayBuffer", {
  kind = "sink",
  doc = "A ring of capacity rows on disk (memmap_like of the first batch's structure): "
    .. "extend(td) writes rows, wrapping around; sample(n, gen) draws n rows as the sampler says "
    .. "(torchrl's samplers: uniform with replacement by default). Its fill count, cursor and "
    .. "priorities are kept on disk: a ring at path is reopened. As a sink, write extends and "
    .. "finish returns the buffer.",
  params = {
    { "path", "string", required = true, doc = "the folder of the ring (capacity rows, zero-filled at first); "
      .. "a ring already there is reopened, with its rows, length and cursor" },
    { "capacity", "integer", required = true, min = 1, doc = "rows kept; older rows are overwritten" },
    { "existsok", "boolean", default = false, doc = "replace what is at path (a ring too) with a new ring "
      .. "at the first extend" },
    { "fsync", "boolean", default = true, doc = "sync the preallocated files (crash-safe creation)" },
    { "sampler", "string", default = "uniform", one_of = samplers.NAMES, doc = "how sample draws: uniform with "
      .. "replacement, without_replacement (each row once per epoch), prioritized (by priority, with "
      .. "importance weights), slice (pieces of trajectories)" },
    { "alpha", "number", min = 0, doc = "prioritized: P(i) = p_i^alpha / sum p^alpha (default 0.6)" },
    { "beta", "number", min = 0, doc = "prioritized: importance weights (N P(i))^-beta, over the largest "
      .. "(default 0.4)" },
    { "eps", "number", min = 0, doc = "prioritized: added to every priority (default 1e-8)" },
    { "drop_last", "boolean", doc = "without_replacement: start a new epoch rather than return fewer than n rows "
      .. "(default false)" },
    { "traj_key", "key", doc = "slice: the leaf of trajectory ids (rows with equal ids in a row are one)" },
    { "end_key", "key", doc = "slice: the bool leaf marking each trajectory's last step (instead of traj_key)" },
    { "slice_len", "integer", min = 1, doc = "slice: steps per piece (n / slice_len pieces)" },
    { "num_slices", "integer", min = 1, doc = "slice: pieces per sample (n / num_slices steps each; instead of "
      .. "slice_len)" },
  },
  examples = {
    'local rb = flow.ReplayBuffer{path = "rb", capacity = 100000}; rb:extend(td); local b = rb:sample(256, g)',
    'flow.ReplayBuffer{path = "rb", capacity = 1000000, sampler = "prioritized", alpha = 0.7, beta = 0.5}',
    'flow.ReplayBuffer{path = "rb", capacity = 1000000, sampler = "slice", traj_key = "episode", slice_len = 32}',
  },
})

function ReplayBuffer:init()
  self.pos, self.filled = 0, 0
  self.extends = 0 -- extends so far (what a sampler's cache is of)
  self.sampler = samplers.new(self)
end

-- The ring at path mapped read-write with its counters (fill count and cursor).
local function map_ring(self, hint)
  local ring, counters = append.open_ring(self.p.path)
  if not ring then self:fail("%s%s", counters, hint or "") end
  self.buf, self.counters = ring, counters
  self.filled, self.pos = counters[3], counters[4]
  return ring
end

-- The ring already at path, unless existsok replaces it. Looked for once, at the first
-- use.
local function attach(self)
  if self.buf or self.looked then return end
  self.looked = true
  if self.p.existsok or not fs.exists(self.p.path) then return end
  local ring = map_ring(self, "; pass existsok = true to replace it")
  if #ring ~= self.p.capacity then
    self:fail("'%s' is a ring of %d rows, not %d (capacity); pass existsok = true to replace it",
      self.p.path, #ring, self.p.capacity)
  end
  self.sampler:ring_ready(self, false)
end

-- A pipeline's open: the ring at path is reopened (or, with existsok, replaced at the
-- first extend); a path holding something else is refused before data moves. In a
-- data-parallel run (ctx.dist) the ranks extend one ring (flow/replay_ranks.lua): their
-- rows reach it at finish.
function ReplayBuffer:open(ctx)
  if self.ranks then replay_ranks.abort(self.ranks) end
  self.ranks = ctx and ctx.dist and replay_ranks.open(self, ctx.dist) or nil
  attach(self)
end

-- Rows filled (at most capacity). (`#rb` cannot work: a node is a Lua table.)
function ReplayBuffer:len()
  attach(self)
  return self.filled
end

-- The ring itself (capacity rows, read-write mapped), nil before the first extend.
function ReplayBuffer:storage()
  attach(self)
  return self.buf
end

local function make_ring(self, td)
  local opts = { existsok = self.p.existsok, fsync = self.p.fsync }
  local ring, msg = append.rows_like(td, self.p.capacity, self.p.path, opts)
  if not ring then self:fail("extend: %s", (msg:gsub("%(pass existsok%)", "(pass existsok = true to replace it)"))) end
  local counters, err = append.new_ring_counters(self.p.path, self.p.capacity, opts)
  if not counters then self:fail("extend: %s", err) end
  self.buf, self.counters, self.pos, self.filled = ring, counters, 0, 0
  self.sampler:ring_ready(self, true)
end

-- rb:extend(td): td's rows go after the newest ones, wrapping around; of a batch of
-- more than capacity rows only the last capacity are kept. Returns rb. The counters on
-- disk move after the rows are written.
function ReplayBuffer:extend(td)
  if not is_td(td) then self:fail("extend: expected a TensorDict, got %s", describe(td)) end
  if td:batch_dims() == 0 then
    self:fail("extend: a batch needs at least one batch dim (rows), got batch size []")
  end
  attach(self)
  if self.ranks then
    if self.buf then
      local fits, msg = append.check_rows_like(self.buf, td, "the buffer")
      if not fits then self:fail("extend: %s", msg) end
    end
    replay_ranks.extend(self, self.ranks, td)
    return self
  end
  if not self.buf then make_ring(self, td) end
  local buf, cap = self.buf, self.p.capacity
  local fits, msg = append.check_rows_like(buf, td, "the buffer")
  if not fits then self:fail("extend: %s", msg) end
  local n = #td
  if n == 0 then return self end
  if n > cap then td, n = td[{ { n - cap + 1, n } }], cap end
  local pos = self.pos
  local first = math.min(n, cap - pos)
  buf[{ { pos + 1, pos + first } }] = first == n and td or td[{ { 1, first } }]
  if first < n then buf[{ { 1, n - first } }] = td[{ { first + 1, n } }] end
  self.pos = (pos + n) % cap
  self.filled = math.min(cap, self.filled + n)
  local counters = self.counters
  counters[3], counters[4] = self.filled, self.pos
  self.extends = self.extends + 1
  self.sampler:extended(self, pos, n)
  return self
end

-- rb:sample(n [, gen]): n rows drawn from the filled ones as the sampler says (gen a
-- T.Generator, else the global generator): a new TensorDict of batch {n}
-- (flow/samplers.lua).
function ReplayBuffer:sample(n, gen)
  if not util.is_int(n) or n < 0 then
    self:fail("sample: n must be a non-negative integer, got %s", describe(n))
  end
  attach(self)
  if self.ranks then
    self:fail("sample: in a data-parallel run (mpirun) the ranks' rows reach the ring at finish; sample after the run")
  end
  if self.filled == 0 then self:fail("sample: the buffer is empty (extend it first)") end
  if gen ~= nil and getmetatable(gen) ~= GENERATOR_MT then
    self:fail("sample: gen must be a T.Generator (or nil: the global one), got %s", describe(gen))
  end
  return self.sampler:sample(self, n, gen)
end

-- rb:update_priority(index, priority): with sampler = "prioritized", rows index (1-based,
-- as a sample's "index": a tensor, a number or an array) take priority (one each, or one
-- for all; finite and >= 0). Returns rb.
function ReplayBuffer:update_priority(index, priority)
  attach(self)
  if self.ranks then
    self:fail("update_priority: in a data-parallel run (mpirun) the ranks' rows reach the ring at finish; "
      .. "update after the run")
  end
  if self.filled == 0 then self:fail("update_priority: the buffer is empty (extend it first)") end
  self.sampler:update_priority(self, index, priority)
  return self
end

-- The rows and the counters durable (msync).
function ReplayBuffer:sync()
  if self.buf then
    self.buf:sync()
    local ok, msg = append.sync_counters(self.counters)
    if not ok then self:fail("sync: %s", msg) end
    self.sampler:sync(self)
  end
  return self
end

-- The sink side: write extends; finish syncs and returns the buffer (rb itself).
function ReplayBuffer:write(td) return self:extend(td) end

function ReplayBuffer:finish()
  local w = self.ranks
  if w then
    self.ranks = nil
    local ok, total = pcall(replay_ranks.finish, self, w, function() attach(self) end,
      function(structure) make_ring(self, structure) end,
      function() map_ring(self); self.sampler:ring_ready(self, false) end)
    if not ok then
      replay_ranks.abort(w)
      error(total, 0)
    end
    -- the rows placed: the stream's last (at most capacity), ending at the cursor
    local cap = self.p.capacity
    local placed = math.min(total, cap)
    if placed > 0 then
      self.extends = self.extends + 1
      self.sampler:extended(self, (self.pos - placed) % cap, placed)
    end
  end
  return self:sync()
end

-- Nothing to undo: the ring is a working buffer, never a committed result (in a
-- data-parallel run the rows not yet in it are dropped).
function ReplayBuffer:abort()
  local w = self.ranks
  self.ranks = nil
  if w then replay_ranks.abort(w) end
end

function ReplayBuffer:close() self:sync() end

return ReplayBuffer
