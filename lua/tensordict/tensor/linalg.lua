-- tensor/linalg.lua: matmul and friends on OpenBLAS (core/kernels/blas.c), and t().
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local device = require("tensordict.tensor.device")

local fail, describe = util.fail, util.describe
local Tensor, adopt, is_tensor, header = tensor.Tensor, tensor.adopt, tensor.is_tensor, tensor.handle

local M = {}

local function pair(call, a, b)
  if not is_tensor(a) or not is_tensor(b) then
    fail(("%s: expected two tensors, got %s and %s"):format(call, describe(a), describe(b)))
  end
  return header(a), header(b)
end

function M.matmul(a, b)
  local ha, hb = pair("matmul", a, b)
  return adopt(device.pick("matmul", ha, hb).td_matmul(ha, hb))
end
Tensor.matmul = M.matmul
-- mm, bmm, mv, dot: matmul with fixed ranks (the device's through cuBLAS too).
local function fixed_ranks(call)
  local fn = "td_" .. call
  return function(a, b)
    local ha, hb = pair(call, a, b)
    return adopt(device.pick(call, ha, hb)[fn](ha, hb))
  end
end
Tensor.mm, Tensor.bmm, Tensor.mv = fixed_ranks("mm"), fixed_ranks("bmm"), fixed_ranks("mv")
local dot = fixed_ranks("dot")

-- dot(a, b): a Lua number.
function Tensor.dot(a, b)
  local r = dot(a, b)
  local v = r:item()
  r:free()
  return v
end

-- t(): the transpose of a 2-D tensor; 0-D and 1-D tensors come back as they are.
function Tensor.t(self)
  local h = header(self)
  if h.ndim > 2 then fail(("t: expects a tensor of at most 2 dims, got %d dims"):format(h.ndim)) end
  if h.ndim < 2 then return self end
  return self:transpose(1, 2)
end

return M
