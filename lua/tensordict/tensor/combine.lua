-- tensor/combine.lua: torch's functions that combine tensors, composed of the kernels
-- (elementwise ops, matmul, cat): outer, diff, addcmul, addcdiv, addmm, baddbmm, tile. Methods
-- only; T.vstack and T.hstack are in the facade.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")

local fail, describe, dim0 = util.fail, util.describe, util.dim0
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

local function tensor_arg(call, x, what)
  if not is_tensor(x) then fail(("%s: %s must be a tensor, got %s"):format(call, what, describe(x))) end
  return x
end

-- outer(other): self (n) times other (m), n x m.
function Tensor.outer(self, other)
  header(self)
  tensor_arg("outer", other, "other")
  if self:dim() ~= 1 or other:dim() ~= 1 then
    fail(("outer: expected two 1-D tensors, got %d and %d dims"):format(self:dim(), other:dim()))
  end
  return (self:view(self:numel(), 1) * other:view(1, other:numel()))
end

-- diff([n = 1 [, dim = -1]]): the n-th forward difference along dim (n fewer elements;
-- bool gives the logical xor of neighbours, as torch).
function Tensor.diff(self, n, dim)
  header(self)
  n = n == nil and 1 or n
  if not util.is_int(n) or n < 0 then fail(("diff: n must be an integer >= 0, got %s"):format(describe(n))) end
  if self:dim() == 0 then fail("diff: expected a tensor of at least 1 dim, got a 0-dim one") end
  local d = dim0("diff", dim == nil and -1 or dim, self:dim()) + 1
  local out = self
  for _ = 1, n do
    local size = out:size(d)
    if size == 0 then break end
    local hi, lo = out:narrow(d, 2, size - 1), out:narrow(d, 1, size - 1)
    out = out:dtype() == "bool" and hi:logical_xor(lo) or hi - lo
  end
  return out == self and self:clone() or out
end

-- addcmul(t1, t2 [, value = 1]): self + value * t1 * t2; addcdiv: self + value * t1 / t2.
function Tensor.addcmul(self, t1, t2, value)
  header(self)
  tensor_arg("addcmul", t1, "tensor1")
  tensor_arg("addcmul", t2, "tensor2")
  if value == nil or value == 1 then return self + t1 * t2 end
  return self + t1 * t2 * value
end
function Tensor.addcdiv(self, t1, t2, value)
  header(self)
  tensor_arg("addcdiv", t1, "tensor1")
  tensor_arg("addcdiv", t2, "tensor2")
  if value == nil or value == 1 then return self + t1 / t2 end
  return self + t1 / t2 * value
end

-- beta * self + alpha * prod, torch's addmm/baddbmm: with beta 0 self is ignored (NaN
-- in it too).
local function scaled_sum(call, self, prod, opts)
  opts = util.options(call, opts, { beta = "number", alpha = "number" })
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  if alpha ~= 1 then prod = prod * alpha end
  if beta == 0 then return prod end
  return (beta == 1 and self or self * beta) + prod
end

-- addmm(mat1, mat2 [, {beta =, alpha =}]): beta * self + alpha * (mat1 @ mat2).
function Tensor.addmm(self, mat1, mat2, opts)
  header(self)
  tensor_arg("addmm", mat1, "mat1")
  tensor_arg("addmm", mat2, "mat2")
  if mat1:dim() ~= 2 or mat2:dim() ~= 2 then
    fail(("addmm: mat1 and mat2 must be matrices, got %d and %d dims"):format(mat1:dim(), mat2:dim()))
  end
  return scaled_sum("addmm", self, mat1:matmul(mat2), opts)
end

-- baddbmm(batch1, batch2 [, {beta =, alpha =}]): beta * self + alpha * bmm(batch1, batch2).
function Tensor.baddbmm(self, b1, b2, opts)
  header(self)
  tensor_arg("baddbmm", b1, "batch1")
  tensor_arg("baddbmm", b2, "batch2")
  if b1:dim() ~= 3 or b2:dim() ~= 3 then
    fail(("baddbmm: batch1 and batch2 must have 3 dims, got %d and %d"):format(b1:dim(), b2:dim()))
  end
  return scaled_sum("baddbmm", self, b1:bmm(b2), opts)
end

-- tile(reps): repeat with reps padded with leading ones to the tensor's dims (torch's).
function Tensor.tile(self, ...)
  header(self)
  local reps = select("#", ...) == 1 and type((...)) == "table" and (...) or { ... }
  for _, r in ipairs(reps) do
    if not util.is_int(r) or r < 0 then fail(("tile: repeats must be integers >= 0, got %s"):format(describe(r))) end
  end
  local full = {}
  for _ = 1, self:dim() - #reps do full[#full + 1] = 1 end
  for _, r in ipairs(reps) do full[#full + 1] = r end
  return (self:repeat_tensor(full))
end

return {}
