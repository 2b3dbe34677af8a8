-- tensor/cuda.lua: T.cuda, device tensors and transfers (docs/cuda.md).
--
-- libtensordict_cuda.so is opened on the first call that needs a CUDA device (never by
-- `require "tensordict"`): a machine without it, without a driver or without a GPU
-- loads and runs everything else as before. Once it is open, tensor/device.lua routes ops on
-- device tensors to its kernels. Every call that needs CUDA raises
-- "tensordict: <call>: CUDA is not available (<reason>)" where it cannot have it.
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local device = require("tensordict.tensor.device")

local C = lib.C
local fail, describe = util.fail, util.describe
local Tensor, adopt, header, check = tensor.Tensor, tensor.adopt, tensor.handle, tensor.check

local M = {}

------------------------------------------------------------------------ the library

-- The folder of libtensordict (the CUDA library is built and installed next to it).
local function cuda_library_path()
  local env = os.getenv("TENSORDICT_CUDA_LIB")
  if env and env ~= "" then return env end
  local dir = lib.path:match("^(.*)/[^/]*$")
  return (dir and dir .. "/" or "") .. "libtensordict_cuda.so"
end

-- state: nil (not tried), or { CU = clib or nil, reason = string or nil, count = n }
local state

local function kernel_table(CU)
  local function on(h) return (C.td_tensor_device_index(h)) end
  return {
    td_binary = CU.td_cuda_binary, td_binary_scalar = CU.td_cuda_binary_scalar,
    td_binary_ = CU.td_cuda_binary_, td_binary_scalar_ = CU.td_cuda_binary_scalar_,
    td_unary = CU.td_cuda_unary, td_unary_ = CU.td_cuda_unary_,
    td_where = CU.td_cuda_where, td_masked_fill = CU.td_cuda_masked_fill,
    td_masked_fill_ = CU.td_cuda_masked_fill_, td_masked_select = CU.td_cuda_masked_select,
    td_reduce = CU.td_cuda_reduce,
    td_index_select = CU.td_cuda_index_select, td_gather = CU.td_cuda_gather,
    td_scatter_ = CU.td_cuda_scatter_,
    td_stack = CU.td_cuda_stack, td_cat = CU.td_cuda_cat,
    td_uniform_ = CU.td_cuda_uniform_, td_normal_ = CU.td_cuda_normal_,
    td_bernoulli_ = CU.td_cuda_bernoulli_, td_randint_ = CU.td_cuda_randint_,
    td_matmul = CU.td_cuda_matmul, td_mm = CU.td_cuda_mm, td_bmm = CU.td_cuda_bmm,
    td_mv = CU.td_cuda_mv, td_dot = CU.td_cuda_dot,
    td_clamp = CU.td_cuda_clamp, td_clamp_ = CU.td_cuda_clamp_,
    td_reduce_with_index = CU.td_cuda_reduce_with_index,
    td_cumsum = CU.td_cuda_cumsum, td_cumprod = CU.td_cuda_cumprod, td_softmax = CU.td_cuda_softmax,
    td_tensor_copy_ = CU.td_cuda_copy_, td_tensor_fill_ = CU.td_cuda_fill_,
    -- contiguous shares a contiguous tensor, as on the CPU
    td_tensor_contiguous = function(h) return CU.td_cuda_to_device(h, on(h), 0) end,
    td_tensor_clone = function(h)
      local p = CU.td_cuda_empty(on(h), h.ndim, h.shape, h.dtype)
      if p ~= nil and CU.td_cuda_copy_(p, h) ~= 0 then C.td_tensor_release(p); return nil end
      return p
    end,
    td_tensor_to_dtype = function(h, dtype)
      if h.dtype == dtype then return (C.td_tensor_share(h)) end
      local p = CU.td_cuda_empty(on(h), h.ndim, h.shape, dtype)
      if p ~= nil and CU.td_cuda_copy_(p, h) ~= 0 then C.td_tensor_release(p); return nil end
      return p
    end,
  }
end

local function open()
  if state then return state end
  state = {}
  local ok_defs, defs = pcall(require, "tensordict.cuda_cdefs")
  if not ok_defs then
    state.reason = "libtensordict_cuda.so was not built: nvcc was not found when 'make' ran"
  else
    require("tensordict.once")("cuda_cdefs", function() ffi.cdef(defs.cdef); return true end)
    local path = cuda_library_path()
    local ok, CU = pcall(ffi.load, path)
    if not ok then
      state.reason = ("cannot load %s: %s"):format(path, tostring(CU))
    elseif CU.td_cuda_abi_version() ~= defs.abi_version then
      state.reason = ("%s has ABI version %d but the Lua cdefs expect %d; rebuild with 'make'")
        :format(path, CU.td_cuda_abi_version(), defs.abi_version)
    else
      local why = ffi.new("const char *[1]")
      local n = CU.td_cuda_device_count(why)
      if n < 1 then
        state.reason = "cudaGetDeviceCount: " .. ffi.string(why[0])
      else
        state.CU, state.count = CU, n
        device.kernels = kernel_table(CU)
        device.watching = true
      end
    end
  end
  device.unavailable = state.reason
  return state
end

-- The CUDA library, or raises naming the call and the reason.
local function need(call)
  local s = open()
  if not s.CU then fail(("%s: CUDA is not available (%s)"):format(call, s.reason)) end
  return s.CU
end
M.need = need

------------------------------------------------------------------------ T.cuda

-- is_available() -> true, or false and the reason (no library, no driver, no device).
function M.is_available()
  local s = open()
  if s.CU then return true end
  return false, s.reason
end

-- The number of CUDA devices (0 when CUDA is not available, as torch).
function M.device_count()
  local s = open()
  return s.count or 0
end

function M.current_device()
  local r = need("current_device").td_cuda_current_device()
  if r < 0 then util.c_fail() end
  return r
end

-- Reads "cuda", "cuda:N" or a device number N; the device index.
local function device_index(call, spec)
  if type(spec) == "number" and spec >= 0 and spec % 1 == 0 then return spec end
  if type(spec) == "string" then
    local n = spec:match("^cuda:(%d+)$")
    if n then return (tonumber(n)) end
    if spec == "cuda" then return M.current_device() end
  end
  fail(("%s: expected a CUDA device ('cuda', 'cuda:N' or N), got %s"):format(call, describe(spec)))
end

function M.set_device(spec)
  local CU = need("set_device")
  check(CU.td_cuda_set_device(device_index("set_device", spec)))
end

function M.synchronize() check(need("synchronize").td_cuda_synchronize()) end
function M.empty_cache() check(need("empty_cache").td_cuda_empty_cache()) end

-- Bytes and counts of the caching allocator of a device (default: the current one).
function M.memory_stats(spec)
  local CU = need("memory_stats")
  local d = spec == nil and M.current_device() or device_index("memory_stats", spec)
  local s = ffi.new("td_cuda_memory_stats")
  check(CU.td_cuda_memory_stats_get(d, s))
  return {
    allocated_bytes = tonumber(s.allocated_bytes), reserved_bytes = tonumber(s.reserved_bytes),
    peak_allocated_bytes = tonumber(s.peak_allocated_bytes), allocations = tonumber(s.allocations),
    cache_hits = tonumber(s.cache_hits), cuda_mallocs = tonumber(s.cuda_mallocs),
  }
end

------------------------------------------------------------------------ devices by name

-- "cpu", "cuda", "cuda:N" -> "cpu" or the CUDA index (CUDA needed for the latter).
local function parse(call, spec)
  if spec == "cpu" then return "cpu" end
  if type(spec) == "string" and (spec == "cuda" or spec:match("^cuda:%d+$")) then
    need(call)
    return device_index(call, spec)
  end
  fail(("%s: unknown device %s (expected 'cpu', 'cuda' or 'cuda:N')"):format(call, describe(spec)))
end
M.parse = parse

-- True for a string naming a device (to() tells devices from dtypes with it).
function M.is_device_name(x)
  return type(x) == "string" and (x == "cpu" or x == "cuda" or x:match("^cuda:%d+$") ~= nil)
end

------------------------------------------------------------------------ tensors

-- t moved to device spec ("cpu", "cuda", "cuda:N"); self when it is there already.
-- non_blocking: from pinned memory the copy is queued and the call returns at once.
function M.tensor_to(self, spec, non_blocking, call)
  call = call or "to"
  local h = header(self)
  local target = parse(call, spec)
  local here = C.td_tensor_device_type(h) == C.TD_DEVICE_CPU and "cpu" or C.td_tensor_device_index(h)
  if target == here then return self end
  local CU = need(call)
  if target == "cpu" then return adopt(CU.td_cuda_to_host(h, 0)) end
  return adopt(CU.td_cuda_to_device(h, target, non_blocking and 1 or 0))
end

local TO_OPTS = { non_blocking = "boolean" }

-- The arguments of x:cuda([device] [, {non_blocking =}]): the device and the flag.
function M.cuda_args(spec, opts)
  if type(spec) == "table" then spec, opts = nil, spec end
  return spec or "cuda", util.options("cuda", opts, TO_OPTS).non_blocking
end

-- t:cuda([device [, {non_blocking =}]]) and t:cpu().
function Tensor.cuda(self, spec, opts)
  local target, non_blocking = M.cuda_args(spec, opts)
  return M.tensor_to(self, target, non_blocking, "cuda")
end

function Tensor.cpu(self)
  header(self)
  if not device.on_device(self.h) then return self end
  return M.tensor_to(self, "cpu", false, "cpu")
end

-- A copy in page-locked host memory (needs CUDA, as torch's does).
function Tensor.pin_memory(self)
  local h = header(self)
  local CU = need("pin_memory")
  if Tensor.is_pinned(self) then return self end
  return adopt(CU.td_cuda_pin(h))
end

function Tensor.is_pinned(self)
  return C.td_storage_kind(header(self).storage) == C.TD_STORAGE_PINNED
end

-- One element of a device tensor at index (0-based int64 buffer) as a host 0-dim tensor.
function M.host_element(h, idx)
  local v = tensor.Header()
  ffi.copy(v, h, ffi.sizeof(v))
  for _ = 1, h.ndim do check(C.td_tensor_select(v, 0, idx[_ - 1], v)) end
  return adopt(need("item").td_cuda_to_host(v, 0))
end

return M
