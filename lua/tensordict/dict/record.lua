-- dict/record.lua: T.record{"obs", "reward", ..., name = "Step"}, a typed record: Python's
-- @tensorclass for Lua. It declares a class whose instances are TensorDicts with named
-- fields: `r.obs` reads a field, `r.obs = x` sets one, any other name raises naming the
-- field and the class; methods defined on the class (`function Step:total() ... end`)
-- apply to instances; every TensorDict method works and what returns a TensorDict
-- returns an instance of the class (Python wraps the same way). Saved with memmap in
-- tensorclass's layout (meta.json holding the class, the fields in "_tensordict").
--
-- An instance is a userdata (newproxy) so that `#r` works; its TensorDict and class live
-- in a weak table keyed by it.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local core = require("tensordict.dict.core")
local td_join = require("tensordict.dict.join")
local td_memmap = require("tensordict.dict.memmap")

local TD = core.methods
local fail, describe = util.fail, util.describe
local is_td = core.is_td

local M = {}

local instances = setmetatable({}, { __mode = "k" }) -- instance -> {td =, class =}
local infos = setmetatable({}, { __mode = "k" })     -- class -> its declaration

local function is_record(x, class)
  local st = type(x) == "userdata" and instances[x]
  if not st then return false end
  return class == nil or st.class == class
end
M.is_record = is_record
util.kinds["a record"] = function(x) return is_record(x) end

-- The TensorDict of a record (records are shared, not copied), anything else as it is.
local function unwrap(x)
  local st = type(x) == "userdata" and instances[x]
  return st and st.td or x
end
M.unwrap = unwrap

local function field_list(info) return (table.concat(info.fields, ", ")) end

-- An instance of class over td (shared).
local function wrap(class, td)
  local info = infos[class]
  local r = newproxy(info.proto)
  instances[r] = { td = td, class = class }
  return r
end

-- A TensorDict (or an array of them) coming back from a TensorDict method, as instances.
local function wrap_result(class, self, td, v)
  if is_td(v) then return v == td and self or wrap(class, v) end
  if type(v) == "table" and getmetatable(v) == nil and is_td(v[1]) then
    local out = {}
    for i, x in ipairs(v) do out[i] = is_td(x) and wrap(class, x) or x end
    return out
  end
  return v
end

-- A TensorDict method called on an instance: on its TensorDict, records among the
-- arguments unwrapped, TensorDict results wrapped.
local function forwarder(class, name)
  local method = TD[name]
  return function(self, ...)
    local st = instances[self]
    if not st then util.bad_self("a " .. infos[class].name .. " record", self, {}) end
    local n = select("#", ...)
    local args = { ... }
    for i = 1, n do args[i] = unwrap(args[i]) end
    local res = { method(st.td, unpack(args, 1, n)) }
    for i = 1, #res do res[i] = wrap_result(class, self, st.td, res[i]) end
    return unpack(res)
  end
end

local function check_keys(info, td, call)
  for _, k in ipairs(TD.keys(td)) do
    if not info.field_set[k] then
      fail(("%s: '%s' is not a field of record %s (fields: %s)"):format(call, k, info.name, field_list(info)))
    end
  end
end

local RESERVED = { batch_size = true, names = true, device = true }

-- Class(source [, batch_size [, opts]]): source a table of fields (plus batch_size =,
-- names =, device = as Python's keyword arguments) or a TensorDict of fields.
local function construct(class, source, batch_size, opts)
  local info = infos[class]
  if is_td(source) then return M.from_tensordict(class, source) end
  if type(source) ~= "table" or getmetatable(source) ~= nil then
    fail(("%s: expected a table of fields (%s), got %s"):format(info.name, field_list(info), describe(source)))
  end
  local given = opts
  opts = {}
  for k, v in pairs(util.options(info.name, given)) do opts[k] = v end
  local fields = {}
  for k, v in pairs(source) do
    if info.field_set[k] then
      fields[k] = v
    elseif RESERVED[k] then
      if k == "batch_size" then batch_size = batch_size or v else opts[k] = v end
    else
      fail(("%s: unknown field %s (fields: %s)"):format(info.name, describe(k), field_list(info)))
    end
  end
  local missing = {}
  for _, f in ipairs(info.fields) do
    if fields[f] == nil and not info.optional[f] then missing[#missing + 1] = "'" .. f .. "'" end
  end
  if #missing > 0 then
    fail(("%s: missing field%s %s (declare them optional = {...} to leave them unset)")
      :format(info.name, #missing > 1 and "s" or "", table.concat(missing, ", ")))
  end
  local td = core.construct(nil, batch_size, opts)
  for _, f in ipairs(info.fields) do
    if fields[f] ~= nil then TD.set(td, f, unwrap(fields[f])) end
  end
  return wrap(class, td)
end

-- Class.from_tensordict(td): an instance sharing td, whose keys must be fields.
function M.from_tensordict(class, td)
  local info = infos[class]
  if not is_td(td) then
    fail(("from_tensordict: expected a TensorDict, got %s"):format(describe(td)))
  end
  check_keys(info, td, "from_tensordict")
  return wrap(class, td)
end

local function type_name(info) return ("<class '%s.%s'>"):format(info.module, info.name) end

-- The methods every class has (a user's method of the same name wins).
local function class_methods(class, info)
  local methods = {}
  -- r:memmap(prefix [, opts]): tensorclass's layout; an instance over the files.
  function methods.memmap(self, prefix, opts)
    local st = instances[self]
    local flags, threads = td_memmap.save_flags("memmap", opts)
    local saved = core.wrap(C.td_dict_memmap_tensorclass(core.cdict(st.td), type_name(info),
      td_memmap.path_arg("memmap", prefix), flags, threads))
    return wrap(class, td_memmap.keep_names(st.td, saved))
  end
  -- r:memmap_(prefix [, opts]): the same; r takes the saved fields. Returns r.
  function methods.memmap_(self, prefix, opts)
    instances[self].td = instances[methods.memmap(self, prefix, opts)].td
    return self
  end
  -- r:to_tensordict(): a TensorDict copy of the fields (Python's); r:tensordict() shares.
  function methods.to_tensordict(self) return TD.clone(instances[self].td) end
  function methods.tensordict(self) return instances[self].td end
  return methods
end

-- The options beside the field list (their types are checked below, with own messages).
local RECORD_OPTIONS = { name = "any", module = "any", optional = "any" }

-- T.record{"field", ... [, name = "Name"] [, module = "__main__"] [, optional = {...}]}
function M.record(spec)
  if type(spec) ~= "table" or getmetatable(spec) ~= nil then
    fail(("record: expected a table of field names such as {\"obs\", \"reward\", name = \"Step\"}, got %s")
      :format(describe(spec)))
  end
  local info = { name = "Record", module = "__main__", fields = {}, field_set = {}, optional = {} }
  -- the list part names the fields; the named part is options, checked by util.options
  local named = {}
  for k, v in pairs(spec) do
    if type(k) ~= "number" then
      named[k] = v
    elseif not util.is_int(k) or k < 1 or k > #spec then
      fail("record: field names must form a list")
    end
  end
  util.options("record", named, RECORD_OPTIONS)
  for _, k in ipairs({ "name", "module" }) do
    local v = named[k]
    if v ~= nil then
      if type(v) ~= "string" or not v:match("^[%a_][%w_]*$") then
        fail(("record: %s must be an identifier, got %s"):format(k, describe(v)))
      end
      info[k] = v
    end
  end
  for i, f in ipairs(spec) do
    if type(f) ~= "string" or f == "" then
      fail(("record: field %d must be a non-empty string, got %s"):format(i, describe(f)))
    end
    if info.field_set[f] then fail(("record: field '%s' is declared twice"):format(f)) end
    if RESERVED[f] then
      fail(("record: '%s' cannot be a field (it is the constructor's %s argument)"):format(f, f))
    end
    info.fields[i], info.field_set[f] = f, true
  end
  if #info.fields == 0 then fail("record: declare at least one field") end
  for _, f in ipairs(type(spec.optional) == "table" and spec.optional or {}) do
    if not info.field_set[f] then
      fail(("record: optional field '%s' is not declared (fields: %s)"):format(tostring(f), field_list(info)))
    end
    info.optional[f] = true
  end
  if spec.optional ~= nil and type(spec.optional) ~= "table" then
    fail(("record: optional must be a list of fields, got %s"):format(describe(spec.optional)))
  end

  local class = {}
  infos[class] = info
  info.proto = newproxy(true)
  local imt = getmetatable(info.proto)
  local builtin = class_methods(class, info)
  local forwarded = {}

  function imt.__index(self, k)
    local st = instances[self]
    if type(k) == "string" then
      if info.field_set[k] then return TD.get(st.td, k) end
      local m = rawget(class, k) or builtin[k]
      if m ~= nil then return m end
      if TD[k] ~= nil then
        forwarded[k] = forwarded[k] or forwarder(class, k)
        return forwarded[k]
      end
      fail(("'%s' is not a field or method of record %s (fields: %s)"):format(k, info.name, field_list(info)))
    end
    return wrap_result(class, self, st.td, st.td[k])
  end
  function imt.__newindex(self, k, v)
    local st = instances[self]
    if type(k) == "string" then
      if not info.field_set[k] then
        fail(("cannot set '%s': record %s has no such field (fields: %s)"):format(k, info.name, field_list(info)))
      end
      TD.set(st.td, k, unwrap(v))
    else
      st.td[k] = unwrap(v)
    end
  end
  function imt.__len(self) return #instances[self].td end
  function imt.__tostring(self)
    return (tostring(instances[self].td):gsub("^TensorDict", info.name, 1))
  end
  function imt.__eq(a, b) return instances[a].td == instances[b].td end

  class.fields = info.fields
  class.name = info.name
  function class.from_tensordict(td) return M.from_tensordict(class, td) end
  -- Class.load_memmap(prefix [, opts]), Class.from_consolidated(file [, opts]): instances
  -- of what T.load_memmap / T.from_consolidated load (Python's Class.load_memmap).
  function class.load_memmap(prefix, opts)
    return M.from_tensordict(class, td_memmap.load_memmap(prefix, opts))
  end
  function class.from_consolidated(filename, opts)
    return M.from_tensordict(class, td_memmap.from_consolidated(filename, opts))
  end
  return setmetatable(class, {
    __call = function(_, source, batch_size, opts) return construct(class, source, batch_size, opts) end,
    __tostring = function() return ("record %s{%s}"):format(info.name, field_list(info)) end,
  })
end

-- T.stack / T.cat of instances of one class: an instance (Python's torch.stack of
-- tensorclasses).
local function join_of(call, fn)
  return function(list, dim)
    local class = instances[list[1]].class
    local tds = {}
    for i, r in ipairs(list) do
      if not is_record(r, class) then
        fail(("%s: element %d is %s, not a %s record like element 1"):format(call, i, describe(r), infos[class].name))
      end
      tds[i] = instances[r].td
    end
    return wrap(class, fn(tds, dim))
  end
end
M.stack = join_of("stack", td_join.stack)
M.cat = join_of("cat", td_join.cat)

return M
