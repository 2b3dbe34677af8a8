-- dict/entries.lua: Python's dict-like container methods over whole entries:
-- setdefault, popitem, filter_non_tensor_data, filter_empty_, split_keys, sorted_keys,
-- set_non_tensor / get_non_tensor, and the scoped unlock td:unlocked(fn). Leaves are
-- shared, never copied.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local core = require("tensordict.dict.core")
local json = require("tensordict.json")
local tensor = require("tensordict.tensor")
local struct = require("tensordict.dict.struct")

local TD = core.methods
local cdict, check, is_td = core.cdict, core.check, core.is_td
local fail, describe = util.fail, util.describe
local KIND_TENSOR, KIND_DICT = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT

-- Refuses a change of keys on a locked container, naming the call (the C message would
-- name set or del).
local function check_unlocked(self, call, what)
  if self._td_head.locked ~= 0 then
    fail(("%s: cannot %s: the TensorDict is locked (unlock() it first, or use td:unlocked(fn))")
      :format(call, what))
  end
end

-- td:setdefault(key, default): the value at key; when there is none, default is set
-- there first (as td:set would) and the stored value returned, as Python's setdefault.
function TD.setdefault(self, key, default)
  core.check_key("setdefault", key)
  local v = TD.get(self, key)
  if v ~= nil then return v end
  if default == nil then
    fail(("setdefault: no value at %s and the default is nil"):format(core.key_text(key)))
  end
  check_unlocked(self, "setdefault", "set key " .. core.key_text(key))
  TD.set(self, key, default)
  return TD.get(self, key)
end

-- td:popitem(): removes the last entry and returns its key and value (Python's
-- popitem; a nested TensorDict comes out whole).
function TD.popitem(self)
  local n = cdict(self) and self._td_head.nkeys
  if n == 0 then fail("popitem: the TensorDict is empty") end
  local keys = core.key_list(self)
  local k = keys[n]
  check_unlocked(self, "popitem", "remove '" .. k .. "'")
  local v = core.get_string(self, k)
  check(C.td_dict_del(cdict(self), n - 1))
  return k, v
end

-- td:filter_non_tensor_data(): a new TensorDict without the non-tensor values, nested
-- ones included; a nested TensorDict left empty stays, as in Python.
function TD.filter_non_tensor_data(self)
  local r = struct.new_like(self)
  local d = cdict(self)
  for i, k in ipairs(core.key_list(self)) do
    local kind = C.td_dict_kind(d, i - 1)
    if kind == KIND_TENSOR then
      check(C.td_dict_set_entry(cdict(r), k, #k, d, i - 1))
    elseif kind == KIND_DICT then
      core.set_string(r, k, TD.filter_non_tensor_data(core.get_string(self, k)),
        "filter_non_tensor_data")
    end
  end
  return r
end

-- td:filter_empty_(): removes, in place, every nested TensorDict that holds no leaf
-- (tensor or non-tensor value) at any depth, as Python's filter_empty_; returns td. A
-- locked td refuses when there is one to remove.
function TD.filter_empty_(self)
  cdict(self)
  for _, k in ipairs(core.key_list(self)) do
    local v = core.get_string(self, k)
    if is_td(v) then
      TD.filter_empty_(v)
      if v._td_head.nkeys == 0 then
        check_unlocked(self, "filter_empty_", "remove the empty TensorDict '" .. k .. "'")
        local d = cdict(self)
        check(C.td_dict_del(d, C.td_dict_find(d, k, #k)))
      end
    end
  end
  return self
end

-- td:sorted_keys(): the top-level keys in sorted order (Python's td.sorted_keys, a
-- property there).
function TD.sorted_keys(self)
  cdict(self)
  local keys = core.key_list(self)
  table.sort(keys)
  return keys
end

-- td:set_non_tensor(key, value): value stored as a non-tensor value (JSON data: a
-- string, number, boolean or table), also a table with string keys, which td:set would
-- make a nested TensorDict; intermediate TensorDicts of a key path are made. Python's
-- set_non_tensor; returns td. A locked td refuses, as Python's (also to replace one).
function TD.set_non_tensor(self, key, value)
  cdict(self)
  core.check_key("set_non_tensor", key)
  local tv = type(value)
  if value == nil then
    fail(("set_non_tensor: the value for %s is nil (use del to remove a key)"):format(core.key_text(key)))
  elseif tensor.is_tensor(value) or is_td(value) then
    fail(("set_non_tensor: the value for %s is %s; non-tensor values are strings, numbers, booleans "
      .. "and tables (set it with set)"):format(core.key_text(key), describe(value)))
  elseif tv ~= "string" and tv ~= "number" and tv ~= "boolean" and tv ~= "table" then
    fail(("set_non_tensor: cannot store %s under %s"):format(describe(value), core.key_text(key)))
  end
  if tv == "table" and next(value) ~= nil and value ~= json.null and not json.is_array(value) then
    local marked = {}
    for k, v in pairs(value) do marked[k] = v end
    value = setmetatable(marked, json.object_mt) -- a JSON object, not a nested TensorDict
  end
  local parent, k = self, key
  if type(key) == "table" then
    check_unlocked(self, "set_non_tensor", "set key " .. core.key_text(key))
    parent, k = core.parent_of(self, key, "set_non_tensor", true), key[#key]
  end
  check_unlocked(parent, "set_non_tensor", "set key " .. core.key_text(key))
  core.set_string(parent, k, value, "set_non_tensor")
  return self
end

-- td:get_non_tensor(key [, default]): the value at key (a non-tensor value as its Lua
-- value; a tensor or a TensorDict as get gives it), as Python's get_non_tensor. A
-- missing key gives default when one is passed (nil included), else raises.
function TD.get_non_tensor(self, key, ...)
  cdict(self)
  core.check_key("get_non_tensor", key)
  local v = TD.get(self, key)
  if v ~= nil then return v end
  if select("#", ...) > 0 then return (...) end
  core.missing(self, "get_non_tensor", key)
end

-- td:split_keys(keys1, keys2, ... [, {inplace =, strict =}]): one TensorDict per table
-- of keys (in that order), then one with the rest, as Python's split_keys. Each set is
-- taken from what the sets before it left. strict (default true) raises for a key that
-- is not there; inplace = true takes the keys out of td, which is then the rest.
function TD.split_keys(self, ...)
  cdict(self)
  local sets, n = { ... }, select("#", ...)
  local opts = {}
  if n > 0 and type(sets[n]) == "table" and sets[n][1] == nil and next(sets[n]) ~= nil then
    opts, sets[n], n = sets[n], nil, n - 1
  end
  opts = util.options("split_keys", opts, { inplace = "boolean", strict = "boolean" })
  local strict = opts.strict ~= false
  if opts.inplace then check_unlocked(self, "split_keys", "take keys out of it (inplace = true)") end
  local rest = opts.inplace and self or TD.exclude(self)
  local out = {}
  for i = 1, n do
    local keys = sets[i]
    if type(keys) ~= "table" or is_td(keys) then
      fail(("split_keys: argument %d must be a table of keys, got %s"):format(i, describe(keys)))
    end
    for j = 1, #keys do core.check_key("split_keys", keys[j]) end
    if strict then
      for j = 1, #keys do
        if not TD.has(rest, keys[j]) then core.missing(rest, "split_keys", keys[j]) end
      end
    end
    local args = { unpack(keys, 1, #keys) }
    args[#args + 1] = { strict = false }
    out[i] = TD.select(rest, unpack(args, 1, #args))
    if opts.inplace then
      for j = 1, #keys do
        if TD.has(rest, keys[j]) then TD.del(rest, keys[j]) end
      end
    else -- exclude makes new nested containers where keys go: self's stay whole
      rest = TD.exclude(rest, unpack(keys, 1, #keys))
    end
  end
  out[n + 1] = rest
  return unpack(out, 1, n + 1)
end

local function relock_and_return(self, was_locked, ok, ...)
  if was_locked and self._td_p ~= nil then C.td_dict_set_locked(self._td_p, 1) end
  if not ok then error((...), 0) end
  return ...
end

-- td:unlocked(fn): runs fn(td) with td unlocked and locks it again afterwards, also
-- when fn raises (the error is raised again); returns fn's results. A td that was not
-- locked is left unlocked.
function TD.unlocked(self, fn)
  cdict(self)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    fail(("unlocked: expected a function, got %s"):format(describe(fn)))
  end
  local was_locked = self._td_head.locked ~= 0
  if was_locked then C.td_dict_set_locked(cdict(self), 0) end
  return relock_and_return(self, was_locked, pcall(fn, self))
end

return {}
