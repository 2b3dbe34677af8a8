-- tensor/matrix_forms.lua: torch's functions over matrices and their diagonals, composed
-- of views (diagonal), the elementwise ops, cat and matmul: diag, trace, kron, cross,
-- tensordot, inner, vdot. Methods
-- only (T.<name> functions come from the facade's METHOD_FUNCTIONS).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local join = require("tensordict.tensor.join")

local fail, describe, dim0 = util.fail, util.describe, util.dim0
local header = tensor.handle -- raises, naming the method, for a self that is no live tensor
local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

local function offset_arg(call, k)
  if k == nil then return 0 end
  if not util.is_int(k) then fail(("%s: diagonal must be an integer, got %s"):format(call, describe(k))) end
  return k
end

-- diag([diagonal = 0]): of a 1-D tensor, the square matrix with it on that diagonal
-- (> 0 above the main one); of a matrix, that diagonal as a new 1-D tensor.
function Tensor.diag(self, k)
  header(self)
  k = offset_arg("diag", k)
  local nd = self:dim()
  if nd == 2 then return self:diagonal(k):clone() end
  if nd ~= 1 then fail(("diag: expected a 1-D or 2-D tensor, got %d dims"):format(nd)) end
  local n = self:size(1) + math.abs(k)
  local out = create.zeros(n, n, self:dtype())
  out:diagonal(k):copy_(self)
  return out
end

-- trace(): the sum of a matrix's main diagonal (integers give int64, as sum does).
function Tensor.trace(self)
  header(self)
  if self:dim() ~= 2 then fail(("trace: expected a matrix (2 dims), got %d dims"):format(self:dim())) end
  if self:dtype() == "bool" then fail("trace: not supported for bool tensors (torch neither)") end
  return (self:diagonal():sum())
end

-- kron(other): the Kronecker product; the operand with fewer dims gets leading ones.
-- Each pair of dims (a_i, b_i) becomes a_i * b_i: self is viewed [a0, 1, a1, 1, ..],
-- other [1, b0, 1, b1, ..], their broadcast product [a0, b0, a1, b1, ..] is merged.
function Tensor.kron(self, other)
  header(self)
  if not is_tensor(other) then fail(("kron: other must be a tensor, got %s"):format(describe(other))) end
  local nd = math.max(self:dim(), other:dim())
  local sa, sb, va, vb, out = {}, {}, {}, {}, {}
  for i = 1, nd do
    local ia, ib = i - (nd - self:dim()), i - (nd - other:dim())
    sa[i], sb[i] = ia >= 1 and self:size(ia) or 1, ib >= 1 and other:size(ib) or 1
    va[2 * i - 1], va[2 * i] = sa[i], 1
    vb[2 * i - 1], vb[2 * i] = 1, sb[i]
    out[i] = sa[i] * sb[i]
  end
  if nd == 0 then return self * other end
  return ((self:reshape(va) * other:reshape(vb)):reshape(out))
end

-- cross(other [, dim]): the cross product of 3-vectors along dim (default: the first
-- dim of size 3 of the broadcast shape, as torch.cross), operands broadcast.
function Tensor.cross(self, other, dim)
  header(self)
  if not is_tensor(other) then fail(("cross: other must be a tensor, got %s"):format(describe(other))) end
  if self:dim() ~= other:dim() then
    fail(("cross: self and other must have the same number of dims, got %d and %d"):format(self:dim(), other:dim()))
  end
  local shape = {}
  for i = 1, self:dim() do
    local x, y = self:size(i), other:size(i)
    if x ~= y and x ~= 1 and y ~= 1 then
      fail(("cross: the shapes of self and other do not broadcast at dim %d (%d and %d)"):format(i, x, y))
    end
    shape[i] = math.max(x, y)
  end
  local d
  if dim == nil then
    for i = 1, #shape do
      if shape[i] == 3 then d = i break end
    end
    if not d then fail("cross: no dim of size 3 in the broadcast shape " .. util.format_list(shape)) end
  else
    d = dim0("cross", dim, #shape) + 1
    if shape[d] ~= 3 then fail(("cross: dim %d must have size 3, got %d"):format(d, shape[d])) end
  end
  local a, b = self:broadcast_to(shape), other:broadcast_to(shape)
  local function at(t, i) return t:narrow(d, i, 1) end
  return (join.cat({
    at(a, 2) * at(b, 3) - at(a, 3) * at(b, 2),
    at(a, 3) * at(b, 1) - at(a, 1) * at(b, 3),
    at(a, 1) * at(b, 2) - at(a, 2) * at(b, 1),
  }, d))
end

-- tensordot(other [, dims = 2]): the sum over the last dims of self and the first of
-- other (dims a count), or over the pairs of dims {{self's}, {other's}} (1-based).
function Tensor.tensordot(self, other, dims)
  header(self)
  if not is_tensor(other) then fail(("tensordot: other must be a tensor, got %s"):format(describe(other))) end
  dims = dims == nil and 2 or dims
  local da, db = {}, {}
  if util.is_int(dims) then
    if dims < 0 or dims > self:dim() or dims > other:dim() then
      fail(("tensordot: dims %d is out of range for tensors of %d and %d dims"):format(dims, self:dim(), other:dim()))
    end
    for i = 1, dims do da[i], db[i] = self:dim() - dims + i, i end
  elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" and #dims[1] == #dims[2] then
    for i = 1, #dims[1] do
      da[i], db[i] = dim0("tensordot", dims[1][i], self:dim()) + 1, dim0("tensordot", dims[2][i], other:dim()) + 1
    end
  else
    fail(("tensordot: dims must be a count or two lists of dims of equal length, got %s"):format(describe(dims)))
  end
  local function rest(t, contracted)
    local out, used = {}, {}
    for _, d in ipairs(contracted) do used[d] = true end
    for d = 1, t:dim() do if not used[d] then out[#out + 1] = d end end
    return out
  end
  local ra, rb = rest(self, da), rest(other, db)
  local shape, na, nb, nk = {}, 1, 1, 1
  for _, d in ipairs(ra) do shape[#shape + 1] = self:size(d); na = na * self:size(d) end
  for _, d in ipairs(rb) do shape[#shape + 1] = other:size(d); nb = nb * other:size(d) end
  for i, d in ipairs(da) do
    if self:size(d) ~= other:size(db[i]) then
      fail(("tensordot: dim %d of self (size %d) and dim %d of other (size %d) differ"):format(d, self:size(d), db[i],
        other:size(db[i])))
    end
    nk = nk * self:size(d)
  end
  local pa, pb = {}, {}
  for _, d in ipairs(ra) do pa[#pa + 1] = d end
  for _, d in ipairs(da) do pa[#pa + 1] = d end
  for _, d in ipairs(db) do pb[#pb + 1] = d end
  for _, d in ipairs(rb) do pb[#pb + 1] = d end
  local a = #pa > 0 and self:permute(pa) or self
  local b = #pb > 0 and other:permute(pb) or other
  local r = a:reshape(na, nk):matmul(b:reshape(nk, nb))
  return (r:reshape(shape))
end

-- inner(other): the sum over the last dims of both (numbers: a product).
function Tensor.inner(self, other)
  header(self)
  if not is_tensor(other) then fail(("inner: other must be a tensor, got %s"):format(describe(other))) end
  if self:dim() == 0 or other:dim() == 0 then return (self * other) end
  return (self:tensordot(other, { { -1 }, { -1 } }))
end

-- vdot(other): the dot product of two 1-D tensors, a Lua number (as dot).
function Tensor.vdot(self, other)
  header(self)
  return (self:dot(other))
end

return {}
