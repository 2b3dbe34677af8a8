-- td_memmap.lua: TensorDicts on disk in Python tensordict's memmap layout (a folder per
-- container, meta.json, one raw file per leaf) and in its consolidated single-file
-- layout. The C side (core/dict/dict_memmap.c, dict_consolidate.c) writes atomically
-- (temporary sibling, fsync, rename) and validates everything it reads.
local C = require("tensordict.lib").C
local ffi = require("ffi")
local util = require("tensordict.util")
local core = require("tensordict.td_core")

local TD = core.methods
local D, wrap, check = core.D, core.wrap, core.check
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
  return keep_names(self, wrap(C.td_dict_memmap(D(self), path_arg("memmap", prefix), flags, threads)))
end

-- td:memmap_(prefix [, opts]): the same, in place; returns td.
function TD.memmap_(self, prefix, opts)
  local flags, threads = save_flags("memmap_", opts)
  check(C.td_dict_memmap_(D(self), path_arg("memmap_", prefix), flags, threads))
  return self
end

-- td:memmap_like(prefix [, opts]): the structure, shapes and dtypes on disk, zero-filled
-- (a preallocated buffer to fill with buf[idx] = batch).
function TD.memmap_like(self, prefix, opts)
  local flags, threads = save_flags("memmap_like", opts)
  return keep_names(self, wrap(C.td_dict_memmap_like(D(self), path_arg("memmap_like", prefix), flags, threads)))
end

local MODES = { r = C.TD_MAP_READ, ["r+"] = C.TD_MAP_READWRITE }

local function load_mode(call, opts)
  opts = opts_arg(call, opts, { mode = true, device = true })
  local mode = MODES[opts.mode or "r"]
  if not mode then
    fail(("%s: mode must be 'r' or 'r+', got %s"):format(call, describe(opts.mode)))
  end
  if opts.device ~= nil and opts.device ~= "cpu" then
    fail(("%s: device %s: files map into host memory; load on 'cpu'"):format(call, describe(opts.device)))
  end
  return mode
end

-- T.load_memmap(prefix [, {mode = "r" | "r+", device = "cpu"}]): maps the folder lazily.
function M.load_memmap(prefix, opts)
  local mode = load_mode("load_memmap", opts)
  return wrap(C.td_dict_load_memmap(path_arg("load_memmap", prefix), mode))
end

function TD.is_memmap(self)
  return C.td_dict_prefix_borrow(D(self)) ~= nil
end

function TD.memmap_prefix(self)
  local p = C.td_dict_prefix_borrow(D(self))
  if p == nil then return nil end
  return ffi.string(p)
end

-- td:sync(): flushes every file-backed leaf to its file (msync).
function TD.sync(self)
  check(C.td_dict_sync(D(self)))
  return self
end

-- td:consolidate([filename [, opts]]): the whole container in one file, in
-- tensordict's consolidated layout; returns td (or, without a filename, nothing is
-- written: a contiguous in-memory copy is what Python returns there).
function TD.consolidate(self, filename, opts)
  if filename == nil then return TD.contiguous(self) end
  local flags = save_flags("consolidate", opts)
  check(C.td_dict_consolidate(D(self), path_arg("consolidate", filename, "the filename"), flags))
  return self
end

-- T.from_consolidated(filename [, {mode =}]): maps the file; leaves view it.
function M.from_consolidated(filename, opts)
  local mode = load_mode("from_consolidated", opts)
  return wrap(C.td_dict_from_consolidated(path_arg("from_consolidated", filename, "the filename"), mode))
end

return M
