-- tensor/statistics.lua: torch's statistics between variables and points, composed of
-- the reductions, matmul and elementwise ops: cov, corrcoef (variables as rows,
-- observations as columns, as torch and NumPy), dist, cdist. Methods only.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local dtypes = require("tensordict.tensor.dtype")

local fail, describe = util.fail, util.describe
local header = tensor.handle
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

-- cov([{correction = 1}]): the covariance matrix of the rows (a vector: its variance, a
-- Lua value, as var() over everything gives).
function Tensor.cov(self, opts)
  header(self)
  opts = util.options("cov", opts, { correction = "number" })
  if self:dim() > 2 then fail(("cov: expected a tensor of at most 2 dims, got %d"):format(self:dim())) end
  local x = self:dim() < 2 and self:reshape(1, self:numel()) or self
  if not dtypes.is_floating(header(x).dtype) then x = x:to("float32") end
  local n = x:size(2)
  local centred = x - x:mean(2, true)
  local c = centred:matmul(centred:t()) / math.max(n - (opts.correction or 1), 0)
  if self:dim() < 2 then return c:item() end
  return c
end

-- corrcoef(): the Pearson correlation of the rows, clamped into [-1, 1] (torch's).
function Tensor.corrcoef(self)
  header(self)
  local c = self:cov()
  if type(c) == "number" then return c / c end
  local d = c:diagonal():sqrt()
  return ((c / d:view(-1, 1) / d:view(1, -1)):clamp(-1, 1))
end

-- dist(other [, p = 2]): the p-norm of self - other (broadcast), a Lua number.
function Tensor.dist(self, other, p)
  header(self)
  if not is_tensor(other) then fail(("dist: other must be a tensor, got %s"):format(describe(other))) end
  return ((self - other):norm(p == nil and 2 or p))
end

-- cdist(x2 [, p = 2]): the p-norm distance between every row of self ([.., P, M]) and
-- every row of x2 ([.., R, M]): [.., P, R], computed as differences (no cancellation).
function Tensor.cdist(self, x2, p)
  header(self)
  if not is_tensor(x2) then fail(("cdist: x2 must be a tensor, got %s"):format(describe(x2))) end
  if self:dim() < 2 or x2:dim() < 2 then
    fail(("cdist: expected tensors of at least 2 dims, got %d and %d"):format(self:dim(), x2:dim()))
  end
  if self:size(-1) ~= x2:size(-1) then
    fail(("cdist: the last dims must match, got %d and %d"):format(self:size(-1), x2:size(-1)))
  end
  if not dtypes.is_floating(header(self).dtype) then
    fail(("cdist: expected floating point tensors, got %s"):format(self:dtype()))
  end
  local diff = self:unsqueeze(-2) - x2:unsqueeze(-3)
  return (diff:norm(p == nil and 2 or p, -1))
end

return {}
