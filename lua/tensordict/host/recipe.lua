-- host/recipe.lua: experiment recipes (docs/recipes.md). A recipe is JSON, or a Lua file
-- returning a table (which may hold functions):
--   { "seed": 0, "batch_size": 4096, "workers": 2, "vars": {"cut": 0.5},
--     "source": {"use": "ParticleSource", "n": 100000},
--     "steps": [{"use": "Normalize", "keys": ["vel"]}, {"use": "Filter", "where": "..."}],
--     "sink": {"use": "MemmapSink", "path": "out/particles"} }
-- Loading checks everything before any data moves and reports every problem at once,
-- each with its path: `steps[3].scale: expected a number, got "x"`. Every check that can
-- run does, whatever the others found: overrides (host/overrides.lua), the recipe's
-- fields and $vars, each step's parameters, each node's checks of the world (a sink's
-- path, sizes against the machine's memory), and the key and dtype flow
-- (host/keyflow.lua). What cannot be checked is said as a note.
local util = require("tensordict.util")
local json = require("tensordict.json")
local core = require("tensordict.flow.core")
local build = require("tensordict.flow.build")
local flow = require("tensordict.flow")
local plugins = require("tensordict.host.plugins")
local overrides = require("tensordict.host.overrides")
local keyflow = require("tensordict.host.keyflow")
local sizes = require("tensordict.host.sizes")
local host_dist = require("tensordict.host.dist")
local metrics = require("tensordict.host.metrics")
local sweep_variants = require("tensordict.host.sweep_variants")

local describe = util.describe

local M = {}

local TOP = { "name", "description", "seed", "batch_size", "workers", "timeout", "vars", "source", "steps",
  "sink", "metrics", "sweep" }
local TOP_SET = {}
for _, k in ipairs(TOP) do TOP_SET[k] = true end

-- The pipeline settings among them, declared like a node's parameters (flow/core.lua
-- checks them, ranges included).
local SETTINGS = { type_name = "recipe", params = {
  { "seed", "seed" },
  { "batch_size", "integer", min = 1 },
  { "workers", "integer", min = 0, max = core.MAX_WORKERS },
} }

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "number" then return util.number_text(v) end
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

-- The recipe table of a path (JSON or Lua; "-" reads standard input: JSON when it
-- starts with "{", which no Lua chunk can, else Lua) or a table, and problems found
-- reading it.
local function read(source)
  if type(source) == "table" then return source, {} end
  if type(source) ~= "string" then
    return nil, { ("a recipe is a file path or a table, got %s"):format(describe(source)) }
  end
  local stdin = source == "-" and (io.stdin:read("*a") or "") or nil
  local name = stdin and "stdin" or source
  if stdin and stdin:match("^%s*$") then return nil, { "stdin: no recipe: standard input is empty" } end
  if source:match("%.lua$") or (stdin and not stdin:match("^%s*{")) then
    local chunk, err
    if stdin then chunk, err = loadstring(stdin, "=stdin") else chunk, err = loadfile(source) end
    if not chunk then return nil, { err } end
    local ok, t = pcall(chunk)
    if not ok then return nil, { ("%s failed: %s"):format(name, tostring(t)) } end
    if type(t) ~= "table" then
      return nil, { ("%s must return a table, got %s"):format(name, describe(t)) }
    end
    return t, {}
  end
  local text, err = stdin, nil
  if not text then text, err = read_file(source) end
  if not text then return nil, { err } end
  local ok, t, dups, inexact = pcall(json.read, text, name)
  if not ok then return nil, { (tostring(t):gsub("^.-tensordict: ", "")) } end
  local problems = {}
  for _, path in ipairs(dups) do
    problems[#problems + 1] = ("%s: given twice in the same object"):format(path)
  end
  for _, at in ipairs(inexact) do problems[#problems + 1] = json.inexact_text(at) end
  if type(t) ~= "table" or getmetatable(t) == json.array_mt then
    problems[#problems + 1] = ("%s: a recipe is a JSON object, got %s"):format(name,
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
  return (setmetatable(out, getmetatable(v)))
end

-- M.apply_set(t, "a.b.2.c=value"): the problems of one override (none: applied).
M.apply_set = overrides.apply

-- M.read(source): the recipe table as read (no overrides, nothing checked) and the
-- problems of reading it (tdflow sweep reads its "sweep" block).
M.read = read

----------------------------------------------------------------------------- $vars

-- vars must be an object: a JSON array (or --set vars=[1]) is not one, however it is
-- indexed. Returns the problem, or nil.
local function vars_problem(vars)
  local is_object = type(vars) == "table" and getmetatable(vars) ~= json.array_mt and not core.is_node(vars)
    and not require("tensordict.dict").is_td(vars)
  for k in pairs(is_object and vars or {}) do is_object = is_object and type(k) == "string" end
  if is_object then return nil end
  local got = getmetatable(vars) == json.array_mt and "an array" or show(vars)
  if type(vars) == "table" and got ~= "an array" and not core.is_node(vars) then got = "a table with list entries" end
  return ('vars: expected an object {"name": value, ...}, got %s'):format(got)
end

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
      local x = vars[name]
      if x == nil then
        problems[#problems + 1] = ("%s: unknown variable ${vars.%s}"):format(where, name)
        return nil
      end
      if type(x) ~= "string" and type(x) ~= "number" and type(x) ~= "boolean" then
        problems[#problems + 1] = ("%s: ${vars.%s} inside a string needs a string, a number or a boolean, got %s "
          .. "(use \"$vars.%s\" alone for the value itself)"):format(where, name, show(x), name)
        return nil
      end
      return (tostring(x))
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

local PREPARE_OPTIONS = { set = "table", workers = "number", resume = "boolean" }

-- Each node's own checks of the world (a sink's path that exists, sizes the machine
-- cannot hold), nested steps included.
local function preflight(node, where, problems, world)
  if not node then return end
  if node.nodes then
    for j, sub in ipairs(node.nodes) do preflight(sub, ("%s.steps[%d]"):format(where, j), problems, world) end
  end
  if node.preflight then
    for _, pb in ipairs(node:preflight(world) or {}) do
      problems[#problems + 1] = ("%s (%s): %s"):format(where, node.type_name, pb)
    end
  end
end

-- Reads, checks and builds a recipe. Returns the recipe (see the module's header; its
-- notes: what could not be checked) and the problems (a list of strings; the recipe
-- is nil when there are any), then the notes (and, when there are problems, the
-- effective recipe as far as it was made: tdflow sweep names a variant's sink). opts: set (overrides "PATH=VALUE"),
-- workers, resume (a resumed run: the sink finds its checkpoint).
function M.prepare(source, opts)
  opts = util.options("recipe", opts, PREPARE_OPTIONS)
  local problems, notes = {}, {}
  local pok, perr = pcall(plugins.load_all)
  if not pok then problems[#problems + 1] = (tostring(perr):gsub("^.-tensordict: ", "")) end
  local t, read_problems = read(source)
  for _, pb in ipairs(read_problems) do problems[#problems + 1] = pb end
  if not t then return nil, problems, notes end
  t = deep_copy(t)
  local document = deep_copy(t) -- as read: a run's provenance record keeps it
  for _, assignment in ipairs(opts.set or {}) do
    for _, pb in ipairs(overrides.apply(t, assignment)) do problems[#problems + 1] = pb end
  end
  if opts.workers ~= nil then t.workers = opts.workers end

  for k in pairs(t) do
    if not TOP_SET[k] then
      problems[#problems + 1] = ("%s: unknown recipe field%s (fields: %s)"):format(tostring(k),
        util.did_you_mean(k, TOP), table.concat(TOP, ", "))
    end
  end
  local vars = t.vars or {}
  local vpb = vars_problem(vars)
  if vpb then problems[#problems + 1] = vpb end
  local _, found = core.check_params(SETTINGS, { seed = t.seed, batch_size = t.batch_size, workers = t.workers })
  for _, pb in ipairs(found) do problems[#problems + 1] = pb end
  if t.timeout ~= nil and not (type(t.timeout) == "number" and t.timeout > 0) then
    problems[#problems + 1] = ("timeout: expected a number of seconds > 0, got %s"):format(show(t.timeout))
  end
  for _, field in ipairs({ "source", "steps", "sink" }) do
    -- with vars refused, its references are not reported again one by one
    if t[field] ~= nil then t[field] = expand_vars(t[field], vpb and {} or vars, field, vpb and {} or problems) end
  end
  local effective = deep_copy(t) -- after --set and $vars, before building

  -- Pipeline settings: seed, workers and timeout reach the nodes at open, through
  -- flow.run's ctx (r.seed, r.workers, r.timeout); batch_size is needed to make a source, so the builder
  -- fills it into the steps that take it and leave it out.
  local defaults = { batch_size = util.is_int(t.batch_size) and t.batch_size or nil }
  local function make(spec, where, kind)
    return build.node(spec, { where = where, kind = kind, problems = problems, defaults = defaults })
  end
  local r = { path = type(source) == "string" and source or nil, seed = t.seed or 0, workers = t.workers,
    timeout = t.timeout, vars = vars, name = t.name, description = t.description, steps = {}, document = document,
    effective = effective, notes = notes }
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
  local items, all_built = {}, true
  for i, spec in ipairs(steps) do
    r.steps[i] = make(spec, ("steps[%d]"):format(i), "node")
    -- a step that failed is still checked for keys and dtypes, as if its wrong
    -- parameters were left out
    items[i] = { node = r.steps[i], spec = spec,
      lenient = not r.steps[i] and build.lenient(spec, { defaults = defaults }) or nil }
    all_built = all_built and r.steps[i] ~= nil
  end
  if t.sink ~= nil then r.sink = make(t.sink, "sink", "sink") end

  -- what a node's own checks of the world take (under mpirun: this rank's)
  local world = { resume = opts.resume }
  world.rank, world.ranks = host_dist.launched_rank()
  preflight(r.source, "source", problems, world)
  for i, node in ipairs(r.steps) do preflight(node, ("steps[%d]"):format(i), problems, world) end
  preflight(r.sink, "sink", problems, world)
  sizes.check(r.source, r.steps, problems)
  local at_sink = keyflow.check(r.source, items, r.sink, problems, notes)
  metrics.check(t.metrics, at_sink, r.sink, problems, notes)
  for _, pb in ipairs(t.sweep ~= nil and sweep_variants.check(t.sweep) or {}) do problems[#problems + 1] = pb end
  r.metrics = t.metrics

  if #problems > 0 or not all_built then return nil, problems, notes, effective end
  r.node = flow.Seq { steps = r.steps }
  r.sink = r.sink or flow.Discard {}
  return r, {}, notes
end

-- recipe.check(source [, opts]) -> the list of problems (empty when the recipe is fine),
-- then the notes (what could not be checked).
function M.check(source, opts)
  local _, problems, notes = M.prepare(source, opts)
  return problems, notes
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
