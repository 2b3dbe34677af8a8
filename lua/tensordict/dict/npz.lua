-- dict/npz.lua: NumPy's .npz archives (core/store/npz.c) as containers: T.load_npz(path
-- [, {batch_size =}]) gives a TensorDict with one leaf per array (a key "a/b" nests, as
-- "/" joins nested keys on save), td:save_npz(path [, {compressed =, fsync =}]) writes
-- every tensor leaf (np.savez, or np.savez_compressed when compressed).
local ffi = require("ffi")
local util = require("tensordict.util")
local lib = require("tensordict.lib")
local tensor = require("tensordict.tensor")
local npy = require("tensordict.tensor.npy")
local td_core = require("tensordict.dict.core")

local C = lib.C
local fail, describe = util.fail, util.describe

local M = {}

-- The archive's keys, in its order.
local function names(path)
  local need = C.td_npz_names(path, nil, 0)
  if need < 0 then util.c_fail() end
  local buf = ffi.new("char[?]", need + 1)
  if C.td_npz_names(path, buf, need + 1) < 0 then util.c_fail() end
  local list = {}
  for key in ffi.string(buf, need):gmatch("([^\n]*)\n") do list[#list + 1] = key end
  return list
end

function M.load_npz(path, opts)
  npy.path_arg("load_npz", path)
  opts = util.options("load_npz", opts, { batch_size = "table" })
  local leaves = {}
  for _, key in ipairs(names(path)) do
    local t = tensor.adopt(C.td_npz_read(path, key))
    local parts = {}
    for part in key:gmatch("[^/]+") do parts[#parts + 1] = part end
    if #parts == 0 then fail(("load_npz: '%s' has an array with an empty key"):format(path)) end
    local node = leaves
    for i = 1, #parts - 1 do
      node[parts[i]] = node[parts[i]] or {}
      node = node[parts[i]]
      if tensor.is_tensor(node) then fail(("load_npz: '%s': key '%s' is an array and a group"):format(path, key)) end
    end
    node[parts[#parts]] = t
  end
  return (td_core.construct(leaves, opts.batch_size or {}))
end

-- td:save_npz(path [, {compressed = false, fsync = true}]).
function td_core.methods.save_npz(td, path, opts)
  if not td_core.is_td(td) then fail(("save_npz: expected a TensorDict, got %s"):format(describe(td))) end
  npy.path_arg("save_npz", path)
  local flags, o = npy.save_flags("save_npz", opts)
  local keys = td:keys({ include_nested = true, leaves_only = true })
  local n = #keys
  local ckeys, arrays = ffi.new("const char *[?]", math.max(n, 1)), ffi.new("const td_tensor *[?]", math.max(n, 1))
  local keep = {}
  for i, k in ipairs(keys) do
    local name = type(k) == "table" and table.concat(k, "/") or k
    local v = td:get(k)
    if not tensor.is_tensor(v) then
      fail(("save_npz: key '%s' holds %s; an .npz archive holds arrays"):format(name, describe(v)))
    end
    keep[#keep + 1] = name
    ckeys[i - 1], arrays[i - 1] = name, tensor.handle(v)
  end
  -- keep holds the joined names, whose bytes ckeys points at, until C has read them
  local status = C.td_npz_save(path, ckeys, arrays, #keep, o.compressed and 1 or 0, flags)
  if status ~= 0 then util.c_fail() end
  return td
end
M.save_npz = td_core.methods.save_npz

return M
