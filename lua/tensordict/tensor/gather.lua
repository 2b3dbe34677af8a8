-- tensor/gather.lua: masks and index tensors: masked_select, nonzero, index_select, gather,
-- scatter_, index_add_, and the grammar's mask and index entries (t[mask], t[idx],
-- t[{ {}, idx }] and assignment through them).
-- Index values are 1-based here (negative from the end) and 0-based in C; indices are
-- checked in Lua first so errors speak in the user's terms.
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor.core")
local create = require("tensordict.tensor.create")
local device = require("tensordict.tensor.device")
local cuda = require("tensordict.tensor.cuda")

local C = lib.C
local fail, describe, dim0 = util.fail, util.describe, util.dim0
local Tensor, adopt, is_tensor, check = tensor.Tensor, tensor.adopt, tensor.is_tensor, tensor.check
local header = tensor.handle -- the C header of a live tensor
local INT = C.TD_SCALAR_INT

local M = {}

-- 1-based index values (a tensor of integers or a Lua array) for a dim of this size
-- -> a tensor of 0-based values for C. dim is 1-based, for messages.
-- The same as an owned C header, which the caller releases (td_tensor_release) right
-- after its C call: no Lua object, owner or finaliser for a temporary that td[idx]
-- would otherwise make on every call.
function M.zero_based_header(idx, size, dim, call)
  if type(idx) == "table" and not is_tensor(idx) then
    idx = create.tensor(idx, "int64")
  end
  if not is_tensor(idx) then
    fail(("%s: index must be an integer tensor or a Lua array of integers, got %s"):format(call, describe(idx)))
  end
  local h = header(idx)
  if not dtypes.is_integer(h.dtype) then
    fail(("%s: index must have an integer dtype, got %s"):format(call, dtypes.name(h.dtype)))
  end
  if device.on_device(h) then -- checked and shifted on the host, then moved back
    local host = cuda.tensor_to(idx, "cpu", false, call)
    local z = M.zero_based(host, size, dim, call)
    host:free()
    return cuda.tensor_to(z, device.name_of(h), false, call)
  end
  -- one C pass: checked against the dim and shifted to 0-based (negatives kept)
  local p = C.td_index_from_one_based(h, size, call, dim)
  if p == nil then util.c_fail() end
  return p
end

function M.zero_based(idx, size, dim, call)
  return adopt(M.zero_based_header(idx, size, dim, call))
end

-- The 0-based index for a tensor at header h: on h's device when h is on a device and
-- the index was given as a Lua array (made on the host).
local function index_for(h, index, size, dim, call)
  local idx = M.zero_based(index, size, dim, call)
  if device.on_device(h) and not device.on_device(idx.h) and not is_tensor(index) then
    local moved = cuda.tensor_to(idx, device.name_of(h), false, call)
    idx:free()
    return moved
  end
  return idx
end

local function dim_and_size(call, h, dim)
  local d = dim0(call, dim, h.ndim)
  return d, tonumber(h.shape[d])
end

function Tensor.masked_select(self, mask)
  if not is_tensor(mask) then fail(("masked_select: mask must be a bool tensor, got %s"):format(describe(mask))) end
  local h, m = header(self), header(mask)
  return adopt(device.pick("masked_select", h, m).td_masked_select(h, m))
end

-- [count, dim()] 1-based positions of the non-zero elements.
function Tensor.nonzero(self)
  local positions = adopt(C.td_nonzero(header(self)))
  check(C.td_binary_scalar_(C.TD_BINARY_ADD, positions.h, 1, INT))
  return positions
end

-- An int64 or int32 index tensor that C may take 1-based as it is, with h, on the host
-- (checked and shifted in the pass that makes the offsets: no converted copy).
local function takes_one_based(h, index)
  if not is_tensor(index) or device.on_device(h) then return false end
  local ih = header(index)
  return (ih.dtype == C.TD_INT64 or ih.dtype == C.TD_INT32) and not device.on_device(ih)
end

-- The converted index is freed at once: the GC would keep one per call alive for a while.
function Tensor.index_select(self, dim, index)
  local h = header(self)
  local d, size = dim_and_size("index_select", h, dim)
  if takes_one_based(h, index) then return adopt(C.td_index_select_one_based(h, d, header(index))) end
  local idx = index_for(h, index, size, dim, "index_select")
  local r = device.pick("index_select", h, idx.h).td_index_select(h, d, idx.h)
  idx:free()
  return adopt(r)
end

function Tensor.gather(self, dim, index)
  local h = header(self)
  local d, size = dim_and_size("gather", h, dim)
  if takes_one_based(h, index) then return adopt(C.td_gather_one_based(h, d, header(index))) end
  local idx = index_for(h, index, size, dim, "gather")
  local r = device.pick("gather", h, idx.h).td_gather(h, d, idx.h)
  idx:free()
  return adopt(r)
end

-- scatter_(dim, index, src): src a tensor, or a number written at every index.
function Tensor.scatter_(self, dim, index, src)
  local h = header(self)
  local d, size = dim_and_size("scatter_", h, dim)
  local idx = index_for(h, index, size, dim, "scatter_")
  local s
  if is_tensor(src) then
    s = header(src)
  elseif type(src) == "number" or type(src) == "boolean" then
    local v = type(src) == "boolean" and (src and 1 or 0) or src
    local full = adopt(C.td_tensor_full(idx.h.ndim, idx.h.shape, h.dtype, v))
    if device.on_device(h) then full = cuda.tensor_to(full, device.name_of(h), false, "scatter_") end
    s = full.h
  else
    fail(("scatter_: src must be a tensor or a number, got %s"):format(describe(src)))
  end
  check(device.pick("scatter_", h, idx.h, s).td_scatter_(h, d, header(idx), s))
  return self
end

function Tensor.index_add_(self, dim, index, src)
  local h = header(self)
  local d, size = dim_and_size("index_add_", h, dim)
  if not is_tensor(src) then fail(("index_add_: src must be a tensor, got %s"):format(describe(src))) end
  check(C.td_index_add_(h, d, header(M.zero_based(index, size, dim, "index_add_")), header(src)))
  return self
end

------------------------------------------------------------------ grammar entries

-- Dims 0..n-1 of h in the order: the k dims from d first, then the others.
local function front_order(n, d, k)
  local order = {}
  for i = d, d + k - 1 do order[#order + 1] = i end
  for i = 0, n - 1 do
    if i < d or i >= d + k then order[#order + 1] = i end
  end
  return order
end

local function permuted(h, order)
  local buf = util.dims_buf
  for i, d in ipairs(order) do buf[i - 1] = d end
  local out = tensor.Header()
  check(C.td_tensor_permute(h, buf, out))
  return out
end

-- t is [count, before.., after..] with before the first d dims: -> [before.., count, after..].
local function count_dim_to(t, d)
  if d == 0 then return t end
  local perm = {}
  for i = 1, d do perm[i] = i + 1 end
  perm[d + 1] = 1
  for i = d + 2, t:dim() do perm[i] = i end
  return t:permute(perm)
end

-- The inverse: [before.., count, after..] -> [count, before.., after..].
local function count_dim_to_front(t, d)
  if d == 0 then return t end
  local perm = { d + 1 }
  for i = 1, d do perm[i + 1] = i end
  for i = d + 2, t:dim() do perm[i] = i end
  return t:permute(perm)
end

-- The result of an advanced entry applied to view (a caller-owned header): a copy.
-- adv = {tensor =, dim = 0-based dim of view, mask = boolean}.
function M.read(view, adv)
  local idx = adv.tensor
  if adv.mask then
    local k = idx.h.ndim
    local front = permuted(view, front_order(view.ndim, adv.dim, k))
    local rows = adopt(C.td_mask_rows(front, header(idx)))
    return count_dim_to(rows, adv.dim)
  end
  local flat = idx.h.ndim == 1 and idx or idx:reshape(-1)
  local size = tonumber(view.shape[adv.dim])
  local picked = adopt(C.td_index_select(view, adv.dim, header(M.zero_based(flat, size, adv.dim + 1, "index"))))
  if idx.h.ndim == 1 then return picked end
  return picked:unflatten(adv.dim + 1, idx:shape())
end

-- Writes value (tensor, number, boolean) through an advanced entry into view.
function M.write(view, adv, value)
  local idx = adv.tensor
  local v
  if is_tensor(value) then
    v = value
  elseif type(value) == "number" or type(value) == "boolean" then
    v = adopt(C.td_tensor_full(0, nil, view.dtype, type(value) == "boolean" and (value and 1 or 0) or value))
  else
    v = create.from_table(value, view.dtype, "assignment")
  end
  if adv.mask then
    local k = idx.h.ndim
    local order = front_order(view.ndim, adv.dim, k)
    local front = permuted(view, order)
    -- value broadcasts to the selection [.., count, ..]; put wants [count, rest..].
    local count = idx:sum()
    local shape = {}
    for i = 0, adv.dim - 1 do shape[#shape + 1] = tonumber(view.shape[i]) end
    shape[#shape + 1] = count
    for i = adv.dim + k, view.ndim - 1 do shape[#shape + 1] = tonumber(view.shape[i]) end
    local ordered = count_dim_to_front(v:expand(shape), adv.dim)
    check(C.td_mask_rows_put_(front, header(idx), header(ordered)))
    return
  end
  local flat = idx.h.ndim == 1 and idx or idx:reshape(-1)
  local size = tonumber(view.shape[adv.dim])
  check(C.td_index_put_(view, adv.dim, header(M.zero_based(flat, size, adv.dim + 1, "index")), header(v)))
end

return M
