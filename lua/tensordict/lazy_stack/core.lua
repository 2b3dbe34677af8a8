-- lazy_stack/core.lua: T.lazy_stack, Python tensordict's LazyStackedTensorDict: TensorDicts
-- kept side by side along a new batch dim instead of copied into one container, so
-- their leaves may differ in shape (and the members in keys). Indexing picks members
-- (or indexes each member) without copying; get, keys and contiguous stack on demand.
-- Operations are in lazy_stack/ops.lua, printing and files in lazy_stack/io.lua.
--
-- A lazy stack is a userdata (newproxy) rather than a table, so that `#ls` works (LuaJIT
-- calls __len on userdata, never on tables); its state lives in a weak table keyed by
-- it: members (a Lua array of TensorDicts, each shared, not copied) and dim (0-based).
local util = require("tensordict.util")
local core = require("tensordict.dict")
local tensor = require("tensordict.tensor")
local join = require("tensordict.tensor.join")
local td_join = require("tensordict.dict.join")
local index = require("tensordict.tensor.index")
local create = require("tensordict.tensor.create")

local TD = core.methods
local fail, describe, format_list = util.fail, util.describe, util.format_list
local is_td, is_tensor = core.is_td, tensor.is_tensor

local M = {}
local LS = {} -- methods; user code may add more
M.methods = LS

local state = require("tensordict.once")("lazy_stack_type", function()
  local proto = newproxy(true)
  return { proto = proto, mt = getmetatable(proto), data = setmetatable({}, { __mode = "k" }) }
end)
local data, mt = state.data, state.mt
M.mt = mt

local function is_ls(x) return type(x) == "userdata" and data[x] ~= nil end
M.is_lazy_stack = is_ls
util.kinds["a LazyStackedTensorDict"] = is_ls

-- A new lazy stack of members (an array, taken over) along 0-based dim.
local function new(members, dim, prefix)
  local p = newproxy(state.proto)
  data[p] = { members = members, dim = dim, prefix = prefix }
  return p
end
M.new = new

-- The state of a lazy stack method's self.
local function stack_state(self)
  local s = data[self]
  if s == nil then util.bad_self("a LazyStackedTensorDict", self, LS) end
  return s
end
M.state_of = stack_state

-- T.lazy_stack(tds [, dim]): tds an array of TensorDicts with the same number of batch
-- dims (their sizes may differ: those dims read -1), dim 1-based (default 1, up to one
-- past the members' batch dims, negative from the end).
function M.lazy_stack(list, dim)
  if type(list) ~= "table" or getmetatable(list) ~= nil or #list == 0 then
    fail(("lazy_stack: expected a non-empty table of TensorDicts, got %s"):format(describe(list)))
  end
  local members = {}
  for i, td in ipairs(list) do
    if not is_td(td) then
      fail(("lazy_stack: element %d is %s, not a TensorDict%s"):format(i, describe(td),
        is_ls(td) and " (lazy stacks of lazy stacks are not supported: densify it first)" or ""))
    end
    members[i] = td
  end
  local nd = TD.batch_dims(members[1])
  for i = 2, #members do
    if TD.batch_dims(members[i]) ~= nd then
      fail(("lazy_stack: the batch sizes differ in their number of dims: element 1 has %s, element %d has %s")
        :format(format_list(TD.batch_size(members[1])), i, format_list(TD.batch_size(members[i]))))
    end
  end
  return new(members, util.dim0("lazy_stack", dim or 1, nd, 1, "%d batch dims"))
end

------------------------------------------------------------------------ batch

-- Python's batch size: the members' dims (-1 where their sizes differ) with the
-- member count inserted at the stack dim.
local function batch_of(s)
  local m = s.members
  local out = TD.batch_size(m[1])
  for i = 2, #m do
    local b = TD.batch_size(m[i])
    for d = 1, #out do
      if b[d] ~= out[d] then out[d] = -1 end
    end
  end
  table.insert(out, s.dim + 1, #m)
  return (setmetatable(out, util.size_mt))
end
M.batch_of = batch_of

function LS.batch_size(self) return batch_of(stack_state(self)) end
function LS.batch_dims(self) return TD.batch_dims(stack_state(self).members[1]) + 1 end
LS.shape, LS.dim, LS.ndim = LS.batch_size, LS.batch_dims, LS.batch_dims
-- The stack dim, 1-based (Python's stack_dim is 0-based: it prints as its own).
function LS.stack_dim(self) return stack_state(self).dim + 1 end
-- The members, in order (a new array; the TensorDicts themselves are shared).
function LS.tensordicts(self)
  local out = {}
  for i, m in ipairs(stack_state(self).members) do out[i] = m end
  return out
end

function LS.numel(self)
  local n = 0
  for _, m in ipairs(stack_state(self).members) do n = n + TD.numel(m) end
  return n
end

function mt.__len(self)
  local s = stack_state(self)
  if s.dim == 0 then return #s.members end
  local first = TD.batch_size(s.members[1])[1]
  for _, m in ipairs(s.members) do
    if TD.batch_size(m)[1] ~= first then
      fail("#: the first batch dim of the LazyStackedTensorDict differs between members (-1)")
    end
  end
  return first
end

------------------------------------------------------------------------ keys

local function path_id(path)
  return type(path) == "table" and table.concat(path, "\0") or path
end

-- Python's keys of a lazy stack: those every member has, in the first member's order.
-- opts as td:keys's.
function LS.keys(self, opts)
  local s = stack_state(self)
  local counts = {}
  for i = 2, #s.members do
    for _, k in ipairs(TD.keys(s.members[i], opts)) do
      local id = path_id(k)
      counts[id] = (counts[id] or 0) + 1
    end
  end
  local out = {}
  for _, k in ipairs(TD.keys(s.members[1], opts)) do
    if #s.members == 1 or counts[path_id(k)] == #s.members - 1 then out[#out + 1] = k end
  end
  return out
end

function LS.has(self, key)
  for _, m in ipairs(stack_state(self).members) do
    if not TD.has(m, key) then return false end
  end
  return true
end

------------------------------------------------------------------------ get

local function shapes_text(values)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = format_list(v:shape()) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

-- Tensors of the same dtype and number of dims padded to the largest size of each dim
-- (Python's as_padded_tensor), then stacked along dim (1-based).
local function padded_stack(values, dim, opts, key)
  local side = opts.padding_side or "right"
  if side ~= "right" and side ~= "left" then
    fail(("get: padding_side must be 'right' or 'left', got %s"):format(describe(side)))
  end
  local top = values[1]:shape()
  for i = 2, #values do
    local sh = values[i]:shape()
    if #sh ~= #top then
      fail(("get: cannot pad the tensors under the key %s: their shapes %s differ in their number of dims")
        :format(core.key_text(key), shapes_text(values)))
    end
    for d = 1, #sh do top[d] = math.max(top[d], sh[d]) end
  end
  local out = {}
  for i, v in ipairs(values) do
    local p = create.full(top, opts.padding_value or 0, v:dtype())
    if v:numel() > 0 then
      local region = {}
      for d, n in ipairs(v:shape()) do
        region[d] = side == "right" and { 1, n } or { top[d] - n + 1, top[d] }
      end
      local view = #region > 0 and p[region] or p
      view:copy_(v)
    end
    out[i] = p
  end
  return join.stack(out, dim)
end

local GET_OPTS = { as_list = "boolean", as_padded_tensor = "boolean", padding_value = "number",
  padding_side = "string" }

-- ls:get(key [, default [, {as_list =, as_padded_tensor =, padding_value =, padding_side =}]]):
-- tensors stacked along the stack dim when their shapes agree (else an error naming the
-- key and the shapes, as Python's), nested TensorDicts as a lazy stack, non-tensor values
-- as a dense stack of them reads; as_list gives the members' values as a Lua array.
function LS.get(self, key, default, opts)
  local s = stack_state(self)
  opts = util.options("get", opts, GET_OPTS)
  local values = {}
  for i, m in ipairs(s.members) do
    local v = TD.get(m, key)
    if v == nil then
      if default ~= nil then return default end
      fail(("get: key %s is missing from member %d of the LazyStackedTensorDict (keys every member has: %s)")
        :format(core.key_text(key), i, format_list(LS.keys(self))))
    end
    values[i] = v
  end
  if opts.as_list then return values end
  local first = values[1]
  local function kind(v) return is_tensor(v) and "a tensor" or is_td(v) and "a TensorDict" or "a non-tensor value" end
  for i = 2, #values do
    if kind(values[i]) ~= kind(first) then
      fail(("get: key %s holds %s in member 1 and %s in member %d"):format(core.key_text(key),
        kind(first), kind(values[i]), i))
    end
  end
  if is_tensor(first) then
    if opts.as_padded_tensor then return padded_stack(values, s.dim + 1, opts, key) end
    local shape = first:shape()
    for i = 2, #values do
      if values[i]:shape() ~= shape then
        fail(("get: cannot stack the tensors under the key %s: their shapes are %s "
          .. "(pass {as_list = true} or {as_padded_tensor = true} to read them)")
          :format(core.key_text(key), shapes_text(values)))
      end
    end
    return join.stack(values, s.dim + 1)
  end
  if opts.as_padded_tensor then
    fail(("get: as_padded_tensor: key %s holds %s, not tensors"):format(core.key_text(key), kind(first)))
  end
  if is_td(first) then return M.lazy_stack(values, s.dim + 1) end
  local parts = {}
  for i, m in ipairs(s.members) do parts[i] = TD.select(m, key) end
  return TD.get(td_join.stack(parts, s.dim + 1), key)
end

------------------------------------------------------------------------ set

-- value split along the stack dim into one piece per member (a tensor, TensorDict or
-- lazy stack whose leading dims match the batch size), or nil for a value every member
-- takes whole.
local function pieces_of(s, value, call, key)
  local shape
  if is_tensor(value) then shape = value:shape()
  elseif is_td(value) then shape = TD.batch_size(value)
  elseif is_ls(value) then shape = LS.batch_size(value)
  else return nil end
  local batch = batch_of(s)
  local fits = #shape >= #batch
  for d = 1, #batch do
    if fits and batch[d] ~= -1 and shape[d] ~= batch[d] then fits = false end
  end
  if not fits then
    fail(("%s: the value's leading dims %s do not match the batch size %s of the LazyStackedTensorDict%s")
      :format(call, format_list(shape), format_list(batch), key and " (key " .. core.key_text(key) .. ")" or ""))
  end
  if is_ls(value) then return M.unbind(value, s.dim + 1) end
  return value:unbind(s.dim + 1)
end

-- ls:set(key, value): a tensor or container over the whole batch is split along the stack
-- dim into the members; anything else (a string, number, ...) is set in every member.
function LS.set(self, key, value)
  local s = stack_state(self)
  local pieces = pieces_of(s, value, "set", key)
  for i, m in ipairs(s.members) do TD.set(m, key, pieces and pieces[i] or value) end
  return self
end

function LS.del(self, key)
  for _, m in ipairs(stack_state(self).members) do TD.del(m, key) end
  return self
end

------------------------------------------------------------------------ indexing

local function is_whole(e) return type(e) == "table" and not is_tensor(e) and #e == 0 end

-- Positions (1-based) of a range entry {a, b [, step]} / {a} / {} over a dim of size n.
local function range_positions(r, n, dim)
  local a, b, step = r[1], r[2], r[3]
  if #r == 0 then a, b = 1, n elseif #r == 1 then b = a end
  step = step or 1
  if #r > 3 or not util.is_int(a) or not util.is_int(b) or not util.is_int(step) or step <= 0 then
    fail(("index: range %s for dim %d must be {a, b} or {a, b, step} with integers, step > 0")
      :format(format_list(r), dim))
  end
  if a == 0 or b == 0 then
    fail(("index: range %s for dim %d holds 0; indices are 1-based (negative from the end)")
      :format(format_list(r), dim))
  end
  if a < 0 then a = math.max(n + a + 1, 1) end
  if b < 0 then b = n + b + 1 end
  if b > n then b = n end
  local out = {}
  for p = a, b, step do out[#out + 1] = p end
  return out
end

-- Positions (1-based) picked by a 1-D index tensor (integers, negative from the end) or
-- bool mask over a dim of size n.
local function tensor_positions(t, n, dim)
  if t:dim() ~= 1 then
    fail(("index: an index tensor or mask on the stack dim must be 1-D, got shape %s"):format(format_list(t:shape())))
  end
  local out = {}
  local list = t:totable()
  if t:dtype() == "bool" then
    if #list ~= n then
      fail(("index: the mask has %d elements, the stack dim (dim %d) has %d"):format(#list, dim, n))
    end
    for p, on in ipairs(list) do
      if on then out[#out + 1] = p end
    end
  elseif t:dtype():find("int") then
    for k, p in ipairs(list) do out[k] = index.position(p, n, dim) + 1 end
  else
    fail(("index: an index tensor must hold integers or booleans, got %s"):format(t:dtype()))
  end
  return out
end

-- One entry per batch dim from key (numbers, ranges, whole dims, at most one 1-D index
-- tensor or mask; an ellipsis stands for the whole dims it covers).
local function entries_of(s, key)
  if type(key) ~= "table" or is_tensor(key) or key == index.ellipsis or key == index.newaxis then
    key = { key }
  end
  local nd = #s.members == 0 and 0 or TD.batch_dims(s.members[1]) + 1
  local ntensors, nell = 0, 0
  for _, e in ipairs(key) do
    if e == index.newaxis then
      fail("index: T.newaxis is not supported on a LazyStackedTensorDict (unsqueeze its members, or densify it first)")
    elseif e == index.ellipsis then
      nell = nell + 1
    elseif is_tensor(e) then
      if e:dim() == 0 then
        ntensors = ntensors - 1 -- a 0-dim integer tensor is its number (below)
      end
      ntensors = ntensors + 1
    elseif type(e) ~= "number" and type(e) ~= "table" then
      fail(("index: cannot index a LazyStackedTensorDict with %s"):format(describe(e)))
    end
  end
  if nell > 1 then fail("index: at most one T.ellipsis per index") end
  if ntensors > 1 then fail("index: at most one index tensor or mask per index on a LazyStackedTensorDict") end
  local given = #key - nell
  if given > nd then
    fail(("index: %d indices for a LazyStackedTensorDict of %d batch dims"):format(given, nd))
  end
  local out = {}
  for _, e in ipairs(key) do
    if e == index.ellipsis then
      for _ = 1, nd - given do out[#out + 1] = {} end
    elseif is_tensor(e) and e:dim() == 0 then
      out[#out + 1] = e:item()
    else
      out[#out + 1] = e
    end
  end
  for _ = #out + 1, nd do out[#out + 1] = {} end
  return out
end

-- What key selects: the members (positions), whether the stack dim was indexed by a
-- number (one member, no stack left), the index of the other dims for each member
-- (nil: whole) and the stack dim of the result (0-based).
local function resolve(s, key)
  local entries = entries_of(s, key)
  local here = entries[s.dim + 1]
  local rest, whole, numbers_before = {}, true, 0
  for d, e in ipairs(entries) do
    if d ~= s.dim + 1 then
      rest[#rest + 1] = e
      if not is_whole(e) then whole = false end
      if d <= s.dim and type(e) == "number" then numbers_before = numbers_before + 1 end
      if is_tensor(e) and e:dim() ~= 1 then
        fail(("index: an index tensor or mask off the stack dim must be 1-D, got shape %s")
          :format(format_list(e:shape())))
      end
    end
  end
  local n = #s.members
  local positions, single
  if type(here) == "number" then
    positions, single = { index.position(here, n, s.dim + 1) + 1 }, true
  elseif is_tensor(here) then
    positions = tensor_positions(here, n, s.dim + 1)
  else
    positions = range_positions(here, n, s.dim + 1)
  end
  return positions, single, (not whole) and rest or nil, s.dim - numbers_before
end

local function index_read(self, key)
  local s = stack_state(self)
  local positions, single, rest, dim = resolve(s, key)
  if single then
    local m = s.members[positions[1]]
    return rest and m[rest] or m
  end
  local members = {}
  for k, p in ipairs(positions) do
    local m = s.members[p]
    members[k] = rest and m[rest] or m
  end
  if #members == 0 then
    fail("index: the selection holds no member of the LazyStackedTensorDict (an empty lazy stack cannot be made)")
  end
  return new(members, dim)
end
M.index_read = index_read

-- member[at] = value, and for a member of batch size [] (no dims to index) its keys
-- written in place: the ones it has copied into (update_), the others set.
local function write_member(m, at, value)
  if TD.batch_dims(m) > 0 or at ~= index.ellipsis then
    m[at] = value
    return
  end
  if type(value) == "table" and not is_tensor(value) and not is_td(value) then value = core.construct(value) end
  if not is_td(value) then
    fail(("index assignment: a member of batch size [] takes a TensorDict or a table, got %s"):format(describe(value)))
  end
  local have, new_keys = {}, {}
  for _, k in ipairs(TD.keys(value)) do
    if TD.has(m, k) then have[#have + 1] = k else new_keys[#new_keys + 1] = k end
  end
  if #have > 0 then TD.update_(m, TD.select(value, unpack(have))) end
  for _, k in ipairs(new_keys) do TD.set(m, k, TD.get(value, k)) end
end

-- ls[idx] = value: each selected member takes its piece (index assignment into the
-- member, so fewer keys write those keys, as for TensorDicts).
local function index_write(self, key, value)
  local s = stack_state(self)
  local positions, single, rest, dim = resolve(s, key)
  local at = rest or index.ellipsis
  if single then
    write_member(s.members[positions[1]], at, value)
    return
  end
  local pieces
  if is_td(value) then pieces = TD.unbind(value, dim + 1)
  elseif is_ls(value) then pieces = M.unbind(value, dim + 1)
  elseif type(value) == "table" and not is_tensor(value) then value = core.construct(value) end
  if pieces and #pieces ~= #positions then
    fail(("index assignment: the value has %d elements along the stack dim, the selection %d members")
      :format(#pieces, #positions))
  end
  for k, p in ipairs(positions) do write_member(s.members[p], at, pieces and pieces[k] or value) end
end

local function is_key_path(key)
  if type(key) ~= "table" or getmetatable(key) ~= nil or #key == 0 then return false end
  for _, k in ipairs(key) do
    if type(k) ~= "string" then return false end
  end
  return true
end

function mt.__index(self, key)
  local method = LS[key]
  if method ~= nil then return method end
  if type(key) == "number" then -- the common ls[i] along a first stack dim: the member
    local s = stack_state(self)
    if s.dim == 0 then return s.members[index.position(key, #s.members, 1) + 1] end
  end
  if type(key) == "string" or is_key_path(key) then
    if type(key) == "string" and not LS.has(self, key) then
      local names = {}
      for name in pairs(LS) do names[#names + 1] = name end
      local near = util.nearest(key, names)
      fail(("no key '%s' in the LazyStackedTensorDict and no method of that name "
        .. "(keys every member has: %s)%s")
        :format(key, format_list(LS.keys(self)), near and (", did you mean ls:" .. near .. "()?") or ""))
    end
    local v = LS.get(self, key)
    return v
  end
  return index_read(self, key)
end

function mt.__newindex(self, key, value)
  if type(key) == "string" or is_key_path(key) then
    LS.set(self, key, value)
  else
    index_write(self, key, value)
  end
end

-- The slices along batch dim (1-based): the members themselves along the stack dim.
function M.unbind(self, dim)
  local s = stack_state(self)
  local nd = TD.batch_dims(s.members[1]) + 1
  local d = util.dim0("unbind", dim or 1, nd, 0, "%d batch dims")
  if d == s.dim then return LS.tensordicts(self) end
  local size = batch_of(s)[d + 1]
  if size == -1 then
    fail(("unbind: dim %d of the LazyStackedTensorDict differs between members (-1)"):format(d + 1))
  end
  local out = {}
  for i = 1, size do
    local key = {}
    for k = 1, nd do key[k] = k == d + 1 and i or {} end
    out[i] = index_read(self, key)
  end
  return out
end
LS.unbind = M.unbind

-- for i, td in ls:iter() do ... end: ls[1], ls[2], ... along the first batch dim.
function LS.iter(self)
  local n = #self
  local i = 0
  return function()
    i = i + 1
    if i <= n then return i, index_read(self, i) end
  end
end

return M
