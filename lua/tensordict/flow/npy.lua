-- flow/npy.lua: NpySource, batches of rows of NumPy .npy files, one file per key, each
-- mapped read-only (T.load_npy{mmap = true}; a big-endian file is read, swapped): a batch
-- is views of the files, or gathered copies when shuffled (sources.row_batches, as
-- MemmapSource).
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local npy = require("tensordict.tensor.npy")
local core = require("tensordict.flow.core")
local sources = require("tensordict.flow.sources")
local row_batches, copy_position = sources.row_batches, sources.copy_position

local NpySource = core.define("NpySource", {
  kind = "source",
  doc = "Reads NumPy .npy files (one per key, rows along their first dim) in batches of rows, mapped: "
    .. "a batch is views of the files, or gathered copies when shuffled.",
  params = {
    { "paths", "table", required = true, doc = "key -> .npy path; every array has the same first dim" },
    { "batch_size", "integer", required = true, min = 1, doc = "rows per batch (the last one may be smaller)" },
    { "shuffle", "boolean", default = false, doc = "visit the rows in a seeded random order" },
    { "seed", "seed", doc = "the order's seed (default: the pipeline seed, ctx.seed)" },
    { "drop_last", "boolean", default = false, doc = "drop a last batch of fewer than batch_size rows" },
  },
  examples = { 'flow.NpySource{paths = {obs = "data/obs.npy", action = "data/action.npy"}, batch_size = 256}' },
})

-- The keys in a fixed order (a Lua table has none of its own).
local function sorted_keys(paths)
  local keys = {}
  for k in pairs(paths) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end

function NpySource:init()
  local keys = sorted_keys(self.p.paths)
  if #keys == 0 then self:fail("paths is empty: give at least one key -> .npy path") end
  for _, k in ipairs(keys) do
    if type(k) ~= "string" or type(self.p.paths[k]) ~= "string" then
      self:fail("paths must map string keys to .npy paths, got %s = %s", util.describe(k),
        util.describe(self.p.paths[k]))
    end
  end
  self.out_keys = keys
end

-- The arrays, mapped, as one TensorDict of batch [rows]; raises naming the file.
function NpySource:load()
  if self.td then return self.td end
  local leaves, rows, first = {}, nil, nil
  for _, k in ipairs(self.out_keys) do
    local path = self.p.paths[k]
    local ok, t = pcall(npy.load_npy, path, { mmap = true })
    if not ok and tostring(t):find("cannot be mapped", 1, true) then -- big-endian: read (and swapped) instead
      ok, t = pcall(npy.load_npy, path)
    end
    if not ok then self:fail("%s", (tostring(t):gsub("^.-tensordict: ", ""))) end
    if t:dim() == 0 then self:fail("'%s' (key %s) is a 0-dim array; rows are taken along the first dim", path, k) end
    if rows == nil then
      rows, first = t:size(1), k
    elseif t:size(1) ~= rows then
      self:fail("'%s' (key %s) has %d rows, '%s' (key %s) %d: every array needs the same first dim", path, k,
        t:size(1), self.p.paths[first], first, rows)
    end
    leaves[k] = t
  end
  self.td = td_core.construct(leaves, { rows })
  return self.td
end

function NpySource:open() self:load() end
function NpySource:close() self.td = nil end
function NpySource:keys() return self.out_keys end

local function loaded(self)
  local ok, td = pcall(self.load, self)
  return ok and td or nil
end
function NpySource:key_dtypes()
  local td = loaded(self)
  return td and core.leaf_dtypes(td) or {}
end
function NpySource:row_bytes()
  local td = loaded(self)
  return td and core.row_bytes(td) or nil
end

function NpySource:len()
  local n, b = #self:load(), self.p.batch_size
  if self.p.drop_last then n = n - n % b end
  return n
end

function NpySource:iter(ctx)
  local rows, pos = row_batches(self:load(), self.p.batch_size, self.p, ctx, self.from)
  self.from = nil
  self.position = function() return copy_position(pos) end
  return rows
end

-- Checkpoints: the position of the pass in progress, as MemmapSource's.
function NpySource:state() return self.position and self.position() end
function NpySource:restore(state) self.from = state end

return { NpySource = NpySource }
