-- dict/auto_batch.lua: batch sizes found from the leaves, as Python's
-- td.auto_batch_size_() and TensorDict.from_dict(..., auto_batch_size = True): the
-- longest leading shape every tensor leaf shares, nested containers sized first (each
-- by its own leaves), non-tensor values ignored.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local core = require("tensordict.dict.core")

local TD = core.methods
local cdict, check, is_td = core.cdict, core.check, core.is_td
local fail, describe = util.fail, util.describe
local KIND_TENSOR, KIND_DICT, KIND_VALUES = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUES

local M = {}

local function set_batch(td, shape)
  local n = util.read_shape("auto_batch_size_", false, shape)
  check(C.td_dict_set_batch(cdict(td), n, util.shape_buf))
end

-- The shape of a tensor leaf (or a stacked value's positions) at entry i.
local function entry_shape(d, i)
  local h = C.td_dict_tensor_pin(d, i)
  return util.int64_list(h.shape, h.ndim)
end

-- The longest common prefix of the shapes, at most max_dims long.
local function common_prefix(shapes, max_dims)
  local out = {}
  local first = shapes[1]
  for j = 1, math.min(#first, max_dims) do
    for s = 2, #shapes do
      if shapes[s][j] ~= first[j] then return out end
    end
    out[j] = first[j]
  end
  return out
end

-- Plans shape for td and every container below it (they have no tensors).
local function plan_all(td, shape, plan)
  for _, k in ipairs(core.key_list(td)) do
    local v = core.get_string(td, k)
    if is_td(v) then plan_all(v, shape, plan) end
  end
  plan[#plan + 1] = { td, shape }
end

-- Plans the batch sizes of td and the containers below it, children before parents;
-- returns td's, or nil when nothing below td has a shape (no tensor leaves): then the
-- caller plans its own for it.
local function plan_level(td, max_dims, plan)
  local d = cdict(td)
  local shapes, shapeless = {}, {}
  for i, k in ipairs(core.key_list(td)) do
    local kind = C.td_dict_kind(d, i - 1)
    if kind == KIND_TENSOR or kind == KIND_VALUES then
      shapes[#shapes + 1] = entry_shape(d, i - 1)
    elseif kind == KIND_DICT then
      local child = core.get_string(td, k)
      local shape = plan_level(child, max_dims, plan)
      if shape then shapes[#shapes + 1] = shape else shapeless[#shapeless + 1] = child end
    end
  end
  if #shapes == 0 then return nil end
  local batch = common_prefix(shapes, max_dims)
  for _, child in ipairs(shapeless) do plan_all(child, batch, plan) end
  plan[#plan + 1] = { td, batch }
  return batch
end

-- Applies a plan (children listed before parents). Every size set must lead the
-- children's and follow the parent's, so: first, parents first, each container shrinks
-- to what its old and new sizes share; then, children first, each takes its new size.
local function apply_plan(plan)
  for p = #plan, 1, -1 do
    local td, new = plan[p][1], plan[p][2]
    local old, kept = TD.batch_size(td), {}
    for j = 1, math.min(#old, #new) do
      if old[j] ~= new[j] then break end
      kept[j] = old[j]
    end
    if #kept < #old then set_batch(td, kept) end
  end
  for p = 1, #plan do set_batch(plan[p][1], plan[p][2]) end
end

local function check_batch_dims(call, batch_dims)
  if type(batch_dims) ~= "nil" and not (util.is_int(batch_dims) and batch_dims >= 0) then
    fail(("%s: batch_dims must be a non-negative integer, got %s"):format(call, describe(batch_dims)))
  end
  return batch_dims or math.huge
end

-- td:auto_batch_size_([batch_dims]): the batch size becomes the longest leading shape
-- all tensor leaves share (at most batch_dims dims), nested TensorDicts each sized by
-- their own leaves first; in place, returns td. Names of the dims kept stay.
function TD.auto_batch_size_(self, batch_dims)
  cdict(self)
  local max_dims = check_batch_dims("auto_batch_size_", batch_dims)
  local names = core.dim_names(self)
  local plan = {}
  if plan_level(self, max_dims, plan) == nil then plan_all(self, {}, plan) end
  apply_plan(plan)
  if names then
    local kept = {}
    for i = 1, self._td_head.ndim do kept[i] = names[i] or false end
    core.set_names(self, kept, "auto_batch_size_")
  end
  return self
end

local FROM_DICT_OPTS = { batch_size = true, auto_batch_size = "boolean", batch_dims = true, names = true,
                         device = true }

-- T.from_dict(tbl [, {batch_size =, auto_batch_size =, batch_dims =, names =, device =}])
-- (also T.TensorDict.from_dict): a TensorDict from a Lua table (nested tables become nested
-- TensorDicts), as Python's from_dict. With batch_size, that size (nested ones too);
-- with auto_batch_size = true, or batch_dims without auto_batch_size = false, the size
-- auto_batch_size_ finds (at most batch_dims dims); else [] (Python's defaults).
-- A TensorDict given instead of a table gives a new one sharing its leaves (Python
-- returns that TensorDict itself, options ignored).
function M.from_dict(source, opts)
  opts = util.options("from_dict", opts, FROM_DICT_OPTS)
  if not is_td(source) and (type(source) ~= "table" or tensor.is_tensor(source)) then
    fail(("from_dict: expected a table of tensors and values (or a TensorDict), got %s"):format(describe(source)))
  end
  if opts.batch_size ~= nil and opts.batch_dims ~= nil then
    fail("from_dict: give batch_size or batch_dims, not both")
  end
  if is_td(source) then -- new nested containers (leaves shared): sizing must not reach source's
    source = TD.apply(source, function(x) return x end, { filter_empty = false })
  end
  local auto = opts.batch_size == nil
    and (opts.auto_batch_size == true or (opts.auto_batch_size == nil and opts.batch_dims ~= nil))
  local td = core.construct(source, (not auto) and opts.batch_size or nil, { device = opts.device })
  if auto then
    check_batch_dims("from_dict", opts.batch_dims)
    TD.auto_batch_size_(td, opts.batch_dims)
  end
  if opts.names ~= nil then core.set_names(td, opts.names, "from_dict") end
  return td
end

return M
