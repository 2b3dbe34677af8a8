-- tensor/device.lua: which kernels an op's tensors go to. Every tensor lives on the host until
-- the CUDA library is loaded (lua/tensordict/tensor/cuda.lua, on the first request for a CUDA
-- device); until then `watching` is false and an op's kernels are the CPU library's,
-- with no check at all. Once device tensors can exist, an op looks at its operands:
-- all on the host -> the CPU library; all on one CUDA device -> the CUDA library's
-- kernels (same names and signatures: `kernels.td_binary` is td_cuda_binary); a mix
-- raises naming both devices. The CPU kernels refuse device tensors themselves too
-- (td_check_cpu), so an op with no CUDA kernel says so rather than reading device memory.
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = {
  watching = false, -- set once a device tensor can exist
  kernels = nil,    -- the CUDA kernel table, set by tensor/cuda.lua when the library loads
  unavailable = nil, -- why CUDA is not available (a string), set by tensor/cuda.lua
}

local CPU = C.TD_DEVICE_CPU

local function name_of(h)
  if C.td_tensor_device_type(h) == CPU then return "cpu" end
  return "cuda:" .. C.td_tensor_device_index(h)
end
M.name_of = name_of

function M.on_device(h) return M.watching and C.td_tensor_device_type(h) ~= CPU end

-- The CUDA kernel table, or raises "<call>: CUDA is not available (<reason>)".
function M.cuda_kernels(call)
  local k = M.kernels
  if k then return k end
  util.fail(("%s: CUDA is not available (%s)"):format(call, M.unavailable or "the CUDA library is not loaded"))
end

-- Slow path of pick: the operands' devices (nil operands are scalars).
local function pick_checked(call, h1, h2, h3)
  local first, device = nil, nil
  for _, h in ipairs({ h1, h2, h3 }) do
    if h ~= nil then
      local name = name_of(h)
      if device == nil then
        first, device = h, name
      elseif name ~= device then
        util.fail(("%s: expected all tensors on one device, but got %s and %s"):format(call, device, name))
      end
    end
  end
  if first == nil or device == "cpu" then return C end
  return M.cuda_kernels(call)
end

-- The kernels for an op over headers h1, h2, h3 (any may be nil): C, or the CUDA table.
function M.pick(call, h1, h2, h3)
  if not M.watching then return C end
  return pick_checked(call, h1, h2, h3)
end

-- The kernels for an op over a C array of n headers (cat, stack).
function M.pick_array(call, array, n)
  if not M.watching then return C end
  for i = 1, n - 1 do pick_checked(call, array[0], array[i]) end
  return pick_checked(call, array[0])
end

-- For copies, which move data between devices: the CUDA table when either side is on
-- a device (td_cuda_copy_ handles every pair), else C.
function M.pick_copy(call, dst, src)
  if not M.watching then return C end
  if C.td_tensor_device_type(dst) == CPU and C.td_tensor_device_type(src) == CPU then return C end
  return M.cuda_kernels(call)
end

return M
