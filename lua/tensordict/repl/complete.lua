-- repl/complete.lua: tab completion for tdrepl. The word before the cursor is a chain
-- of names ("T.flow.Ap", "td:ma", "td.ob"): everything before the last '.' or ':' is
-- looked up (indexing only, never calling anything) and its fields or methods are
-- offered; a bare name completes globals and keywords; ":lo" completes commands and
-- ":load rec" file names. Candidates are whole words that replace the word typed.
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local fs = require("tensordict.fs")

local M = {}

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function",
  "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

local function is_ident(s) return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil end

-- Adds the identifier keys of t (and of the tables its __index chain reaches) to out;
-- only_functions keeps the keys whose value is a function (for "x:").
local function add_fields(out, t, only_functions)
  local depth = 0
  while type(t) == "table" and depth < 8 do
    for k, v in pairs(t) do
      if is_ident(k) and (not only_functions or type(v) == "function") then out[k] = true end
    end
    local mt = getmetatable(t)
    t = type(mt) == "table" and rawget(mt, "__index") or nil
    depth = depth + 1
  end
end

-- The names an object offers after "." (fields) or ":" (methods).
local function names_of(v, sep)
  local out = {}
  if tensor.is_tensor(v) then
    add_fields(out, tensor.Tensor, false)
  elseif td_core.is_td(v) then
    if sep == ":" then
      add_fields(out, td_core.methods, false)
    else
      local ok, keys = pcall(v.keys, v)
      if ok then for _, k in ipairs(keys) do if is_ident(k) then out[k] = true end end end
    end
  elseif type(v) == "string" and sep == ":" then
    add_fields(out, string, true)
  elseif type(v) == "table" then
    add_fields(out, v, sep == ":")
  end
  return out
end

-- Looks up "a.b.c" in env without calling anything but __index; nil when any step fails.
local function resolve(env, chain)
  local v = env
  for name in chain:gmatch("[^.]+") do
    if not is_ident(name) then return nil end
    local ok, x = pcall(function() return v[name] end)
    if not ok or x == nil then return nil end
    v = x
  end
  return v
end

-- Metamethods and other "__" names only when the prefix asks for them.
local function sorted_matching(set, prefix, head)
  local out = {}
  local hidden = prefix:sub(1, 2) ~= "__"
  for name in pairs(set) do
    if name:sub(1, #prefix) == prefix and not (hidden and name:sub(1, 2) == "__") then
      out[#out + 1] = head .. name
    end
  end
  table.sort(out)
  return out
end

-- File names for ":load PATH".
local function complete_path(typed)
  local dir, base = typed:match("^(.*/)([^/]*)$")
  if not dir then dir, base = "", typed end
  local names = fs.list(dir == "" and "." or dir) or {}
  local out = {}
  for _, name in ipairs(names) do
    if name:sub(1, #base) == base and (base:sub(1, 1) == "." or name:sub(1, 1) ~= ".") then
      local path = dir .. name
      out[#out + 1] = fs.is_dir(path) and path .. "/" or path
    end
  end
  return out
end

-- M.complete(state, line) -> candidates, word: line is the text before the cursor;
-- word is its last token, which every candidate replaces (candidates start with it).
function M.complete(state, line)
  local typed = line:match("^%s*:load%s+(.*)$")
  if typed then return complete_path(typed), typed end
  local cmd = line:match("^%s*(:%w*)$")
  if cmd then
    local set = {}
    for name in pairs(state.commands) do set[":" .. name] = true end
    return sorted_matching(set, cmd, ""), cmd
  end
  local word = line:match("[%w_.:]*$")
  -- a word right after a number's digits or an odd chain ("a..b") has nothing to offer
  local head, sep, prefix = word:match("^(.-)([.:])([%w_]*)$")
  if not head then
    if word ~= "" and not word:match("^[%a_]") then return {}, word end
    local set = {}
    add_fields(set, state.env, false)
    for _, k in ipairs(KEYWORDS) do set[k] = true end
    return sorted_matching(set, word, ""), word
  end
  if head == "" or head:find(":", 1, true) or head:find("..", 1, true) then return {}, word end
  local v = resolve(state.env, head)
  if v == nil then return {}, word end
  return sorted_matching(names_of(v, sep), prefix, head .. sep), word
end

return M
