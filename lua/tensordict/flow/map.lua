-- flow/map.lua: Map, a stream node that runs fn on batches in worker processes
-- (lua/tensordict/dict/workers.lua): forked once at open (they inherit this Lua state, so
-- closures and upvalues work), reused for every batch, batches and results through
-- shared memory. Results come out in input order unless ordered = false. Batch k (the
-- k-th pushed since open, from 1) seeds the global generator from (seed, k) before fn
-- runs, so the output is the same for any worker count, workers = 0 (inline) included.
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local core = require("tensordict.flow.core")
local workers = require("tensordict.dict.workers")

local describe, is_td = util.describe, td_core.is_td

local Map = core.define("Map", {
  keeps_rows = true,
  doc = "Runs fn(batch) -> batch or nil in worker processes, batches through shared memory.",
  params = {
    { "fn", "function", required = true, takes = "batch",
      doc = "fn(td) -> TensorDict or nil (drops the batch); runs in a worker" },
    { "workers", "integer", min = 0, max = core.MAX_WORKERS,
      doc = "worker processes (default: ctx.workers, else 2); 0 runs fn inline" },
    { "ordered", "boolean", default = true, doc = "emit results in input order (false: as they finish)" },
    { "seed", "seed", doc = "seeds batch k's generator from (seed, k) (default: the pipeline seed)" },
    { "timeout", "number", min = 0,
      doc = "seconds one batch may take in a worker: past it the run fails and every worker is killed "
        .. "(default: ctx.timeout, a recipe's 'timeout'; none: as long as it takes)" },
    { "in_keys", "keys", doc = "only these keys are shipped to fn (default: the whole batch)" },
    { "out_keys", "keys",
      doc = "these keys of fn's result are written into the batch, which is emitted "
        .. "(default: fn's result is emitted)" },
  },
})

function Map:init()
  self.in_keys = self.p.in_keys or {}
  self.out_keys = self.p.out_keys or {}
  self.keys_unknown = self.p.out_keys == nil -- fn's result may hold any key
  self.count = 0       -- batches pushed since open
  self.held = {}       -- k -> the pushed batch, while k is in flight (out_keys needs it)
  self.ready = {}      -- k -> result (false: dropped), waiting for its turn
  self.next_out = 1    -- the next batch number to emit in order
end

-- What fn sees of a batch.
local function shipped(self, td)
  local keys = self.p.in_keys
  if not keys then return td end
  core.require_keys(self, td, keys)
  return td:select(unpack(keys))
end

-- fn's result checked, for a worker (a check error carries no traceback).
local function run_fn(self, td)
  local r = self.p.fn(td)
  if r ~= nil and not is_td(r) then
    workers.check_error(("fn returned %s, expected a TensorDict or nil"):format(describe(r)))
  end
  if r ~= nil and r._td_p == nil then workers.check_error("fn returned a freed TensorDict") end
  if r ~= nil and self.p.out_keys then
    for _, key in ipairs(self.p.out_keys) do
      if r:get(key) == nil then
        workers.check_error(("fn's result has no key %s (out_keys); its keys: %s")
          :format(core.key_text(key), core.keys_text(r)))
      end
    end
  end
  return r
end

-- What is emitted for batch td given fn's result r.
local function output(self, td, r)
  if r == nil or not self.p.out_keys then return r end
  local out = core.writable(td)
  for _, key in ipairs(self.p.out_keys) do out:set(key, r:get(key)) end
  return out
end

function Map:open(ctx)
  self:close()
  ctx = ctx or {}
  self.seed = core.setting(self.p, "seed", ctx, 0)
  local n = core.setting(self.p, "workers", ctx, 2)
  self.count, self.held, self.ready, self.next_out = 0, {}, {}, 1
  self.broken = false
  local timeout = core.setting(self.p, "timeout", ctx, nil)
  if timeout ~= nil and not (type(timeout) == "number" and timeout > 0) then
    self:fail("timeout must be a number of seconds > 0, got %s", describe(timeout))
  end
  if n > 0 then
    self.pool = workers.open(n, function(_, td) return run_fn(self, td) end, self.seed, "Map", "batch",
      timeout ~= math.huge and timeout or nil)
  end
end

function Map:close()
  local pool = self.pool
  self.pool = nil
  if pool then pool:close() end
  self.held, self.ready = {}, {}
end

-- A failed batch closes the workers (none outlives a failure) and raises.
local function failed(self, err)
  self:close()
  self.broken = true
  err = workers.clean_error(err):gsub("^Map: ", "")
  self:fail("%s", err)
end

local AHEAD = 2 -- batches per worker submitted and not yet emitted, in order

-- Emits the results whose turn has come (all of them when not ordered).
local function emit_ready(self, emit)
  while self.ready[self.next_out] ~= nil do
    local r = self.ready[self.next_out]
    self.ready[self.next_out] = nil
    self.next_out = self.next_out + 1
    if r then emit(r) end
  end
end

-- One reply (waiting up to timeout_ms; nil: as long as it takes); false when none came.
local function collect(self, emit, timeout_ms)
  local ok, k, r = pcall(self.pool.next, self.pool, timeout_ms)
  if not ok then failed(self, k) end
  if k == nil then return false end
  local td = self.held[k]
  self.held[k] = nil
  local out = output(self, td, r)
  if self.p.ordered then
    self.ready[k] = out or false
    emit_ready(self, emit)
  elseif out then
    emit(out)
  end
  return true
end

function Map:push(td, emit)
  if self.broken then self:fail("a batch failed earlier and the workers were stopped; open() the node again") end
  if self.seed == nil then self.seed = self.p.seed or 0 end
  self.count = self.count + 1
  local k = self.count
  local ship = shipped(self, td)
  if not self.pool then -- inline: the same seeding as a worker
    workers.seed_batch(self.seed, k)
    local ok, r = xpcall(run_fn, workers.traceback, self, ship)
    if not ok then self:fail("batch %d failed: %s", k, r) end
    self.next_out = k + 1
    local out = output(self, td, r)
    if out then emit(out) end
    return
  end
  while self.pool:idle() == 0 do collect(self, emit) end
  -- Ordered results wait for their turn, at most AHEAD per worker (torch's DataLoader
  -- keeps prefetch_factor = 2): a stalled batch holds the stream back rather than let the
  -- others pile up in memory, so what is in flight stays bounded whatever the timing.
  while self.p.ordered and k - self.next_out >= AHEAD * self.pool.n do
    if not collect(self, emit) then break end
  end
  self.held[k] = td
  local ok, err = pcall(self.pool.submit, self.pool, k, ship)
  if not ok then failed(self, err) end
  while self.pool:busy() > 0 and collect(self, emit, 0) do end
end

-- Everything in flight, emitted (in order when ordered).
function Map:drain(emit)
  if not self.pool then return end
  while self.pool:busy() > 0 do collect(self, emit) end
end

function Map:flush(emit) self:drain(emit) end

-- Checkpoints (taken after drain: nothing in flight): the batches pushed so far, since
-- batch k's seed comes from (seed, k), and the seed itself, which a resumed run must
-- share.
function Map:state()
  if self.pool and self.pool:busy() > 0 then self:fail("state: batches are in flight (drain first)") end
  return { count = self.count, seed = self.seed }
end
function Map:restore(state)
  if state.seed ~= self.seed then
    self:fail("restore: the checkpoint's batches were seeded from %s, this run's from %s",
      tostring(state.seed), tostring(self.seed))
  end
  self.count, self.next_out = state.count, state.count + 1
end

return { Map = Map }
