-- dict/fill.lua: in-place writes of whole containers, as Python's TensorDict methods:
-- zero_(), fill_(key, value), copy_(other) and update_at_(other, idx). They write into
-- the existing leaves (locked containers included), never add or replace keys.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local core = require("tensordict.dict.core")
local struct = require("tensordict.dict.struct")
local td_index = require("tensordict.dict.index")

local TD = core.methods
local cdict, check, is_td = core.cdict, core.check, core.is_td
local fail, describe = util.fail, util.describe
local is_tensor = tensor.is_tensor
local KIND_TENSOR, KIND_DICT = C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT

-- Raises the C library's message under this call's name (the C call that failed is an
-- implementation detail: copy_ runs update_ there).
local function check_as(call, status)
  if status >= 0 then return status end
  fail((ffi.string(C.td_last_error()):gsub("^[%w_]+: ", call .. ": ", 1)))
end

-- Writes value (a number, boolean or tensor) into one leaf; path names it in errors.
local function write_leaf(call, path, leaf, value)
  if C.td_storage_is_writable(leaf.h.storage) == 0 then
    fail(("%s: %s is read-only (its file is mapped with mode \"r\"; load it with "
      .. "{mode = \"r+\"} to write it)"):format(call, core.key_text(path)))
  end
  if is_tensor(value) then leaf:copy_(value) else leaf:fill_(value) end
end

-- Writes value into every tensor leaf of td, nested ones included (non-tensor values
-- are left as they are, as in Python). prefix: td's key path, or nil at the top.
local function fill_leaves(call, td, value, prefix)
  local d = cdict(td)
  for i, k in ipairs(core.key_list(td)) do
    local kind = C.td_dict_kind(d, i - 1)
    local path = k
    if prefix then
      path = { unpack(prefix) }
      path[#path + 1] = k
    end
    if kind == KIND_TENSOR then
      write_leaf(call, path, core.get_string(td, k), value)
    elseif kind == KIND_DICT then
      fill_leaves(call, core.get_string(td, k), value, type(path) == "table" and path or { path })
    end
  end
end

-- td:zero_(): every tensor leaf set to zero, in place; returns td.
function TD.zero_(self)
  fill_leaves("zero_", self, 0, nil)
  return self
end

-- td:fill_(key, value): the tensor at key (every leaf of a nested TensorDict there)
-- filled with value, a number, a boolean or a tensor broadcast to the leaf; returns
-- td. As Python's fill_, it takes a key.
function TD.fill_(self, key, value)
  core.check_key("fill_", key)
  local v = TD.get(self, key)
  if v == nil then core.missing(self, "fill_", key) end
  local t = type(value)
  if t ~= "number" and t ~= "boolean" and not is_tensor(value) then
    fail(("fill_: the value must be a number, a boolean or a tensor, got %s"):format(describe(value)))
  end
  if is_td(v) then
    fill_leaves("fill_", v, value, type(key) == "table" and key or { key })
  elseif is_tensor(v) then
    write_leaf("fill_", key, v, value)
  else
    fail(("fill_: %s is a non-tensor value; fill_ writes tensors (use set_ to replace it)")
      :format(core.key_text(key)))
  end
  return self
end

-- The entries of other whose keys self has too (nested TensorDicts narrowed the same
-- way); shared, not copied.
local function common_part(self, other)
  local r = struct.new_like(other)
  local od = cdict(other)
  for i, k in ipairs(core.key_list(other)) do
    local mine = core.get_string(self, k)
    if mine ~= nil then
      if C.td_dict_kind(od, i - 1) == KIND_DICT and is_td(mine) then
        core.set_string(r, k, common_part(mine, core.get_string(other, k)), "copy_")
      else
        check(C.td_dict_set_entry(cdict(r), k, #k, od, i - 1))
      end
    end
  end
  return r
end

-- other as a TensorDict: a Lua table becomes one of batch size [].
local function td_or_table(call, other)
  if is_td(other) then return other end
  if type(other) ~= "table" or is_tensor(other) then
    fail(("%s: expected a TensorDict or a table, got %s"):format(call, describe(other)))
  end
  return core.construct(other)
end

-- td:copy_(other): other's leaves copied into td's leaves of the same keys (cast, and
-- broadcast: other's batch size may be a prefix-compatible smaller one such as []);
-- non-tensor values replaced. Keys only other has are ignored, as in Python's copy_.
function TD.copy_(self, other)
  cdict(self)
  other = td_or_table("copy_", other)
  check_as("copy_", C.td_dict_update_(cdict(self), cdict(common_part(self, other))))
  return self
end

-- td:update_at_(other, idx): other's leaves written into td[idx] (td[idx] = other,
-- broadcast over the selection); other is a TensorDict or a Lua table. Every key of
-- other must be in td, as Python's update_at_ requires. Returns td.
function TD.update_at_(self, other, idx)
  cdict(self)
  other = td_or_table("update_at_", other)
  if idx == nil then fail("update_at_: the index is missing (td:update_at_(other, idx))") end
  for _, path in ipairs(TD.keys(other, { include_nested = true, leaves_only = true })) do
    if not TD.has(self, path) then core.missing(self, "update_at_", path) end
  end
  td_index.index_write(self, idx, other, "update_at_")
  return self
end

return {}
