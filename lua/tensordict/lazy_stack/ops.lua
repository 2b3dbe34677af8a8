-- lazy_stack/ops.lua: what a lazy stack (lazy_stack/core.lua) does as a whole: apply over
-- its members, densify into one TensorDict where the shapes agree, clone, locks,
-- T.maybe_dense_stack, and tostring in tensordict 0.15's repr.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local core = require("tensordict.dict")
local tensor = require("tensordict.tensor")
local td_join = require("tensordict.dict.join")
local td_print = require("tensordict.dict.print")
local ls = require("tensordict.lazy_stack.core")

local TD, LS = core.methods, ls.methods
local stack_state, new, is_ls = ls.state_of, ls.new, ls.is_lazy_stack
local fail, describe, format_list = util.fail, util.describe, util.format_list
local is_td, is_tensor = core.is_td, tensor.is_tensor

local M = {}

------------------------------------------------------------------------ apply

-- The others of apply (lazy stacks: their members; TensorDicts: their slices along the
-- stack dim) for member i, and the options (a plain table last).
local function split_args(call, s, ...)
  local n = select("#", ...)
  local args = { ... }
  local opts
  local last = args[n]
  if n > 0 and type(last) == "table" and getmetatable(last) == nil then
    opts, n = last, n - 1
  end
  local per = {}
  for j = 1, n do
    local o = args[j]
    if is_ls(o) then
      local os = stack_state(o)
      if #os.members ~= #s.members or os.dim ~= s.dim then
        fail(("%s: argument %d is a lazy stack of %d members along dim %d, self %d members along dim %d")
          :format(call, j + 1, #os.members, os.dim + 1, #s.members, s.dim + 1))
      end
      per[j] = os.members
    elseif is_td(o) then
      per[j] = TD.unbind(o, s.dim + 1)
      if #per[j] ~= #s.members then
        fail(("%s: argument %d has %d elements along the stack dim (dim %d), self %d members")
          :format(call, j + 1, #per[j], s.dim + 1, #s.members))
      end
    else
      fail(("%s: argument %d must be a TensorDict or a lazy stack, got %s"):format(call, j + 1, describe(o)))
    end
  end
  return function(i)
    local out = {}
    for j = 1, n do out[j] = per[j][i] end
    if opts == nil then return unpack(out, 1, n) end
    out[n + 1] = opts
    return unpack(out, 1, n + 1)
  end
end

-- ls:apply(fn, ...others [, opts]): td:apply on every member (others aligned member by
-- member); a lazy stack of the results, as Python's.
function LS.apply(self, fn, ...)
  local s = stack_state(self)
  local args = split_args("apply", s, ...)
  local out = {}
  for i, m in ipairs(s.members) do out[i] = TD.apply(m, fn, args(i)) end
  return new(out, s.dim)
end

-- ls:apply_(fn, ...others [, opts]): td:apply_ on every member, in place; returns ls.
function LS.apply_(self, fn, ...)
  local s = stack_state(self)
  local args = split_args("apply_", s, ...)
  for i, m in ipairs(s.members) do TD.apply_(m, fn, args(i)) end
  return self
end

------------------------------------------------------------------------ dense

-- One TensorDict: the keys every member has, stacked along the stack dim. Tensors must
-- have one shape across the members; the error names the first key that does not.
local function dense(self, call)
  local s = stack_state(self)
  local leaves = LS.keys(self, { include_nested = true, leaves_only = true })
  for _, path in ipairs(leaves) do
    local first = TD.get(s.members[1], path)
    if is_tensor(first) then
      for i = 2, #s.members do
        local v = TD.get(s.members[i], path)
        if not is_tensor(v) or v:shape() ~= first:shape() then
          local shapes = {}
          for k, m in ipairs(s.members) do
            local x = TD.get(m, path)
            shapes[k] = is_tensor(x) and format_list(x:shape()) or describe(x)
          end
          fail(("%s: cannot stack the tensors under the key %s: their shapes are [%s] "
            .. "(read them with get(key, nil, {as_list = true}) or {as_padded_tensor = true})")
            :format(call, core.key_text(path), table.concat(shapes, ", ")))
        end
      end
    end
  end
  -- members with other keys too give the common ones (leaves, and whole the containers
  -- every member has)
  local common = LS.keys(self, { include_nested = true })
  local top = LS.keys(self)
  top[#top + 1] = { strict = false }
  local parts = {}
  for i, m in ipairs(s.members) do
    parts[i] = #TD.keys(m, { include_nested = true }) == #common and m or TD.select(m, unpack(top))
  end
  return td_join.stack(parts, s.dim + 1)
end

-- ls:contiguous(), ls:to_tensordict(): a TensorDict (copies) of the keys every member has.
function LS.contiguous(self) return dense(self, "contiguous") end
function LS.to_tensordict(self) return dense(self, "to_tensordict") end

-- ls:densify([{layout = "strided"}]): the same. Python's densify turns leaves whose
-- shapes differ into nested (jagged) tensors; this library has none, so they raise.
function LS.densify(self, opts)
  opts = util.options("densify", opts, { layout = "string" })
  local layout = opts.layout or "strided"
  if layout == "jagged" then
    fail("densify: layout 'jagged': this library has no nested (jagged) tensors; read leaves "
      .. "whose shapes differ with ls:get(key, nil, {as_list = true}) or {as_padded_tensor = true}")
  elseif layout ~= "strided" then
    fail(("densify: layout must be 'strided' or 'jagged', got %s"):format(describe(opts.layout)))
  end
  return dense(self, "densify")
end

-- ls:clone(): a lazy stack of copies of the members.
function LS.clone(self)
  local s = stack_state(self)
  local out = {}
  for i, m in ipairs(s.members) do out[i] = TD.clone(m) end
  return new(out, s.dim)
end

function LS.lock(self)
  for _, m in ipairs(stack_state(self).members) do TD.lock(m) end
  return self
end
function LS.unlock(self)
  for _, m in ipairs(stack_state(self).members) do TD.unlock(m) end
  return self
end
function LS.is_locked(self)
  for _, m in ipairs(stack_state(self).members) do
    if not TD.is_locked(m) then return false end
  end
  return true
end
LS.lock_, LS.unlock_ = LS.lock, LS.unlock

function LS.equal(self, other)
  if not is_ls(other) then return false end
  local a, b = stack_state(self), stack_state(other)
  if a.dim ~= b.dim or #a.members ~= #b.members then return false end
  for i, m in ipairs(a.members) do
    if not TD.equal(m, b.members[i]) then return false end
  end
  return true
end

-- T.maybe_dense_stack(tds [, dim]): Python's LazyStackedTensorDict.maybe_dense_stack: a
-- TensorDict when the inputs' keys and shapes agree, else a lazy stack.
function M.maybe_dense_stack(list, dim)
  local lazy = ls.lazy_stack(list, dim)
  local s = stack_state(lazy)
  local first = TD.keys(s.members[1], { include_nested = true, sort = true })
  local function same(m)
    local keys = TD.keys(m, { include_nested = true, sort = true })
    if #keys ~= #first or TD.batch_size(m) ~= TD.batch_size(s.members[1]) then return false end
    for k, path in ipairs(keys) do
      if core.key_text(path) ~= core.key_text(first[k]) then return false end
      local a, b = TD.get(m, path), TD.get(s.members[1], path)
      if is_tensor(a) ~= is_tensor(b) or (is_tensor(a) and (a:shape() ~= b:shape() or a:dtype() ~= b:dtype())) then
        return false
      end
    end
    return true
  end
  for i = 2, #s.members do
    if not same(s.members[i]) then return lazy end
  end
  return td_join.stack(s.members, s.dim + 1)
end

------------------------------------------------------------------------ printing

local body

-- The feature dims (after nb batch dims) of the tensors, -1 where they differ.
local function feature_dims(values, nb)
  local dims = values[1]:shape()
  local out = {}
  for d = nb + 1, #dims do out[#out + 1] = dims[d] end
  for i = 2, #values do
    local sh = values[i]:shape()
    for d = nb + 1, #dims do
      if sh[d] ~= dims[d] then out[d - nb] = -1 end
    end
  end
  return out
end

-- The compact entries of members (of nb batch dims), keys every member has.
function body(members, nb)
  local entries = {}
  for _, k in ipairs(LS.keys(new(members, 0))) do
    local values = {}
    for i, m in ipairs(members) do values[i] = TD.get(m, k) end
    local v = values[1]
    local node
    if is_tensor(v) then
      node = (td_print.dtype_abbr[v:dtype()] or v:dtype()) .. td_print.dims_text(feature_dims(values, nb), 1)
    elseif is_td(v) then
      local extra = TD.batch_dims(v) > nb and td_print.dims_text(TD.batch_size(v), nb + 1) or ""
      node = { extra, body(values, TD.batch_dims(v)) }
    else
      local d = core.cdict(members[1])
      local stacked = C.td_dict_kind(d, C.td_dict_find(d, k, #k)) == C.TD_ENTRY_VALUES
      node = stacked and "NonTensorStack" or td_print.value_type(v)
    end
    local flat = type(node) == "string" and node or nil
    entries[#entries + 1] = { k, node, k .. ": " .. (flat or "{") }
  end
  table.sort(entries, function(a, b) return a[3] < b[3] end)
  return entries
end

-- tensordict 0.15's repr, the stack dim 1-based as everywhere in this library:
--   LazyStackedTensorDict(batch_size=[2], stack_dim=1, fields={obs: f32[-1], r: i64[3]})
function ls.mt.__tostring(self)
  local s = stack_state(self)
  local head = ("LazyStackedTensorDict(batch_size=%s, stack_dim=%d, fields=")
    :format(td_print.dims_text(ls.batch_of(s), 1), s.dim + 1)
  local entries = body(s.members, TD.batch_dims(s.members[1]))
  return head .. td_print.compact_render({ "", entries }, "", #head, 1) .. ")"
end

return M
