-- repl/show.lua: how tdrepl prints values. Tensors and TensorDicts print with their
-- own tostring; an array of integers is a shape and prints as [3, 4]; other tables
-- print as short Lua constructors (bounded depth and length, cycles marked), so a
-- stray large table cannot flood the terminal.
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")

local M = {}

M.MAX_ITEMS = 30 -- entries shown per table
M.MAX_DEPTH = 3 -- nested tables shown before "{...}"
M.MAX_CHARS = 1000 -- about the most one table prints (a module would print pages)

local is_tensor, is_td = tensor.is_tensor, td_core.is_td

local function is_int(v) return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53 end

-- A shape: a non-empty array of integers and nothing else.
function M.is_shape(t)
  if type(t) ~= "table" or getmetatable(t) ~= nil then return false end
  local n = 0
  for k, v in pairs(t) do
    if not is_int(v) or not is_int(k) then return false end
    n = n + 1
  end
  if n == 0 then return false end
  for i = 1, n do if t[i] == nil then return false end end
  return true
end

function M.shape(t)
  local parts = {}
  for i = 1, #t do parts[i] = ("%d"):format(t[i]) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

local function quote(s) return (("%q"):format(s):gsub("\\\n", "\\n")) end

local function number(v)
  if is_int(v) then return ("%d"):format(v) end
  return (tostring(v))
end

-- One line for a tensor or a TensorDict inside a table.
local function brief_object(v)
  if is_tensor(v) then
    return ("tensor(shape=%s, dtype=%s)"):format(M.shape(v:shape()), v:dtype())
  end
  local keys = v:keys()
  for i, k in ipairs(keys) do keys[i] = type(k) == "table" and table.concat(k, ".") or k end
  return ("TensorDict(batch_size=%s, keys={%s})"):format(M.shape(v:batch_size()), table.concat(keys, ", "))
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

local table_text

-- v as it appears inside a table. seen: the tables being printed (cycles) and, in
-- seen.left, the characters left to print.
local function inner(v, depth, seen)
  local tv = type(v)
  if tv == "string" then return quote(v) end
  if tv == "number" then return number(v) end
  if is_tensor(v) or is_td(v) then return brief_object(v) end
  if tv == "table" then
    if has_tostring(v) then return (tostring(v)) end
    return table_text(v, depth, seen)
  end
  return (tostring(v))
end

function table_text(t, depth, seen)
  if M.is_shape(t) then return M.shape(t) end
  if seen[t] then return "<cycle>" end
  if depth > M.MAX_DEPTH then return "{...}" end
  seen[t] = true
  local n = #t
  local keys = {}
  for i = 1, n do keys[i] = i end
  local rest = {}
  for k in pairs(t) do
    if not (is_int(k) and k >= 1 and k <= n) then rest[#rest + 1] = k end
  end
  table.sort(rest, key_order)
  for _, k in ipairs(rest) do keys[#keys + 1] = k end
  local parts = {}
  for i, k in ipairs(keys) do
    if i > M.MAX_ITEMS or seen.left <= 0 then
      parts[#parts + 1] = ("... (%d more)"):format(#keys - i + 1)
      break
    end
    local part
    if i <= n then
      part = inner(t[k], depth + 1, seen)
    else
      local name = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or ("[" .. inner(k, depth + 1, seen) .. "]")
      part = name .. " = " .. inner(t[k], depth + 1, seen)
    end
    seen.left = seen.left - #part - 2
    parts[#parts + 1] = part
  end
  seen[t] = nil
  if #parts == 0 then return "{}" end
  return "{" .. table.concat(parts, ", ") .. "}"
end

-- A value as the REPL prints it on its own.
function M.value(v)
  local tv = type(v)
  if tv == "number" then return number(v) end
  if tv == "table" and not is_tensor(v) and not has_tostring(v) then
    return table_text(v, 1, { left = M.MAX_CHARS })
  end
  return (tostring(v))
end

-- Several results side by side, tab-separated like print's.
function M.values(n, ...)
  local parts = {}
  for i = 1, n do parts[i] = M.value((select(i, ...))) end
  return (table.concat(parts, "\t"))
end

M.brief_object = brief_object

return M
