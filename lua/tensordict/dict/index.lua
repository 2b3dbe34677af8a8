-- dict/index.lua: batch indexing of TensorDicts (the index grammar over batch dims,
-- reading and assignment) and the shape ops over batch dims. Each is one C call over
-- every leaf (core/dict/dict_map.c); this file parses arguments and keeps dim names.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local index = require("tensordict.tensor.index")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local gather = require("tensordict.tensor.gather")
local core = require("tensordict.dict.core")

local TD, mt = core.methods, core.mt
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor, header = tensor.is_tensor, tensor.handle
local type, tonumber = type, tonumber
local SELECT, SLICE, NEWAXIS = C.TD_INDEX_SELECT, C.TD_INDEX_SLICE, C.TD_INDEX_NEWAXIS
local entries = index.entries

local M = {}

-- A table of strings is a key path, not an index (DESIGN.md).
local function is_key_path(key)
  return type(key) == "table" and type(rawget(key, 1)) == "string"
end

-- Names of the result of an index (only called when the source has names), as Python
-- tensordict gives them: a 1-D mask or index keeps its dim's name; the dim a k-D mask
-- leaves, and the dims a k-D index makes, are unnamed.
local function names_after_index(names, n, adv)
  local out, dim = {}, 1
  local consumed = 0
  for k = 0, n - 1 do
    local kind = entries[k].kind
    if kind == SELECT or kind == SLICE then consumed = consumed + 1 end
  end
  local adv_k = adv and (adv.mask and adv.tensor.h.ndim or 1) or 0
  local out_dim = 0
  local k = 0
  while k < n do
    local e = entries[k]
    if adv and out_dim == adv.dim and e.kind == SLICE and dim == adv.in_dim + 1 then
      local t = adv.tensor
      if t.h.ndim == 1 then
        out[#out + 1] = names[dim]
      else
        for _ = 1, adv.mask and 1 or t.h.ndim do out[#out + 1] = false end
      end
      dim, k, out_dim = dim + adv_k, k + adv_k, out_dim + 1
    elseif e.kind == SELECT then
      dim, k = dim + 1, k + 1
    elseif e.kind == SLICE then
      out[#out + 1] = names[dim]
      dim, k, out_dim = dim + 1, k + 1, out_dim + 1
    elseif e.kind == NEWAXIS then
      out[#out + 1] = false
      k, out_dim = k + 1, out_dim + 1
    else -- ellipsis
      for _ = 1, #names - consumed do
        out[#out + 1] = names[dim]
        dim, out_dim = dim + 1, out_dim + 1
      end
      k = k + 1
    end
  end
  for i = dim, #names do out[#out + 1] = names[i] end
  return out
end

local function keep_names(src, result, names)
  if src._td_head.has_names ~= 0 then core.set_names(result, names, "names") end
  return result
end

-- Fills the entries for key over self's batch dims: returns the count and the advanced
-- entry as (tensor header, dim, adv) -- the tensor 0-based int64 (1-D) or a bool mask.
-- An index tensor's 0-based copy is kept alive in adv.flat, or, when owned is true,
-- handed over as an owned C header that the caller releases after its C call.
local function parse(self, key, call, owned)
  local head = self._td_head
  if head.ndim == 0 then
    fail(("%s: the TensorDict has no batch dims (batch size []) to index"):format(call))
  end
  if type(key) == "number" then
    local e = entries[0]
    e.kind, e.start = SELECT, index.position(key, tonumber(head.shape[0]), 1)
    return 1, nil, 0, nil
  end
  local n, adv = index.parse(head, key, "%d batch dims")
  if not adv then return n, nil, 0, nil end
  local t = adv.tensor
  if adv.mask then return n, header(t), adv.dim, adv end
  local flat = t.h.ndim == 1 and t or t:reshape(-1)
  if owned then
    return n, gather.zero_based_header(flat, tonumber(head.shape[adv.in_dim]), adv.in_dim + 1, call),
      adv.dim, adv
  end
  local zero = gather.zero_based(flat, tonumber(head.shape[adv.in_dim]), adv.in_dim + 1, call)
  adv.flat = zero -- keep it alive through the C call
  return n, header(zero), adv.dim, adv
end

local function index_read(self, key)
  if type(key) == "string" or is_key_path(key) then return core.get_or_raise(self, key) end
  local d = cdict(self)
  local n, advh, adv_dim, adv = parse(self, key, "index", true)
  local p = C.td_dict_index(d, entries, n, advh, adv_dim)
  if adv and not adv.mask then C.td_tensor_release(advh) end
  local r = wrap(p)
  local names = self._td_head.has_names ~= 0 and names_after_index(core.dim_names(self), n, adv)
  if adv and not adv.mask and adv.tensor.h.ndim > 1 then
    r = TD.unflatten(r, adv.dim + 1, adv.tensor:shape())
  end
  if names then keep_names(self, r, names) end
  -- What indexing gives is unlocked, as in Python (a sample of a loaded memmap can take
  -- new keys; its leaves stay read-only where the file is).
  if r._td_head.locked ~= 0 then C.td_dict_set_locked(r._td_p, 0) end
  return r
end
M.index_read = index_read

function mt.__index(self, key)
  local method = TD[key]
  if method ~= nil then return method end
  return index_read(self, key)
end

-- Python's td[idx] = sub writes only the keys sub has (the C call skips the others) and
-- makes the tensor keys only sub has, zeros outside the selection.
local function add_missing_keys(self, value)
  if value._td_head.nkeys == 0 then return end
  local nb = value._td_head.ndim
  for _, path in ipairs(TD.keys(value, { include_nested = true, leaves_only = true })) do
    if not TD.has(self, path) then
      local leaf = TD.get(value, path)
      if not is_tensor(leaf) then
        fail(("index assignment: %s is not in the TensorDict, and only tensors can be added "
          .. "this way (set it first)"):format(type(path) == "table" and core.key_path_text(path)
          or "'" .. path .. "'"))
      end
      local shape = TD.batch_size(self)
      for i = nb + 1, leaf:dim() do shape[#shape + 1] = leaf:size(i) end
      TD.set(self, path, create.zeros(shape, leaf:dtype()))
    end
  end
end

-- td[idx] = value: value a TensorDict (broadcast over the selection), a Lua table
-- (made a TensorDict of batch size []) or a number/boolean (fills every leaf). A value
-- with fewer or other keys writes those keys only, as in Python. call names the
-- caller in errors ("index assignment" by default; update_at_ passes its own).
local function index_write(self, key, value, call)
  call = call or "index assignment"
  if type(value) == "table" and not is_tensor(value) then value = core.construct(value) end
  local d = cdict(self)
  local n, advh, adv_dim, adv = parse(self, key, call)
  local src, scalar = nil, 0
  if is_td(value) then
    -- A k-D index tensor selects k dims that C sees flattened into one: flatten them in
    -- the value too when it has them.
    local k = adv and not adv.mask and adv.tensor.h.ndim or 1
    if k > 1 and value._td_head.ndim >= adv_dim + k then
      value = TD.flatten(value, adv_dim + 1, adv_dim + k)
    end
    src = cdict(value)
  elseif type(value) == "number" then
    scalar = value
  elseif type(value) == "boolean" then
    scalar = value and 1 or 0
  else
    fail(("%s: the value must be a TensorDict, a table or a number, got %s")
      :format(call, describe(value)))
  end
  local st = C.td_dict_index_put_(d, entries, n, advh, adv_dim, src, scalar)
  if st == C.TD_EINVAL and ffi.string(C.td_last_error()):find("of the value is not in the TensorDict", 1, true) then
    -- keys only the value has: made, then written (the failed call wrote nothing)
    add_missing_keys(self, value)
    st = C.td_dict_index_put_(d, entries, n, advh, adv_dim, src, scalar)
  end
  check(st)
end

function mt.__newindex(self, key, value)
  if type(key) == "string" then
    core.set_string(self, key, value, "set")
  elseif is_key_path(key) then
    TD.set(self, key, value)
  else
    index_write(self, key, value)
  end
end

-- td:get_at(key, idx) == td:get(key)[idx]; set_at_ writes through it.
function TD.get_at(self, key, idx)
  local leaf = TD.get(self, key)
  if leaf == nil then core.missing(self, "get_at", key) end
  if not (is_tensor(leaf) or is_td(leaf)) then
    fail(("get_at: %s is a non-tensor value; it cannot be indexed"):format(describe(key)))
  end
  return leaf[idx]
end

function TD.set_at_(self, key, value, idx)
  local leaf = TD.get(self, key)
  if leaf == nil then core.missing(self, "set_at_", key) end
  if not (is_tensor(leaf) or is_td(leaf)) then
    fail(("set_at_: %s is a non-tensor value; it cannot be indexed"):format(describe(key)))
  end
  leaf[idx] = value
  return self
end

---------------------------------------------------------------------------- shape ops

local shape_buf, dims_buf = util.shape_buf, util.dims_buf

local function batch_dim(call, self, d, extra)
  return core.batch_dim(call, self, d, extra)
end

function TD.view(self, ...)
  local n = util.read_shape("view", true, ...)
  return wrap(C.td_dict_view(cdict(self), n, shape_buf))
end

function TD.reshape(self, ...)
  local n = util.read_shape("reshape", true, ...)
  return wrap(C.td_dict_reshape(cdict(self), n, shape_buf))
end

function TD.expand(self, ...)
  local n = util.read_shape("expand", true, ...)
  local names = core.dim_names(self)
  local r = wrap(C.td_dict_expand(cdict(self), n, shape_buf))
  if names then -- new leading dims are unnamed
    local out = {}
    for i = 1, n - #names do out[i] = false end
    for _, name in ipairs(names) do out[#out + 1] = name end
    core.set_names(r, out, "expand")
  end
  return r
end

function TD.permute(self, ...)
  cdict(self)
  if select("#", ...) == 0 then fail("permute: expected the new order of the batch dims") end
  local dims = util.list_args("permute", ...)
  local nd = self._td_head.ndim
  if #dims ~= nd then
    fail(("permute: %d dims given for %d batch dims"):format(#dims, nd))
  end
  local seen = {}
  for i = 1, nd do
    local d0 = batch_dim("permute", self, dims[i])
    if seen[d0] then
      fail(("permute: dim %d appears twice in %s"):format(d0 + 1, util.format_list(dims)))
    end
    seen[d0] = true
    dims_buf[i - 1] = d0
  end
  local r = wrap(C.td_dict_permute(cdict(self), dims_buf))
  local names = core.dim_names(self)
  if names then
    local out = {}
    for i = 1, nd do out[i] = names[dims_buf[i - 1] + 1] end
    core.set_names(r, out, "permute")
  end
  return r
end

function TD.transpose(self, a, b)
  cdict(self)
  local nd = self._td_head.ndim
  local perm = {}
  for i = 1, nd do perm[i] = i end
  local a0, b0 = batch_dim("transpose", self, a) + 1, batch_dim("transpose", self, b) + 1
  perm[a0], perm[b0] = b0, a0
  return TD.permute(self, perm)
end

function TD.unsqueeze(self, dim)
  local d0 = batch_dim("unsqueeze", self, dim, 1)
  local r = wrap(C.td_dict_unsqueeze(cdict(self), d0))
  local names = core.dim_names(self)
  if names then
    table.insert(names, d0 + 1, false)
    core.set_names(r, names, "unsqueeze")
  end
  return r
end

function TD.squeeze(self, dim)
  local d0 = dim == nil and -1 or batch_dim("squeeze", self, dim)
  local names = core.dim_names(self)
  local r = wrap(C.td_dict_squeeze(cdict(self), d0))
  if names then
    local out = {}
    for i = 1, self._td_head.ndim do
      local gone = tonumber(self._td_head.shape[i - 1]) == 1 and (d0 == -1 or d0 == i - 1)
      if not gone then out[#out + 1] = names[i] end
    end
    core.set_names(r, out, "squeeze")
  end
  return r
end

function TD.flatten(self, a, b)
  cdict(self)
  local nd = self._td_head.ndim
  if nd == 0 then return self end
  local a0 = a == nil and 0 or batch_dim("flatten", self, a)
  local b0 = b == nil and nd - 1 or batch_dim("flatten", self, b)
  local names = core.dim_names(self)
  local r = wrap(C.td_dict_flatten(cdict(self), a0, b0))
  if names and a0 < b0 then -- the merged dim is unnamed
    local out = {}
    for i = 1, nd do
      if i <= a0 or i > b0 + 1 then out[#out + 1] = names[i] elseif i == a0 + 1 then out[#out + 1] = false end
    end
    core.set_names(r, out, "flatten")
  elseif names then
    core.set_names(r, names, "flatten")
  end
  return r
end

function TD.unflatten(self, dim, sizes)
  local d0 = batch_dim("unflatten", self, dim)
  if type(sizes) ~= "table" then
    fail(("unflatten: sizes must be a table, got %s"):format(describe(sizes)))
  end
  local n = util.read_shape("unflatten", true, sizes)
  local names = core.dim_names(self)
  local r = wrap(C.td_dict_unflatten(cdict(self), d0, n, shape_buf))
  if names then -- the new dims are unnamed
    local out = {}
    for i, name in ipairs(names) do
      if i == d0 + 1 then
        for _ = 1, n do out[#out + 1] = false end
      else
        out[#out + 1] = name
      end
    end
    core.set_names(r, out, "unflatten")
  end
  return r
end

-- Replaces the batch size (leaves must still start with it): Python's batch_size setter.
function TD.set_batch_size(self, batch_size)
  local n = core.read_batch("set_batch_size", batch_size)
  local names = core.dim_names(self)
  check(C.td_dict_set_batch(cdict(self), n, shape_buf))
  if names then -- names of the dims kept stay; new dims are unnamed
    local out = {}
    for i = 1, n do out[i] = names[i] or false end
    core.set_names(self, out, "set_batch_size")
  end
  return self
end

M.is_key_path = is_key_path
M.index_write = index_write

return M
