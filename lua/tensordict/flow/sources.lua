-- flow/sources.lua: the in-memory source and sink: TensorSource (batches of rows of a
-- TensorDict) and Collect (keeps what reaches it). The file-backed ones are in
-- memmap.lua and csv.lua, the synthetic one in synthetic.lua.
local join = require("tensordict.dict.join")
local random = require("tensordict.tensor.random")
local core = require("tensordict.flow.core")
local meter = require("tensordict.flow.meter")

------------------------------------------------------------------------ TensorSource

local TensorSource = core.define("TensorSource", {
  kind = "source",
  doc = "Yields batches of rows of an in-memory TensorDict (views, or gathered copies when shuffled).",
  params = {
    { "td", "tensordict", required = true, doc = "the data: rows along its first batch dim" },
    { "batch_size", "integer", required = true, min = 1, doc = "rows per batch (the last one may be smaller)" },
    { "shuffle", "boolean", default = false, doc = "a new seeded permutation of the rows each epoch" },
    { "seed", "seed", doc = "the permutation's seed (default: the pipeline seed)" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than batch_size rows" },
    { "epochs", "integer", default = 1, min = 1, doc = "passes over the data" },
  },
})

function TensorSource:init()
  if self.p.td:batch_dims() == 0 then
    self:fail("td has batch size []; its rows are taken along the first batch dim")
  end
  self.out_keys = self.p.td:keys({ include_nested = true, leaves_only = true })
end

-- Rows yielded over all epochs.
function TensorSource:len()
  local n, b = #self.p.td, self.p.batch_size
  if self.p.drop_last then n = n - n % b end
  return n * self.p.epochs
end

function TensorSource:keys() return self.out_keys end
function TensorSource:key_dtypes() return core.leaf_dtypes(self.p.td) end
function TensorSource:row_bytes() return core.row_bytes(self.p.td) end

-- This rank's share of n rows in a data-parallel run (ctx.dist, set by the tdflow host
-- under mpirun; docs/dist.md): 1-based first and last row, ranks taking consecutive
-- ranges in rank order, their sizes differing by one at most. All rows without ctx.dist.
local function shard_rows(n, ctx)
  local d = ctx and ctx.dist
  if not d or d.size <= 1 then return 1, n end
  return math.floor(n * d.rank / d.size) + 1, math.floor(n * (d.rank + 1) / d.size)
end

-- An iterator over batches of b rows of td along its first batch dim: views, or, with
-- p.shuffle, gathered copies in a new seeded permutation per epoch (p.seed, else the
-- pipeline's). p.drop_last drops a last short batch; p.epochs (default 1) passes.
-- Under ctx.dist each rank takes its share (shard_rows) of the rows, or of each epoch's
-- permutation, which every rank draws alike from the same seed. MemmapSource uses it too.
-- The second result is the pass's position, a table the iterator keeps current:
-- {epoch =, start = (the next row), gen = (the generator's state before this epoch's
-- permutation)}; a copy of one given as from (a checkpoint's) continues from there.
local function row_batches(td, b, p, ctx, from)
  local lo, hi = shard_rows(#td, ctx)
  local n = hi - lo + 1
  local gen = p.shuffle and random.Generator(core.setting(p, "seed", ctx, 0))
  local epochs = p.epochs or 1
  local pos = { epoch = 0, start = n + 1 }
  local order
  local function permute()
    pos.gen = gen:get_state()
    order = random.randperm(#td, "int64", gen)
    if n ~= #td then order = order[{ { lo, hi } }] end
  end
  if from then
    pos.epoch, pos.start = from.epoch, from.start
    if gen and from.gen then
      gen:set_state(from.gen)
      permute()
    end
  end
  if not gen and (lo ~= 1 or hi ~= #td) then td = td[{ { lo, hi } }] end
  return function()
    if pos.start > n or (p.drop_last and pos.start + b - 1 > n) then
      pos.epoch = pos.epoch + 1
      if pos.epoch > epochs then return nil end
      pos.start = 1
      if gen then permute() end
      if n == 0 or (p.drop_last and b > n) then return nil end
    end
    local stop = math.min(n, pos.start + b - 1)
    local rows = { pos.start, stop }
    pos.start = stop + 1
    if order then return td[order[{ rows }]] end
    return td[{ rows }]
  end, pos
end

-- A copy of a row_batches position (what a source's state() gives).
local function copy_position(pos)
  if not pos then return nil end
  return { epoch = pos.epoch, start = pos.start, gen = pos.gen }
end

function TensorSource:iter(ctx)
  local nxt, pos = row_batches(self.p.td, self.p.batch_size, self.p, ctx, self.from)
  self.from, self.position = nil, pos
  return nxt
end

-- Checkpoints: the position of the pass in progress; restore makes the next iter()
-- continue from a recorded one.
function TensorSource:state() return copy_position(self.position) end
function TensorSource:restore(state) self.from = state end

---------------------------------------------------------------------------- Collect

local Collect = core.define("Collect", {
  kind = "sink",
  doc = "Keeps every batch that reaches it; finish() returns them as a list, or joined with cat.",
  params = {
    { "cat", "boolean", default = false,
      doc = "finish() returns one TensorDict (T.cat along dim 1; nil when nothing came)" },
  },
})

function Collect:init() self.batches = {} end
function Collect:open() self.batches = {} end
function Collect:write(td) self.batches[#self.batches + 1] = td end

function Collect:finish()
  local list = self.batches
  self.batches = {}
  if not self.p.cat then return list end
  if #list == 0 then return nil end
  if #list == 1 then return list[1] end
  return join.cat(list, 1)
end

function Collect:abort() self.batches = {} end

---------------------------------------------------------------------------- Discard

local Discard = core.define("Discard", {
  kind = "sink",
  doc = "Takes batches and keeps nothing: finish() returns the rows it saw "
    .. "(for runs kept for their side effects or timing).",
  params = {},
})

function Discard:open() self.rows = 0 end
function Discard:write(td) self.rows = (self.rows or 0) + meter.rows(td) end
function Discard:finish() return self.rows or 0 end
function Discard:abort() self.rows = 0 end

return { TensorSource = TensorSource, Collect = Collect, Discard = Discard, row_batches = row_batches,
  shard_rows = shard_rows, copy_position = copy_position }
