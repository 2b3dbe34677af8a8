-- cjson.lua: JSON text to Lua values through cJSON in the C core (core/src/json.c).
-- Objects become tables with string keys, arrays Lua arrays (1-based), null nil (so an
-- array holding null has a hole), numbers Lua numbers. A syntax error raises with the
-- line and column: "tensordict: <what>: line 3, column 14: invalid JSON near '...'".
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")

local M = {}

local T_NULL, T_FALSE, T_TRUE = C.TD_JSON_NULL, C.TD_JSON_FALSE, C.TD_JSON_TRUE
local T_NUMBER, T_STRING, T_ARRAY = C.TD_JSON_NUMBER, C.TD_JSON_STRING, C.TD_JSON_ARRAY

-- Empty objects and arrays are told apart by this metatable on arrays, for callers
-- that care (a recipe's "steps": [] is a list).
M.array_mt = { __name = "json array" }

local function convert(node, duplicates, path)
  local t = C.td_json_type(node)
  if t == T_NULL then return nil end
  if t == T_FALSE then return false end
  if t == T_TRUE then return true end
  if t == T_NUMBER then return C.td_json_number(node) end
  if t == T_STRING then return ffi.string(C.td_json_string(node)) end
  local out = {}
  local child = C.td_json_child(node)
  if t == T_ARRAY then
    local i = 0
    while child ~= nil do
      i = i + 1
      out[i] = convert(child, duplicates, path .. "[" .. i .. "]")
      child = C.td_json_next(child)
    end
    return setmetatable(out, M.array_mt)
  end
  while child ~= nil do
    local key = ffi.string(C.td_json_key(child))
    if out[key] ~= nil then duplicates[#duplicates + 1] = path .. (path == "" and "" or ".") .. key end
    out[key] = convert(child, duplicates, path == "" and key or (path .. "." .. key))
    child = C.td_json_next(child)
  end
  return out
end

-- decode(text, what) -> value, duplicates (paths of keys given twice in an object: the
-- last one is kept, and callers such as recipes report them).
function M.decode(text, what)
  if type(text) ~= "string" then
    util.fail(("%s: expected JSON text, got %s"):format(what or "json", util.describe(text)))
  end
  local doc = C.td_json_parse(text, #text)
  if doc == nil then
    util.fail(("%s: %s"):format(what or "json", ffi.string(C.td_last_error())))
  end
  local ok, value, dups = pcall(function()
    local d = {}
    return convert(C.td_json_root(doc), d, ""), d
  end)
  C.td_json_free(doc)
  if not ok then error(value, 0) end
  return value, dups
end

return M
