-- dict/gather.lua: td:gather(dim, index) over a batch dim, Python's TensorDict.gather:
-- torch.gather on every leaf, the index (shaped like the batch) expanded to each leaf's
-- trailing dims. The result's batch size is the index's shape.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local gather = require("tensordict.tensor.gather")
local core = require("tensordict.dict.core")

local TD = core.methods
local cdict, wrap, check = core.cdict, core.wrap, core.check
local fail, describe = util.fail, util.describe
local is_tensor, header, adopt = tensor.is_tensor, tensor.handle, tensor.adopt
local KIND_TENSOR, KIND_DICT, KIND_VALUES = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUES

local function shape_text(s) return "[" .. table.concat(s, ", ") .. "]" end

-- The 0-based index viewed over a tensor of this shape: the index's dims, then the
-- tensor's dims past the batch (nb of them) through stride-0 expansion.
local function index_for(zero, ishape, shape, nb)
  if #shape == nb then return zero end
  local ones, full = { unpack(ishape) }, { unpack(ishape) }
  for j = nb + 1, #shape do
    ones[#ones + 1] = 1
    full[#full + 1] = shape[j]
  end
  return zero:reshape(ones):expand(full)
end

-- A tensor over a pinned header of entry i (a leaf, or a stacked value's positions).
local function pinned(td, d, i)
  local h = tensor.Header()
  ffi.copy(h, C.td_dict_tensor_pin(d, i), ffi.sizeof(tensor.Header))
  return tensor.new_tensor(h, td)
end

-- A stacked value with the same texts as entry i of d and new positions.
local function set_values_like(r, k, d, i, positions)
  local n = tonumber(C.td_dict_value_count(d, i))
  local texts = ffi.new("const char *[?]", math.max(n, 1))
  for pos = 0, n - 1 do texts[pos] = C.td_dict_value_borrow(d, i, pos) end
  check(C.td_dict_set_values(cdict(r), k, #k, n, texts, header(positions)))
end

local function gather_level(td, d0, zero, ishape, nb)
  local batch = { unpack(ishape) }
  local own = TD.batch_size(td)
  for j = nb + 1, #own do batch[#batch + 1] = own[j] end
  local r = wrap(C.td_dict_new(util.read_shape("gather", false, batch), util.shape_buf))
  local d = cdict(td)
  for i, k in ipairs(core.key_list(td)) do
    local kind = C.td_dict_kind(d, i - 1)
    if kind == KIND_TENSOR or kind == KIND_VALUES then
      local t = pinned(td, d, i - 1)
      local got = adopt(C.td_gather(header(t), d0, header(index_for(zero, ishape, t:shape(), nb))))
      if kind == KIND_TENSOR then
        core.set_string(r, k, got, "gather")
      else
        set_values_like(r, k, d, i - 1, got)
      end
    elseif kind == KIND_DICT then
      core.set_string(r, k, gather_level(core.get_string(td, k), d0, zero, ishape, nb), "gather")
    else
      check(C.td_dict_set_entry(cdict(r), k, #k, d, i - 1)) -- a uniform value stays
    end
  end
  return r
end

-- td:gather(dim, index): index an integer tensor (or Lua array) of 1-based positions
-- along batch dim `dim`, with one dim per batch dim; in the other dims it may be no
-- larger than the batch. The result has batch size index:shape(); non-tensor values
-- stay, names are kept.
function TD.gather(self, dim, index)
  cdict(self)
  local nb = self._td_head.ndim
  if nb == 0 then fail("gather: the TensorDict has no batch dims (batch size []) to gather along") end
  local d0 = core.batch_dim("gather", self, dim)
  if type(index) == "table" and not is_tensor(index) then index = create.tensor(index, "int64") end
  if not is_tensor(index) then
    fail(("gather: index must be an integer tensor or a Lua array of integers, got %s"):format(describe(index)))
  end
  local ishape, batch = index:shape(), TD.batch_size(self)
  if #ishape ~= nb then
    fail(("gather: the index has %d dims (shape %s); it needs one per batch dim (batch size %s)")
      :format(#ishape, shape_text(ishape), shape_text(batch)))
  end
  for j = 1, nb do
    if j ~= d0 + 1 and ishape[j] > batch[j] then
      fail(("gather: index shape %s is larger than the batch size %s in dim %d (only dim %d may be larger)")
        :format(shape_text(ishape), shape_text(batch), j, d0 + 1))
    end
  end
  local zero = gather.zero_based(index, batch[d0 + 1], d0 + 1, "gather")
  local r = gather_level(self, d0, zero, { unpack(ishape) }, nb)
  if self._td_head.device_type ~= C.TD_DEVICE_NONE then
    check(C.td_dict_set_device(r._td_p, self._td_head.device_type, self._td_head.device_index))
  end
  local names = core.dim_names(self)
  if names then core.set_names(r, names, "gather") end
  return r
end

return {}
