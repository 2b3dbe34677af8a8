-- flow/memmap.lua: the file-backed nodes. MemmapSource reads a memmap folder (Python
-- tensordict's layout, Python-written folders too) in batches of rows; MemmapSink
-- appends batches into a folder that is committed atomically at finish; ReplayBuffer
-- (flow/replay_buffer.lua, exported here too) is a preallocated ring on disk (the RL use
-- case) that is also a sink.
-- Appends and rings are dict/append.lua's (core/store/append.c, on top of the memmap
-- saver: temporary sibling, fsync, rename).
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local td_memmap = require("tensordict.dict.memmap")
local append = require("tensordict.dict.append")
local core = require("tensordict.flow.core")
local fs = require("tensordict.fs")
local sources = require("tensordict.flow.sources")
local checkpoint_io = require("tensordict.flow.checkpoint")
local ranks = require("tensordict.flow.memmap_ranks")
local row_batches, copy_position = sources.row_batches, sources.copy_position
local ToDevice = require("tensordict.flow.device").ToDevice
local td_device = require("tensordict.dict.device")

local describe = util.describe
local is_td = td_core.is_td

-- Raises as node, the error of a failed call (the library's message, or a Lua error).
local function node_error(node, err)
  err = tostring(err):gsub("^.-tensordict: ", "")
  node:fail("%s", err)
end

local function leaf_keys(td)
  return td:keys({ include_nested = true, leaves_only = true })
end

local function keys_list(td)
  local parts = {}
  for i, k in ipairs(leaf_keys(td)) do parts[i] = core.key_text(k) end
  return #parts == 0 and "none" or table.concat(parts, ", ")
end

---------------------------------------------------------------------- MemmapSource

local MemmapSource = core.define("MemmapSource", {
  kind = "source",
  doc = "Reads a memmap folder (Python tensordict's layout) in batches of rows, lazily: "
    .. "a batch is a view of the mapped files, or a gathered copy when shuffled.",
  params = {
    { "path", "string", required = true, doc = "the folder (a meta.json and one file per leaf)" },
    { "batch_size", "integer", required = true, min = 1, doc = "rows per batch (the last one may be smaller)" },
    { "shuffle", "boolean", default = false, doc = "visit the rows in a seeded random order" },
    { "seed", "seed", doc = "the order's seed (default: the pipeline seed, ctx.seed)" },
    { "keys", "keys", doc = "the leaves to read (key paths allowed; default: all)" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than batch_size rows" },
    { "device", "string", doc = "\"cuda\" or \"cuda:N\": batches arrive there, each pinned and its copy queued "
      .. "while the one before is processed (default: the host)" },
  },
  examples = {
    'flow.MemmapSource{path = "data/train", batch_size = 256, shuffle = true, keys = {"obs", {"next", "reward"}}}',
    'flow.MemmapSource{path = "data/train", batch_size = 4096, device = "cuda"}',
  },
})

-- The folder, mapped read-only and restricted to keys; raises naming the path.
function MemmapSource:load()
  if self.td then return self.td end
  local path = self.p.path
  local ok, td = pcall(td_memmap.load_memmap, path)
  if not ok then node_error(self, td) end
  if td:batch_dims() == 0 then
    self:fail("'%s' has batch size []; its rows are taken along the first batch dim", path)
  end
  local keys = self.p.keys
  if keys then
    for _, k in ipairs(keys) do
      if td:get(k) == nil then
        self:fail("key %s is not in '%s' (its keys: %s)", core.key_text(k), path, keys_list(td))
      end
    end
    td = td:select(unpack(keys))
  end
  self.td = td
  return td
end

function MemmapSource:init()
  -- The keys it yields, known without reading when keys is given; else read from the
  -- folder's meta.json when it is there (a spec may name a folder made later).
  if self.p.keys then
    self.out_keys = self.p.keys
  else
    local ok, td = pcall(td_memmap.load_memmap, self.p.path)
    self.out_keys = ok and leaf_keys(td) or {}
  end
end

function MemmapSource:open()
  if self.p.device then ToDevice.check_device(self, self.p.device) end
  self:load()
end

-- What the folder declares, for checks before any data moves (nothing when it does not
-- load yet: a spec may name a folder made later): each leaf's dtype, a row's bytes.
local function declared(self)
  local ok, td = pcall(self.load, self)
  return ok and td or nil
end
function MemmapSource:key_dtypes()
  local td = declared(self)
  return td and core.leaf_dtypes(td) or {}
end
function MemmapSource:row_bytes()
  local td = declared(self)
  return td and core.row_bytes(td) or nil
end

-- Shuffled batches are gathered copies (batch_size rows at once); the others are views.
function MemmapSource:preflight()
  local rb = self.p.shuffle and self:row_bytes()
  if not rb then return {} end
  return { core.memory_problem(self.p.batch_size * rb, ("batch_size = %.0f shuffled rows (gathered copies)")
    :format(self.p.batch_size)) }
end
function MemmapSource:close() self.td = nil end

-- Rows yielded (batch_size divides them when drop_last).
function MemmapSource:len()
  local n, b = #self:load(), self.p.batch_size
  if self.p.drop_last then n = n - n % b end
  return n
end

-- With a CUDA device: batch k + 1 is read, pinned and its copy queued (non-blocking)
-- before batch k is handed on, so reading and pinning overlap the device's work on
-- batch k; the pinned batch is kept until the next one is queued. The position a
-- checkpoint records is the handed-on batch's, not the one read ahead.
function MemmapSource:iter(ctx)
  local rows, pos = row_batches(self:load(), self.p.batch_size, self.p, ctx, self.from)
  self.from = nil
  local device = self.p.device
  if device == nil or device == "cpu" then
    self.position = function() return copy_position(pos) end
    return rows
  end
  ToDevice.check_device(self, device)
  local pinned
  local function fetch()
    local b = rows()
    if b == nil then return nil end
    pinned = b:pin_memory()
    return td_device.to(pinned, device, true, "MemmapSource")
  end
  local handed = copy_position(pos)
  local nxt = fetch()
  local after_nxt = copy_position(pos)
  self.position = function() return handed end
  return function()
    local cur = nxt
    if cur ~= nil then
      handed = after_nxt
      nxt = fetch()
      after_nxt = copy_position(pos)
    end
    return cur
  end
end

-- Checkpoints: the position of the pass in progress; restore makes the next iter()
-- continue from a recorded one.
function MemmapSource:state() return self.position and self.position() end
function MemmapSource:restore(state) self.from = state end

------------------------------------------------------------------------ MemmapSink

local MemmapSink = core.define("MemmapSink", {
  kind = "sink",
  doc = "Appends batches into a memmap folder, committed atomically at finish (temporary "
    .. "sibling, fsync, rename); after an error, abort or a crash the path holds its old "
    .. "state or nothing.",
  params = {
    { "path", "string", required = true, doc = "the folder to write" },
    { "existsok", "boolean", default = false, doc = "replace a memmap folder already at path (else open fails)" },
    { "fsync", "boolean", default = true, doc = "sync files and folders before the rename (crash-safe)" },
    { "checkpoint", "integer", min = 1, doc = "commit a checkpoint every this many rows, which "
      .. "flow.run{resume = true} (tdflow run --resume) continues after a crash or a kill" },
  },
  examples = { 'flow.MemmapSink{path = "out/episodes", existsok = true}',
    'flow.MemmapSink{path = "out/episodes", checkpoint = 1000000}' },
})

-- The name of the provenance record in a committed folder (tdflow's; Python tensordict
-- loads only what meta.json names, and "%p" begins no key's file name).
MemmapSink.PROVENANCE_FILE = "%provenance.json"

-- Before any data moves (tdflow check): a path that exists without existsok; a
-- checkpoint of an unfinished run that a fresh run would replace (or one to resume).
-- opts: resume, and under mpirun rank and ranks (this rank's checkpoint is looked at).
function MemmapSink:preflight(opts)
  local problems = {}
  local resume = opts and opts.resume
  if not self.p.existsok and fs.exists(self.p.path) then
    problems[#problems + 1] = ("path '%s' exists (pass existsok = true to replace it, e.g. --set sink.existsok=true)")
      :format(self.p.path)
  end
  local rank, size = opts and opts.rank, opts and opts.ranks
  local rows = MemmapSink.checkpoint_rows(self.p.path, rank, size)
  local of = rank and (" for rank %d of %d (a data-parallel run resumes on as many ranks as it ran on)")
    :format(rank, size) or ""
  if resume and not rows then
    problems[#problems + 1] = ("path '%s' has no checkpoint to resume%s"):format(self.p.path, of)
  elseif rows and not resume and not self.p.existsok then
    problems[#problems + 1] = ("path '%s' has a checkpoint of an unfinished run (%d rows%s): continue it "
      .. "with --resume, or start over with --set sink.existsok=true"):format(self.p.path, rows,
      rank and (" on rank %d"):format(rank) or "")
  end
  if #problems > 0 then return problems end
end

-- Where this sink's own append goes: path, or in a data-parallel run (which appends
-- here only when it checkpoints) the rank's own folder beside it.
local function own_target(self)
  local d = self.dist
  return d and ranks.own_path(self.p.path, "rank", d.rank, d.size) or self.p.path
end

-- Starts the append: checks the path (existsok), removes temporaries that processes
-- now gone left beside it, makes this one's temporary folder. With ctx.resume the
-- append continues from the path's checkpoint instead (resume_state gives what the run
-- recorded with it). In a data-parallel run (ctx.dist) every rank writes into the one
-- folder rank 0 commits (flow/memmap_ranks.lua), planned from ctx.rows_hint; one that
-- checkpoints appends to a checkpointed folder of each rank's own (own_target), which
-- finish copies into the one folder.
function MemmapSink:open(ctx)
  if self.app or self.ranks then self:abort() end
  if ctx then self.dist = ctx.dist end
  local opts = { existsok = self.p.existsok, fsync = self.p.fsync }
  local target = self.p.path
  self.every, self.provenance = self.p.checkpoint, nil
  if self.dist then target = own_target(self) end
  if ctx and ctx.resume then
    local a, msg = append.resume(target, opts)
    if not a then self:fail("%s", (msg:gsub("%(pass existsok%)", "(pass existsok = true to replace it)"))) end
    self.app = a
    return
  end
  if self.dist then
    if not self.p.existsok and fs.exists(self.p.path) then
      self:fail("path '%s' exists (pass existsok = true to replace it)", self.p.path)
    end
    if not self.p.checkpoint then
      self.ranks = ranks.open(self, self.dist, opts, ctx.rows_hint)
      return
    end
  end
  local a, msg = append.open(target, opts)
  if not a then self:fail("%s", (msg:gsub("%(pass existsok%)", "(pass existsok = true to replace it)"))) end
  self.app = a
end

function MemmapSink:write(td)
  if not is_td(td) then self:fail("write: expected a TensorDict, got %s", describe(td)) end
  if self.ranks then return ranks.write(self, self.ranks, td) end
  if not self.app then self:open() end
  local ok, msg = self.app:write(td)
  if not ok then self:fail("%s", msg) end
end

-- Rows written so far.
function MemmapSink:rows()
  if self.ranks then return ranks.rows(self.ranks) end
  return self.app and self.app:rows() or 0
end

------------------------------------------------------------- checkpoints (resume)

-- Whether this sink commits checkpoints (flow.run asks before it opens anything).
function MemmapSink:checkpointing() return self.p.checkpoint ~= nil end

-- A host's --checkpoint ROWS: the checkpoint parameter, set after the sink was made.
function MemmapSink:set_checkpoint(rows)
  if not util.is_int(rows) or rows < 1 then
    self:fail("checkpoint: expected an integer >= 1 (rows between checkpoints), got %s", describe(rows))
  end
  self.p.checkpoint = rows
end

-- True when checkpoint rows were written since the last checkpoint.
function MemmapSink:checkpoint_due()
  local a, every = self.app, self.every
  return a ~= nil and every ~= nil and a:rows() - (self.last_checkpoint or 0) >= every
end

-- Records a checkpoint: the rows written so far, durable, with state (the pipeline's,
-- from flow.run) beside them; the append goes on. The previous one stays on failure.
function MemmapSink:checkpoint(state)
  local a = self.app
  local dir, msg = a:stage()
  if not dir then self:fail("%s", msg) end
  checkpoint_io.write(dir, { pipeline = state, every = self.every }, { fsync = self.p.fsync })
  local ok, err = a:checkpoint()
  if not ok then self:fail("%s", err) end
  self.last_checkpoint = a:rows()
end

-- After open with ctx.resume: the state flow.run recorded with the checkpoint. The sink
-- goes on checkpointing at the recorded interval unless given its own.
function MemmapSink:resume_state()
  local dir = self.app and self.app:checkpoint_path()
  if not dir then self:fail("resume: the sink was not opened to resume") end
  local saved = checkpoint_io.read(dir)
  self.every = self.p.checkpoint or saved.every
  self.last_checkpoint = self.app:rows()
  return saved.pipeline
end

-- flow.run hands the run's provenance record over before finish: it is committed with
-- the rows, as PROVENANCE_FILE.
function MemmapSink:set_provenance(text) self.provenance = text end

-- Commits and returns the folder loaded (T.load_memmap(path), read-only): every row
-- written, in order. Without any batch the folder is an empty TensorDict of batch [0].
function MemmapSink:finish()
  if self.ranks then
    local w = self.ranks
    self.ranks = nil
    local ok, err = pcall(ranks.finish, self, w)
    if not ok then
      ranks.abort(w)
      error(err, 0)
    end
    return td_memmap.load_memmap(self.p.path)
  end
  if not self.app then self:open() end
  if self.dist then -- a data-parallel run that checkpoints
    local opts = { existsok = self.p.existsok, fsync = self.p.fsync }
    local ok, err = pcall(ranks.finish_own, self, self.dist, self.app, opts)
    if not ok then error(err, 0) end -- self.app and its checkpoint stay, for abort to keep
    self.app = nil
    return td_memmap.load_memmap(self.p.path)
  end
  if self.provenance then
    local ok, err = fs.write_atomic(self.app:path() .. "/" .. MemmapSink.PROVENANCE_FILE,
      self.provenance, self.p.fsync)
    if not ok then self:fail("provenance: %s", err) end
  end
  self:commit_app()
  return td_memmap.load_memmap(self.p.path)
end

-- Commits the append under way and frees it.
function MemmapSink:commit_app()
  local a = self.app
  self.app = nil
  local ok, msg = a:commit()
  if not ok then self:fail("%s", msg) end
end

-- Removes the temporary folder (a data-parallel rank: its own folders, and on rank 0 the
-- shared one): the path keeps what it held. A checkpoint is kept, for a later resume (the
-- rows written after it are dropped then); a fresh run with existsok replaces it.
-- Idempotent.
function MemmapSink:abort()
  if self.ranks then
    ranks.abort(self.ranks)
    self.ranks = nil
  end
  local a = self.app
  if a == nil then return end
  self.app = nil
  a:suspend()
end

-- The rows of the checkpoint kept at path, nil when there is none (a host's message
-- after a failed or interrupted run).
-- rank and size: a data-parallel run's rank and rank count (its checkpoint is that of
-- the rank's own folder).
function MemmapSink.checkpoint_rows(path, rank, size)
  return append.checkpoint_rows(rank and ranks.own_path(path, "rank", rank, size) or path)
end

local ReplayBuffer = require("tensordict.flow.replay_buffer")

return { MemmapSource = MemmapSource, MemmapSink = MemmapSink, ReplayBuffer = ReplayBuffer }
