-- h5/dict.lua: T.from_h5, a container over an HDF5 file (docs/h5.md). Opening reads the
-- structure only (groups, dataset shapes and dtypes); a leaf is read when first asked
-- for, and an index over the leading batch dim reads only the rows it selects (one
-- hyperslab per dataset), into an ordinary TensorDict.
local ffi = require("ffi")
local T = require("tensordict")
local util = require("tensordict.util")
local file = require("tensordict.h5.file")

local fail, describe = util.fail, util.describe
local M = {}
local H = {} -- the methods

local mt = {}
local function is_h5(x) return getmetatable(x) == mt end
M.is_h5 = is_h5

local function join(group, name) return group == "/" and "/" .. name or group .. "/" .. name end
local function shape_text(shape) return "[" .. table.concat(shape, ", ") .. "]" end

-- The longest shared prefix of the shapes (Python's auto_batch_size).
local function common_prefix(shapes)
  if #shapes == 0 then return {} end
  local out = {}
  for d = 1, math.huge do
    local v = shapes[1][d]
    if v == nil then return out end
    for i = 2, #shapes do
      if shapes[i][d] ~= v then return out end
    end
    out[d] = v
  end
end

local function starts_with(shape, prefix)
  for d = 1, #prefix do
    if shape[d] ~= prefix[d] then return false end
  end
  return true
end

-- The node of a group: its entries (name order) with what each holds, and batch size.
local function scan(f, group, batch, call)
  local node = { _f = f, _path = group, _entries = {}, _by = {}, _cache = {} }
  local shapes, described = {}, {}
  for _, child in ipairs(file.children(f, group, call)) do
    local path = join(group, child.name)
    local e
    if child.kind == "group" then
      e = { name = child.name, kind = "group", node = scan(f, path, nil, call) }
      shapes[#shapes + 1] = e.node._batch
      described[#described + 1] = path .. " (group) " .. shape_text(e.node._batch)
    elseif child.kind == "dataset" then
      local info = file.info(f, path, call)
      e = { name = child.name, kind = info.content, info = info }
      if info.content == "tensor" then
        shapes[#shapes + 1] = info.shape
        described[#described + 1] = path .. " " .. shape_text(info.shape)
      end
    end
    if e then
      node._entries[#node._entries + 1] = e
      node._by[child.name] = e
    end
  end
  if batch then
    for _, s in ipairs(shapes) do
      if not starts_with(s, batch) then
        fail(("%s: batch_size %s does not fit group %s: its datasets do not all start with it: %s")
          :format(call, shape_text(batch), group, table.concat(described, ", ")))
      end
    end
    node._batch = batch
  else
    node._batch = common_prefix(shapes)
  end
  return (setmetatable(node, mt))
end

local OPTS = { mode = "string", batch_size = "table", group = "string" }

-- T.from_h5(path [, {mode = "r" | "r+", batch_size =, group =}])
function M.from_h5(path, opts)
  if type(path) ~= "string" or path == "" then
    fail(("from_h5: path must be a non-empty string, got %s"):format(describe(path)))
  end
  opts = util.options("from_h5", opts, OPTS)
  local mode = opts.mode or "r"
  if mode ~= "r" and mode ~= "r+" then fail(("from_h5: mode must be 'r' or 'r+', got %s"):format(describe(mode))) end
  local batch
  if opts.batch_size then
    batch = {}
    for i, v in ipairs(opts.batch_size) do
      if not util.is_int(v) or v < 0 then
        fail(("from_h5: batch_size must be a list of non-negative integers, got %s"):format(describe(v)))
      end
      batch[i] = v
    end
  end
  local group = opts.group or "/"
  if group:sub(1, 1) ~= "/" then group = "/" .. group end
  local f = file.open("from_h5", path, mode == "r+")
  local kids = group == "/" or pcall(file.children, f, group, "from_h5")
  if not kids then fail(("from_h5: %s has no group %s"):format(path, group)) end
  return (scan(f, group, batch, "from_h5"))
end

function H.keys(self)
  local out = {}
  for i, e in ipairs(self._entries) do out[i] = e.name end
  return out
end

function H.batch_size(self)
  local out = {}
  for i, v in ipairs(self._batch) do out[i] = v end
  return out
end

function H.path(self) return self._f.path, self._path end
function H.is_h5() return true end

-- The entry at key (a name, "a.b" is a name; a table of names is a path), or nil.
local function entry(self, key, call)
  if type(key) == "string" then return self._by[key], self end
  if type(key) ~= "table" or #key == 0 then
    fail(("%s: key must be a string or a non-empty table of strings, got %s"):format(call, describe(key)))
  end
  local node = self
  for i = 1, #key - 1 do
    local e = node._by[key[i]]
    if not e or e.kind ~= "group" then return nil, node end
    node = e.node
  end
  return node._by[key[#key]], node
end

local function key_text(key) return type(key) == "table" and table.concat(key, ".") or key end

local function read_entry(node, e, call)
  if e.kind == "group" then return e.node end
  local path = join(node._path, e.name)
  if e.kind == "string" then return (file.read_strings(node._f, path, e.info, call)) end
  local first = e.info.shape[1]
  return (file.read_rows(node._f, path, e.info, 0, first, call))
end

-- h:get(key [, default]): the leaf read whole (a tensor, cached), a nested container
-- (a group), or a string (a string dataset).
function H.get(self, key, ...)
  local e, node = entry(self, key, "get")
  if not e then
    if select("#", ...) > 0 then return (...) end
    fail(("get: no key %s in %s:%s (keys: %s)"):format(describe(key_text(key)), self._f.path, self._path,
      table.concat(H.keys(node), ", ")))
  end
  local v = node._cache[e.name]
  if v == nil then
    v = read_entry(node, e, "get")
    node._cache[e.name] = v
  end
  return v
end

local function leaf_info(self, key, call)
  local e = entry(self, key, call)
  if not e or e.kind ~= "tensor" then
    fail(("%s: %s is not a tensor dataset of %s"):format(call, describe(key_text(key)), self._f.path))
  end
  return e.info
end

function H.shape(self, key) return { unpack(leaf_info(self, key, "shape").shape) } end
-- h:kind(key): "group", "tensor" or "string" (nil when absent), without reading.
function H.kind(self, key)
  local e = entry(self, key, "kind")
  return e and e.kind or nil
end
function H.dtype(self, key) return leaf_info(self, key, "dtype").dtype end
-- h:chunks(key): the dataset's chunk dims, or nil when it is contiguous.
function H.chunks(self, key) return leaf_info(self, key, "chunks").chunk end

-- h:attrs([key]): the HDF5 attributes of the group (or of the entry at key), as Lua
-- values; Python tensordict's own markers are left out.
function H.attrs(self, key)
  local path = self._path
  if key ~= nil then
    local e, node = entry(self, key, "attrs")
    if not e then fail(("attrs: no key %s in %s"):format(describe(key_text(key)), self._f.path)) end
    path = join(node._path, e.name)
  end
  local out = file.attrs(self._f, path, "attrs")
  out.__tensordict_str__, out.__tensordict_stack__ = nil, nil
  return out
end

-- A TensorDict of rows [row0, row0 + n) of every leaf (nil: whole leaves, 0-dim batch).
local function read_td(node, row0, n, rows, call)
  local batch = H.batch_size(node)
  if n then batch[1] = n end
  local out = T.TensorDict({}, batch)
  for _, e in ipairs(node._entries) do
    local path = join(node._path, e.name)
    if e.kind == "group" then
      out:set(e.name, read_td(e.node, row0, n, rows, call))
    elseif e.kind == "string" then
      out:set_non_tensor(e.name, file.read_strings(node._f, path, e.info, call))
    elseif not n then
      out:set(e.name, node._cache[e.name] or file.read_rows(node._f, path, e.info, 0, e.info.shape[1], call))
    elseif rows then
      out:set(e.name, file.read_index(node._f, path, e.info, rows, n, call))
    else
      out:set(e.name, file.read_rows(node._f, path, e.info, row0, n, call))
    end
  end
  return out
end

-- h:to_tensordict(): every leaf read, as a TensorDict.
function H.to_tensordict(self)
  if #self._batch == 0 then return (read_td(self, nil, nil, nil, "to_tensordict")) end
  return (read_td(self, 0, self._batch[1], nil, "to_tensordict"))
end

-- h:read_rows(row0, n): rows row0 .. row0 + n - 1 (1-based) as a TensorDict.
function H.read_rows(self, row0, n)
  local size = self._batch[1]
  if not size then fail("read_rows: the container has no batch dims") end
  if not util.is_int(row0) or not util.is_int(n) or n < 0 or row0 < 1 or row0 + n - 1 > size then
    fail(("read_rows: rows %s .. +%s are outside 1 .. %d"):format(describe(row0), describe(n), size))
  end
  return (read_td(self, row0 - 1, n, nil, "read_rows"))
end

-- h:read_index(rows): the listed rows (a Lua array of 1-based row numbers).
function H.read_index(self, rows)
  local size = self._batch[1]
  if not size then fail("read_index: the container has no batch dims") end
  if type(rows) ~= "table" then fail(("read_index: rows must be a Lua array, got %s"):format(describe(rows))) end
  local n = #rows
  local buf = ffi.new("int64_t[?]", math.max(n, 1))
  for i = 1, n do
    local r = rows[i]
    if not util.is_int(r) or r < 1 or r > size then
      fail(("read_index: row %s is outside 1 .. %d"):format(describe(r), size))
    end
    buf[i - 1] = r - 1
  end
  return (read_td(self, nil, n, buf, "read_index"))
end

-- Normalises a range entry {a, b [, step]} over size rows as the index grammar does.
local function range_rows(r, size)
  local a, b, step = r[1] or 1, r[2] or r[1] or size, r[3] or 1
  if not (util.is_int(a) and util.is_int(b) and util.is_int(step)) or step < 1 then return nil end
  if a < 0 then a = size + a + 1 end
  if b < 0 then b = size + b + 1 end
  a, b = math.max(a, 1), math.min(b, size)
  return a, b, step
end

-- h[idx]: the index grammar over the batch dims; the leading dim is read as the rows it
-- selects (a number, a range {a, b [, step]}, an int64 index tensor), the rest of the
-- index applied to those rows. Other forms (masks, ellipsis) read everything first.
function H.index(self, idx)
  if type(idx) == "table" and type(rawget(idx, 1)) == "string" then return (H.get(self, idx)) end -- a key path
  local size = self._batch[1]
  if not size then return (H.to_tensordict(self)[idx]) end
  local first, rest = idx, {}
  if type(idx) == "table" and not T.is_tensor(idx) then
    first = idx[1]
    for i = 2, #idx do rest[#rest + 1] = idx[i] end
    if #idx == 0 then return (H.to_tensordict(self)) end
  end
  local function with(head)
    local t = { head }
    for i = 1, #rest do t[#t + 1] = rest[i] end
    return t
  end
  if util.is_int(first) then
    local i = first < 0 and size + first + 1 or first
    if i < 1 or i > size then fail(("index: %d is out of range for a batch dim of size %d"):format(first, size)) end
    return (read_td(self, i - 1, 1, nil, "index")[with(1)])
  elseif type(first) == "table" and not T.is_tensor(first) and rawget(first, 1) ~= nil then
    local a, b, step = range_rows(first, size)
    if a then
      local n = math.max(b - a + 1, 0)
      local td = read_td(self, n > 0 and a - 1 or 0, n, nil, "index")
      if step == 1 and #rest == 0 then return td end
      return (td[with({ 1, n, step })])
    end
  elseif T.is_tensor(first) and first:dtype() == "int64" and first:dim() == 1 then
    local rows = {}
    local list = first:tolist()
    for i, r in ipairs(list) do rows[i] = r < 0 and size + r + 1 or r end
    local td = H.read_index(self, rows)
    return #rest == 0 and td or (td[with({})])
  end
  return (H.to_tensordict(self)[idx])
end

-- h:set(key, value) in "r+" mode: a new dataset (a tensor starting with the batch size)
-- or string, written at once.
function H.set(self, key, value)
  if not self._f.writable then
    fail(("set: %s is open read-only (from_h5 with mode = 'r+' writes)"):format(self._f.path))
  end
  if type(key) ~= "string" or key == "" or key:find("/", 1, true) then
    fail(("set: key must be a non-empty string without '/', got %s"):format(describe(key)))
  end
  if self._by[key] then fail(("set: %s already holds %s"):format(self._f.path, join(self._path, key))) end
  local save = require("tensordict.h5.save")
  local td = T.TensorDict({}, H.batch_size(self))
  if type(value) == "string" then td:set_non_tensor(key, value) else td:set(key, value) end
  save.write_entries(self._f, self._path, td, {}, "set")
  local node = scan(self._f, self._path, self._batch, "set")
  self._entries, self._by = node._entries, node._by
  return self
end

-- h:select(keys...): a container over the same file with only these entries (names
-- or key paths: a path keeps the groups on its way with only what it names).
function H.select(self, ...)
  local keys = { ... }
  if #keys == 1 and type(keys[1]) == "table" and type(keys[1][1]) == "table" then keys = keys[1] end
  local out = setmetatable({ _f = self._f, _path = self._path, _batch = self._batch, _entries = {}, _by = {},
    _cache = self._cache }, mt)
  for _, key in ipairs(keys) do
    local path = type(key) == "table" and key or { key }
    local e = entry(self, path, "select")
    if not e then
      fail(("select: no key %s in %s (keys: %s)"):format(describe(key_text(key)), self._f.path,
        table.concat(H.keys(self), ", ")))
    end
    local head = self._by[path[1]]
    local kept = out._by[head.name]
    if #path == 1 or head.kind ~= "group" then
      kept = head
    else
      local rest = { unpack(path, 2) }
      local sub = kept and kept.node or nil
      local picked = H.select(head.node, rest)
      if sub and sub ~= head.node then
        for _, pe in ipairs(picked._entries) do
          if not sub._by[pe.name] then sub._entries[#sub._entries + 1] = pe; sub._by[pe.name] = pe end
        end
        picked = sub
      end
      kept = { name = head.name, kind = "group", node = picked }
    end
    if not out._by[head.name] then out._entries[#out._entries + 1] = kept end
    for i, pe in ipairs(out._entries) do
      if pe.name == head.name then out._entries[i] = kept end
    end
    out._by[head.name] = kept
  end
  table.sort(out._entries, function(a, b) return a.name < b.name end)
  return out
end

function H.close(self) file.close(self._f) end

mt.__index = function(self, k)
  local m = H[k]
  if m ~= nil then return m end
  if type(k) == "string" then return nil end
  return (H.index(self, k))
end

mt.__tostring = function(self)
  local parts = {}
  for _, e in ipairs(self._entries) do
    if e.kind == "group" then
      parts[#parts + 1] = e.name .. ": {...}"
    elseif e.kind == "string" then
      parts[#parts + 1] = e.name .. ": str"
    else
      parts[#parts + 1] = ("%s: %s%s"):format(e.name, e.info.dtype, shape_text(e.info.shape))
    end
  end
  return ("H5TensorDict(%s:%s, batch_size=%s, fields={%s})"):format(self._f.path, self._path,
    shape_text(self._batch), table.concat(parts, ", "))
end

return M
