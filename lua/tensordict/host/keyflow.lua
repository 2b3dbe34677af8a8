-- host/keyflow.lua: what `tdflow check` knows of the batch between the source and the
-- sink without reading data: which keys it holds at each step, and, where the source
-- or a step declares it, each key's dtype. Every step's in_keys must be there; a sink's
-- too (a Histogram's key); a step that accepts only some dtypes says so through
-- node:check_dtypes(ks) (Normalize: float leaves; a mask: bool). Keys that a key-or-
-- function parameter names (Filter.where, MaskedFill.mask, Where.cond) get a "did you
-- mean" over the keys known there and the registered functions. After a step that adds
-- keys it does not declare (Lambda, Map without out_keys) a key nobody declared cannot
-- be checked: that is said as a note, never passed over in silence. A step that could
-- not be built is checked as if its wrong parameters were left out (build.lenient);
-- when even that fails it is skipped, and the keys its spec names count as present
-- after it, so the steps after it are still checked (issue 27, items 4, 5 and 7;
-- issue 28, "Also").
local util = require("tensordict.util")
local core = require("tensordict.flow.core")

local M = {}

local function label(where, node) return ("%s (%s)"):format(where, node.type_name) end

-- Every string in a spec (and the string defaults of its type's parameters): the keys
-- a step that could not be built may add. Counting them present keeps the checks after
-- it from blaming their keys on it.
local function spec_strings(spec, out)
  if type(spec) == "string" then
    out[#out + 1] = spec
  elseif type(spec) == "table" and not core.is_node(spec) then
    for _, v in pairs(spec) do spec_strings(v, out) end
  end
  return out
end

local function unbuilt_keys(spec)
  local out = spec_strings(spec, {})
  local cls = type(spec) == "table" and core.registry[core.spec_type(spec) or ""]
  for _, p in ipairs(type(cls) == "table" and cls.params or {}) do spec_strings(p.default, out) end
  return out
end

-- The names a key-or-function parameter's value may have meant, for a hint: the keys
-- known here and the registered functions; " (did you mean the function 'x'?)" when the
-- nearest is a function, " (did you mean 'k'?)" for a key, "" when nothing is close.
local function hint_for(word, ks, with_functions)
  local keys = {}
  for _, k in ipairs(ks:list()) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  local functions = with_functions and core.function_list() or {}
  local names, is_function = {}, {}
  for _, k in ipairs(keys) do names[#names + 1] = k end
  for _, f in ipairs(functions) do
    names[#names + 1] = f
    is_function[f] = true
  end
  local best = type(word) == "string" and util.nearest(word, names)
  if not best then return "", false end
  local text = is_function[best] and (" (did you mean the function '" .. best .. "'?)")
    or (" (did you mean '" .. best .. "'?)")
  return text, is_function[best] or false
end

-- The parameters of node that take a key or a function (masks), as a set of the keys
-- they were given.
local function key_or_function_keys(node)
  local out = {}
  for _, p in ipairs(node.params or {}) do
    local v = node.p and node.p[p[1]]
    if p.key_or_function and type(v) == "string" then out[v] = p[1] end
  end
  return out
end

-- The walk: a state shared by every step.
local Walk = {}
Walk.__index = Walk

-- Checks the keys node reads at where, then applies what it does to the keys.
function Walk:step(node, where)
  local ks = self.ks
  local masks = key_or_function_keys(node)
  for _, k in ipairs(node.in_keys or {}) do
    if not ks:known(k) then
      local param = masks[k]
      local hint, to_function = hint_for(k, ks, param ~= nil)
      if param and to_function then
        self:problem(("%s: %s: '%s' is neither a key known upstream nor a registered function%s"):format(
          label(where, node), param, k, hint))
      elseif ks.open then
        self.notes[#self.notes + 1] = ("%s: key %s is not known upstream; %s adds keys it does not declare, "
          .. "so it may come from there (not checked: give that step out_keys to check it)"):format(
          label(where, node), core.key_text(k), ks.opened_by)
      elseif not self.after_unbuilt then
        -- a node reading keys in an expression says where (flow/expr.lua: the column)
        self:problem(("%s: key %s is neither given by the source nor produced upstream%s (source keys: %s)%s")
          :format(label(where, node), core.key_text(k), hint, self.source_keys,
            node.key_context and node:key_context(k) or ""))
      end
    end
  end
  if node.check_dtypes then
    for _, pb in ipairs(node:check_dtypes(ks) or {}) do self:problem(("%s: %s"):format(label(where, node), pb)) end
  end
  if node.nodes and node.type_name == "Seq" then
    self:steps(node.nodes, where .. ".steps")
    for _, k in ipairs(node.drop_keys or {}) do ks:remove(k) end
  else
    core.keys_after(node, ks, where)
    if node.keys_unknown and not ks.opened_by then ks.opened_by = label(where, node) end
  end
end

function Walk:problem(text) self.problems[#self.problems + 1] = text end

-- items: a list of nodes, or of {node =, spec =} for steps that may not have been built.
function Walk:steps(items, prefix)
  for i, item in ipairs(items) do
    local where = ("%s[%d]"):format(prefix, i)
    if core.is_node(item) then
      self:step(item, where)
    elseif item.node or item.lenient then
      self:step(item.node or item.lenient, where)
    else -- not built: its problems are reported already
      for _, k in ipairs(unbuilt_keys(item.spec)) do self.ks:add(k) end
      if type(item.spec) ~= "table" or type(core.registry[core.spec_type(item.spec) or ""]) ~= "table" then
        self.after_unbuilt = true -- an unknown type: what it adds cannot be told at all
      end
    end
  end
end

-- The keys a source yields, when it can tell without reading data.
function M.source_keys(source)
  if source.keys then
    local ok, keys = pcall(source.keys, source)
    if ok and type(keys) == "table" and #keys > 0 then return keys end
  end
  if source.out_keys and #source.out_keys > 0 then return source.out_keys end
  return nil
end

-- Checks the key flow of a prepared recipe: source (a node, or nil when it could not be
-- built), steps (items as Walk:steps takes them), sink (a node or nil). Problems and
-- notes are appended to the lists given. Returns the keys that reach the sink (a
-- KeySet; nil when the source cannot tell its keys).
function M.check(source, steps, sink, problems, notes)
  if not source then return end
  local keys = M.source_keys(source)
  if not keys then
    notes[#notes + 1] = ("source (%s): it does not say its keys without reading data, so the keys the steps "
      .. "read were not checked"):format(source.type_name or "?")
    return
  end
  local ks = core.KeySet.new()
  local dtypes = source.key_dtypes and source:key_dtypes() or {}
  local shown = {}
  for i, k in ipairs(keys) do
    ks:add(k, false, dtypes[core.key_id(k)], "as the source declares it")
    shown[i] = core.key_text(k)
  end
  local w = setmetatable({ ks = ks, problems = problems, notes = notes, source_keys = table.concat(shown, ", ") },
    Walk)
  w:steps(steps, "steps")
  if sink and #(sink.in_keys or {}) > 0 then w:step(sink, "sink") end
  return ks -- the keys that reach the sink (the recipe's metrics are checked against them)
end

return M
