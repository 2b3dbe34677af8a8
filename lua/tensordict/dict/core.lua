-- dict/core.lua: the TensorDict type: the Lua handle of a C container, entry access
-- (get, set, del, ...), construction and iteration. Batch indexing and shape ops are
-- in dict/index.lua, structure ops in dict/struct.lua, joins, math, apply and printing in
-- the td_*.lua files beside it; they all add methods to M.methods.
--
-- A TensorDict is a cdata `td_dict_ref {_td_p, _td_head, _td_slot}` (const fields; cdata, not a
-- table, so that `#td` works; the field names stay out of the way of keys, which cdata
-- fields would shadow): _td_p is the C container (one reference, released by the
-- finaliser), _td_head its public prefix (batch size, key count, version), _td_slot
-- the index of its Lua-side cache. The cache maps keys to the Lua values already made for them (tensors, nested
-- TensorDicts, decoded non-tensor values) so `td:get(k)` is a table lookup; it is
-- dropped whenever the container's version changes (a key added, removed, renamed or
-- replaced, possibly through another handle). The cache holds its values strongly, as
-- Python's TensorDict holds its tensors: a weak one lost them at every collection, and
-- the next read made them again (items() of 100 leaves 6.7x and values() 22x slower
-- than Python's, a 20-deep get 2.3x). So nothing in it may lead back to the handle: a
-- leaf's owner is the handle's pin (pin_of), a second handle on the same container,
-- and the slot's sweep drops the cache and the pin once the handle is collected. A
-- handle younger than one GC cycle keeps its leaves in a weak cache instead, owned by
-- itself (get_string says why).
local ffi = require("ffi")
local lib = require("tensordict.lib")
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local json = require("tensordict.json")
local memory = require("tensordict.tensor.memory")
local slots = require("tensordict.tensor.slots")
local late = require("tensordict.late") -- cuda: it requires this module

local C = lib.C
local fail, c_fail, describe = util.fail, util.c_fail, util.describe
local is_tensor, new_tensor, Header = tensor.is_tensor, tensor.new_tensor, tensor.Header
local new_table = require("table.new")
local type, tonumber, setmetatable, getmetatable, pairs, ipairs, select =
  type, tonumber, setmetatable, getmetatable, pairs, ipairs, select
local HEADER_BYTES = ffi.sizeof(Header)
local KIND_TENSOR, KIND_DICT, KIND_VALUE, KIND_VALUES =
  C.TD_ENTRY_TENSOR, C.TD_ENTRY_DICT, C.TD_ENTRY_VALUE, C.TD_ENTRY_VALUES

local M = {}

-- Handles carry no finaliser. A LuaJIT finaliser costs ~450 ns per object here (its
-- registration and its call), more than td[i] may take in all. Instead each handle
-- holds a slot of tensor/slots.lua, whose sweep returns the containers of collected handles
-- to C once per GC cycle (and whose header says why its take and sweep never write
-- the same field). Made once per Lua state, so that a reload of these modules keeps
-- serving old handles.
local state = require("tensordict.once")("dict_type", function()
  local mt = {}
  ffi.cdef [[
    typedef struct td_dict_ref { td_dict *const _td_p; const td_dict_head *const _td_head;
                                 const int32_t _td_slot; } td_dict_ref;
    typedef struct td_dict_ref_mut { td_dict *_td_p; const td_dict_head *_td_head;
                                     int32_t _td_slot; } td_dict_ref_mut;
  ]]
  -- A freed handle's head points here: a container with nothing in it, so code that
  -- reads the head before checking the handle sees no keys and no dims.
  local dead = ffi.new("td_dict_head")
  dead.version = -2
  -- The sweep runs in a finaliser, interpreted: the dead containers go back to C in one
  -- call (one FFI call per container cost ~0.2 us each there).
  local release = require("tensordict.lib").C.td_dict_release_slots
  local Ref = ffi.metatype("td_dict_ref", mt)
  local caches, versions, pins, young, born = {}, {}, {}, {}, {}
  -- A collected handle's cache and pin go with its slot (they hold values strongly),
  -- and so do those of the handles in its cache, and down: the nested containers a
  -- dropped TensorDict cached are then all garbage at the next collection, instead of
  -- one level per collection. A nested handle the user still holds only loses its
  -- cache and pin (its leaves keep theirs): the next read makes them again. Runs in a
  -- finaliser, between any two statements of code that reads a cache: so readers take
  -- a cache once into a local and treat false as empty (cache_of, set_string).
  local function forget(slot)
    local cache = caches[slot]
    caches[slot], versions[slot], pins[slot], young[slot] = false, -1, false, false
    if cache then
      for _, v in pairs(cache) do
        if ffi.istype(Ref, v) then forget(v._td_slot) end
      end
    end
  end
  return { mt = mt, Ref = Ref, caches = caches, versions = versions,
           pins = pins, young = young, born = born, dead_head = dead,
           handles = slots.new("td_dict *", release, forget) }
end)
local mt, Ref, caches, versions, pins = state.mt, state.Ref, state.caches, state.versions, state.pins
local young, born = state.young, state.born
local handles = state.handles
local WEAK = { __mode = "v" }
local take_slot, hold_slot = slots.take, slots.hold
local TD = {} -- methods; user code may add more
M.methods, M.mt, M.Ref = TD, mt, Ref

local function is_td(x) return (ffi.istype(Ref, x)) end
M.is_td = is_td

-- The GC sees a handle as a few dozen bytes while the container behind it holds ~350
-- bytes per entry of C memory, so dead handles pile up between collections with all
-- that memory (td[i] in a loop ran at 4-5 us, mostly cache misses on it). Each handle
-- adds a 32nd of its C bytes to a debt paid as a GC step every 256 KiB. Counting all
-- of them made collections so frequent that the GC took 35% of td[i]. An eighth did
-- when the library's Lua heap was smaller; with ~700 KB of it, each step's work grew,
-- and a 32nd took td[i] of 16 leaves from 1.4-1.9 to 1.15-1.3 us (bench_td, runs
-- alternated; a 64th: 1.0-1.1 us) for 2-4 MiB more resident (bench_gc: flat).
local gc_debt = 0
local GC_STEP_BYTES = 256 * 1024

-- A GC step for the debt (collectgarbage is not compiled: the JIT stitches around this
-- rare call; jit_spec allows that here and nowhere else).
local function pay_gc_debt()
  gc_debt = 0
  collectgarbage("step", GC_STEP_BYTES / 1024)
end
M.pay_gc_debt = pay_gc_debt

-- A handle for the new C reference d (NULL: raise the library's error).
local function wrap(d)
  if d == nil then c_fail() end
  local head = C.td_dict_head_borrow(d)
  gc_debt = gc_debt + (4096 + 352 * head.nkeys) / 32
  if gc_debt > GC_STEP_BYTES then pay_gc_debt() end
  local slot = take_slot(handles)
  caches[slot] = false -- made by cache_of on first use (the version never matches -1)
  versions[slot] = -1
  pins[slot], young[slot], born[slot] = false, false, handles.sweeps
  local r = Ref(d, head, slot)
  hold_slot(handles, slot, r, d)
  memory.after_alloc()
  return r
end
M.wrap = wrap

-- The C container of a live handle.
local function cdict(self)
  if not is_td(self) then util.bad_self("a TensorDict", self, TD) end
  local d = self._td_p
  if d == nil then fail("TensorDict used after free()") end
  return d
end
M.cdict = cdict

local function td_arg(x, call, what)
  if not is_td(x) then
    fail(("%s: %s must be a TensorDict, got %s"):format(call, what or "the argument", describe(x)))
  end
  return cdict(x)
end
M.td_arg = td_arg

local function check(status)
  if status < 0 then c_fail() end
  return status
end
M.check = check

-- A 1-based batch dim of self (negative from the end) -> 0-based.
function M.batch_dim(call, self, d, extra)
  cdict(self)
  return util.dim0(call, d, self._td_head.ndim, extra, "%d batch dims")
end

util.kinds["a tensor"] = is_tensor
util.kinds["a TensorDict"] = is_td

-- The cache of a handle, emptied first when the container changed since it was filled.
local function cache_of(self)
  local slot = self._td_slot
  local v = self._td_head.version
  local c = caches[slot]
  if not c or versions[slot] ~= v then
    c = {}
    caches[slot], versions[slot], young[slot] = c, v, false
  end
  return c
end

------------------------------------------------------------------------------ keys

local function key_path_text(path)
  local parts = {}
  for i, p in ipairs(path) do parts[i] = ("%q"):format(p) end
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.key_path_text = key_path_text

-- A key for messages: 'obs' or {"next", "obs"}.
function M.key_text(key)
  return type(key) == "table" and key_path_text(key) or "'" .. tostring(key) .. "'"
end

-- Checks a key: a string, or a non-empty array of strings (a key path). Returns it.
local function check_key(call, key)
  if type(key) == "string" then return key end
  if type(key) == "table" and not is_tensor(key) and #key > 0 then
    for i = 1, #key do
      if type(key[i]) ~= "string" then
        fail(("%s: key path entry %d is %s; key paths are arrays of strings"):format(call, i,
          describe(key[i])))
      end
    end
    return key
  end
  fail(("%s: keys are strings or arrays of strings (key paths), got %s"):format(call,
    describe(key)))
end
M.check_key = check_key

-------------------------------------------------------------------------- values

-- The Lua value of a non-tensor entry. A uniform one decodes its JSON text. A stacked
-- one gives nested lists over its leading batch dims, as deep as the values vary: the
-- dims past the first k along which every value is the same collapse, as Python's
-- stacks of NonTensorData do (stacking {s = "a"} and {s = "b"} of batch [3] gives
-- {"a", "b"}, and its [2] gives "b").
-- The text at pos of entry i (C answers NULL for a position it does not hold, which
-- ffi.string would dereference).
local function value_text(d, i, pos)
  local p = C.td_dict_value_borrow(d, i, pos)
  if p == nil then
    util.fail(("get: the non-tensor value '%s' has no text at position %s (of %d)"):format(
      ffi.string(C.td_dict_key_borrow(d, i, nil)), tostring(pos), tonumber(C.td_dict_value_count(d, i))))
  end
  return (ffi.string(p))
end

local function value_of(self, d, i, kind)
  if kind == KIND_VALUE then return json.decode(value_text(d, i, 0)) end
  local h = Header()
  ffi.copy(h, C.td_dict_tensor_pin(d, i), HEADER_BYTES)
  local flat = new_tensor(h, self):reshape(-1):totable()
  local texts = {}
  for j, pos in ipairs(flat) do texts[j] = value_text(d, i, pos) end
  local ndim, shape = h.ndim, {}
  for j = 1, ndim do shape[j] = tonumber(h.shape[j - 1]) end
  local depth, block = ndim, 1 -- the smallest depth whose blocks are constant
  for k = ndim, 0, -1 do
    if k < ndim then block = block * shape[k + 1] end
    local constant = true
    for start = 1, #texts, block do
      for j = start + 1, start + block - 1 do
        if texts[j] ~= texts[start] then constant = false break end
      end
      if not constant then break end
    end
    if not constant then break end
    depth = k
  end
  if #texts == 0 then depth = ndim end -- no elements: lists down to the empty dim ([[], []])
  local inner = 1
  for j = depth + 1, ndim do inner = inner * shape[j] end
  local pos = 0
  local function build(level)
    if level == depth then
      local v = json.decode(texts[pos * inner + 1] or "null")
      pos = pos + 1
      return v
    end
    local out = {}
    for j = 1, shape[level + 1] do out[j] = build(level + 1) end
    return out
  end
  return build(0)
end

-- The owner of the leaves read through self: a handle of its own on self's container,
-- made once per handle. It keeps the container, and with it the storages its leaves
-- view (see td_dict_tensor_pin), alive while a leaf is, without keeping self alive
-- through self's cache; self:free() frees it, so its leaves raise after that as before.
local function pin_of(self, d)
  local slot = self._td_slot
  local pin = pins[slot]
  if pin then return pin end
  C.td_dict_retain(d)
  pin = wrap(d)
  pins[slot] = pin
  return pin
end

-- A tensor on leaf i of self's container d, owned by owner (self or its pin).
local function leaf(d, i, owner)
  local h = Header()
  ffi.copy(h, C.td_dict_tensor_pin(d, i), HEADER_BYTES)
  return new_tensor(h, owner) -- the owner keeps the container: see td_dict_tensor_pin
end

-- The Lua value of entry i of self (made, not cached): leaves owned by self's pin.
local function entry_value(self, d, i, kind)
  if kind == KIND_TENSOR then return leaf(d, i, pin_of(self, d)) end
  if kind == KIND_DICT then return wrap(C.td_dict_child(d, i)) end
  return value_of(self, d, i, kind)
end

-- The value of the string key k, or nil. A handle that has not yet lived through a GC
-- cycle (born[slot] == the sweep count) is most likely a batch about to be dropped
-- (td[i].obs): its leaves are owned by the handle itself and cached weakly, which
-- costs no pin and lets one collection return the lot. Once it has lived through one,
-- its leaves are owned by its pin and cached for as long as it lives.
local function get_string(self, k)
  local d = cdict(self)
  local cache = cache_of(self)
  local v = cache[k]
  if v ~= nil then return v end
  local slot = self._td_slot
  local weak = young[slot]
  if weak then
    v = weak[k]
    if v ~= nil then return v end
  end
  local i = C.td_dict_find(d, k, #k)
  if i < 0 then return nil end
  local kind = C.td_dict_kind(d, i)
  if kind == KIND_TENSOR and born[slot] == handles.sweeps then
    v = leaf(d, i, self)
    if not weak then
      weak = setmetatable({}, WEAK)
      young[slot] = weak
    end
    weak[k] = v
    return v
  end
  v = entry_value(self, d, i, kind)
  -- A decoded table is the caller's to change: each get decodes a fresh one, so a
  -- change never looks stored when it is not. An element of a stacked value is not
  -- kept either: an index assignment through a container sharing its positions may
  -- change it.
  if (type(v) ~= "table" or is_tensor(v)) and kind ~= KIND_VALUES then
    cache[k] = v
  end
  return v
end
M.get_string = get_string

-- Walks a key path to the container holding its last key; nil when a container on the
-- way is missing. A tensor on the way raises.
local function parent_of(self, path, call, create)
  local cur = self
  for i = 1, #path - 1 do
    local nxt = get_string(cur, path[i])
    if nxt == nil then
      if not create then return nil end
      nxt = wrap(C.td_dict_new(cur._td_head.ndim, cur._td_head.shape))
      check(C.td_dict_set_dict(cdict(cur), path[i], #path[i], nxt._td_p))
      cache_of(cur)[path[i]] = nxt
    elseif not is_td(nxt) then
      fail(("%s: key path %s goes through '%s', which is %s, not a TensorDict"):format(call,
        key_path_text(path), path[i], is_tensor(nxt) and "a tensor" or "a non-tensor value"))
    end
    cur = nxt
  end
  return cur
end
M.parent_of = parent_of

-- The value at a key path, or nil. One loop checks each entry as it walks: with
-- check_key's loop and parent_of's one after the other, a lookup in a user's loop hit
-- the JIT's unroll limit and ran interpreted (nested get: 230-460 ns; now ~40 ns).
local function get_path(self, key)
  local cur, n = self, #key
  for i = 1, n do
    local k = key[i]
    if type(k) ~= "string" then check_key("get", key) end -- raises, naming the entry
    local v = get_string(cur, k)
    if v == nil or i == n then return v end
    if not is_td(v) then parent_of(self, key, "get", false) end -- raises: not a container
    cur = v
  end
end

function TD.get(self, key, default)
  local v
  if type(key) == "string" then
    v = get_string(self, key)
  else
    if type(key) ~= "table" or is_tensor(key) or #key == 0 then check_key("get", key) end
    v = get_path(self, key)
  end
  if v == nil then return default end
  return v
end

local len_buf = ffi.new("int64_t[1]")
local NAMES = {} -- where a handle's cache keeps its key names

-- The key names of self in order, kept in its cache until the container changes (a
-- Lua string per key per call made keys() of 100 keys 7x slower than Python's). The
-- list is shared: callers copy it before handing it out.
local function names_of(self)
  local d = cdict(self)
  local cache = cache_of(self)
  local names = cache[NAMES]
  if names then return names end
  names = {}
  for i = 0, self._td_head.nkeys - 1 do
    names[i + 1] = ffi.string(C.td_dict_key_borrow(d, i, len_buf), len_buf[0])
  end
  cache[NAMES] = names
  return names
end

local function key_list(self)
  local names = names_of(self)
  local n = #names
  local out = new_table(n, 0) -- sized once: growing it by doubling was half of keys()
  for i = 1, n do out[i] = names[i] end
  return out
end
M.key_list = key_list

-- For td.name where name is neither a key nor a method: the method it may have meant
-- (a Python spelling such as td:lock_() is a method call, not a key read).
local function method_hint(call, key)
  if call ~= "index" or type(key) ~= "string" then return "" end
  local names = {}
  for name in pairs(TD) do names[#names + 1] = name end
  table.sort(names)
  local near = util.nearest(key, names)
  if near == nil then return "" end
  return ("; no method '%s' either: did you mean td:%s()?"):format(key, near)
end

-- Raises for a missing key, listing the keys there are.
local function missing(self, call, key)
  local keys = key_list(self)
  local shown = {}
  for i = 1, math.min(#keys, 10) do shown[i] = "'" .. keys[i] .. "'" end
  if #keys > 10 then shown[#shown + 1] = "..." end
  fail(("%s: no key %s in the TensorDict (keys: %s)%s"):format(call,
    type(key) == "table" and key_path_text(key) or "'" .. tostring(key) .. "'",
    #keys == 0 and "none" or table.concat(shown, ", "), method_hint(call, key)))
end
M.missing = missing

-- td.key and td[key_path]: like get, but a missing key raises.
function M.get_or_raise(self, key)
  local v = TD.get(self, key)
  if v == nil then missing(self, "index", key) end
  return v
end

---------------------------------------------------------------------------- setting

local make_from_table -- (source, ndim, shape) -> handle; defined below

-- True when a Lua table is a list (keys 1..n, n >= 1): stored as a non-tensor value.
local function is_list(t)
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

-- Sets string key k of self to value v. Returns v as cached.
local function set_string(self, k, v, call)
  local d = cdict(self)
  local slot = self._td_slot
  local fresh = versions[slot] == self._td_head.version
  local tv = type(v)
  if tv == "table" and getmetatable(v) == tensor.metatable then
    check(C.td_dict_set_tensor(d, k, #k, tensor.handle(v)))
  elseif is_td(v) then
    check(C.td_dict_set_dict(d, k, #k, cdict(v)))
  elseif tv == "table" and v ~= json.null and not is_list(v) and getmetatable(v) ~= json.object_mt then
    v = make_from_table(v, self._td_head.ndim, self._td_head.shape, call)
    check(C.td_dict_set_dict(d, k, #k, v._td_p))
  elseif tv == "string" or tv == "number" or tv == "boolean" or tv == "table" then
    local ok, text = pcall(json.encode, v)
    if not ok then fail(("%s: the value for '%s' is not a tensor, TensorDict or JSON value: %s")
      :format(call, k, text)) end
    check(C.td_dict_set_value(d, k, #k, text))
  elseif v == nil then
    fail(("%s: the value for '%s' is nil (use del to remove a key)"):format(call, k))
  else
    fail(("%s: cannot store %s under '%s'"):format(call, describe(v), k))
  end
  -- Keep the cache when it was current: only k changed. The caller's object is not
  -- cached: it may be freed while the container keeps its own reference, so the next
  -- get makes a new handle on what the container holds.
  if fresh then
    local cache = caches[slot] -- false when the sweep forgot it meanwhile (see forget)
    if cache then
      versions[slot] = self._td_head.version
      cache[k] = nil
      cache[NAMES] = nil -- k may be new
      local weak = young[slot]
      if weak then weak[k] = nil end
    end
  end
  return v
end
M.set_string = set_string

function TD.set(self, key, value)
  if type(key) == "string" then
    set_string(self, key, value, "set")
    return self
  end
  check_key("set", key)
  set_string(parent_of(self, key, "set", true), key[#key], value, "set")
  return self
end

-- The container and the entry index of an existing key (raises when missing).
local function locate(self, key, call)
  check_key(call, key)
  local parent, k = self, key
  if type(key) == "table" then
    parent = parent_of(self, key, call, false)
    k = key[#key]
    if parent == nil then missing(self, call, key) end
  end
  local d = cdict(parent)
  local i = C.td_dict_find(d, k, #k)
  if i < 0 then missing(parent, call, key) end
  return parent, d, i, k
end
M.locate = locate

-- Copies value into the existing leaf (casting and broadcasting like copy_).
function TD.set_(self, key, value)
  local parent, d, i, k = locate(self, key, "set_")
  local kind = C.td_dict_kind(d, i)
  local current = get_string(parent, k)
  if kind == KIND_TENSOR then
    if is_tensor(value) then
      current:copy_(value)
    elseif type(value) == "number" or type(value) == "boolean" then
      current:fill_(value)
    else
      fail(("set_: the value for the tensor '%s' must be a tensor or a number, got %s")
        :format(k, describe(value)))
    end
  elseif kind == KIND_DICT then
    if not is_td(value) then
      fail(("set_: '%s' is a TensorDict; the value must be one too, got %s"):format(k,
        describe(value)))
    end
    check(C.td_dict_update_(cdict(current), cdict(value)))
  else
    -- Replacing a non-tensor value is set_'s in-place write: allowed when locked.
    local locked = parent._td_head.locked ~= 0
    if locked then C.td_dict_set_locked(d, 0) end
    local ok, err = pcall(set_string, parent, k, value, "set_")
    if locked then C.td_dict_set_locked(d, 1) end
    if not ok then error(err, 0) end
  end
  return self
end

function TD.del(self, key)
  local _, d, i = locate(self, key, "del")
  check(C.td_dict_del(d, i))
  return self
end

function TD.pop(self, key, ...)
  if select("#", ...) > 0 and TD.get(self, key) == nil then return (...) end
  local parent, d, i, k = locate(self, key, "pop")
  local v = get_string(parent, k)
  check(C.td_dict_del(d, i))
  return v
end

-- Renames a key; the entry moves to the end, as Python's rename_key_ does. A new key
-- path with another parent moves the entry there.
function TD.rename_key(self, old, new)
  local parent, d, i, k = locate(self, old, "rename_key")
  check_key("rename_key", new)
  local old_prefix = type(old) == "table" and table.concat(old, "\0", 1, #old - 1) or ""
  local new_prefix = type(new) == "table" and table.concat(new, "\0", 1, #new - 1) or ""
  if old_prefix ~= new_prefix then
    if TD.has(self, new) then
      fail(("rename_key: %s exists already"):format(type(new) == "table" and key_path_text(new)
        or "'" .. new .. "'"))
    end
    TD.set(self, new, get_string(parent, k))
    TD.del(self, old)
    return self
  end
  local name = type(new) == "table" and new[#new] or new
  check(C.td_dict_rename(d, i, name, #name))
  return self
end

function TD.has(self, key)
  if type(key) == "string" then
    return C.td_dict_find(cdict(self), key, #key) >= 0
  end
  check_key("has", key)
  local parent = parent_of(self, key, "has", false)
  if parent == nil then return false end
  local k = key[#key]
  return C.td_dict_find(cdict(parent), k, #k) >= 0
end

function TD.is_empty(self)
  local d = cdict(self)
  local n = self._td_head.nkeys
  -- Any leaf at this level answers first: a nested container is walked only when this
  -- level holds containers alone (apply asks at every level of a deep tree; walking
  -- the first child first made that quadratic in the depth).
  for i = 0, n - 1 do
    if C.td_dict_kind(d, i) ~= KIND_DICT then return false end
  end
  local names = n > 0 and names_of(self)
  for i = 1, n do
    if not TD.is_empty(get_string(self, names[i])) then return false end
  end
  return true
end

------------------------------------------------------------------------ construction

local keys_buf, lens_buf, heads_buf, bufs_cap = nil, nil, nil, 0
local function reserve(n)
  if n > bufs_cap then
    local old_keys, old_lens, old_heads, old_cap = keys_buf, lens_buf, heads_buf, bufs_cap
    bufs_cap = math.max(n, 2 * bufs_cap, 64)
    keys_buf = ffi.new("const char *[?]", bufs_cap)
    lens_buf = ffi.new("int64_t[?]", bufs_cap)
    heads_buf = ffi.new("const td_tensor *[?]", bufs_cap)
    if old_cap > 0 then -- keep what a caller filled before growing
      ffi.copy(keys_buf, old_keys, ffi.sizeof("const char *") * old_cap)
      ffi.copy(lens_buf, old_lens, 8 * old_cap)
      ffi.copy(heads_buf, old_heads, ffi.sizeof("const td_tensor *") * old_cap)
    end
  end
end
reserve(64)

-- Reads a batch size (nil, a number, or a table of sizes) into util.shape_buf.
local function read_batch(call, batch_size)
  if batch_size == nil then return 0 end
  if type(batch_size) == "number" then batch_size = { batch_size } end
  if type(batch_size) ~= "table" then
    fail(("%s: batch_size must be a table of sizes, got %s"):format(call, describe(batch_size)))
  end
  return util.read_shape(call, false, batch_size)
end
M.read_batch = read_batch

-- Keys of a Lua table go in sorted order: a Lua table keeps no insertion order, and
-- sorting makes the order the same on every run. When every value is a tensor (the
-- common case) the keys and headers go to C in one call, which sorts them there.
local function make_from_tensors(self, source, call)
  local n = 0
  for k, v in pairs(source) do
    if type(k) ~= "string" then fail(("%s: keys must be strings, got %s"):format(call, describe(k))) end
    if getmetatable(v) ~= tensor.metatable then return false end
    n = n + 1
    if n > bufs_cap then reserve(n) end
    keys_buf[n - 1], lens_buf[n - 1] = k, #k
    heads_buf[n - 1] = tensor.handle(v)
  end
  check(C.td_dict_set_tensors(self._td_p, n, keys_buf, lens_buf, heads_buf))
  return true
end

make_from_table = function(source, ndim, shape, call)
  local self = wrap(C.td_dict_new(ndim, shape))
  if make_from_tensors(self, source, call) then return self end
  local keys = {}
  for k in pairs(source) do
    if type(k) ~= "string" then fail(("%s: keys must be strings, got %s"):format(call, describe(k))) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for i = 1, #keys do set_string(self, keys[i], source[keys[i]], call) end
  return self
end

local device_type = { cpu = C.TD_DEVICE_CPU, cuda = C.TD_DEVICE_CUDA }

-- Applies a device string ("cpu", "cuda", "cuda:N") or nil to the container.
local function apply_device(self, device, call)
  if device == nil then return end
  if type(device) ~= "string" then
    fail(("%s: device must be a string like 'cpu' or 'cuda:0', got %s"):format(call, describe(device)))
  end
  local kind, index = device:match("^(%a+):?(%d*)$")
  if not device_type[kind] then
    fail(("%s: unknown device '%s' (expected 'cpu', 'cuda' or 'cuda:N')"):format(call, device))
  end
  if kind == "cuda" then late.cuda.need(call) end -- "CUDA is not available (why)"
  check(C.td_dict_set_device(cdict(self), device_type[kind], tonumber(index) or 0))
end
M.apply_device = apply_device

local CONSTRUCT_OPTIONS = { names = "table", device = "any", lock = "boolean" } -- device: its own check

local function construct(source, batch_size, opts)
  local call = "TensorDict"
  opts = util.options(call, opts, CONSTRUCT_OPTIONS)
  local ndim = read_batch(call, batch_size)
  local self
  if source == nil then
    self = wrap(C.td_dict_new(ndim, util.shape_buf))
  elseif is_td(source) then
    self = wrap(C.td_dict_new(ndim, util.shape_buf))
    local d = cdict(source)
    local len = ffi.new("int64_t[1]")
    for i = 0, source._td_head.nkeys - 1 do
      local kp = C.td_dict_key_borrow(d, i, len)
      check(C.td_dict_set_entry(self._td_p, kp, len[0], d, i))
    end
  elseif type(source) == "table" and not is_tensor(source) then
    self = make_from_table(source, ndim, util.shape_buf, call)
  else
    fail(("TensorDict: source must be a table of tensors and values or a TensorDict, got %s")
      :format(describe(source)))
  end
  if opts.device ~= nil then apply_device(self, opts.device, call) end
  if opts.names ~= nil then TD.refine_names(self, opts.names) end
  if opts.lock then TD.lock(self) end
  return self
end
M.construct = construct

------------------------------------------------------------------------- properties

function TD.batch_size(self)
  cdict(self)
  return util.int64_list(self._td_head.shape, self._td_head.ndim)
end

function TD.batch_dims(self)
  cdict(self)
  return self._td_head.ndim
end

function TD.numel(self)
  cdict(self)
  local n = 1
  for i = 0, self._td_head.ndim - 1 do n = n * tonumber(self._td_head.shape[i]) end
  return n
end

function TD.device(self)
  cdict(self)
  local t = self._td_head.device_type
  if t == C.TD_DEVICE_NONE then return nil end
  if t == C.TD_DEVICE_CPU then return "cpu" end
  return "cuda:" .. self._td_head.device_index
end

function TD.lock(self)
  C.td_dict_set_locked(cdict(self), 1)
  return self
end

function TD.unlock(self)
  C.td_dict_set_locked(cdict(self), 0)
  return self
end

function TD.is_locked(self)
  cdict(self)
  return self._td_head.locked ~= 0
end

-- Names of the batch dims: a table with false for unnamed dims, or nil when no dim is
-- named (what the library's own passes test for).
local function dim_names(self)
  local d = cdict(self)
  if self._td_head.has_names == 0 then return nil end
  local out = {}
  for i = 0, self._td_head.ndim - 1 do
    local p = C.td_dict_name_borrow(d, i)
    out[i + 1] = p ~= nil and ffi.string(p) or false
  end
  return out
end
M.dim_names = dim_names

-- td:names(): one entry per batch dim, false where unnamed (Python's [None, None]).
function TD.names(self)
  local names = dim_names(self)
  if names then return names end
  names = {}
  for i = 1, self._td_head.ndim do names[i] = false end
  return names
end

local function set_names(self, names, call)
  local d = cdict(self)
  if names == nil then
    check(C.td_dict_set_names(d, nil))
    return self
  end
  local n = self._td_head.ndim
  if type(names) ~= "table" or #names > n then
    fail(("%s: expected a table of at most %d names, got %s"):format(call, n, describe(names)))
  end
  local buf = ffi.new("const char *[?]", math.max(n, 1))
  for i = 1, n do
    local name = names[i]
    if name ~= nil and name ~= false and type(name) ~= "string" then
      fail(("%s: name %d must be a string or false, got %s"):format(call, i, describe(name)))
    end
    buf[i - 1] = name or nil
  end
  check(C.td_dict_set_names(d, buf))
  return self
end
M.set_names = set_names

-- Names dims: a table of names (false leaves a dim unnamed), or "..." entries as
-- torch's refine_names does not support here; names already set must agree.
function TD.refine_names(self, ...)
  cdict(self)
  if select("#", ...) == 0 then fail("refine_names: expected names (strings, or false to keep a dim's)") end
  local names = util.list_args("refine_names", ...)
  local old = dim_names(self)
  if old then
    for i, name in ipairs(names) do
      if old[i] and name and old[i] ~= name then
        fail(("refine_names: dim %d is named '%s' already, cannot refine it to '%s'")
          :format(i, old[i], name))
      end
      if name == false then names[i] = old[i] end
    end
  end
  return set_names(self, names, "refine_names")
end

-- Renames dims in place: a table of new names (nil removes them all), or a map
-- {old = new}.
function TD.rename(self, names)
  if type(names) == "table" and #names == 0 and next(names) ~= nil then
    local old = dim_names(self) or {}
    local out = {}
    for i = 1, self._td_head.ndim do out[i] = old[i] or false end
    for from, to in pairs(names) do
      local found = false
      for i = 1, #out do
        if out[i] == from then out[i], found = to, true end
      end
      if not found then fail(("rename: no dim is named '%s'"):format(tostring(from))) end
    end
    return set_names(self, out, "rename")
  end
  return set_names(self, names, "rename")
end

-- Releases the container now: every handle and leaf borrowed through it raises
-- afterwards.
function TD.free(self)
  if not is_td(self) then util.bad_self("a TensorDict", self, TD) end
  local d = self._td_p
  if d ~= nil then
    local slot = self._td_slot
    -- The fields are const to Lua (a script overwriting _td_p could reach freed
    -- memory); only this writes them, through the mutable twin of the type.
    local m = ffi.cast("td_dict_ref_mut *", self)
    m._td_p = nil
    m._td_head = state.dead_head
    caches[slot] = false
    versions[slot] = -1
    young[slot] = false
    local pin = pins[slot]
    pins[slot] = false
    if pin then TD.free(pin) end -- the leaves read through self raise from now on
    slots.released(handles, slot) -- the slot waits for the handle to go
    C.td_dict_release(d)
  end
end

------------------------------------------------------------------------- iteration

local KEYS_OPTIONS = { include_nested = "boolean", leaves_only = "boolean", sort = "boolean" }

-- Appends the keys of td (key paths below prefix when prefix is given) to out.
local function walk_keys(out, td, prefix, include_nested, leaves_only)
  local names, d = names_of(td), td._td_p
  for i = 1, #names do
    local k = names[i]
    local is_dict = C.td_dict_kind(d, i - 1) == KIND_DICT
    local path = k
    if prefix then
      path = { unpack(prefix) }
      path[#path + 1] = k
    end
    -- A nested container comes after its own keys, as in Python.
    if include_nested and is_dict then
      walk_keys(out, get_string(td, k), prefix and path or { k }, include_nested, leaves_only)
    end
    if not (leaves_only and is_dict) then out[#out + 1] = path end
  end
end

-- Sorted keys: key paths as their parts joined by "\0" (a module-level function: a
-- closure made in keys() kept it out of the JIT, and every loop calling it with it).
local function key_before(a, b)
  local sa = type(a) == "table" and table.concat(a, "\0") or a
  local sb = type(b) == "table" and table.concat(b, "\0") or b
  return sa < sb
end

-- Keys in order: strings, or key paths (arrays) for nested keys with include_nested.
function TD.keys(self, opts)
  cdict(self)
  if type(opts) == "nil" then return key_list(self) end -- (a NULL cdata == nil: refused below)
  opts = util.options("keys", opts, KEYS_OPTIONS)
  local include_nested, leaves_only, sort = opts.include_nested, opts.leaves_only, opts.sort
  local out = {}
  walk_keys(out, self, nil, include_nested, leaves_only)
  if sort then table.sort(out, key_before) end
  return out
end

-- for k, v in td:pairs() do ... end (top-level keys in order; opts as keys()).
-- td:items() is the same iterator, Python's spelling.
-- Top-level keys walk the cached name list itself: a change to the container while
-- the loop runs makes a new list and leaves this one as it was, so the loop sees the
-- keys it started with, as with a copy.
local function top_level_keys(self, opts)
  if opts == nil then
    cdict(self)
    return names_of(self)
  end
  return TD.keys(self, opts)
end

-- The iterators are small callable state tables, not closures: making a closure (FNEW)
-- is not compiled by LuaJIT, so a loop calling td:values() ran interpreted around each
-- call. Each is called as a closure would be (`for v in td:values()`, or `it()`).
local function next_pair(st)
  local i = st.i + 1
  st.i = i
  local k = st.keys[i]
  if k == nil then return nil end
  return k, TD.get(st.td, k)
end

local function next_value(st)
  local _, v = next_pair(st)
  return v
end

local PAIRS, VALUES = { __call = next_pair }, { __call = next_value }

local function iterator(self, opts, kind)
  return (setmetatable({ td = self, keys = top_level_keys(self, opts), i = 0 }, kind))
end

function TD.pairs(self, opts) return iterator(self, opts, PAIRS) end
TD.items = TD.pairs

-- for v in td:values() do ... end (opts as keys()).
function TD.values(self, opts) return iterator(self, opts, VALUES) end

-- Python's spellings of the same methods.
TD.lock_, TD.unlock_, TD.del_, TD.rename_key_ = TD.lock, TD.unlock, TD.del, TD.rename_key
TD.shape, TD.dim, TD.ndim = TD.batch_size, TD.batch_dims, TD.batch_dims

function mt.__len(self)
  cdict(self)
  if self._td_head.ndim == 0 then return 0 end -- Python's len() of batch size []
  return (tonumber(self._td_head.shape[0]))
end

function mt.__eq(a, b)
  -- Handles are equal when they are the same container (Lua's == must give a boolean;
  -- use eq() for the elementwise comparison).
  return is_td(a) and is_td(b) and a._td_p == b._td_p
end

return M
