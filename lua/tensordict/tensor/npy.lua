-- tensor/npy.lua: NumPy's .npy files (core/store/npy.c): T.load_npy(path [, {mmap =
-- true}]) and t:save_npy(path [, {fsync =}]). A mapped array is a read-only view of the
-- file (O(1)); Fortran-order arrays come back as transposed views, big-endian ones
-- swapped as they are read (they cannot be mapped).
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor.core")

local C = lib.C
local fail, describe = util.fail, util.describe
local Tensor, adopt, header = tensor.Tensor, tensor.adopt, tensor.handle

local M = {}

local function path_arg(call, path)
  if type(path) ~= "string" or path == "" then fail(("%s: path must be a non-empty string, got %s"):format(call,
    describe(path))) end
  return path
end

function M.load_npy(path, opts)
  path_arg("load_npy", path)
  opts = util.options("load_npy", opts, { mmap = "boolean" })
  return (adopt(C.td_npy_load(path, opts.mmap and 1 or 0)))
end

-- fsync = false skips the syncs (faster, not crash-safe), as the memmap saves.
function M.save_flags(call, opts)
  opts = util.options(call, opts, { fsync = "boolean", compressed = "boolean" })
  return opts.fsync == false and C.TD_MEMMAP_NO_FSYNC or 0, opts
end

function Tensor.save_npy(self, path, opts)
  local h = header(self)
  path_arg("save_npy", path)
  local flags = M.save_flags("save_npy", opts)
  if C.td_npy_save(h, path, flags) ~= 0 then util.c_fail() end
  return self
end

M.path_arg = path_arg
return M
