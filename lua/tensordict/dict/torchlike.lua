-- dict/torchlike.lua: torch's tensor methods that Python's TensorDict 0.15 has and
-- that work on the batch dims or on every leaf: where, flip, roll, the new_* and *_like
-- constructors, is_contiguous, addcmul / addcdiv, nansum / nanmean. Each is the tensor method on every
-- leaf (nested TensorDicts too); dims are batch dims, 1-based, negative from the end.
-- Non-tensor values are carried over as they are.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local join = require("tensordict.tensor.join")
local random = require("tensordict.tensor.random")
local dtypes = require("tensordict.tensor.dtype")
local core = require("tensordict.dict.core")
local td_math = require("tensordict.dict.math")

local TD = core.methods
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor = tensor.is_tensor
local KIND_TENSOR, KIND_DICT, KIND_VALUES = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUES

-- td:where(cond, other): each leaf where cond is true, other's elsewhere, as Python's
-- td.where (T.where(cond, td, other) with td first). cond: a bool tensor over the
-- leading batch dims, expanded over each leaf's other dims; other: a TensorDict with
-- the same keys, or a number.
function TD.where(self, cond, other)
  cdict(self)
  if is_tensor(other) then
    fail("where: other must be a TensorDict or a number, got a tensor (T.where(cond, td, t) "
      .. "is not supported either: make other a TensorDict of the same keys)")
  end
  return (td_math.where(cond, self, other))
end

-- The distinct 0-based batch dims of a dim or a table of dims, checked; for messages,
-- the dims as given.
local function batch_dims_of(call, self, dims)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" or is_tensor(dims) or is_td(dims) then
    fail(("%s: dims must be a number or a table of numbers, got %s"):format(call, describe(dims)))
  end
  local out, seen = {}, {}
  for i = 1, #dims do
    local d0 = core.batch_dim(call, self, dims[i])
    if seen[d0] then
      fail(("%s: dim %d appears more than once in the dims %s"):format(call, d0 + 1, util.format_list(dims)))
    end
    seen[d0] = true
    out[i] = d0
  end
  return out
end

-- self with batch dim d (1-based) reordered: position i of the result is position
-- pick(i, n) of self (n the dim's size). Batch indexing, so every entry follows, stacked
-- non-tensor values included (as Python's flip and roll move them); a copy.
local function reorder(self, d, pick)
  local n = TD.batch_size(self)[d]
  local idx = {}
  for i = 1, n do idx[i] = pick(i, n) end
  local key = {}
  for j = 1, d - 1 do key[j] = {} end
  key[d] = create.tensor(idx, "int64")
  return self[key]
end

local function flipped(i, n) return n + 1 - i end

-- position i after a roll by shift: the element shift places before it, wrapping
local function rolled(shift) return function(i, n) return (i - 1 - shift) % n + 1 end end

-- td:flip(dims): the batch dims reversed (a number or a table of them), as Python's
-- td.flip; a copy.
function TD.flip(self, dims)
  cdict(self)
  local r = self
  for _, d0 in ipairs(batch_dims_of("flip", self, dims)) do r = reorder(r, d0 + 1, flipped) end
  if r == self then r = TD.clone(self) end
  return r
end

-- td:roll(shifts [, dims]): elements shifted along batch dims, those past the end
-- coming back at the start, as Python's td.roll. dims a number or a table of them,
-- shifts the same (one shift per dim); without dims, the batch dims are rolled as one
-- flattened dim (each leaf's other dims stay in place) by a single shift. A copy.
function TD.roll(self, shifts, dims)
  cdict(self)
  local shift_list = type(shifts) == "table" and shifts or { shifts }
  if type(shifts) ~= "number" and (type(shifts) ~= "table" or is_tensor(shifts) or is_td(shifts)) then
    fail(("roll: shifts must be an integer or a table of integers, got %s"):format(describe(shifts)))
  end
  for i = 1, #shift_list do
    if not util.is_int(shift_list[i]) then
      fail(("roll: shifts must be integers, got %s at position %d"):format(describe(shift_list[i]), i))
    end
  end
  if type(dims) == "table" and #dims == 0 then dims = nil end -- torch: no dims rolls the flattened
  if dims == nil then
    if #shift_list ~= 1 then
      fail(("roll: without dims, shifts must be one integer, got %d shifts"):format(#shift_list))
    end
    if self._td_head.ndim == 0 or TD.numel(self) == 0 then return TD.clone(self) end
    local r = TD.reshape(reorder(TD.reshape(self, -1), 1, rolled(shift_list[1])), TD.batch_size(self))
    local names = core.dim_names(self)
    if names then core.set_names(r, names, "roll") end
    return r
  end
  local leaf_dims = batch_dims_of("roll", self, dims)
  if #leaf_dims ~= #shift_list then
    fail(("roll: shifts and dims must align: %d shifts for %d dims"):format(#shift_list, #leaf_dims))
  end
  local r = self
  for i, d0 in ipairs(leaf_dims) do r = reorder(r, d0 + 1, rolled(shift_list[i])) end
  return r
end

------------------------------------------------------------------ new_* constructors

-- A new empty container of batch size `batch` with self's device.
local function container(call, self, batch)
  local n = util.read_shape(call, false, batch)
  local r = wrap(C.td_dict_new(n, util.shape_buf))
  if self._td_head.device_type ~= C.TD_DEVICE_NONE then
    check(C.td_dict_set_device(r._td_p, self._td_head.device_type, self._td_head.device_index))
  end
  return r
end

-- size ++ shape[from..]: a leaf's (or a nested batch's) dims past the parent's batch dims
-- after the new batch size.
local function with_tail(size, shape, from)
  local out = { unpack(size) }
  for j = from, #shape do out[#out + 1] = shape[j] end
  return out
end

-- A TensorDict of batch size `size` laid out as self: every tensor leaf becomes
-- make(shape, dtype) with shape size ++ its dims past self's batch dims (nested
-- TensorDicts likewise, each keeping its own extra batch dims), dtype opts.dtype or
-- its own. Non-tensor values are carried over. Dim names stay aligned on the right,
-- as Python's.
local function new_like_size(call, self, size, dtype, make)
  local nd = self._td_head.ndim
  local r = container(call, self, size)
  local names = core.dim_names(self)
  if names and #size > 0 then
    local kept = {}
    for i = 1, #size do kept[i] = names[nd - #size + i] or false end
    core.set_names(r, kept, call)
  end
  local d = cdict(self)
  for i, k in ipairs(core.key_list(self)) do
    local kind = C.td_dict_kind(d, i - 1)
    local v = core.get_string(self, k)
    if kind == KIND_TENSOR then
      local t = make(with_tail(size, v:shape(), nd + 1), dtype or v:dtype())
      if v:device() ~= "cpu" then t = t:to(v:device()) end
      core.set_string(r, k, t, call)
    elseif kind == KIND_DICT then
      core.set_string(r, k, new_like_size(call, v, with_tail(size, TD.batch_size(v), nd + 1), dtype, make), call)
    else
      if kind == KIND_VALUES and table.concat(size, ",") ~= table.concat(TD.batch_size(self), ",") then
        fail(("%s: the non-tensor value '%s' varies over the batch dims (a stack of values), so it has no "
          .. "value for batch size %s"):format(call, k, util.format_list(size)))
      end
      check(C.td_dict_copy_entry(cdict(r), k, #k, d, i - 1))
    end
  end
  return r
end

local NEW_OPTS = { dtype = "string" }

-- The size list of (sizes...) or ({sizes}), checked.
local function size_list(call, n, args)
  local size = args
  if n == 1 and type(args[1]) == "table" and not is_tensor(args[1]) and not is_td(args[1]) then
    size, n = args[1], #args[1]
  end
  for i = 1, n do
    if not util.is_int(size[i]) or size[i] < 0 then
      fail(("%s: sizes must be non-negative integers, got %s at position %d"):format(call, describe(size[i]), i))
    end
  end
  return { unpack(size, 1, n) }
end

local function new_opts(call, opts)
  opts = util.options(call, opts, NEW_OPTS)
  if opts.dtype ~= nil then dtypes.code(opts.dtype, call) end
  return opts
end

-- Splits (sizes... [, opts]) or ({sizes} [, opts]) into the size list and the options.
local function size_and_opts(call, ...)
  local args, n = { ... }, select("#", ...)
  local opts
  local last = args[n]
  if n > 0 and type(last) == "table" and not is_tensor(last) and last[1] == nil and next(last) ~= nil then
    opts, args[n], n = last, nil, n - 1
  end
  return size_list(call, n, args), new_opts(call, opts)
end

-- td:new_zeros(sizes... [, {dtype =}]) (or a table of sizes), new_ones, new_empty:
-- Python's td.new_zeros(*size): a TensorDict of batch size `size` whose leaves are
-- zeros (ones, uninitialised) of shape size ++ their dims past td's batch dims, of
-- their own dtype or the one given.
for name, make in pairs({ new_zeros = create.zeros, new_ones = create.ones, new_empty = create.empty }) do
  TD[name] = function(self, ...)
    cdict(self)
    local size, opts = size_and_opts(name, ...)
    return new_like_size(name, self, size, opts.dtype, function(shape, dtype) return make(shape, dtype) end)
  end
end

-- td:new_full(size, value [, {dtype =}]): as new_zeros, every leaf filled with value
-- (cast to the leaf's dtype). size an integer or a table of integers.
function TD.new_full(self, size, value, opts)
  cdict(self)
  if util.is_int(size) then size = { size } end
  if type(size) ~= "table" or is_tensor(size) or is_td(size) then
    fail(("new_full: size must be an integer or a table of integers, got %s"):format(describe(size)))
  end
  if type(value) ~= "number" and type(value) ~= "boolean" then
    fail(("new_full: the fill value must be a number or a boolean, got %s"):format(describe(value)))
  end
  local sizes, o = size_list("new_full", 1, { size }), new_opts("new_full", opts)
  local v = value
  if type(value) == "boolean" then v = value and 1 or 0 end
  return new_like_size("new_full", self, sizes, o.dtype,
    function(shape, dtype) return create.full(shape, v, dtype) end)
end

-- td:zeros_like([dtype]), ones_like, empty_like, full_like(value [, dtype]), rand_like,
-- randn_like: torch.zeros_like(td) and the others: td's layout and batch size, every
-- leaf new (of its dtype, or dtype). T.zeros_like(td) etc. call these.
local plain_zeros_like, plain_empty_like = TD.zeros_like, TD.empty_like -- dict/struct.lua's C copies
local function like(name, make, plain)
  TD[name] = function(self, dtype)
    cdict(self)
    if dtype ~= nil then dtypes.code(dtype, name) end
    if plain and dtype == nil then return plain(self) end
    return new_like_size(name, self, TD.batch_size(self), dtype, make)
  end
end
like("zeros_like", create.zeros, plain_zeros_like)
like("empty_like", create.empty, plain_empty_like)
like("ones_like", create.ones)
-- random floats only: an integer leaf needs a floating dtype given
local function random_like(name, draw)
  return function(shape, dtype)
    if not dtypes.is_floating(dtypes.code(dtype, name)) then
      fail(("%s: a leaf of dtype %s cannot hold random floats (pass a floating dtype: td:%s(\"float32\"))")
        :format(name, dtype, name))
    end
    return draw(shape, dtype)
  end
end
like("rand_like", random_like("rand_like", random.rand))
like("randn_like", random_like("randn_like", random.randn))

function TD.full_like(self, value, dtype)
  cdict(self)
  if type(value) ~= "number" and type(value) ~= "boolean" then
    fail(("full_like: the fill value must be a number or a boolean, got %s"):format(describe(value)))
  end
  if dtype ~= nil then dtypes.code(dtype, "full_like") end
  local v = value
  if type(value) == "boolean" then v = value and 1 or 0 end
  return new_like_size("full_like", self, TD.batch_size(self), dtype,
    function(shape, dt) return create.full(shape, v, dt) end)
end

--------------------------------------------------------------------- leaf checks, math

-- td:is_contiguous(): every tensor leaf (nested ones too) is contiguous, as Python's.
function TD.is_contiguous(self)
  local d = cdict(self)
  for i, k in ipairs(core.key_list(self)) do
    local kind = C.td_dict_kind(d, i - 1)
    if kind == KIND_TENSOR or kind == KIND_DICT then
      local v = core.get_string(self, k)
      if kind == KIND_DICT then
        if not TD.is_contiguous(v) then return false end
      elseif not v:is_contiguous() then
        return false
      end
    end
  end
  return true
end

-- td:addcmul(td1, td2 [, value]): td + value * td1 * td2 leaf by leaf (td1, td2
-- TensorDicts with td's keys); addcdiv: td + value * td1 / td2. The _ forms write into
-- td's leaves. As Python's td.addcmul(other1, other2, value=).
for _, name in ipairs({ "addcmul", "addcdiv" }) do
  for _, inplace in ipairs({ false, true }) do
    local call = inplace and name .. "_" or name
    TD[call] = function(self, t1, t2, value)
      cdict(self)
      core.td_arg(t1, call, "tensor1")
      core.td_arg(t2, call, "tensor2")
      if value ~= nil and type(value) ~= "number" then
        fail(("%s: value must be a number, got %s"):format(call, describe(value)))
      end
      local walk = inplace and TD.apply_ or TD.apply
      local op = tensor.Tensor[name]
      return walk(self, function(x, a, b)
        local r = op(x, a, b, value)
        if inplace then return x:copy_(r) end
        return r
      end, t1, t2)
    end
  end
end

-- td:nansum([dim] [, {keepdim =, reduce =}]), nanmean: the tensor nansum / nanmean of
-- every leaf over batch dims (a number or a table of them; the batch size loses them,
-- or keeps them as 1 with keepdim); no dim: each leaf over all its elements (0-dim
-- leaves, batch size []); reduce = true: one tensor over every element of every leaf
-- (float64 when a leaf is floating, else int64), as Python's td.nansum(reduce=True).
-- nanmean of an integer leaf raises, as in Python.
local NAN_OPTS = { keepdim = "boolean", reduce = "boolean" }
for _, name in ipairs({ "nansum", "nanmean" }) do
  TD[name] = function(self, dim, opts)
    cdict(self)
    if type(dim) == "table" and dim[1] == nil and not is_tensor(dim) and not is_td(dim) then dim, opts = nil, dim end
    opts = util.options(name, opts, NAN_OPTS)
    if opts.reduce then
      if dim ~= nil then fail(("%s: reduce = true takes no dim"):format(name)) end
      local parts, floating = {}, false
      for _, key in ipairs(TD.keys(self, { include_nested = true, leaves_only = true })) do
        local x = TD.get(self, key)
        if is_tensor(x) then
          parts[#parts + 1] = x:reshape(-1)
          floating = floating or dtypes.is_floating(tensor.handle(x).dtype)
        end
      end
      local dtype = floating and "float64" or "int64"
      for i, p in ipairs(parts) do parts[i] = p:to(dtype) end
      local flat = #parts > 0 and join.cat(parts, 1) or create.zeros({ 0 }, dtype)
      return (flat[name](flat, 1))
    end
    if dim == nil then
      return TD.apply(self, function(x)
        local flat = x:reshape(-1)
        return (flat[name](flat, 1))
      end, { batch_size = {} })
    end
    local dims = batch_dims_of(name, self, dim)
    local gone, leaf_dims = {}, {}
    for i, d0 in ipairs(dims) do
      gone[d0 + 1] = true
      leaf_dims[i] = d0 + 1
    end
    local new_batch = {}
    for i, size in ipairs(TD.batch_size(self)) do
      if not gone[i] then new_batch[#new_batch + 1] = size elseif opts.keepdim then new_batch[#new_batch + 1] = 1 end
    end
    return TD.apply(self, function(x) return x[name](x, leaf_dims, opts.keepdim or false) end,
      { batch_size = new_batch })
  end
end

return {}
