-- host/recipe.lua: experiment recipes (docs/recipes.md). A recipe is JSON, or a Lua file
-- returning a table (which may hold functions):
--   { "seed": 0, "batch_size": 4096, "workers": 2, "vars": {"cut": 0.5},
--     "source": {"use": "ParticleSource", "n": 100000},
--     "steps": [{"use": "Normalize", "keys": ["vel"]}, {"use": "Filter", "where": "..."}],
--     "sink": {"use": "MemmapSink", "path": "out/particles"} }
-- Loading checks everything before any data moves and reports every problem at once,
-- each with its path: `steps[3].scale: expected a number, got "x"`.
local util = require("tensordict.util")
local json = require("tensordict.json")
local core = require("tensordict.flow.core")
local build = require("tensordict.flow.build")
local flow = require("tensordict.flow")
local plugins = require("tensordict.host.plugins")

local describe = util.describe

local M = {}

local TOP = { "name", "description", "seed", "batch_size", "workers", "timeout", "vars", "source", "steps",
  "sink" }
local TOP_SET = {}
for _, k in ipairs(TOP) do TOP_SET[k] = true end

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  return describe(v)
end

---------------------------------------------------------------------------- reading

local function read_file(path)
  local f, err = io.open(path, "rb")
  if not f then return nil, ("cannot read %s: %s"):format(path, err) end
  local text = f:read("*a")
  f:close()
  return text
end

-- The recipe table of a path (JSON or Lua) or a table, and problems found reading it.
local function read(source)
  if type(source) == "table" then return source, {} end
  if type(source) ~= "string" then
    return nil, { ("a recipe is a file path or a table, got %s"):format(describe(source)) }
  end
  if source:match("%.lua$") then
    local chunk, err = loadfile(source)
    if not chunk then return nil, { err } end
    local ok, t = pcall(chunk)
    if not ok then return nil, { ("%s failed: %s"):format(source, tostring(t)) } end
    if type(t) ~= "table" then
      return nil, { ("%s must return a table, got %s"):format(source, describe(t)) }
    end
    return t, {}
  end
  local text, err = read_file(source)
  if not text then return nil, { err } end
  local ok, t, dups = pcall(json.read, text, source)
  if not ok then return nil, { (tostring(t):gsub("^.-tensordict: ", "")) } end
  local problems = {}
  for _, path in ipairs(dups) do
    problems[#problems + 1] = ("%s: given twice in the same object"):format(path)
  end
  if type(t) ~= "table" or getmetatable(t) == json.array_mt then
    problems[#problems + 1] = ("%s: a recipe is a JSON object, got %s"):format(source,
      type(t) == "table" and "an array" or describe(t))
    return nil, problems
  end
  return t, problems
end

-- A copy of a recipe table; a table that holds itself (a Lua recipe's cycle) raises
-- rather than recursing until the stack overflows (issue 28, found by the misuse fuzzer).
local function deep_copy(v, open)
  if type(v) ~= "table" or core.is_node(v) or require("tensordict.dict").is_td(v) then return v end
  open = open or {}
  if open[v] then util.fail("recipe: the recipe's tables hold a cycle (a table inside itself)") end
  open[v] = true
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x, open) end
  open[v] = nil
  return setmetatable(out, getmetatable(v))
end

------------------------------------------------------------------------------ --set

-- A --set value: JSON when it parses (numbers, booleans, null, quoted strings,
-- arrays, objects), the raw text otherwise.
local function set_value(text)
  local ok, v = pcall(json.read, text, "--set")
  if ok then return v end
  return text
end

-- Applies "a.b.2.c=value" (numbers index lists, 1-based) to t; returns a problem or nil.
function M.apply_set(t, assignment)
  local path, text = assignment:match("^([^=]+)=(.*)$")
  if not path then return ("--set %s: expected PATH=VALUE, e.g. steps.2.scale=0.5"):format(assignment) end
  local parts = {}
  for part in path:gmatch("[^.]+") do parts[#parts + 1] = tonumber(part) or part end
  local cur = t
  for i = 1, #parts - 1 do
    local k = parts[i]
    if cur[k] == nil then cur[k] = {} end
    if type(cur[k]) ~= "table" then
      return ("--set %s: %s is %s, not a table"):format(assignment, table.concat(parts, ".", 1, i), show(cur[k]))
    end
    cur = cur[k]
  end
  cur[parts[#parts]] = set_value(text)
  return nil
end

----------------------------------------------------------------------------- $vars

local function expand_vars(v, vars, where, problems)
  if type(v) == "string" then
    local whole = v:match("^%$vars%.([%w_]+)$")
    if whole then
      if vars[whole] == nil then
        local names = {}
        for k in pairs(vars) do names[#names + 1] = k end
        table.sort(names)
        local hint = core.nearest(whole, names)
        problems[#problems + 1] = ("%s: unknown variable $vars.%s%s (vars: %s)"):format(where, whole,
          hint and (" (did you mean $vars." .. hint .. "?)") or "", #names > 0 and table.concat(names, ", ") or "none")
        return v
      end
      return deep_copy(vars[whole])
    end
    return (v:gsub("%${vars%.([%w_]+)}", function(name)
      if vars[name] == nil then
        problems[#problems + 1] = ("%s: unknown variable ${vars.%s}"):format(where, name)
        return nil
      end
      return tostring(vars[name])
    end))
  end
  if type(v) == "table" and not core.is_node(v) then
    for k, x in pairs(v) do
      local sub = type(k) == "number" and ("%s[%d]"):format(where, k) or (where == "" and k or where .. "." .. k)
      v[k] = expand_vars(x, vars, sub, problems)
    end
  end
  return v
end

----------------------------------------------------------------------------- building

-- The keys a source yields, when it can tell without reading data.
local function source_keys(source)
  if source.keys then
    local ok, keys = pcall(source.keys, source)
    if ok and type(keys) == "table" then return keys end
  end
  if source.out_keys and #source.out_keys > 0 then return source.out_keys end
  return nil
end

-- Reads, checks and builds a recipe. Returns the recipe (see the module's header) and
-- the problems (a list of strings; the recipe is nil when there are any).
function M.prepare(source, opts)
  opts = util.options("recipe", opts, { set = "table", workers = "any" })
  plugins.load_all()
  local t, problems = read(source)
  if not t then return nil, problems end
  t = deep_copy(t)
  for _, assignment in ipairs(opts.set or {}) do
    local pb = M.apply_set(t, assignment)
    if pb then problems[#problems + 1] = pb end
  end
  if opts.workers ~= nil then t.workers = opts.workers end

  for k in pairs(t) do
    if not TOP_SET[k] then
      problems[#problems + 1] = ("%s: unknown recipe field%s (fields: %s)"):format(tostring(k),
        util.did_you_mean(k, TOP), table.concat(TOP, ", "))
    end
  end
  local vars = t.vars or {}
  if type(vars) ~= "table" then
    problems[#problems + 1] = ("vars: expected an object, got %s"):format(show(vars))
    vars = {}
  end
  for _, field in ipairs({ "seed", "batch_size", "workers" }) do
    local v = t[field]
    if v ~= nil and (not util.is_int(v) or v < (field == "seed" and 0 or (field == "workers" and 0 or 1))) then
      problems[#problems + 1] = ("%s: expected %s, got %s"):format(field,
        field == "batch_size" and "a positive integer" or "a non-negative integer", show(v))
    end
  end
  if t.timeout ~= nil and not (type(t.timeout) == "number" and t.timeout > 0) then
    problems[#problems + 1] = ("timeout: expected a number of seconds > 0, got %s"):format(show(t.timeout))
  end
  for _, field in ipairs({ "source", "steps", "sink" }) do
    if t[field] ~= nil then t[field] = expand_vars(t[field], vars, field, problems) end
  end

  -- Pipeline settings: seed, workers and timeout reach the nodes at open, through
  -- flow.run's ctx (r.seed, r.workers, r.timeout); batch_size is needed to make a source, so the builder
  -- fills it into the steps that take it and leave it out.
  local defaults = { batch_size = t.batch_size }
  local function make(spec, where, kind)
    return build.node(spec, { where = where, kind = kind, problems = problems, defaults = defaults })
  end
  local r = { path = type(source) == "string" and source or nil, seed = t.seed or 0, workers = t.workers,
    timeout = t.timeout, vars = vars, name = t.name, description = t.description, steps = {} }
  if t.source == nil then
    problems[#problems + 1] = "source: required: where the batches come from ({\"use\": \"TensorSource\", ...})"
  else
    r.source = make(t.source, "source", "source")
  end
  local steps = t.steps or {}
  if type(steps) ~= "table" or core.spec_type(steps) ~= nil then
    problems[#problems + 1] = ("steps: expected a list of steps, got %s"):format(show(steps))
    steps = {}
  end
  local all_built = true
  for i, spec in ipairs(steps) do
    r.steps[i] = make(spec, ("steps[%d]"):format(i), "node")
    all_built = all_built and r.steps[i] ~= nil
  end
  if t.sink ~= nil then r.sink = make(t.sink, "sink", "sink") end

  -- each node's own checks of the world (a sink's path that exists, ...)
  local function preflight(node, where)
    if not node then return end
    if node.nodes then
      for j, sub in ipairs(node.nodes) do preflight(sub, ("%s.steps[%d]"):format(where, j)) end
    end
    if node.preflight then
      for _, pb in ipairs(node:preflight() or {}) do
        problems[#problems + 1] = ("%s (%s): %s"):format(where, node.type_name, pb)
      end
    end
  end
  preflight(r.source, "source")
  for i, node in ipairs(r.steps) do preflight(node, ("steps[%d]"):format(i)) end
  preflight(r.sink, "sink")

  if all_built and #problems == 0 then
    r.node = flow.Seq { steps = r.steps }
    local keys = r.source and source_keys(r.source)
    if keys then
      local shown = {}
      for i, k in ipairs(keys) do shown[i] = core.key_text(k) end
      for _, pb in ipairs(r.node:check_keys(flow.KeySet.new(keys))) do
        problems[#problems + 1] = ("%s (%s): key %s is neither given by the source nor produced upstream "
          .. "(source keys: %s)"):format(pb.where, pb.node.type_name, core.key_text(pb.key), table.concat(shown, ", "))
      end
    end
  end
  if #problems > 0 then return nil, problems end
  r.sink = r.sink or flow.Discard {}
  return r, {}
end

-- recipe.check(source [, opts]) -> the list of problems (empty when the recipe is fine).
function M.check(source, opts)
  local _, problems = M.prepare(source, opts)
  return problems
end

-- recipe.load(source [, opts]) -> the built recipe; raises listing every problem.
function M.load(source, opts)
  local r, problems = M.prepare(source, opts)
  if not r then
    util.fail(("recipe%s: %d problem%s:\n  %s"):format(type(source) == "string" and (" " .. source) or "",
      #problems, #problems == 1 and "" or "s", table.concat(problems, "\n  ")))
  end
  return r
end

-- Runs a loaded recipe with flow.run (the host adds progress and reports).
function M.run(r, opts)
  opts = opts or {}
  return flow.run(r.source, r.node, r.sink, { seed = r.seed, workers = r.workers, on_batch = opts.on_batch,
    ctx = { timeout = r.timeout } })
end

return M
