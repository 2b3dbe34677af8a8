-- json.lua: a small, strict JSON codec in pure Lua (RFC 8259), for TensorDict's non-tensor leaves.
--
-- Why it exists: a TensorDict holds tensors and, beside them, non-tensor leaves (strings,
-- numbers, flags, small nested tables). Python tensordict keeps such leaves as NonTensorData
-- and writes them as JSON into meta.json when it saves to disk; we keep them as JSON text
-- too, so the metadata reads the same on either side. The codec is strict (every error
-- names the problem and where: a path for encode, a byte offset for decode) and
-- deterministic (compact separators, object keys sorted), so equal values give equal text.
--
-- Mapping, Lua <-> JSON:
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
local byte, char, find, format, sub, gsub = string.byte, string.char, string.find, string.format,
  string.sub, string.gsub
local concat, sort = table.concat, table.sort
local floor, huge = math.floor, math.huge
local type, next, getmetatable, setmetatable, tonumber, error = type, next, getmetatable, setmetatable,
  tonumber, error

local MAX_DEPTH = 1000

local M = {}

local null = setmetatable({}, {
  __tostring = function() return "json.null" end,
  __newindex = function() error("json: json.null is read-only", 2) end,
})
local object_mt = {}
M.null, M.object_mt = null, object_mt

---------------------------------------------------------------------------------------------
-- Encoding

local ESCAPE = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
  ["\r"] = "\\r", ["\t"] = "\\t" }
for i = 0, 31 do
  local c = char(i)
  if not ESCAPE[c] then ESCAPE[c] = format("\\u%04x", i) end
end
local ESCAPE_PAT = '[%z\1-\031"\\]'

-- A byte loop finds the first byte to escape: compiled by the JIT it is far faster than a
-- pattern with a character class, and most strings have nothing to escape.
local function quote(s)
  for i = 1, #s do
    local b = byte(s, i)
    if b < 32 or b == 34 or b == 92 then return '"' .. gsub(s, ESCAPE_PAT, ESCAPE) .. '"' end
  end
  return '"' .. s .. '"'
end

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

-- Per-call state of encode: output pieces, tables on the current path, keys of that path.
local buf, nbuf, visiting, keys

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

local function number_text(v, depth)
  if v ~= v then cannot("NaN", depth) end
  if v == huge or v == -huge then cannot(v > 0 and "inf" or "-inf", depth) end
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
    nbuf = nbuf + 1
    buf[nbuf] = getmetatable(t) == object_mt and "{}" or "[]"
    return
  end
  local n, problem = classify(t)
  if not n then cannot(problem, depth) end
  visiting[t] = true
  local inner = depth + 1
  if n > 0 then
    nbuf = nbuf + 1
    buf[nbuf] = "["
    for i = 1, n do
      if i > 1 then
        nbuf = nbuf + 1
        buf[nbuf] = ","
      end
      keys[inner] = i
      encode_value(t[i], inner)
    end
    nbuf = nbuf + 1
    buf[nbuf] = "]"
  else
    local names, m = {}, 0
    for k in next, t do
      m = m + 1
      names[m] = k
    end
    sort(names)
    for i = 1, m do
      local k = names[i]
      nbuf = nbuf + 1
      buf[nbuf] = (i == 1 and "{" or ",") .. quote(k) .. ":"
      keys[inner] = k
      encode_value(t[k], inner)
    end
    nbuf = nbuf + 1
    buf[nbuf] = "}"
  end
  visiting[t] = nil
end

encode_value = function(v, depth)
  local tv = type(v)
  local s
  if tv == "string" then
    s = quote(v)
  elseif tv == "number" then
    s = number_text(v, depth)
  elseif tv == "boolean" then
    s = v and "true" or "false"
  elseif v == null or v == nil then
    s = "null"
  elseif tv == "table" then
    return encode_table(v, depth)
  else
    cannot("a " .. tv, depth)
  end
  nbuf = nbuf + 1
  buf[nbuf] = s
end

function M.encode(value)
  buf, nbuf, visiting, keys = {}, 0, {}, {}
  encode_value(value, 0)
  local text = concat(buf, "", 1, nbuf)
  buf, visiting, keys = nil, nil, nil
  return text
end

---------------------------------------------------------------------------------------------
-- Decoding

-- Per-call state of decode: the text, its length, and where the next quote and the next
-- backslash are at or after the last place looked (len + 1: none there). Plain finds are the
-- fastest scans there are, and with these they never look at a byte twice.
local str, len, next_quote, next_backslash

local function fail(what, pos)
  error(format("json: %s at byte %d", what, pos), 0)
end

-- "expected X but found Y at byte N", or "unexpected end of input at byte N".
local function unexpected(expected, pos)
  local b = byte(str, pos)
  if not b then fail("unexpected end of input", pos) end
  local found = (b >= 32 and b < 127) and "'" .. char(b) .. "'" or format("byte 0x%02x", b)
  fail("expected " .. expected .. " but found " .. found, pos)
end

local function skip(pos)
  local b = byte(str, pos)
  if b == 32 or b == 9 or b == 10 or b == 13 then
    return find(str, "[^ \t\n\r]", pos + 1) or len + 1
  end
  return pos
end

local UNESCAPE = { [34] = '"', [92] = "\\", [47] = "/", [98] = "\b", [102] = "\f", [110] = "\n",
  [114] = "\r", [116] = "\t" }

local function hex4(pos)
  local h = sub(str, pos, pos + 3)
  if find(h, "^%x%x%x%x$") then return tonumber(h, 16) end
end

local function utf8(cp)
  if cp < 0x80 then return char(cp) end
  if cp < 0x800 then return char(0xC0 + floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return char(0xE0 + floor(cp / 0x1000), 0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
  end
  return char(0xF0 + floor(cp / 0x40000), 0x80 + floor(cp / 0x1000) % 0x40,
    0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

-- The \u escape whose backslash is at pos: its UTF-8 text and the position after it.
local function unicode_escape(pos)
  local cp = hex4(pos + 2)
  if not cp then fail("invalid \\u escape", pos) end
  if cp >= 0xD800 and cp <= 0xDFFF then
    local lo = cp <= 0xDBFF and sub(str, pos + 6, pos + 7) == "\\u" and hex4(pos + 8)
    if not lo or lo < 0xDC00 or lo > 0xDFFF then fail("unpaired surrogate", pos) end
    return utf8(0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)), pos + 12
  end
  return utf8(cp), pos + 6
end

local function no_control(from, to)
  for i = from, to do
    if byte(str, i) < 32 then fail("control character in string", i) end
  end
end

-- The string whose opening quote is at pos, and the position after its closing quote.
local function parse_string(pos)
  local from = pos + 1
  local parts, n
  while true do
    local q, bs = next_quote, next_backslash
    if q < from then
      q = find(str, '"', from, true) or len + 1
      next_quote = q
    end
    if bs < from then
      bs = find(str, "\\", from, true) or len + 1
      next_backslash = bs
    end
    if q < bs then
      no_control(from, q - 1)
      if q > len then fail("unterminated string", pos) end
      if not parts then return sub(str, from, q - 1), q + 1 end
      n = n + 1
      parts[n] = sub(str, from, q - 1)
      return concat(parts, "", 1, n), q + 1
    end
    no_control(from, bs - 1)
    if bs > len then fail("unterminated string", pos) end
    if not parts then parts, n = {}, 0 end
    if bs > from then
      n = n + 1
      parts[n] = sub(str, from, bs - 1)
    end
    local e = byte(str, bs + 1)
    local plain = UNESCAPE[e]
    n = n + 1
    if plain then
      parts[n] = plain
      from = bs + 2
    elseif e == 117 then
      parts[n], from = unicode_escape(bs)
    elseif not e then
      fail("unterminated string", pos)
    elseif e > 32 and e < 127 then
      fail("invalid escape '\\" .. char(e) .. "'", bs)
    else
      fail("invalid escape", bs)
    end
  end
end

-- The number starting at pos (a '-' or a digit), and the position after it.
local function parse_number(pos)
  local p = pos
  if byte(str, p) == 45 then p = p + 1 end
  local b = byte(str, p)
  if b == 48 then
    p = p + 1
    b = byte(str, p)
    if b and b >= 48 and b <= 57 then fail("leading zero in number", pos) end
  elseif b and b >= 49 and b <= 57 then
    p = find(str, "%D", p + 1) or len + 1
  else
    fail("invalid number", pos)
  end
  if byte(str, p) == 46 then
    local q = find(str, "%D", p + 1) or len + 1
    if q == p + 1 then fail("invalid number", pos) end
    p = q
  end
  b = byte(str, p)
  if b == 101 or b == 69 then
    p = p + 1
    b = byte(str, p)
    if b == 43 or b == 45 then p = p + 1 end
    local q = find(str, "%D", p) or len + 1
    if q == p then fail("invalid number", pos) end
    p = q
  end
  return tonumber(sub(str, pos, p - 1)), p
end

local parse_value

local function too_deep(depth, pos)
  if depth > MAX_DEPTH then fail(format("nesting deeper than %d levels", MAX_DEPTH), pos) end
end

local function parse_array(pos, depth)
  too_deep(depth, pos)
  local t, n = {}, 0
  pos = skip(pos + 1)
  if byte(str, pos) == 93 then return t, pos + 1 end
  while true do
    local v
    v, pos = parse_value(pos, depth)
    n = n + 1
    t[n] = v
    pos = skip(pos)
    local b = byte(str, pos)
    if b == 93 then return t, pos + 1 end
    if b ~= 44 then unexpected("',' or ']'", pos) end
    pos = skip(pos + 1)
  end
end

local function parse_object(pos, depth)
  too_deep(depth, pos)
  local t = setmetatable({}, object_mt)
  pos = skip(pos + 1)
  if byte(str, pos) == 125 then return t, pos + 1 end
  while true do
    if byte(str, pos) ~= 34 then unexpected("a string key", pos) end
    local k, v
    k, pos = parse_string(pos)
    pos = skip(pos)
    if byte(str, pos) ~= 58 then unexpected("':'", pos) end
    v, pos = parse_value(skip(pos + 1), depth)
    t[k] = v
    pos = skip(pos)
    local b = byte(str, pos)
    if b == 125 then return t, pos + 1 end
    if b ~= 44 then unexpected("',' or '}'", pos) end
    pos = skip(pos + 1)
  end
end

-- The value starting at pos (not whitespace), and the position after it.
parse_value = function(pos, depth)
  local b = byte(str, pos)
  if b == 34 then return parse_string(pos) end
  if b == 123 then return parse_object(pos, depth + 1) end
  if b == 91 then return parse_array(pos, depth + 1) end
  if b == 45 then
    if sub(str, pos + 1, pos + 8) == "Infinity" then return -huge, pos + 9 end
    return parse_number(pos)
  end
  if b and b >= 48 and b <= 57 then return parse_number(pos) end
  if b == 116 then
    if sub(str, pos, pos + 3) == "true" then return true, pos + 4 end
  elseif b == 102 then
    if sub(str, pos, pos + 4) == "false" then return false, pos + 5 end
  elseif b == 110 then
    if sub(str, pos, pos + 3) == "null" then return null, pos + 4 end
  elseif b == 78 then
    if sub(str, pos, pos + 2) == "NaN" then return 0 / 0, pos + 3 end
  elseif b == 73 then
    if sub(str, pos, pos + 7) == "Infinity" then return huge, pos + 8 end
  end
  unexpected("a value", pos)
end

function M.decode(text)
  if type(text) ~= "string" then error("json: decode expects a string, got " .. type(text), 0) end
  str, len, next_quote, next_backslash = text, #text, 0, 0
  local value, pos = parse_value(skip(1), 0)
  pos = skip(pos)
  if pos <= len then fail("trailing garbage", pos) end
  str = nil
  return value
end

return M
