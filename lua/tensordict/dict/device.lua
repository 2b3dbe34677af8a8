-- dict/device.lua: TensorDicts across devices: td:to(device), td:cuda(), td:cpu(),
-- td:pin_memory(). A move is one pass over the leaves (td:apply), each leaf copied
-- once to the target; the result's device is then set, which checks every leaf.
local C = require("tensordict.lib").C
local cuda = require("tensordict.tensor.cuda")
local core = require("tensordict.dict.core")
require("tensordict.dict.apply") -- TD.apply
require("tensordict.dict.struct") -- TD.exclude

local TD = core.methods
local cdict, check = core.cdict, core.check

local M = {}

-- A new TensorDict with every leaf on device spec ("cpu", "cuda", "cuda:N");
-- non_blocking queues copies from pinned memory (T.cuda.synchronize() waits for them).
function M.to(self, spec, non_blocking, call)
  call = call or "to"
  local target = cuda.parse(call, spec) -- raises when CUDA is asked for and missing
  local name = target == "cpu" and "cpu" or "cuda:" .. target
  local src = TD.exclude(self) -- a shallow copy: its device is cleared, not self's
  check(C.td_dict_set_device(cdict(src), C.TD_DEVICE_NONE, 0))
  local r = TD.apply(src, function(t) return cuda.tensor_to(t, name, non_blocking, call) end,
    { filter_empty = false })
  core.apply_device(r, name, call)
  return r
end

function TD.cuda(self, spec, opts)
  local device, non_blocking = cuda.cuda_args(spec, opts)
  return M.to(self, device, non_blocking, "cuda")
end

function TD.cpu(self) return M.to(self, "cpu", false, "cpu") end

-- Every leaf copied into page-locked host memory (CUDA needed, as torch's).
function TD.pin_memory(self)
  cuda.need("pin_memory")
  return TD.apply(self, function(t) return t:pin_memory() end, { filter_empty = false })
end

return M
