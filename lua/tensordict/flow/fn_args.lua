-- flow/fn_args.lua: functions with arguments in recipes. Where a recipe names a function
-- ("fn": "physics.speed", "where": "physics.is_bound") it may also write
--   {"use": "physics.energy_below", "args": {"max": 0.5}}
-- A function that takes args is registered as a factory (flow.register_factory, or a
-- plugin's factories = {...}): make(args) is called once, when the step is built, with
-- the args checked against its declaration (the parameter kinds of node types: unknown,
-- missing and mistyped args are problems of the recipe's check), and returns the
-- function the step calls. The function remembers its use and args, so spec() writes
-- them back and flow.build(node:spec()) makes an equal step.
local util = require("tensordict.util")
local core = require("tensordict.flow.core")

local fail, describe = util.fail, util.describe

local M = {}

M.factories = {} -- name -> {make =, args = {param specs}, takes =, doc =}
local made = setmetatable({}, { __mode = "k" }) -- function -> {use =, args =}

-- flow.register_factory(name, {make = fn(args) -> function, args = {{"max", "number",
-- required = true, doc = "..."}, ...}, takes = "batch" | "tensors", doc = "one line"}).
function M.register(name, def)
  if type(name) ~= "string" or name == "" then
    fail(("register_factory: the name must be a non-empty string, got %s"):format(describe(name)))
  end
  if type(def) ~= "table" or type(def.make) ~= "function" then
    fail(("register_factory: '%s' needs {make = function(args) ... end, args = {...}}, got %s"):format(name,
      describe(def)))
  end
  if def.args ~= nil and type(def.args) ~= "table" then
    fail(("register_factory: '%s': args must be a list of {name, kind, ...} declarations, got %s"):format(name,
      describe(def.args)))
  end
  for i, spec in ipairs(def.args or {}) do
    if type(spec) ~= "table" or type(spec[1]) ~= "string" or not core.is_param_kind(spec[2]) then
      fail(("register_factory: '%s': args[%d] must be {name, kind, ...} with a parameter kind (docs/flow.md), "
        .. "got %s"):format(name, i, describe(spec)))
    end
  end
  if def.takes ~= nil and def.takes ~= "batch" and def.takes ~= "tensors" then
    fail(("register_factory: '%s': takes must be \"batch\" or \"tensors\", got %s"):format(name, describe(def.takes)))
  end
  M.factories[name] = { make = def.make, args = def.args or {}, takes = def.takes, doc = def.doc }
  core.function_takes[name] = def.takes
  return def
end

local FIELDS = { use = true, args = true }

-- The function {use =, args =} stands for (a factory's product, or a plain registered
-- function when there are no args); raises what is wrong, every arg problem at once.
function M.resolve(v)
  for k in pairs(v) do
    if not FIELDS[k] then
      fail(("unknown field %s in a function with args (it is {\"use\": name, \"args\": {...}})"):format(
        describe(k)))
    end
  end
  local use, args = v.use, v.args
  if type(use) ~= "string" then fail(("use: expected a function's name, got %s"):format(describe(use))) end
  if args ~= nil and (type(args) ~= "table" or #args > 0) then
    fail(("%s: args must be an object {\"name\": value, ...}, got %s"):format(use, describe(args)))
  end
  local def = M.factories[use]
  if not def then
    local fn = core.resolve_function(use)
    if not fn then
      fail(("unknown function '%s'%s"):format(use, util.did_you_mean(use, core.function_list())))
    end
    if args ~= nil and next(args) ~= nil then
      fail(("%s takes no args (it is a plain function; functions that take args are registered with "
        .. "flow.register_factory)"):format(use))
    end
    return fn
  end
  local p, problems = core.check_params({ type_name = use, params = def.args }, args or {}, "args.")
  if #problems > 0 then fail(("%s: %s"):format(use, table.concat(problems, "; "))) end
  local fn = def.make(p)
  if type(fn) ~= "function" then
    fail(("%s: its factory returned %s, not a function"):format(use, describe(fn)))
  end
  local as_node = { fail = function(_, fmt, ...) fail(use .. ": " .. fmt:format(...)) end }
  made[fn] = { use = use, args = args and core.plain_copy(as_node, "args", args) }
  return fn
end

-- The plain form of a function made by resolve ({use =, args =}), or nil.
function M.plain(fn)
  local m = made[fn]
  if not m then return nil end
  local out = { use = m.use }
  if m.args then
    out.args = {}
    for k, x in pairs(m.args) do out.args[k] = x end
  end
  return out
end

-- The factories' names (sorted).
function M.names()
  local out = {}
  for name in pairs(M.factories) do out[#out + 1] = name end
  table.sort(out)
  return out
end

return M
