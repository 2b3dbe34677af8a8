-- flow/batching.lua: stream nodes that change how rows are grouped into batches:
-- Batch (stack n containers), Unbatch (one container per row), Rebatch (batches of
-- exactly size rows), Shuffle (a seeded shuffle buffer over rows) and Take (the first
-- n rows). They hold rows between pushes, so a source must not overwrite a batch it
-- has yielded; flush emits what they hold at the end of the stream.
local join = require("tensordict.dict.join")
local random = require("tensordict.tensor.random")
local core = require("tensordict.flow.core")

-- Rows along the first batch dim; raises for a batch without batch dims.
local function rows_of(node, td)
  if td:batch_dims() == 0 then
    node:fail("the batch has batch size []; %s counts rows along the first batch dim", node.type_name)
  end
  return #td
end

------------------------------------------------------------------------------ Batch

local Batch = core.define("Batch", {
  doc = "Stacks every size incoming TensorDicts into one (T.stack along a new first dim).",
  params = {
    { "size", "integer", required = true, min = 1, doc = "containers per output batch" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than size" },
  },
})

function Batch:init() self.held = {} end

function Batch:push(td, emit)
  local held = self.held
  held[#held + 1] = td
  if #held == self.p.size then
    self.held = {}
    emit(join.stack(held, 1))
  end
end

function Batch:flush(emit)
  local held = self.held
  self.held = {}
  if #held > 0 and not self.p.drop_last then emit(join.stack(held, 1)) end
end

function Batch:close() self.held = {} end

-- Checkpoints: the containers held.
function Batch:state() return { held = self.held } end
function Batch:restore(state) self.held = state.held end

---------------------------------------------------------------------------- Unbatch

local Unbatch = core.define("Unbatch", {
  doc = "Emits each row of a batch as its own TensorDict (the first batch dim removed).",
  params = {},
})

function Unbatch:push(td, emit)
  for i = 1, rows_of(self, td) do emit(td[i]) end
end

---------------------------------------------------------------------------- Rebatch

local Rebatch = core.define("Rebatch", {
  keeps_rows = true,
  doc = "Turns batches of any sizes into batches of exactly size rows (the last one partial unless drop_last).",
  params = {
    { "size", "integer", required = true, min = 1, rows_held = true, doc = "rows per output batch" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than size rows" },
  },
})

function Rebatch:init()
  self.pieces, self.rows = {}, 0
end

-- Takes exactly n rows from the front of the held pieces: views where one piece
-- covers them, one cat otherwise.
local function take_rows(self, n)
  local parts, need, pieces = {}, n, self.pieces
  while need > 0 do
    local p = pieces[1]
    local pn = #p
    if pn <= need then
      parts[#parts + 1] = p
      table.remove(pieces, 1)
      need = need - pn
    else
      parts[#parts + 1] = p[{ { 1, need } }]
      pieces[1] = p[{ { need + 1, pn } }]
      need = 0
    end
  end
  self.rows = self.rows - n
  if #parts == 1 then return parts[1] end
  return join.cat(parts, 1)
end

function Rebatch:push(td, emit)
  local n = rows_of(self, td)
  if n == 0 then return end
  self.pieces[#self.pieces + 1] = td
  self.rows = self.rows + n
  local size = self.p.size
  while self.rows >= size do emit(take_rows(self, size)) end
end

function Rebatch:flush(emit)
  if self.rows > 0 and not self.p.drop_last then emit(take_rows(self, self.rows)) end
  self.pieces, self.rows = {}, 0
end

function Rebatch:close() self.pieces, self.rows = {}, 0 end

-- Checkpoints: the rows waiting for the next batch, as one container (the batches
-- that come out of them are the same views or copies of the same bytes).
function Rebatch:state()
  local pieces = self.pieces
  if #pieces == 0 then return {} end
  return { held = #pieces == 1 and pieces[1] or join.cat(pieces, 1) }
end
function Rebatch:restore(state)
  self.pieces, self.rows = {}, 0
  if state.held then self.pieces, self.rows = { state.held }, #state.held end
end

---------------------------------------------------------------------------- Shuffle

local Shuffle = core.define("Shuffle", {
  keeps_rows = true,
  doc = "A seeded shuffle buffer over rows: each output row is drawn at random from the last buffer rows seen.",
  params = {
    { "buffer", "integer", required = true, min = 1, rows_held = true, doc = "rows held; larger mixes further" },
    { "seed", "seed", doc = "the generator's seed (default: the pipeline seed)" },
  },
})

function Shuffle:init() self:reset() end

function Shuffle:reset()
  self.pieces, self.rows = {}, 0  -- while filling
  self.buf = nil                  -- then: buffer rows, as one container
  self.last = nil                 -- the last batch's row count: flush's batch size
  self.gen = nil
end

function Shuffle:open(ctx)
  self:reset()
  self.gen = random.Generator(core.setting(self.p, "seed", ctx, 0))
end

-- n distinct random slots of the buffer, 1-based int64.
local function slots(self, n)
  return random.randperm(self.p.buffer, "int64", self.gen)[{ { 1, n } }]
end

-- Exchanges incoming rows with random buffer rows: the buffer's rows go out, the
-- incoming ones take their places.
local function exchange(self, td, emit)
  local m, cap = #td, self.p.buffer
  local start = 1
  while start <= m do
    local stop = math.min(m, start + cap - 1)
    local part = (start == 1 and stop == m) and td or td[{ { start, stop } }]
    local idx = slots(self, stop - start + 1)
    local out = self.buf[idx]
    self.buf[idx] = part
    emit(out)
    start = stop + 1
  end
end

function Shuffle:push(td, emit)
  if not self.gen then self.gen = random.Generator(self.p.seed or 0) end
  local n = rows_of(self, td)
  if n == 0 then return end
  self.last = n
  if self.buf then return exchange(self, td, emit) end
  self.pieces[#self.pieces + 1] = td
  self.rows = self.rows + n
  if self.rows < self.p.buffer then return end
  local all = #self.pieces == 1 and self.pieces[1]:clone() or join.cat(self.pieces, 1)
  self.pieces, self.rows = {}, 0
  local cap = self.p.buffer
  self.buf = all[{ { 1, cap } }]
  if #all > cap then exchange(self, all[{ { cap + 1, #all } }], emit) end
end

-- The rows held, in random order, in batches of the last input's size.
function Shuffle:flush(emit)
  local held = self.buf
  if not held and #self.pieces > 0 then held = join.cat(self.pieces, 1) end
  local last, gen = self.last, self.gen
  self:reset()
  self.gen = gen -- the stream goes on drawing from the same generator
  if not held or #held == 0 then return end
  local mixed = held[random.randperm(#held, "int64", gen)]
  for a = 1, #mixed, last do
    emit(mixed[{ { a, math.min(#mixed, a + last - 1) } }])
  end
end

function Shuffle:close() self.pieces, self.buf = {}, nil end

-- Checkpoints: the rows gathered while filling, or the buffer, the last input's size
-- and the generator's state (the next exchange draws the same slots).
function Shuffle:state()
  local filling
  if #self.pieces > 0 then filling = #self.pieces == 1 and self.pieces[1] or join.cat(self.pieces, 1) end
  return { filling = filling, buffer = self.buf, last = self.last, gen = self.gen and self.gen:get_state() }
end
function Shuffle:restore(state)
  self.pieces, self.rows = {}, 0
  if state.filling then self.pieces, self.rows = { state.filling }, #state.filling end
  self.buf, self.last = state.buffer, state.last
  if state.gen then
    self.gen = self.gen or random.Generator(0)
    self.gen:set_state(state.gen)
  end
end

------------------------------------------------------------------------------- Take

local Take = core.define("Take", {
  doc = "Passes the first n rows and drops the rest of the stream.",
  params = {
    { "n", "integer", required = true, min = 0, doc = "rows passed" },
  },
})

function Take:init() self.taken = 0 end
function Take:open() self.taken, self.done = 0, nil end

function Take:state() return { taken = self.taken, done = self.done or false } end
function Take:restore(state) self.taken, self.done = state.taken, state.done or nil end

function Take:push(td, emit)
  local left = self.p.n - self.taken
  if left <= 0 then
    self.done = true -- tells flow.run that nothing more will pass: the source may stop
    return
  end
  local n = rows_of(self, td)
  if n < left then
    self.taken = self.taken + n
    return emit(td)
  end
  self.taken, self.done = self.p.n, true
  emit(n == left and td or td[{ { 1, left } }])
end

return { Batch = Batch, Unbatch = Unbatch, Rebatch = Rebatch, Shuffle = Shuffle, Take = Take }
