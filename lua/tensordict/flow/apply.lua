-- flow/apply.lua: nodes that compute or reshape keys: Apply (a function per leaf),
-- Module (tensordict.nn's TensorDictModule: in_keys in, out_keys out), Lambda (a whole
-- batch in, a batch or nil out), Select, Exclude, Rename and Cast.
-- Nodes write into the batch they get, as tensordict.nn modules do; a locked batch (a
-- memmap load, say) is first copied shallowly (its leaves shared, not copied).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local dtypes = require("tensordict.tensor.dtype")
local core = require("tensordict.flow.core")

local describe = util.describe
local is_tensor, is_td = tensor.is_tensor, td_core.is_td

local writable = core.writable

local function check_result(node, r, what)
  if not is_tensor(r) and not is_td(r) then
    node:fail("fn returned %s for %s; expected a tensor or a TensorDict", describe(r), what)
  end
  return r
end

local function check_same_length(self, a, b, an, bn)
  if b and #a ~= #b then
    self:fail("%s has %d keys but %s has %d; they pair up one to one", an, #a, bn, #b)
  end
end

------------------------------------------------------------------------------ Apply

local Apply = core.define("Apply", {
  keeps_rows = true,
  doc = "Calls fn on each selected leaf and stores the result (in place, or under out_keys).",
  params = {
    { "keys", "keys", required = true, doc = "the leaves fn is applied to" },
    { "fn", "function", required = true, takes = "tensors", doc = "fn(leaf) -> tensor (or TensorDict)" },
    { "out_keys", "keys", doc = "where each result goes, paired with keys (default: keys, replacing the leaves)" },
  },
})

function Apply:init()
  check_same_length(self, self.p.keys, self.p.out_keys, "keys", "out_keys")
  self.in_keys = self.p.keys
  self.out_keys = self.p.out_keys or self.p.keys
end

function Apply:forward(td)
  td = writable(td)
  local keys, outs, fn = self.in_keys, self.out_keys, self.p.fn
  for i = 1, #keys do
    local r = fn(core.get(self, td, keys[i]))
    td:set(outs[i], check_result(self, r, core.key_text(keys[i])))
  end
  return td
end

----------------------------------------------------------------------------- Module

local Module = core.define("Module", {
  keeps_rows = true,
  doc = "tensordict.nn's TensorDictModule: fn(in_keys' values...) returns the out_keys' values.",
  params = {
    { "fn", "function", required = true, takes = "tensors",
      doc = "fn(v1, v2, ...) -> r1, r2, ... (one result per out_key)" },
    { "in_keys", "keys", required = true, doc = "the values passed to fn, in order" },
    { "out_keys", "keys", required = true, doc = "where fn's results go, in order" },
  },
})

function Module:init()
  self.in_keys, self.out_keys = self.p.in_keys, self.p.out_keys
  self.args = {}
end

function Module:forward(td)
  td = writable(td)
  local ins, outs, args = self.in_keys, self.out_keys, self.args
  for i = 1, #ins do args[i] = core.get(self, td, ins[i]) end
  local res = { self.p.fn(unpack(args, 1, #ins)) }
  for i = 1, #outs do
    if res[i] == nil then
      self:fail("fn returned %d value%s; out_keys needs %d", i - 1, i == 2 and "" or "s", #outs)
    end
    td:set(outs[i], check_result(self, res[i], "out_key " .. core.key_text(outs[i])))
  end
  return td
end

----------------------------------------------------------------------------- Lambda

local Lambda = core.define("Lambda", {
  keeps_rows = true,
  doc = "Calls fn on the whole batch: fn(td) returns a TensorDict (the same or a new one) or nil to drop it.",
  params = {
    { "fn", "function", required = true, takes = "batch", doc = "fn(td) -> TensorDict or nil" },
    { "in_keys", "keys", default = {}, doc = "the keys fn reads (for key checks)" },
    { "out_keys", "keys", default = {}, doc = "the keys fn adds (for key checks)" },
  },
})

function Lambda:init()
  self.in_keys, self.out_keys = self.p.in_keys, self.p.out_keys
  self.keys_unknown = #self.p.out_keys == 0 -- fn may add any key
end

function Lambda:forward(td)
  core.require_keys(self, td, self.in_keys)
  local r = self.p.fn(td)
  if r ~= nil and not is_td(r) then
    self:fail("fn returned %s; expected a TensorDict or nil", describe(r))
  end
  return r
end

------------------------------------------------------------------ Select, Exclude

local Select = core.define("Select", {
  keeps_rows = true,
  doc = "Keeps only the given keys (leaves shared).",
  params = {
    { "keys", "keys", required = true, doc = "the keys kept (key paths keep those leaves of nested TensorDicts)" },
    { "strict", "boolean", default = true, doc = "a missing key raises (false: ignored)" },
  },
})

function Select:init()
  self.in_keys = self.p.strict and self.p.keys or {}
end

function Select:keys_after(ks) ks:restrict(self.p.keys) end

function Select:forward(td)
  local keys = self.p.keys
  if self.p.strict then core.require_keys(self, td, keys) end
  local args = { unpack(keys) }
  args[#args + 1] = { strict = self.p.strict }
  local ok, r = pcall(td.select, td, unpack(args, 1, #args))
  if not ok then self:fail("%s", tostring(r):gsub("^.-tensordict: ", "")) end
  return r
end

local Exclude = core.define("Exclude", {
  keeps_rows = true,
  doc = "Drops the given keys (missing ones are ignored).",
  params = {
    { "keys", "keys", required = true, doc = "the keys dropped" },
  },
})

function Exclude:keys_after(ks)
  for _, k in ipairs(self.p.keys) do ks:remove(k) end
end

function Exclude:forward(td)
  return td:exclude(unpack(self.p.keys))
end

----------------------------------------------------------------------------- Rename

local Rename = core.define("Rename", {
  keeps_rows = true,
  doc = "Renames keys: {old = \"new\", ...}, or a list of {old, new} pairs for key paths.",
  params = {
    { "keys", "table", required = true, doc = "old -> new names: {a = \"b\"} or {{old, new}, ...}" },
  },
})

function Rename:init()
  local pairs_list = {}
  local spec = self.p.keys
  for i = 1, #spec do
    local pair = spec[i]
    if type(pair) ~= "table" or #pair ~= 2 then
      self:fail("keys[%d]: expected a pair {old, new}, got %s", i, describe(pair))
    end
    pairs_list[#pairs_list + 1] = { pair[1], pair[2] }
  end
  local names = {}
  for k in pairs(spec) do
    if type(k) ~= "number" then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do pairs_list[#pairs_list + 1] = { k, spec[k] } end
  local ins, outs = {}, {}
  for i, pair in ipairs(pairs_list) do
    for j = 1, 2 do
      local ok, key = pcall(td_core.check_key, "Rename", pair[j])
      if not ok or key == "" then
        self:fail("keys: %s name of pair %d must be a key, got %s", j == 1 and "old" or "new", i, describe(pair[j]))
      end
    end
    ins[i], outs[i] = pair[1], pair[2]
  end
  if #ins == 0 then self:fail("keys: nothing to rename") end
  self.in_keys, self.out_keys = ins, outs
end

-- A renamed key keeps its dtype (and who declared it).
function Rename:keys_after(ks)
  for i, k in ipairs(self.in_keys) do
    local dtype, origin = ks:dtype(k)
    ks:remove(k)
    ks:add(self.out_keys[i], true, dtype, origin)
  end
end

-- A key keeps its place; a key path with another parent moves the entry there.
function Rename:forward(td)
  td = writable(td)
  for i, old in ipairs(self.in_keys) do
    core.get(self, td, old)
    td:rename_key(old, self.out_keys[i])
  end
  return td
end

------------------------------------------------------------------------------- Cast

local Cast = core.define("Cast", {
  keeps_rows = true,
  doc = "Casts leaves to a dtype: the given keys (any dtype), or every floating leaf.",
  params = {
    { "dtype", "dtype", required = true, doc = "the target dtype" },
    { "keys", "keys", doc = "the leaves cast (default: every floating-point leaf, like td:to(dtype))" },
  },
})

function Cast:init()
  self.in_keys = self.p.keys or {}
end

-- The keys cast hold dtype from here on: the given ones, or every key declared floating.
function Cast:keys_after(ks, where)
  local origin = ("cast by %s"):format(where or "Cast")
  if self.p.keys then
    for _, k in ipairs(self.p.keys) do ks:add(k, false, self.p.dtype, origin) end
    return
  end
  for _, k in ipairs(ks:list()) do
    local dtype = ks:dtype(k)
    if dtype and dtypes.is_floating(dtypes.code(dtype, "Cast")) then ks:add(k, false, self.p.dtype, origin) end
  end
end

function Cast:forward(td)
  local keys, dtype = self.p.keys, self.p.dtype
  if not keys then return td:to(dtype) end
  td = writable(td)
  for _, k in ipairs(keys) do
    local v = core.get(self, td, k)
    if not is_tensor(v) then self:fail("key %s is %s, not a tensor", core.key_text(k), describe(v)) end
    td:set(k, v:to(dtype))
  end
  return td
end

return { Apply = Apply, Module = Module, Lambda = Lambda, Select = Select, Exclude = Exclude,
  Rename = Rename, Cast = Cast }
