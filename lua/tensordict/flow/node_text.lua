-- flow/node_text.lua: what tostring(node) prints: the constructor call that makes the
-- node, with the parameters that differ from their defaults, in declared order
--   flow.Normalize{keys = {"energy"}, out_keys = {"energy_z"}}
--   flow.Map{fn = "physics.features", workers = 2}
-- A Seq lists its steps one per line, indented. Functions show their registered name
-- (as a spec writes them) or <function>; tensors and TensorDicts their dtype and shape.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local core = require("tensordict.flow.core")

local MAX_ENTRIES, MAX_DEPTH = 10, 3

local function shape_text(shape) return "[" .. table.concat(shape, ", ") .. "]" end

local value_text

-- A plain table as a short constructor: the list part, then the other keys sorted.
local function table_text(t, depth)
  if depth >= MAX_DEPTH then return "{...}" end
  local parts, n = {}, #t
  for i = 1, math.min(n, MAX_ENTRIES) do parts[i] = value_text(t[i], depth + 1) end
  local keys = {}
  for k in pairs(t) do
    if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    if #parts >= MAX_ENTRIES then break end
    local name = type(k) == "string" and k:match("^[%a_][%w_]*$") and k or ("[" .. value_text(k, depth + 1) .. "]")
    parts[#parts + 1] = name .. " = " .. value_text(t[k], depth + 1)
  end
  if n + #keys > MAX_ENTRIES then parts[#parts + 1] = "..." end
  return "{" .. table.concat(parts, ", ") .. "}"
end

function value_text(v, depth)
  local t = type(v)
  if t == "string" then return ("%q"):format(v) end
  if t == "number" then return util.is_int(v) and ("%d"):format(v) or tostring(v) end
  if t == "boolean" or v == nil then return (tostring(v)) end
  if t == "function" then
    local name = core.function_name(v)
    local made = not name and require("tensordict.flow.fn_args").plain(v) -- {use =, args =}
    if made then return table_text(made, depth or 0) end
    return name and ("%q"):format(name) or "<function>"
  end
  if tensor.is_tensor(v) then return ("<tensor %s %s>"):format(v:dtype(), shape_text(v:shape())) end
  if td_core.is_td(v) then return ("<TensorDict %s>"):format(shape_text(v:batch_size())) end
  if core.is_node(v) then return (tostring(v)) end
  if t == "table" then return table_text(v, depth or 0) end
  return util.describe(v)
end

-- The parameters of node that a spec would write (not their defaults), as "name = value".
local function param_parts(node, skip)
  local parts = {}
  for _, spec in ipairs(node.params or {}) do
    local name = spec[1]
    local v = node.p and node.p[name]
    if name ~= skip and v ~= nil and not (spec.default ~= nil and v == spec.default) then
      parts[#parts + 1] = name .. " = " .. value_text(v)
    end
  end
  return parts
end

local function text(node, indent)
  indent = indent or ""
  if node.type_name == "Seq" and node.nodes then
    local inner = indent .. "  "
    local lines = { "flow.Seq{" }
    for _, step in ipairs(node.nodes) do lines[#lines + 1] = inner .. text(step, inner) .. "," end
    for _, part in ipairs(param_parts(node, "steps")) do lines[#lines + 1] = inner .. part .. "," end
    lines[#lines + 1] = indent .. "}"
    return (table.concat(lines, "\n"))
  end
  return ("flow.%s{%s}"):format(node.type_name, table.concat(param_parts(node), ", "))
end

return text
