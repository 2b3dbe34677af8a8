-- json.lua: JSON for Lua values, through the library's one JSON layer in C
-- (core/src/json*.c), which also reads and writes the memmap and consolidated metadata.
--
-- Why it exists: a TensorDict holds tensors and, beside them, non-tensor leaves (strings,
-- numbers, flags, small nested tables). Python tensordict keeps such leaves as NonTensorData
-- and writes them as JSON into meta.json when it saves to disk; we keep them as JSON text
-- too, so the metadata reads the same on either side. The codec is strict (every error
-- names the problem and where: a path for encode, a byte for decode) and deterministic
-- (compact separators, object keys sorted), so equal values give equal text.
--
-- C parses and Lua walks the tree with a few accessors (C never calls Lua); to encode, Lua
-- walks its tables (only it can) and C writes every piece, so a value's text is the same
-- whether Lua or the C loaders wrote it.
--
-- Mapping, Lua <-> JSON (encode, decode):
--   table with keys exactly 1..n (n >= 1)  <-> array (decoded arrays are plain tables)
--   table with only string keys            <-> object (decoded objects get M.object_mt)
--   empty table                             -> [], or {} when it carries M.object_mt
--   M.null (and a bare encode(nil))        <-> null
--   string, boolean, finite number         <-> themselves
-- Numbers: integers in [-2^53, 2^53] print without a decimal point ("3", "-0"); other
-- numbers print in the fewest of 15, 16, 17 significant digits that read back exactly.
-- NaN and infinities never encode, but decode accepts Python's NaN, Infinity, -Infinity.
-- Strings pass UTF-8 through untouched (not validated); only '"', '\' and bytes below
-- 0x20 are escaped. Nesting is limited to 1000 levels both ways. Error paths use Lua
-- keys: `.a[2]` is t.a[2] (1-based), `["a b"]` a key that is not an identifier, `.` the root.
-- All errors are raised with error(msg, 0) and msg starts with "json: ".
--
-- M.read is decode for documents people write (recipes): null is nil, arrays carry
-- M.array_mt, keys given twice are reported, and errors name the line and column.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local find, format = string.find, string.format
local concat, sort = table.concat, table.sort
local huge = math.huge
local type, next, getmetatable, setmetatable, error, tonumber = type, next, getmetatable,
  setmetatable, error, tonumber
local ffi_string = ffi.string

local MAX_DEPTH = 1000

local M = {}

local null = setmetatable({}, {
  __tostring = function() return "json.null" end,
  __newindex = function() error("json: json.null is read-only", 2) end,
})
local object_mt = {}
M.null, M.object_mt = null, object_mt
-- Arrays read by M.read carry it, so that an empty list and an empty object differ.
M.array_mt = { __name = "json array" }

local len_out = ffi.new("int64_t[1]")

---------------------------------------------------------------------------------------------
-- Encoding

local writer = ffi.gc(C.td_json_writer_new(), C.td_json_writer_free)
local write_open, write_close, write_key = C.td_json_write_open, C.td_json_write_close,
  C.td_json_write_key
local write_raw, write_string = C.td_json_write_raw, C.td_json_write_string

-- Sorts a table's keys out: the array length n, 0 for an object, or nil and what is wrong.
local function classify(t)
  local count, strings, ints, max = 0, 0, 0, 0
  for k in next, t do
    count = count + 1
    local tk = type(k)
    if tk == "string" then
      strings = strings + 1
    elseif tk == "number" and k >= 1 and k % 1 == 0 then
      ints = ints + 1
      if k > max then max = k end
    end
  end
  if strings == count then return 0 end
  if ints == count then
    if max == count then return count end
    return nil, "a sparse array (integer keys not 1..n)"
  end
  return nil, "a table with mixed or non-string keys"
end

function M.is_array(t)
  if type(t) ~= "table" then return false end
  local n = classify(t)
  return n ~= nil and n > 0
end

-- State of encode: tables on the current path, keys of that path. Both are empty again
-- when encode returns; after an error, encode starts from new ones.
local visiting, keys, clean = {}, {}, true

-- A key as the error paths write it: quoted the way encode writes strings.
local function quote(k)
  C.td_json_writer_reset(writer)
  write_string(writer, k, #k)
  return (ffi_string(C.td_json_writer_text(writer, len_out), len_out[0]))
end

local function path(depth)
  if depth == 0 then return "." end
  local parts = {}
  for i = 1, depth do
    local k = keys[i]
    if type(k) == "number" then
      parts[i] = format("[%d]", k)
    elseif find(k, "^[%a_][%w_]*$") then
      parts[i] = "." .. k
    else
      parts[i] = "[" .. quote(k) .. "]"
    end
  end
  return concat(parts)
end

local function cannot(what, depth)
  error("json: cannot encode " .. what .. " at " .. path(depth), 0)
end

-- A finite number's literal: integers in [-2^53, 2^53] without a decimal point, others in
-- the fewest of 15, 16, 17 significant digits that read back exactly. (Lua formats its
-- numbers: LuaJIT does it several times faster than C's printf.)
local function number_text(v)
  if v % 1 == 0 and v >= -9007199254740992 and v <= 9007199254740992 then
    if v == 0 and 1 / v < 0 then return "-0" end
    return format("%d", v)
  end
  local s = format("%.15g", v)
  if tonumber(s) ~= v then
    s = format("%.16g", v)
    if tonumber(s) ~= v then s = format("%.17g", v) end
  end
  return s
end

local encode_value

local function encode_table(t, depth)
  if visiting[t] then cannot("a circular reference", depth) end
  if depth >= MAX_DEPTH then
    error(format("json: nesting deeper than %d levels at %s", MAX_DEPTH, path(depth)), 0)
  end
  if next(t) == nil then
    write_raw(writer, getmetatable(t) == object_mt and "{}" or "[]", 2)
    return
  end
  local n, problem = classify(t)
  if not n then cannot(problem, depth) end
  visiting[t] = true
  local inner = depth + 1
  if n > 0 then
    write_open(writer, 0)
    for i = 1, n do
      keys[inner] = i
      encode_value(t[i], inner)
    end
    write_close(writer, 0)
  else
    local names, m = {}, 0
    for k in next, t do
      m = m + 1
      names[m] = k
    end
    sort(names)
    write_open(writer, 1)
    for i = 1, m do
      local k = names[i]
      write_key(writer, k, #k)
      keys[inner] = k
      encode_value(t[k], inner)
    end
    write_close(writer, 1)
  end
  visiting[t] = nil
end

encode_value = function(v, depth)
  local tv = type(v)
  if tv == "string" then
    write_string(writer, v, #v)
  elseif tv == "number" then
    if v ~= v then cannot("NaN", depth) end
    if v == huge or v == -huge then cannot(v > 0 and "inf" or "-inf", depth) end
    local text = number_text(v)
    write_raw(writer, text, #text)
  elseif tv == "boolean" then
    if v then write_raw(writer, "true", 4) else write_raw(writer, "false", 5) end
  elseif v == null or v == nil then
    write_raw(writer, "null", 4)
  elseif tv == "table" then
    encode_table(v, depth)
  else
    cannot("a " .. tv, depth)
  end
end

function M.encode(value)
  if not clean then visiting, keys = {}, {} end
  clean = false
  C.td_json_writer_reset(writer)
  encode_value(value, 0)
  clean = true
  local p = C.td_json_writer_text(writer, len_out)
  if p == nil then error("json: " .. ffi_string(C.td_last_error()), 0) end
  return (ffi_string(p, len_out[0]))
end

---------------------------------------------------------------------------------------------
-- Decoding

local T_NULL, T_FALSE, T_TRUE = C.TD_JSON_NULL, C.TD_JSON_FALSE, C.TD_JSON_TRUE
local T_NUMBER, T_STRING, T_ARRAY = C.TD_JSON_NUMBER, C.TD_JSON_STRING, C.TD_JSON_ARRAY
local T_OBJECT = C.TD_JSON_OBJECT

-- The open containers while items are read: table, items still to come, next array index,
-- and for M.read the path. A loop, not a recursion, so that the JIT compiles it.
local open_t, open_left, open_n, open_path = {}, {}, {}, {}

-- The value of the document's items. document: M.read's conventions (null is nil, arrays
-- carry array_mt, keys given twice go to duplicates); else json.decode's.
-- The value of an item: a scalar, or an empty table for an array or object.
local function value_of(it, t, document)
  if t == T_STRING then return (ffi_string(it.text, it.text_len)) end
  if t == T_NUMBER then return it.number end
  if t == T_TRUE then return true end
  if t == T_FALSE then return false end
  if t == T_ARRAY then return document and setmetatable({}, M.array_mt) or {} end
  if t == T_OBJECT then return document and {} or setmetatable({}, object_mt) end
  if t == T_NULL and not document then return null end
  return nil -- null in a document
end

-- An integer literal of more than 15 digits that a double does not hold exactly (past
-- 2^53 = 9007199254740992) goes into inexact as {path =, literal =, value =}.
local function check_exact(it, v, at, inexact)
  local literal = ffi_string(it.text, it.text_len)
  if find(literal, "^%-?%d+$") and format("%.0f", v) ~= literal and literal ~= "-0" then
    inexact[#inexact + 1] = { path = at, literal = literal, value = v }
  end
end

local function build(items, count, document, duplicates, inexact)
  -- one item: no loop (a loop run once per call is one the JIT gives up on)
  if count == 1 then
    local it = items[0]
    if inexact and it.type == T_NUMBER and it.text_len > 15 then check_exact(it, it.number, "", inexact) end
    return value_of(it, it.type, document)
  end
  local root, depth = nil, 0
  for i = 0, count - 1 do
    local it = items[i]
    local t = it.type
    local v = value_of(it, t, document)
    local here
    if depth == 0 then
      root = v
    else
      local parent, n = open_t[depth], open_n[depth]
      if n then -- an array
        n = n + 1
        open_n[depth] = n
        parent[n] = v
        if document then here = open_path[depth] .. "[" .. n .. "]" end
      else
        local key = ffi_string(it.key, it.key_len)
        if document then
          local at = open_path[depth]
          here = at == "" and key or (at .. "." .. key)
          if parent[key] ~= nil then duplicates[#duplicates + 1] = here end
        end
        parent[key] = v
      end
      open_left[depth] = open_left[depth] - 1
    end
    if inexact and t == T_NUMBER and it.text_len > 15 then check_exact(it, v, here or "", inexact) end
    if (t == T_ARRAY or t == T_OBJECT) and it.count > 0 then
      depth = depth + 1
      open_t[depth], open_left[depth] = v, it.count
      open_n[depth] = t == T_ARRAY and 0 or false
      if document then open_path[depth] = here or "" end
    end
    while depth > 0 and open_left[depth] == 0 do
      open_t[depth] = nil
      depth = depth - 1
    end
  end
  return root
end

local reader = ffi.gc(C.td_json_reader_new(), C.td_json_reader_free)

-- Parses text (flags: C.TD_JSON_LINES for line-and-column messages): true and the value,
-- or false and the message.
local function parse(text, flags, document, duplicates, inexact)
  local items = C.td_json_reader_parse(reader, text, #text, flags, len_out)
  if items == nil then return false, ffi_string(C.td_last_error()) end
  -- (build raises only when Lua runs out of memory; the next parse clears the reader)
  local value = build(items, tonumber(len_out[0]), document, duplicates, inexact)
  C.td_json_reader_clear(reader)
  return true, value
end

function M.decode(text)
  if type(text) ~= "string" then error("json: decode expects a string, got " .. type(text), 0) end
  local ok, value = parse(text, 0, false)
  if not ok then error("json: " .. value, 0) end
  return value
end

-- read(text, what) -> value, duplicates, inexact. duplicates: paths of keys given twice
-- in an object (the last one is kept, and callers such as recipes report them);
-- inexact: the integers past 2^53 that a double cannot hold exactly, {path =, literal =,
-- value =} (M.inexact_text says it), which a recipe must not take silently rounded. A
-- syntax error raises "tensordict: <what>: line 3, column 14: invalid JSON near '...'"; a
-- text people write must be UTF-8, so a raw byte that is not raises "line 2, column 12:
-- invalid UTF-8 in a string (byte 0xff) near '...'" now, not later as a key no file can
-- be named after.
function M.read(text, what)
  if type(text) ~= "string" then
    util.fail(("%s: expected JSON text, got %s"):format(what or "json", util.describe(text)))
  end
  local duplicates, inexact = {}, {}
  local ok, value = parse(text, bit.bor(C.TD_JSON_LINES, C.TD_JSON_UTF8), true, duplicates, inexact)
  if not ok then util.fail(("%s: %s"):format(what or "json", value)) end
  return value, duplicates, inexact
end

-- "steps[2].n: 9007199254740993 is an integer that a double cannot hold exactly ..."
function M.inexact_text(at)
  return ("%s%s is an integer that a double cannot hold exactly (it would be read as %.0f); integers "
    .. "are exact up to 2^53 = 9007199254740992"):format(at.path ~= "" and (at.path .. ": ") or "", at.literal,
    at.value)
end

return M
