-- flow/h5.lua: the HDF5 nodes (docs/h5.md). H5Source reads an HDF5 file (h5py's or
-- Python tensordict's layout) in batches of rows, each one hyperslab per dataset, the
-- rows in file (chunk) order unless shuffled; H5Sink appends batches to extendible
-- datasets of a temporary sibling file, renamed into place at finish.
local util = require("tensordict.util")
local random = require("tensordict.tensor.random")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local h5 = require("tensordict.h5.dict")
local save = require("tensordict.h5.save")
local core = require("tensordict.flow.core")
local shard_rows = require("tensordict.flow.sources").shard_rows

local describe = util.describe
local is_td = td_core.is_td

-- Raises as node, the error of a failed call (without the library's prefix); the node's
-- own errors go on as they are.
local function node_error(node, err)
  local msg = tostring(err):gsub("^.-tensordict: ", "")
  if msg:sub(1, #node.type_name + 2) == node.type_name .. ": " then error(err, 0) end
  node:fail("%s", msg)
end

---------------------------------------------------------------------- H5Source

local H5Source = core.define("H5Source", {
  kind = "source",
  doc = "Reads an HDF5 file in batches of rows along the first batch dim, one hyperslab per "
    .. "dataset: the rows in file (chunk) order, or a seeded random order when shuffled.",
  params = {
    { "path", "string", required = true, doc = "the HDF5 file" },
    { "batch_size", "integer", required = true, min = 1, doc = "rows per batch (the last one may be smaller)" },
    { "keys", "keys", doc = "the datasets to read (key paths reach into groups; default: all)" },
    { "shuffle", "boolean", default = false, doc = "visit the rows in a seeded random order (each batch "
      .. "reads its rows sorted, in one pass over the chunks they touch)" },
    { "seed", "seed", doc = "the order's seed (default: the pipeline seed, ctx.seed)" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than batch_size rows" },
  },
  examples = {
    'flow.H5Source{path = "data/train.h5", batch_size = 8192}',
    'flow.H5Source{path = "data/train.h5", batch_size = 256, shuffle = true, keys = {"obs", {"next", "reward"}}}',
  },
})

-- The file's container restricted to keys, opened once; raises naming the path.
function H5Source:load()
  if self.h then return self.h end
  local ok, h = pcall(h5.from_h5, self.p.path)
  if not ok then node_error(self, h) end
  if #h:batch_size() == 0 then
    self:fail("'%s' has batch size [] (its datasets share no leading dim); its rows are taken along the "
      .. "first batch dim", self.p.path)
  end
  if self.p.keys then
    ok, h = pcall(h.select, h, self.p.keys)
    if not ok then node_error(self, h) end
  end
  self.h = h
  return h
end

function H5Source:init()
  -- The keys it yields: given, or read from the file when it is there already.
  if self.p.keys then
    self.out_keys = self.p.keys
  else
    local ok, h = pcall(h5.from_h5, self.p.path)
    self.out_keys = ok and h:keys() or {}
    if ok then h:close() end
  end
end

function H5Source:open() self:load() end

function H5Source:close()
  if self.h then self.h:close() end
  self.h = nil
end

-- Rows yielded (batch_size divides them when drop_last).
function H5Source:len()
  local n, b = self:load():batch_size()[1], self.p.batch_size
  if self.p.drop_last then n = n - n % b end
  return n
end

-- One pass: batches of rows [start, start + b) of this rank's share, read through
-- hyperslabs; shuffled, a permutation per pass (seeded, drawn alike on every rank) whose
-- slices are read as row lists.
function H5Source:iter(ctx)
  local h, b, p = self:load(), self.p.batch_size, self.p
  local lo, hi = shard_rows(h:batch_size()[1], ctx)
  local n = hi - lo + 1
  local pos = { start = 1 }
  local order
  if p.shuffle then
    local gen = random.Generator(core.setting(p, "seed", ctx, 0))
    if self.from and self.from.gen then gen:set_state(self.from.gen) end
    pos.gen = gen:get_state()
    order = random.randperm(h:batch_size()[1], "int64", gen)
    if n ~= h:batch_size()[1] then order = order[{ { lo, hi } }] end
  end
  if self.from then pos.start = self.from.start end
  self.from = nil
  self.position = function() return { start = pos.start, gen = pos.gen } end
  return function()
    if pos.start > n or (p.drop_last and pos.start + b - 1 > n) then return nil end
    local stop = math.min(n, pos.start + b - 1)
    local first = pos.start
    pos.start = stop + 1
    local ok, td
    if order then
      ok, td = pcall(h.read_index, h, order[{ { first, stop } }]:tolist())
    else
      ok, td = pcall(h.read_rows, h, lo + first - 1, stop - first + 1)
    end
    if not ok then node_error(self, td) end
    return td
  end
end

-- Checkpoints: the next row of the pass in progress (and its permutation's seed state).
function H5Source:state() return self.position and self.position() end
function H5Source:restore(state) self.from = state end

------------------------------------------------------------------------ H5Sink

local H5Sink = core.define("H5Sink", {
  kind = "sink",
  doc = "Appends batches to an HDF5 file in Python tensordict's layout (a group per nested "
    .. "container, an extendible dataset per leaf), written to a temporary sibling and "
    .. "renamed into place at finish: after an error or abort nothing is left at path.",
  params = {
    { "path", "string", required = true, doc = "the HDF5 file to write (replaced at finish)" },
    { "chunks", "integer", min = 1, doc = "rows per chunk (default: about 1 MiB of rows)" },
    { "compression", "string", one_of = { "gzip" }, doc = "\"gzip\" to compress the chunks (default: none)" },
    { "compression_opts", "integer", min = 0, max = 9, doc = "the gzip level (default 4)" },
  },
  examples = { 'flow.H5Sink{path = "out/episodes.h5"}',
    'flow.H5Sink{path = "out/episodes.h5", compression = "gzip", chunks = 4096}' },
})

function H5Sink:open()
  self:abort()
  self.opts = save.options("H5Sink", { compression = self.p.compression, compression_opts = self.p.compression_opts,
    chunks = self.p.chunks })
  local ok, f, commit, abort = pcall(save.begin, self.p.path, "H5Sink")
  if not ok then node_error(self, f) end
  self.f, self.commit, self.abort_file, self.leaves, self.n = f, commit, abort, nil, 0
end

-- The leaves of td (key paths) with their group paths, in a fixed order.
local function leaves_of(td, prefix, out)
  for _, key in ipairs(td:keys()) do
    local path = prefix .. "/" .. key
    local v = td:get(key)
    if is_td(v) then leaves_of(v, path, out) else out[#out + 1] = { path = path, value = v } end
  end
  return out
end

-- The first batch makes the datasets (its structure is the file's); the later ones
-- must have the same leaves, dtypes and row shapes, and are appended.
function H5Sink:write(td)
  if not is_td(td) then self:fail("write: expected a TensorDict, got %s", describe(td)) end
  if td:batch_dims() == 0 then self:fail("write: a batch needs at least one batch dim (rows), got batch size []") end
  if not self.f then self:open() end
  local f, list = self.f, leaves_of(td, "", {})
  local ok, err = pcall(function()
    if not self.leaves then
      self.leaves = {}
      for _, leaf in ipairs(list) do
        local v = leaf.value
        if type(v) == "string" then
          if f.C.td_h5_write_string(f.box[0], leaf.path, v, #v) < 0 then
            require("tensordict.h5.file").fail("H5Sink", f.C)
          end
          self.leaves[leaf.path] = { string = v }
        elseif tensor.is_tensor(v) then
          local t = save.write_tensor(f, leaf.path, v, self.opts, "H5Sink", true)
          local shape = t:shape()
          table.remove(shape, 1)
          self.leaves[leaf.path] = { dtype = t:dtype(), row = table.concat(shape, ", ") }
        else
          self:fail("write: the non-tensor value at %s is %s: HDF5 files hold non-tensor strings only",
            leaf.path, describe(v))
        end
      end
      self.order = list
    else
      self:append(list)
    end
  end)
  if not ok then node_error(self, err) end
  self.n = self.n + td:batch_size()[1]
end

function H5Sink:append(list)
  local f = self.f
  local seen = 0
  for _, leaf in ipairs(list) do
    local want, v = self.leaves[leaf.path], leaf.value
    if not want then self:fail("write: %s is not in the first batch (leaves are fixed by it)", leaf.path) end
    seen = seen + 1
    if want.string then
      if v ~= want.string then
        self:fail("write: the non-tensor value %s changed from %s to %s", leaf.path, describe(want.string), describe(v))
      end
    else
      local t = v:contiguous()
      local shape = t:shape()
      local rows = table.remove(shape, 1)
      if t:dtype() ~= want.dtype or table.concat(shape, ", ") ~= want.row then
        self:fail("write: %s is %s rows of [%s], the first batch's were %s rows of [%s]", leaf.path, t:dtype(),
          table.concat(shape, ", "), want.dtype, want.row)
      end
      save.append(f, leaf.path, t, rows, "H5Sink")
    end
  end
  local count = 0
  for _ in pairs(self.leaves) do count = count + 1 end
  if seen ~= count then self:fail("write: a batch lacks leaves of the first batch (%d of %d)", seen, count) end
end

-- Rows written so far.
function H5Sink:rows() return self.n or 0 end

-- Commits (rename into place) and returns the file as T.from_h5 opens it.
function H5Sink:finish()
  if not self.f then self:open() end
  local commit = self.commit
  self.f, self.commit, self.abort_file = nil, nil, nil
  local ok, err = pcall(commit)
  if not ok then node_error(self, err) end
  return h5.from_h5(self.p.path)
end

-- Removes the temporary file: path keeps what it held. Idempotent.
function H5Sink:abort()
  local abort = self.abort_file
  self.f, self.commit, self.abort_file = nil, nil, nil
  if abort then abort() end
end

return { H5Source = H5Source, H5Sink = H5Sink }
