-- tensordict: batched tensor containers and kernels for LuaJIT.
--   local T = require("tensordict")
-- See docs/lua-api.md. Everything hangs off T; the C library does the numeric work.
local lib = require("tensordict.lib")
local ffi = require("ffi")
local tensor = require("tensordict.tensor")
local create = require("tensordict.create")
local index = require("tensordict.index")
local dtypes = require("tensordict.dtype")
local memory = require("tensordict.memory")
local util = require("tensordict.util")
local ops = require("tensordict.ops")
local join = require("tensordict.join")
local random = require("tensordict.random")
local linalg = require("tensordict.linalg")
require("tensordict.reduce") -- methods only
require("tensordict.gather") -- methods only

local T = {}

T.version = ffi.string(lib.C.td_version_string())
T.abi_version = lib.abi_version
T.library_path = lib.path

T.Tensor = tensor.Tensor -- the method table: add to it to extend every tensor
T.is_tensor = tensor.is_tensor

T.tensor = create.tensor
T.empty = create.empty
T.zeros = create.zeros
T.ones = create.ones
T.full = create.full
T.arange = create.arange
T.from_file = create.from_file

T.newaxis = index.newaxis
T.ellipsis = index.ellipsis

T.where = ops.where
T.stack = join.stack
T.cat = join.cat
T.pad = join.pad
T.matmul = linalg.matmul

T.manual_seed = random.manual_seed
T.Generator = random.Generator
T.rand = random.rand
T.randn = random.randn
T.randint = random.randint
T.randperm = random.randperm

T.dtypes = dtypes.list()
T.live_bytes = memory.live_bytes
-- Freed large blocks wait for reuse (TD_CACHE_BYTES, 1 GiB by default): their size,
-- and a call returning them to the system.
function T.cached_bytes() return tonumber(lib.C.td_cached_bytes()) end
function T.release_cached_memory() return tonumber(lib.C.td_release_cached_memory()) end

-- Threads for large kernels, ours and OpenBLAS's; results do not depend on the count.
function T.set_num_threads(n)
  if not util.is_int(n) or n < 1 then
    util.fail(("set_num_threads: expected a positive integer, got %s"):format(util.describe(n)))
  end
  if lib.C.td_set_num_threads(n) ~= 0 then util.c_fail() end
end
function T.get_num_threads() return lib.C.td_get_num_threads() end

return T
