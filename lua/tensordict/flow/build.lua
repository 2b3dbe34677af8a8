-- flow/build.lua: the one builder. A spec is plain data naming a registered type and its
-- parameters, {type = "Apply", keys = {"x"}, fn = "Tensor.neg"}; recipes write the
-- same with use = "Apply" (one field under two names, core.spec_type). The builder
-- makes the node, source or sink, collecting what is wrong into a problems list
-- instead of raising: a recipe reports every problem at once, each with its path
-- ("steps[3].size: expected an integer, got \"x\""), and flow.build raises them.
local util = require("tensordict.util")
local core = require("tensordict.flow.core")

local describe, did_you_mean = util.describe, util.did_you_mean

local M = {}

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return describe(v)
end

-- A constructor's error without the "file:line: tensordict: " decoration (and the
-- type's own "Type: ", which the problem's label says already).
local function reason(err, type_name)
  local msg = tostring(err):gsub("^.-tensordict: ", "")
  if type_name then msg = msg:gsub("^" .. type_name:gsub("%p", "%%%0") .. ": ", "") end
  return msg
end

-- The type a spec names, or nil after adding the problem. Messages are phrased for
-- where the spec came from: a recipe's step (o.where, the path) or flow.build.
local function spec_type(spec, o)
  local where, problems = o.where, o.problems
  if type(spec) ~= "table" or core.is_node(spec) then
    problems[#problems + 1] = where and ('%s: expected a step {"use": "Type", ...}, got %s'):format(where, show(spec))
      or ("build: expected a spec table with a 'type' field, got %s"):format(describe(spec))
    return nil
  end
  local name, field = core.spec_type(spec)
  if spec.use ~= nil and spec.type ~= nil and spec.use ~= spec.type then
    problems[#problems + 1] = ("%suse and type name different node types (%s, %s)"):format(
      where and (where .. ": ") or "build: ", show(spec.use), show(spec.type))
    return nil
  end
  if type(name) ~= "string" then
    problems[#problems + 1] = where and ("%s.use: required: the node type (got %s)"):format(where, show(name))
      or ("build: the spec has no 'type' string (got %s)"):format(describe(name))
    return nil
  end
  if not core.registry[name] then
    local hint = did_you_mean(name, core.type_names())
    problems[#problems + 1] = where and ("%s.%s: unknown node type %s%s"):format(where, field, show(name), hint)
      or ("build: unknown node type '%s'%s"):format(name, hint)
    return nil
  end
  return name
end

-- A spec's parameters: every field but the one naming its type.
local function params_of(spec)
  local params = {}
  for k, v in pairs(spec) do
    if k ~= "use" and k ~= "type" then params[k] = v end
  end
  return params
end

-- The parameters of a spec of class cls: nested step specs (params of kind node and
-- nodes) built with their paths, then o.defaults for parameters the spec leaves out.
-- Returns them and whether every nested step was built.
local function recipe_params(spec, cls, o)
  local known = {}
  for _, p in ipairs(cls.params) do known[p[1]] = p end
  local params, all_built = params_of(spec), true
  local sub = { problems = o.problems, defaults = o.defaults }
  for k, v in pairs(params) do
    local p = known[k]
    if p and p[2] == "nodes" and type(v) == "table" then
      local list = {}
      for i, step in ipairs(v) do
        sub.where = ("%s.%s[%d]"):format(o.where, k, i)
        list[i] = M.node(step, sub)
        all_built = all_built and list[i] ~= nil
      end
      params[k] = list
    elseif p and p[2] == "node" and type(v) == "table" then
      sub.where = o.where .. "." .. k
      params[k] = M.node(v, sub)
      all_built = all_built and params[k] ~= nil
    end
  end
  for name, value in pairs(o.defaults or {}) do
    if known[name] and params[name] == nil then params[name] = value end
  end
  return params, all_built
end

-- build.node(spec, o) -> the node, or nil with problems added to o.problems.
-- o.where: the spec's path in a recipe ("steps[2]"); without it the spec was given to
-- flow.build, whose messages name no path and whose constructors raise as they do.
-- o.kind: "source", "node" or "sink", when the place needs one. o.defaults: values for
-- parameters a spec leaves out (a recipe's batch_size). A node in place of a spec (a Lua
-- recipe may hold one) is taken as it is.
function M.node(spec, o)
  if o.where and core.is_node(spec) then return spec end
  local name = spec_type(spec, o)
  if not name then return nil end
  local cls, where, problems = core.registry[name], o.where, o.problems
  if not where then -- flow.build: nested specs are built by the "node" parameter kind
    if type(cls) == "function" then return cls(params_of(spec)) end
    return cls.new(params_of(spec))
  end
  if type(cls) == "function" then -- a plugin's plain constructor: its own checks
    local ok, node = pcall(cls, params_of(spec))
    if ok then return node end
    problems[#problems + 1] = ("%s: %s"):format(where, reason(node))
    return nil
  end
  if o.kind and cls.kind ~= o.kind then
    problems[#problems + 1] = ("%s.use: %s is a %s, not a %s"):format(where, name, cls.kind, o.kind)
    return nil
  end
  local params, all_built = recipe_params(spec, cls, o)
  local _, found = core.check_params(cls, params, where .. ".")
  for _, pb in ipairs(found) do problems[#problems + 1] = pb end
  if #found > 0 or not all_built then return nil end
  local ok, node = pcall(cls.new, params)
  if ok then return node end
  problems[#problems + 1] = ("%s (%s): %s"):format(where, name, reason(node, name))
  return nil
end

-- build.lenient(spec, o) -> a node of spec made without the parameters that have
-- problems (their defaults instead), or nil: what the host checks a step that failed
-- with (its keys and dtypes), so that one wrong parameter does not hide the problems
-- after it. nil when a required parameter is wrong, a nested step fails, or the type
-- refuses anyway. o.defaults as for build.node. The node is for checks, never runs.
function M.lenient(spec, o)
  local name = spec_type(spec, { problems = {} })
  local cls = name and core.registry[name]
  if type(cls) ~= "table" then return nil end
  local quiet = { where = "", problems = {}, defaults = o and o.defaults }
  local params, all_built = recipe_params(spec, cls, quiet)
  if not all_built then return nil end
  local _, _, bad = core.check_params(cls, params, "")
  for _, p in ipairs(cls.params) do
    if bad[p[1]] and p.required then return nil end
  end
  for k in pairs(bad) do params[k] = nil end
  local ok, node = pcall(cls.new, params)
  return ok and node or nil
end

-- flow.build(spec): the node a spec describes; raises what is wrong with it.
function M.build(spec)
  local problems = {}
  local node = M.node(spec, { problems = problems })
  if #problems > 0 then util.fail(table.concat(problems, "; ")) end
  return node
end

return M
