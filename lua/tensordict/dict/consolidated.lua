-- dict/consolidated.lua: td:consolidate() in memory and td:is_consolidated(), as
-- Python's: a consolidated TensorDict has every tensor leaf in one block of memory
-- (one storage), which a copy or a shipment to another process moves in one piece.
-- T.from_consolidated(file) gives one too (its leaves view the mapped file).
local C = require("tensordict.lib").C
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local core = require("tensordict.dict.core")

local TD = core.methods
local cdict = core.cdict
local KIND_TENSOR, KIND_DICT = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT
local header, adopt = tensor.handle, tensor.adopt

local M = {}

local ALIGN = 8 -- every leaf starts at a multiple of the largest item size

-- Calls fn(leaf) for every tensor leaf of td, nested ones too, in key order.
local function each_leaf(td, fn)
  local d = cdict(td)
  for i, k in ipairs(core.key_list(td)) do
    local kind = C.td_dict_kind(d, i - 1)
    if kind == KIND_TENSOR then
      if fn(core.get_string(td, k)) == false then return false end
    elseif kind == KIND_DICT then
      if each_leaf(core.get_string(td, k), fn) == false then return false end
    end
  end
end

local function aligned_bytes(x)
  local n = x:numel() * tonumber(C.td_dtype_itemsize(header(x).dtype))
  return math.ceil(n / ALIGN) * ALIGN
end

-- A copy of td whose tensor leaves are views of one new block of memory (contiguous,
-- in key order); non-tensor values carried over. Leaves off the CPU are copied one by
-- one instead (TD.contiguous): a block is CPU memory.
function M.in_memory(td)
  local total, on_cpu = 0, true
  each_leaf(td, function(x)
    total = total + aligned_bytes(x)
    on_cpu = on_cpu and x:device() == "cpu"
  end)
  if not on_cpu then return TD.contiguous(td) end
  local block = create.empty({ math.max(total, 1) }, "uint8")
  local storage = header(block).storage
  local at = 0
  return TD.apply(td, function(x)
    local h = header(x)
    local view = adopt(C.td_tensor_from_storage(storage, at / tonumber(C.td_dtype_itemsize(h.dtype)),
      h.ndim, h.shape, nil, h.dtype))
    at = at + aligned_bytes(x)
    return view:copy_(x)
  end, { filter_empty = false })
end

-- td:is_consolidated(): true when td has tensor leaves and they all live in one
-- storage (td:consolidate(), T.from_consolidated); a clone or an ordinary TensorDict
-- gives false, as Python's.
function TD.is_consolidated(self)
  cdict(self)
  local storage, count = nil, 0
  local same = each_leaf(self, function(x)
    local s = header(x).storage
    count = count + 1
    if storage == nil then storage = s elseif s ~= storage then return false end
  end) ~= false
  return same and count > 0
end

return M
