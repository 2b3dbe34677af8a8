-- dict/struct.lua: operations on the structure of TensorDicts: select, exclude,
-- update, flatten_keys / unflatten_keys, copies and casts, to_table, fromkeys.
-- Leaves are shared (set_entry) unless the operation is a copy.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local dtypes = require("tensordict.tensor.dtype")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local core = require("tensordict.dict.core")
local late = require("tensordict.late") -- td_device: it requires this module

local TD = core.methods
local cdict, wrap, check, is_td = core.cdict, core.wrap, core.check, core.is_td
local fail, describe = util.fail, util.describe
local KIND_DICT = C.TD_ENTRY_DICT

local M = {}

-- A new empty container with self's batch size, device and names.
local function new_like(self)
  cdict(self)
  local r = wrap(C.td_dict_new(self._td_head.ndim, self._td_head.shape))
  if self._td_head.device_type ~= C.TD_DEVICE_NONE then
    check(C.td_dict_set_device(r._td_p, self._td_head.device_type, self._td_head.device_index))
  end
  if self._td_head.has_names ~= 0 then core.set_names(r, core.dim_names(self), "names") end
  return r
end
M.new_like = new_like

-- Shares entry k of src into dst under the same key.
local function share_entry(dst, src, k)
  local d = cdict(src)
  local i = C.td_dict_find(d, k, #k)
  check(C.td_dict_set_entry(cdict(dst), k, #k, d, i))
end

-- Splits select/exclude arguments into keys and options ({strict =}).
local function keys_and_opts(call, ...)
  local n = select("#", ...)
  local keys, opts = { ... }, {}
  local last = keys[n]
  if type(last) == "table" and not is_td(last) and last[1] == nil and next(last) ~= nil then
    opts, keys[n], n = last, nil, n - 1
  end
  for i = 1, n do keys[i] = core.check_key(call, keys[i]) end
  return keys, opts
end

-- Groups keys by their first part: {first = {rest paths...} or true for the whole key}.
local function group(keys)
  local order, groups = {}, {}
  for _, key in ipairs(keys) do
    local first = type(key) == "table" and key[1] or key
    if groups[first] == nil then order[#order + 1] = first end
    if type(key) == "string" or #key == 1 then
      groups[first] = true
    elseif groups[first] ~= true then
      groups[first] = groups[first] or {}
      local rest = { unpack(key, 2) }
      table.insert(groups[first], rest)
    end
  end
  return order, groups
end

local function select_level(self, keys, strict)
  local r = new_like(self)
  local order, groups = group(keys)
  for _, k in ipairs(order) do
    local v = core.get_string(self, k)
    if v == nil then
      if strict then core.missing(self, "select", k) end
    elseif groups[k] == true then
      share_entry(r, self, k)
    elseif not is_td(v) then
      if strict then
        fail(("select: '%s' is not a TensorDict, so it has no nested keys"):format(k))
      end
    else
      core.set_string(r, k, select_level(v, groups[k], strict), "select")
    end
  end
  return r
end

-- A new TensorDict with only the given keys (strings or key paths); leaves shared.
-- A missing key raises unless {strict = false} is passed last.
function TD.select(self, ...)
  local keys, opts = keys_and_opts("select", ...)
  return select_level(self, keys, opts.strict ~= false)
end

local function exclude_level(self, keys, strict)
  local r = new_like(self)
  local _, groups = group(keys)
  if strict then
    for k in pairs(groups) do
      if core.get_string(self, k) == nil then core.missing(self, "exclude", k) end
    end
  end
  for _, k in ipairs(core.key_list(self)) do
    local g = groups[k]
    if g == nil then
      share_entry(r, self, k)
    elseif g ~= true then
      local v = core.get_string(self, k)
      if is_td(v) then
        core.set_string(r, k, exclude_level(v, g, strict), "exclude")
      elseif strict then
        fail(("exclude: '%s' is not a TensorDict, so it has no nested keys"):format(k))
      else
        share_entry(r, self, k)
      end
    end
  end
  return r
end

-- A new TensorDict without the given keys (strings or key paths); leaves shared.
-- Missing keys are ignored unless {strict = true} is passed last.
function TD.exclude(self, ...)
  local keys, opts = keys_and_opts("exclude", ...)
  return exclude_level(self, keys, opts.strict == true)
end

-- Sets every entry of other into self (nested TensorDicts merge recursively).
-- other may be a TensorDict or a Lua table of values. Returns self.
function TD.update(self, other)
  cdict(self)
  if not is_td(other) then
    if type(other) ~= "table" or tensor.is_tensor(other) then
      fail(("update: expected a TensorDict or a table, got %s"):format(describe(other)))
    end
    other = core.construct(other, self:batch_size())
  end
  local od = cdict(other)
  for _, k in ipairs(core.key_list(other)) do
    local i = C.td_dict_find(od, k, #k)
    local mine = core.get_string(self, k)
    if C.td_dict_kind(od, i) == KIND_DICT and is_td(mine) then
      TD.update(mine, core.get_string(other, k))
    else
      check(C.td_dict_set_entry(cdict(self), k, #k, od, i))
    end
  end
  return self
end

-- Copies other's leaves into self's leaves of the same keys (in place, casting).
function TD.update_(self, other)
  if not is_td(other) then
    if type(other) ~= "table" or tensor.is_tensor(other) then
      fail(("update_: expected a TensorDict or a table, got %s"):format(describe(other)))
    end
    other = core.construct(other)
  end
  check(C.td_dict_update_(cdict(self), cdict(other)))
  return self
end

local function check_sep(call, sep)
  sep = sep or "."
  if type(sep) ~= "string" or sep == "" then
    fail(("%s: the separator must be a non-empty string, got %s"):format(call, describe(sep)))
  end
  return sep
end

-- A TensorDict whose nested keys are joined by sep ("." by default); leaves shared.
function TD.flatten_keys(self, sep)
  sep = check_sep("flatten_keys", sep)
  local r = new_like(self)
  local seen = {}
  local function walk(td, prefix)
    local d = cdict(td)
    for _, k in ipairs(core.key_list(td)) do
      local i = C.td_dict_find(d, k, #k)
      local name = prefix and prefix .. sep .. k or k
      if C.td_dict_kind(d, i) == KIND_DICT then
        walk(core.get_string(td, k), name) -- an empty one leaves no key, as in Python
      else
        if seen[name] then
          fail(("flatten_keys: flattening with '%s' makes the key '%s' twice"):format(sep, name))
        end
        seen[name] = true
        check(C.td_dict_set_entry(cdict(r), name, #name, d, i))
      end
    end
  end
  walk(self, nil)
  return r
end

-- The reverse of flatten_keys: "a.b" becomes key b of a nested TensorDict a (with the
-- parent's batch size). A key that is both a leaf and a prefix raises.
function TD.unflatten_keys(self, sep)
  sep = check_sep("unflatten_keys", sep)
  local r = new_like(self)
  local d = cdict(self)
  -- made[container][name]: the nested containers met or made here. A container changes
  -- with every key set into it, which empties its handle's cache, so looking each level
  -- up again through get made a new handle per level per key.
  local made = {}
  for _, k in ipairs(core.key_list(self)) do
    local parts, pos = {}, 1
    while true do
      local s, e = k:find(sep, pos, true)
      if not s then break end
      parts[#parts + 1] = k:sub(pos, s - 1)
      pos = e + 1
    end
    parts[#parts + 1] = k:sub(pos)
    local i = C.td_dict_find(d, k, #k)
    local target = r
    for j = 1, #parts - 1 do
      local below = made[target]
      if below == nil then
        below = {}
        made[target] = below
      end
      local nxt = below[parts[j]]
      if nxt == nil then
        nxt = core.get_string(target, parts[j])
        if nxt == nil then
          nxt = core.set_string(target, parts[j], wrap(C.td_dict_new(target._td_head.ndim, target._td_head.shape)),
            "unflatten_keys")
        elseif not is_td(nxt) then
          fail(("unflatten_keys: '%s' is a leaf and also a prefix of '%s'"):format(
            table.concat(parts, sep, 1, j), k))
        end
        below[parts[j]] = nxt
      end
      target = nxt
    end
    local last = parts[#parts]
    if TD.has(target, last) then
      fail(("unflatten_keys: the key '%s' appears twice after unflattening"):format(k))
    end
    check(C.td_dict_set_entry(cdict(target), last, #last, d, i))
  end
  return r
end

--------------------------------------------------------------------- copies, casts

local function copy(self, mode)
  local r = wrap(C.td_dict_copy(cdict(self), mode))
  C.td_dict_set_locked(r._td_p, 0)
  return r
end

function TD.clone(self) return copy(self, C.TD_COPY_CLONE) end
function TD.contiguous(self) return copy(self, C.TD_COPY_CONTIGUOUS) end
function TD.empty_like(self) return copy(self, C.TD_COPY_EMPTY) end
function TD.zeros_like(self) return copy(self, C.TD_COPY_ZEROS) end

-- Python's td.empty(): the same batch size, device and names with no keys; with
-- recurse = true the nested TensorDicts stay, empty.
function TD.empty(self, recurse)
  local r = new_like(self)
  if recurse then
    for _, k in ipairs(core.key_list(self)) do
      local v = core.get_string(self, k)
      if is_td(v) then core.set_string(r, k, TD.empty(v, true), "empty") end
    end
  end
  return r
end

-- td:to(dtype) casts the floating leaves; td:to(device [, {non_blocking =}]) moves
-- every leaf ("cpu", "cuda", "cuda:N"; dict/device.lua); td:to{dtype =, device =,
-- non_blocking =}.
local TO_OPTS = { dtype = "any", device = "string", non_blocking = "boolean" }
function TD.to(self, arg, opts)
  local dtype, device, non_blocking
  if type(arg) == "table" then
    arg = util.options("to", arg, TO_OPTS)
    dtype, device, non_blocking = arg.dtype, arg.device, arg.non_blocking
  elseif type(arg) == "string" and (arg == "cpu" or arg:match("^cuda")) then
    device = arg
    non_blocking = util.options("to", opts, { non_blocking = "boolean" }).non_blocking
  else
    dtype = arg
  end
  local r = self
  if dtype ~= nil then
    r = wrap(C.td_dict_to_dtype(cdict(self), dtypes.code(dtype, "to"), 1))
  end
  if device ~= nil then
    r = late.td_device.to(r, device, non_blocking, "to")
  end
  return r
end

-- Plain Lua tables: tensors stay tensors, nested TensorDicts become tables, non-tensor
-- values their Lua values.
function TD.to_table(self)
  local out = {}
  for _, k in ipairs(core.key_list(self)) do
    local v = core.get_string(self, k)
    if is_td(v) then v = TD.to_table(v) end
    out[k] = v
  end
  return out
end

-- T.TensorDict.fromkeys(keys, value): every key set to value (a number makes a 0-dim
-- float32 tensor per key, a tensor is shared), batch size [].
function M.fromkeys(keys, value)
  if type(keys) ~= "table" then
    fail(("fromkeys: keys must be a table of strings, got %s"):format(describe(keys)))
  end
  if value == nil then value = 0 end
  local r = core.construct(nil)
  for _, k in ipairs(keys) do
    local v = value
    if type(value) == "number" or type(value) == "boolean" then
      v = create.full({}, type(value) == "boolean" and (value and 1 or 0) or value,
        type(value) == "boolean" and "bool" or "float32")
    end
    TD.set(r, k, v)
  end
  return r
end

return M
