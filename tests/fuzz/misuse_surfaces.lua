-- misuse_surfaces.lua: the misuse fuzzer's surfaces past the tensor and TensorDict API
-- (tests/fuzz/misuse.lua; issue 28): T.flow's nodes, recipes through recipe.load and
-- recipe.check, and T.dist on a single rank. Each surface gives targets (name, function,
-- receiver kind) and values for the pool; the oracle is misuse.lua's: a result or a
-- "tensordict: " error, nothing else.
--
-- What is left out, and why: Map with workers > 0 forks a process per node (its engine
-- has its own specs and the workers' faults their own tests), so every Map the fuzzer
-- makes runs inline; running recipes (recipe.load only builds them: a ParticleSource of
-- 2^62 rows is a valid recipe that would run for ever); dist.abort and dist.finalize end
-- the process's MPI for every later call.
local T = require("tensordict")
local flow = T.flow
local recipe = require("tensordict.host.recipe")

local M = {}

local KEYS = { "a", "b", "s", "x", "n", { "n", "c" }, "missing", "" }
local PATHS = { "out", "sub/dir", "", ".", "..", "/", "a\0b", "nope.csv", "pool1" }
local FUNCTIONS = { "Tensor.neg", "Tensor.sigmoid", "physics.features", "nope", "Tensor." }

-- A value for a declared parameter kind, from its own kind most of the time and from
-- the whole pool otherwise.
local function param_value(kind, values, depth)
  local r = math.random()
  if r < 0.3 then return values[math.random(#values)] end
  if kind == "keys" then
    local out = {}
    for i = 1, math.random(0, 3) do out[i] = KEYS[math.random(#KEYS)] end
    return out
  elseif kind == "key" then
    return KEYS[math.random(#KEYS)]
  elseif kind == "integer" then
    return ({ 0, 1, 2, 3, -1, 2 ^ 31, 2 ^ 53, 2 ^ 63, 1.5 })[math.random(9)]
  elseif kind == "number" then
    return ({ 0, 1, -1, 0.5, 1e-9, 0 / 0, math.huge, -math.huge })[math.random(8)]
  elseif kind == "boolean" then
    return math.random() < 0.5
  elseif kind == "string" then
    return PATHS[math.random(#PATHS)]
  elseif kind == "function" then
    return r < 0.6 and FUNCTIONS[math.random(#FUNCTIONS)] or function(td) return td end
  elseif kind == "dtype" then
    return ({ "float32", "int64", "bool", "float17", "" })[math.random(5)]
  elseif kind == "node" then
    return depth < 2 and M.spec(values, "node", depth + 1) or { use = "Take", n = 1 }
  elseif kind == "nodes" then
    local out = {}
    for i = 1, math.random(0, 3) do out[i] = depth < 2 and M.spec(values, "node", depth + 1) or { use = "Unbatch" } end
    return out
  elseif kind == "tensordict" then
    for _ = 1, 20 do
      local v = values[math.random(#values)]
      if T.is_tensordict(v) then return v end
    end
  elseif kind == "table" then
    return ({ { a = "b" }, { x = "a" }, { 1, 2 }, {} })[math.random(4)]
  end
  return values[math.random(#values)]
end

-- The node types of a kind ("source", "node", "sink"), sorted.
local function types_of(kind)
  local out = {}
  for _, name in ipairs(flow.type_names()) do
    local cls = flow.registry[name]
    if type(cls) == "table" and cls.kind == kind then out[#out + 1] = name end
  end
  return out
end

-- A random spec of a node of type name: {use = name, params...}, its parameters drawn
-- per their declared kinds, sometimes one unknown or one required left out.
function M.spec_of(values, name, depth)
  local cls = flow.registry[name]
  local spec = { use = name }
  for _, p in ipairs(cls.params) do
    if math.random() < (p.required and 0.9 or 0.4) then spec[p[1]] = param_value(p[2], values, depth or 0) end
  end
  if name == "Map" then spec.workers = 0 end -- inline: no fork per call (see the header)
  if math.random() < 0.1 then spec.kyes = 1 end
  return spec
end

-- The same for a type of kind ("source", "node", "sink"; any when nil).
function M.spec(values, kind, depth)
  local names = types_of(kind or ({ "source", "node", "sink" })[math.random(3)])
  return M.spec_of(values, names[math.random(#names)], depth)
end

-- Nodes made well, for the methods to be called on: small sources, every step type
-- with sane parameters, sinks writing into the scratch folder.
function M.values(values, dir, n)
  local td = T.TensorDict({ a = T.arange(1, 6), b = T.zeros(6, 2), s = "x", n = { c = T.ones(6) } }, { 6 })
  local made = {
    flow.TensorSource { td = td, batch_size = 4 },
    flow.ParticleSource { n = 8, steps = 1, batch_size = 4, seed = 1 },
    flow.Take { n = 2 }, flow.Apply { keys = { "a" }, fn = "Tensor.neg", out_keys = { "neg" } },
    flow.Select { keys = { "a", "b" } }, flow.Exclude { keys = { "s" } }, flow.Rename { keys = { a = "z" } },
    flow.Cast { dtype = "float64" }, flow.Rebatch { size = 3 }, flow.Batch { size = 2 }, flow.Unbatch {},
    flow.Shuffle { buffer = 4, seed = 1 }, flow.Normalize { keys = { "b" } },
    flow.Map { fn = function(b) return b end, workers = 0 },
    flow.Lambda { fn = function(b) return b end }, flow.Filter { where = "a" },
    flow.DropNaN {}, flow.FillNaN { keys = { "b" }, value = 1, posinf = 2 },
    flow.Seq { steps = { flow.Take { n = 3 }, flow.Select { keys = { "a" } } } },
    flow.Collect { cat = true }, flow.Discard {},
    flow.MemmapSink { path = ("%s/sink%d"):format(dir, n), existsok = true },
    flow.ReplayBuffer { path = ("%s/rb%d"):format(dir, n), capacity = 8, existsok = true },
    flow.ReplayBuffer { path = ("%s/per%d"):format(dir, n), capacity = 8, existsok = true, sampler = "prioritized" },
    flow.KeySet.new({ "a", "b" }),
    { seed = 1, workers = 0 }, { dist = 5 }, { timeout = 0.01 },
    M.spec(values, "source"), M.spec(values, "node"), M.spec(values, "sink"),
  }
  for _, v in ipairs(made) do values[#values + 1] = v end
end

local function is_node(v) return flow.is_node(v) end

-- The methods a node of any kind may be asked for, called on nodes from the pool.
local METHODS = { "forward", "push", "open", "close", "spec", "check_keys", "flush", "drain", "preflight",
  "iter", "len", "keys", "write", "finish", "abort", "keys_after", "is_done", "profile", "set_profile", "counts",
  "sample", "update_priority" }

function M.flow_targets()
  require("tensordict.host.plugins").load_all() -- the plugins' node types are fuzzed too
  local out = {}
  for _, name in ipairs(flow.type_names()) do
    local cls = flow.registry[name]
    out[#out + 1] = { "flow." .. name .. "{...}", function(values)
      local params = values[math.random(#values)]
      if math.random() < 0.8 then
        params = M.spec_of(values, name)
        params.use = nil -- the class is the type
      end
      return cls.new(params)
    end, "pool" }
  end
  for _, m in ipairs(METHODS) do
    out[#out + 1] = { "node:" .. m, function(node, ...)
      local f = node[m]
      if f == nil then return nil end
      return f(node, ...)
    end, is_node }
  end
  out[#out + 1] = { "node(td)", function(node, ...) return node(...) end, is_node }
  out[#out + 1] = { "source:iter()()", function(src, ctx) -- a few batches of a pool source
    local nxt = src:iter(ctx)
    for _ = 1, 3 do
      if type(nxt) ~= "function" or nxt() == nil then break end
    end
  end, function(v) return is_node(v) and v.kind == "source" end }
  out[#out + 1] = { "flow.run", flow.run, nil }
  out[#out + 1] = { "flow.build(spec)", function(values) return flow.build(M.spec(values)) end, "pool" }
  out[#out + 1] = { "flow.build", flow.build, nil }
  out[#out + 1] = { "flow.Seq", function(...) return flow.Seq.new(...) end, nil }
  return out
end

-- A random recipe table: fields from the recipe's own set, their values drawn as a
-- spec's are, some wrong on purpose (vars that are not an object, an unknown field).
local function random_recipe(values)
  local r = {}
  if math.random() < 0.9 then r.source = M.spec(values, "source") end
  if math.random() < 0.7 then
    r.steps = {}
    for i = 1, math.random(0, 4) do r.steps[i] = M.spec(values, "node") end
  end
  if math.random() < 0.6 then r.sink = M.spec(values, "sink") end
  local top = {
    seed = { 0, 7, -1, 2 ^ 63, "x" }, batch_size = { 4, 0, 2 ^ 40, 1.5 }, workers = { 0, -1, "2" },
    timeout = { 1, 0, -1, 0 / 0, "5" }, name = { "n", 5 }, vars = { { cut = 1 }, { 1, 2 }, 3, { a = { 1 } } },
    extra = { 1 },
  }
  for field, choices in pairs(top) do
    if math.random() < 0.3 then r[field] = choices[math.random(#choices)] end
  end
  if r.vars and r.steps and r.steps[1] and math.random() < 0.5 then
    r.steps[1].n = ({ "$vars.cut", "${vars.cut}", "$vars.nope", "$vars." })[math.random(4)]
  end
  return r
end

function M.recipe_targets()
  require("tensordict.host.plugins").load_all() -- every node type and function, before any chdir
  return {
    { "recipe.load(random)", function(values) return recipe.load(random_recipe(values)) end, "pool" },
    { "recipe.check(random)", function(values) return recipe.check(random_recipe(values)) end, "pool" },
    { "recipe.load", recipe.load, nil },
    { "recipe.check", recipe.check, nil },
  }
end

-- T.dist on one rank: MPI starts once, with a short default timeout so that a receive
-- with no sender fails instead of waiting for ever (calls may still pass {timeout =}
-- from the pool, whose values are short).
local SKIP_DIST = { abort = true, finalize = true }
function M.dist_targets()
  local dist = T.dist
  local ok = dist.is_available()
  if ok and not dist.is_initialized() then dist.init({ timeout = 0.01 }) end
  local out, names = {}, {}
  for k, f in pairs(dist) do
    if type(f) == "function" and not SKIP_DIST[k] then names[#names + 1] = k end
  end
  table.sort(names)
  for _, k in ipairs(names) do out[#out + 1] = { "dist." .. k, dist[k], nil } end
  return out
end

-- Extra pool values for dist: options with short timeouts, ranks and tags.
M.DIST_VALUES = { { timeout = 0 }, { timeout = 0.001 }, 0, 32767, 2 ^ 31 }

return M
