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

T.dtypes = dtypes.list()
T.live_bytes = memory.live_bytes

return T
