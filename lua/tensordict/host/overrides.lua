-- host/overrides.lua: `--set PATH=VALUE` (tdflow), `:load RECIPE k=v` (tdrepl) and
-- recipe.load{set = {...}}: one grammar, one resolver. A path is dot-separated parts,
-- none empty; a part that is an integer indexes a list, 1-based. Every part but the
-- last must name something that exists; the last may also be a new key of an object
-- (not a new list element). Anything else is a problem naming the path and what is
-- there ("steps has 4 entries (1..4)", "source has the fields: use, n, steps"), so an
-- override never silently does nothing (issue 27, item 1; issue 28, defect 5).
local util = require("tensordict.util")
local json = require("tensordict.json")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local core = require("tensordict.flow.core")

local describe = util.describe

local M = {}

-- A JSON array read from a recipe (json.read marks them), or a Lua sequence.
local function is_list(t)
  if getmetatable(t) == json.array_mt then return true end
  if getmetatable(t) ~= nil or next(t) == nil then return false end
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n == #t
end

-- Whether --set may walk into v (plain tables: nodes and TensorDicts are not data).
local function walkable(v)
  return type(v) == "table" and not core.is_node(v) and not td_core.is_td(v) and not tensor.is_tensor(v)
end

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "number" then return util.number_text(v) end
  if core.is_node(v) then return ("a node (%s)"):format(v.type_name) end
  return describe(v)
end

-- An object's field names, sorted.
local function field_names(t)
  local names = {}
  for k in pairs(t) do names[#names + 1] = tostring(k) end
  table.sort(names)
  return names
end

-- What an object holds, for messages: "the fields: a, b".
local function contents(t)
  local names = field_names(t)
  if #names == 0 then return "no fields" end
  return "the fields: " .. table.concat(names, ", ")
end

-- The value of a --set: JSON when it parses (numbers, booleans, null, quoted strings,
-- arrays, objects), the raw text otherwise; and the problems of what parsed (integers a
-- double cannot hold exactly).
local function parse_value(text)
  local ok, v, _, inexact = pcall(json.read, text, "--set")
  if not ok then return text, {} end
  local problems = {}
  for _, at in ipairs(inexact or {}) do problems[#problems + 1] = json.inexact_text(at) end
  return v, problems
end
M.value = parse_value -- what a --set's text means (tdflow sweep's tables and ids)

-- Splits "a.b.2.c" into parts; numbers stay text here (an object's key may be "2").
local function split(path)
  local parts = {}
  for part in (path .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  return parts
end

-- The index a part gives into a list of n entries, or nil and why not.
local function list_index(part, n, at)
  local i = tonumber(part)
  local range = n == 0 and "it is empty" or ("its entries are %s.1 to %s.%d"):format(at, at, n)
  if not (i and part:match("^[+-]?%d+$")) then
    return nil, ("%s is a list: expected an entry number, got '%s' (%s)"):format(at, part, range)
  end
  if i < 1 then
    return nil, ("%s is not an entry of %s: list entries are numbered from 1 (%s)"):format(part, at, range)
  end
  if i > n then
    return nil, ("%s has %d entr%s, so there is no %s.%s (%s)"):format(at, n, n == 1 and "y" or "ies", at, part,
      range)
  end
  return i
end

-- Applies "a.b.2.c=value" to the recipe table t. Returns the problems (empty when it
-- was applied; nothing is changed otherwise).
function M.apply(t, assignment)
  if type(assignment) ~= "string" then
    return { ("--set: expected PATH=VALUE, got %s"):format(describe(assignment)) }
  end
  local path, text = assignment:match("^([^=]*)=(.*)$")
  local function problem(fmt, ...) return { ("--set %s: " .. fmt):format(assignment, ...) } end
  if not path or path == "" then
    return problem("expected PATH=VALUE, e.g. steps.2.max=0.5 (PATH: dotted fields, list entries from 1)")
  end
  local parts = split(path)
  for i, part in ipairs(parts) do
    if part == "" then
      return problem("the path has an empty part (%s) where a field or an entry number was expected",
        i == 1 and "at the start" or (i == #parts and "at the end" or ("after %s"):format(
          table.concat(parts, ".", 1, i - 1))))
    end
  end
  local cur, at = t, "the recipe"
  local function here(i) return (table.concat(parts, ".", 1, i)) end
  for i = 1, #parts do
    local part, last = parts[i], i == #parts
    local key
    if is_list(cur) then
      local why
      key, why = list_index(part, #cur, at)
      if not key then return problem("%s", why) end
    else
      key = part
      if cur[key] == nil and not last then
        return problem("%s has no field '%s'%s, so %s names nothing (%s has %s); only the last part "
          .. "of a path may be a new field", at, part, util.did_you_mean(part, field_names(cur)), here(i), at,
          contents(cur))
      end
    end
    if last then
      local value, problems = parse_value(text)
      if #problems > 0 then
        for j, pb in ipairs(problems) do problems[j] = ("--set %s: %s"):format(assignment, pb) end
        return problems
      end
      cur[key] = value
      return {}
    end
    local nxt = cur[key]
    if not walkable(nxt) then
      return problem("%s is %s, not an object or a list, so %s names nothing", here(i), show(nxt), path)
    end
    cur, at = nxt, here(i)
  end
  return {}
end

return M
