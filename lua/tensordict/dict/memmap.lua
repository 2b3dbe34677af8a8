-- dict/memmap.lua: TensorDicts on disk in Python tensordict's memmap layout (a folder per
-- container, meta.json, one raw file per leaf) and in its consolidated single-file
-- layout. The C side (core/store/memmap.c, core/store/consolidate_*.c) writes atomically
-- (temporary sibling, fsync, rename) and validates everything it reads.
local C = require("tensordict.lib").C
local ffi = require("ffi")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local core = require("tensordict.dict.core")
local consolidated = require("tensordict.dict.consolidated") -- td:consolidate() in memory, is_consolidated
local late = require("tensordict.late") -- td_device, cuda: they require td modules

local TD = core.methods
local cdict, wrap, check = core.cdict, core.wrap, core.check
local fail, describe = util.fail, util.describe

local M = {}

local function path_arg(call, path, what)
  if type(path) ~= "string" or path == "" then
    fail(("%s: %s must be a non-empty string, got %s"):format(call, what or "the prefix", describe(path)))
  end
  return path
end

local KNOWN = { existsok = "boolean", num_threads = "number", fsync = "boolean", mode = "string",
  device = "string" }

local function opts_arg(call, opts, allowed)
  local fields = {}
  for name in pairs(allowed) do fields[name] = KNOWN[name] end
  return util.options(call, opts, fields)
end

local SAVE_OPTS = { existsok = true, num_threads = true, fsync = true }

-- Flags and thread count of a save; existsok defaults to true, as in Python.
local function save_flags(call, opts)
  opts = opts_arg(call, opts, SAVE_OPTS)
  local flags = 0
  if opts.existsok ~= false then flags = flags + C.TD_MEMMAP_EXISTSOK end
  if opts.fsync == false then flags = flags + C.TD_MEMMAP_NO_FSYNC end
  local threads = opts.num_threads or 0
  if not util.is_int(threads) or threads < 0 then
    fail(("%s: num_threads must be a non-negative integer, got %s"):format(call, describe(threads)))
  end
  return flags, threads
end

local function keep_names(from, to)
  local names = core.dim_names(from)
  if names then core.set_names(to, names, "memmap") end
  return to
end

-- td:memmap(prefix [, {existsok =, num_threads =, fsync =}]): a copy whose leaves live
-- in files under prefix (locked, as Python's).
function TD.memmap(self, prefix, opts)
  local flags, threads = save_flags("memmap", opts)
  return keep_names(self, wrap(C.td_dict_memmap(cdict(self), path_arg("memmap", prefix), flags, threads)))
end

-- td:memmap_(prefix [, opts]): the same, in place; returns td.
function TD.memmap_(self, prefix, opts)
  local flags, threads = save_flags("memmap_", opts)
  check(C.td_dict_memmap_(cdict(self), path_arg("memmap_", prefix), flags, threads))
  return self
end

-- td:memmap_like(prefix [, opts]): the structure, shapes and dtypes on disk, zero-filled
-- (a preallocated buffer to fill with buf[idx] = batch).
function TD.memmap_like(self, prefix, opts)
  local flags, threads = save_flags("memmap_like", opts)
  return keep_names(self, wrap(C.td_dict_memmap_like(cdict(self), path_arg("memmap_like", prefix), flags, threads)))
end

local MODES = { r = C.TD_MAP_READ, ["r+"] = C.TD_MAP_READWRITE }

-- moves: whether the call copies the leaves to a CUDA device asked for (load_memmap);
-- the others map files and load on the host only.
local function load_mode(call, opts, moves)
  opts = opts_arg(call, opts, { mode = true, device = true })
  local mode = MODES[opts.mode or "r"]
  if not mode then
    fail(("%s: mode must be 'r' or 'r+', got %s"):format(call, describe(opts.mode)))
  end
  if opts.device ~= nil and opts.device ~= "cpu" and not moves then
    fail(("%s: device %s: files map into host memory; load on 'cpu'"):format(call, describe(opts.device)))
  end
  if opts.device ~= nil then late.cuda.parse(call, opts.device) end -- CUDA there?
  return mode, opts.device
end

-- For lazy stacks' saves and loads (lazy_stack/io.lua): the same argument checks.
M.path_arg, M.save_flags, M.load_mode, M.keep_names = path_arg, save_flags, load_mode, keep_names

-- T.load_memmap(prefix [, {mode = "r" | "r+", device = "cpu" | "cuda" | "cuda:N"}]):
-- maps the folder lazily; with a CUDA device, the leaves are then copied to it.
function M.load_memmap(prefix, opts)
  local mode, device = load_mode("load_memmap", opts, true)
  local td = wrap(C.td_dict_load_memmap(path_arg("load_memmap", prefix), mode))
  if device == nil or device == "cpu" then return td end
  return late.td_device.to(td, device, false, "load_memmap")
end

-- Makes self hold what loaded holds (keys, batch size, names, memmap prefix), in place:
-- its keys not in loaded go. batch is the batch size to keep (nil: loaded's); loaded
-- is checked against it before self changes.
local function take_content(self, loaded, batch, call)
  C.td_dict_set_locked(loaded._td_p, 0)
  local names = core.dim_names(loaded)
  if batch then
    local n = util.read_shape(call, false, batch)
    if C.td_dict_set_batch(loaded._td_p, n, util.shape_buf) < 0 then
      fail(("%s: the folder's leaves do not start with the TensorDict's batch size [%s] (the folder's is [%s])")
        :format(call, table.concat(batch, ", "), table.concat(TD.batch_size(loaded), ", ")))
    end
    names = core.dim_names(self)
  end
  local d = cdict(self)
  for i = self._td_head.nkeys - 1, 0, -1 do check(C.td_dict_del(d, i)) end
  check(C.td_dict_set_batch(d, 0, nil))
  local ld, len = cdict(loaded), ffi.new("int64_t[1]")
  for i = 0, loaded._td_head.nkeys - 1 do
    local kp = C.td_dict_key_borrow(ld, i, len)
    check(C.td_dict_set_entry(d, kp, len[0], ld, i))
  end
  check(C.td_dict_set_batch(d, loaded._td_head.ndim, loaded._td_head.shape))
  core.set_names(self, names, call)
  check(C.td_dict_set_prefix(d, C.td_dict_prefix_borrow(ld)))
end

-- td:load_memmap_(prefix [, {mode =}]): td takes the content of the folder in place
-- (Python's load_memmap_): its keys are replaced by the folder's, its batch size kept
-- (the folder's leaves must start with it). A locked td raises, as in Python.
function TD.load_memmap_(self, prefix, opts)
  cdict(self)
  if self._td_head.locked ~= 0 then
    fail("load_memmap_: the TensorDict is locked (its keys would be replaced): unlock() it first")
  end
  local mode = load_mode("load_memmap_", opts)
  local loaded = wrap(C.td_dict_load_memmap(path_arg("load_memmap_", prefix), mode))
  take_content(self, loaded, TD.batch_size(self), "load_memmap_")
  return self
end

-- Whether any tensor leaf of td may be written (a memmap loaded "r+" or saved here).
local function writable(td)
  for _, path in ipairs(TD.keys(td, { include_nested = true, leaves_only = true })) do
    local leaf = TD.get(td, path)
    if tensor.is_tensor(leaf) and C.td_storage_is_writable(leaf.h.storage) == 1 then return true end
  end
  return false
end

-- td:memmap_refresh_(): a memory-mapped td maps its folder again, in place, taking what
-- is there now (keys, batch size, values another process saved), as Python's
-- memmap_refresh_; the lock and the mode (read-only or not) stay.
function TD.memmap_refresh_(self)
  local prefix = TD.memmap_prefix(self)
  if prefix == nil then
    fail("memmap_refresh_: the TensorDict is not memory-mapped (no folder to refresh from)")
  end
  local mode = writable(self) and C.TD_MAP_READWRITE or C.TD_MAP_READ
  local loaded = wrap(C.td_dict_load_memmap(prefix, mode))
  local locked = self._td_head.locked ~= 0
  C.td_dict_set_locked(cdict(self), 0)
  local ok, err = pcall(take_content, self, loaded, nil, "memmap_refresh_")
  if locked then C.td_dict_set_locked(cdict(self), 1) end
  if not ok then error(err, 0) end
  return self
end

-- td:make_memmap_from_tensor(key, t [, {copy_data = true}]): Python's: t (or zeros, with
-- copy_data = false) becomes the new leaf key (a key path reaches a nested container),
-- one new file in the memory-mapped td's folder and meta.json updated (atomically, in
-- C), without saving the folder again; returns the mapped leaf. A locked td takes it
-- (a memmap's result is locked; so does Python). A td loaded read-only refuses.
function TD.make_memmap_from_tensor(self, key, t, opts)
  local call = "make_memmap_from_tensor"
  opts = util.options(call, opts, { copy_data = "boolean" })
  if not tensor.is_tensor(t) then fail(("%s: expected a tensor, got %s"):format(call, describe(t))) end
  cdict(self)
  -- Every entry of a key path is checked before the path is walked: a number or a table
  -- among them used to reach the C lookup as they were (issue 28).
  core.check_key(call, key)
  local parent, last = self, key
  if type(key) == "table" then
    parent, last = core.parent_of(self, key, call, false), key[#key]
    if parent == nil then core.missing(self, call, key) end
  end
  if TD.memmap_prefix(parent) ~= nil and not writable(parent)
      and #TD.keys(parent, { include_nested = true, leaves_only = true }) > 0 then
    fail(("%s: the TensorDict was loaded read-only: load it with {mode = 'r+'} to add files to its folder")
      :format(call))
  end
  check(C.td_dict_make_memmap_from_tensor(cdict(parent), last, #last, t.h, opts.copy_data == false and 0 or 1, 0))
  return TD.get(parent, last)
end

-- T.memmap_tensor(t [, filename [, {existsok =}]]): a copy of t in a file of raw bytes
-- (C order, little-endian: a <key>.memmap file of the memmap layout), mapped
-- read-write; without a filename, in shared memory. Python's
-- MemoryMappedTensor.from_tensor; an existing file raises unless existsok = true.
function M.memmap_tensor(t, filename, opts)
  if not tensor.is_tensor(t) then
    fail(("memmap_tensor: expected a tensor, got %s"):format(describe(t)))
  end
  opts = opts_arg("memmap_tensor", opts, { existsok = true })
  local out
  if filename == nil then
    out = create.empty(t:shape(), t:dtype(), { shared = true })
  else
    path_arg("memmap_tensor", filename, "the filename")
    local f = io.open(filename, "rb")
    if f then
      f:close()
      if not opts.existsok then
        fail(("memmap_tensor: %s exists (pass {existsok = true} to replace it)"):format(filename))
      end
    end
    out = create.from_file(filename, t:shape(), t:dtype(), "w+")
  end
  return out:copy_(t)
end

function TD.is_memmap(self)
  return C.td_dict_prefix_borrow(cdict(self)) ~= nil
end

function TD.memmap_prefix(self)
  local p = C.td_dict_prefix_borrow(cdict(self))
  if p == nil then return nil end
  return (ffi.string(p))
end

-- td:sync(): flushes every file-backed leaf to its file (msync).
function TD.sync(self)
  check(C.td_dict_sync(cdict(self)))
  return self
end

-- td:consolidate([filename [, opts]]): the whole container in one file, in
-- tensordict's consolidated layout; returns td (or, without a filename, nothing is
-- written: a copy with every leaf in one block of memory, as Python returns there).
function TD.consolidate(self, filename, opts)
  if filename == nil then
    cdict(self)
    return (consolidated.in_memory(self))
  end
  local flags = save_flags("consolidate", opts)
  check(C.td_dict_consolidate(cdict(self), path_arg("consolidate", filename, "the filename"), flags))
  return self
end

-- T.from_consolidated(filename [, {mode =}]): maps the file; leaves view it.
function M.from_consolidated(filename, opts)
  local mode = load_mode("from_consolidated", opts)
  return wrap(C.td_dict_from_consolidated(path_arg("from_consolidated", filename, "the filename"), mode))
end

return M
