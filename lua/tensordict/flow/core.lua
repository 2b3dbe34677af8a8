-- flow/core.lua: what every pipeline node type is made of: the type registry, parameter
-- checking (which also drives spec(), flow.build and the generated docs), named
-- functions, key helpers and node errors. The protocol itself is in docs/flow.md.
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local tensor = require("tensordict.tensor")
local dtypes = require("tensordict.tensor.dtype")
local memory = require("tensordict.tensor.memory")

local fail, describe = util.fail, util.describe
local is_td, is_tensor = td_core.is_td, tensor.is_tensor

local M = {}

M.PROTOCOL_VERSION = 1

M.registry = {}          -- type name -> class (or a plugin's constructor function)
M.functions = {}         -- name -> function, for specs and recipes
M.function_takes = {}    -- name -> "batch" or "tensors": what it is a function of, when declared
local function_names = setmetatable({}, { __mode = "k" }) -- function -> name

-- The integers a double holds exactly: every integer parameter stays within them
-- (1e30 or 2^64 is an integer to Lua, but not a count anything can hold).
M.EXACT_INT = 2 ^ 53
-- Worker processes a step may ask for (Map's workers, a recipe's workers): the range
-- the checks enforce (forking more than this is a typo, not a plan).
M.MAX_WORKERS = 1024

------------------------------------------------------------------------ names

-- The closest of names to word, or nil (util.nearest: "did you mean" hints).
M.nearest = util.nearest

local sorted_keys = util.sorted_keys

----------------------------------------------------------------------- functions

-- flow.register_function(name, fn [, takes]): fn becomes reachable by name from specs
-- and recipes, and spec() writes the name back. takes ("batch" or "tensors") says what
-- fn is a function of: a parameter that calls fn(td) (Map, Lambda, a mask) refuses a
-- function of tensors by name, and one that calls fn(leaf...) (Apply, Module) a
-- function of a batch; undeclared functions are taken by both.
function M.register_function(name, fn, takes)
  if type(name) ~= "string" or name == "" then
    fail(("register_function: the name must be a non-empty string, got %s"):format(describe(name)))
  end
  if type(fn) ~= "function" then
    fail(("register_function: '%s' must be a function, got %s"):format(name, describe(fn)))
  end
  if takes ~= nil and takes ~= "batch" and takes ~= "tensors" then
    fail(("register_function: '%s': takes must be \"batch\" or \"tensors\", got %s"):format(name, describe(takes)))
  end
  M.functions[name] = fn
  M.function_takes[name] = takes
  if function_names[fn] == nil then function_names[fn] = name end
  return fn
end

-- The function a name stands for: a registered one, or "Tensor.<method>" for any
-- tensor method (fn(t, ...) calls t:<method>(...)). nil when unknown.
function M.resolve_function(name)
  local fn = M.functions[name]
  if fn then return fn end
  local method = name:match("^Tensor%.([%w_]+)$")
  if method and type(tensor.Tensor[method]) == "function" then
    local m = tensor.Tensor[method]
    fn = function(t, ...) return m(t, ...) end
    M.functions[name], function_names[fn], M.function_takes[name] = fn, name, "tensors"
    return fn
  end
  return nil
end

-- The registered function names (sorted), factories' included, for "did you mean" hints.
function M.function_list()
  local names = sorted_keys(M.functions)
  for _, name in ipairs(require("tensordict.flow.fn_args").names()) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- A function with args, {use = name, args = {...}} (flow/fn_args.lua): the function it
-- makes; raises what is wrong with it.
function M.resolve_use(v)
  return require("tensordict.flow.fn_args").resolve(v)
end

function M.function_name(fn) return function_names[fn] end

---------------------------------------------------------------------------- keys

-- A key's text for messages: 'obs' or {"next", "obs"}.
function M.key_text(key)
  if type(key) == "table" then return td_core.key_path_text(key) end
  return "'" .. tostring(key) .. "'"
end

-- A key as one string, for sets: paths join with a NUL byte (keys cannot hold one
-- that matters here: a path of length 1 is the same key as its string).
function M.key_id(key)
  if type(key) == "table" then return (table.concat(key, "\0")) end
  return key
end

-- Every leaf key of td (nested ones as paths), for "the batch has keys ..." messages.
function M.keys_text(td)
  local keys = td:keys({ include_nested = true, leaves_only = true })
  local parts = {}
  for i = 1, math.min(#keys, 20) do parts[i] = M.key_text(keys[i]) end
  if #keys > 20 then parts[#parts + 1] = ("... (%d in all)"):format(#keys) end
  return #keys == 0 and "none" or table.concat(parts, ", ")
end

-- What a node says of a key its batch lacks: the key and the batch's keys.
function M.missing_key(td, key)
  return ("key %s is missing from the batch (its keys: %s)"):format(M.key_text(key), M.keys_text(td))
end

-- Raises naming the node, the first missing key and the batch's keys.
function M.require_keys(node, td, keys)
  for i = 1, #keys do
    if td:get(keys[i]) == nil then node:fail(M.missing_key(td, keys[i])) end
  end
end

-- The value at key, or a clear error from the node.
function M.get(node, td, key)
  local v = td:get(key)
  if v == nil then node:fail(M.missing_key(td, key)) end
  return v
end

-- A pipeline setting (seed, workers) as a node reads it at open: its own parameter
-- p[name] when given, else the run's ctx[name] (flow.run's option, a recipe's top-level
-- field), else fallback. The one road by which run-wide values reach nodes.
function M.setting(p, name, ctx, fallback)
  local v = p[name]
  if v == nil and ctx then v = ctx[name] end
  if v == nil then v = fallback end
  return v
end

-- td itself, or a shallow unlocked copy when it is locked (nodes write into the batch
-- they get; a memmap load is locked).
function M.writable(td)
  if td:is_locked() then return td_core.construct(td, td:batch_size()) end
  return td
end

-- An error message with the failing node's place: "tensordict: steps[3] (Apply): ...".
-- The original's "file:line:" prefix is kept; the node's own "Type: " is folded in.
function M.annotate(err, where, node)
  if type(err) ~= "string" then return err end
  local label = node and (where ~= "" and ("%s (%s)"):format(where, node.type_name) or node.type_name) or where
  if label == "" then return err end
  local head, rest = err:match("^(.-)tensordict: (.*)$")
  if head then
    if node and rest:sub(1, #node.type_name + 2) == node.type_name .. ": " then
      rest = rest:sub(#node.type_name + 3)
    end
    if rest:sub(1, #label + 2) == label .. ": " then return err end
    return ("%stensordict: %s: %s"):format(head, label, rest)
  end
  -- a plain Lua error ("file:line: msg") keeps its position in front
  local pos, msg = err:match("^([^\n]-:%d+: )(.*)$")
  if pos then return ("%stensordict: %s: %s"):format(pos, label, msg) end
  return ("tensordict: %s: %s"):format(label, err)
end

------------------------------------------------------------------- param checking

-- Each kind: a check returning the normalised value, or nil and what was expected.
local function check_key(v)
  if type(v) == "string" and v ~= "" then return v end
  if type(v) == "table" and not is_tensor(v) and not is_td(v) and #v > 0 then
    for i = 1, #v do
      if type(v[i]) ~= "string" or v[i] == "" then return nil end
    end
    if #v == 1 then return v[1] end
    local copy = {}
    for i = 1, #v do copy[i] = v[i] end
    return copy
  end
  return nil
end

local KINDS = {}
KINDS.key = { expect = "a key (a string or an array of strings)", check = check_key }
KINDS.keys = {
  expect = "a list of keys (strings or arrays of strings)",
  check = function(v)
    if type(v) == "string" then return check_key(v) and { v } end
    if type(v) ~= "table" or is_tensor(v) or is_td(v) then return nil end
    local out = {}
    local n = 0
    for _ in pairs(v) do n = n + 1 end
    if n ~= #v then return nil end
    for i = 1, #v do
      out[i] = check_key(v[i])
      if out[i] == nil then return nil end
    end
    return out
  end,
}
KINDS.string = { expect = "a string", check = function(v) return type(v) == "string" and v or nil end }
KINDS.number = { expect = "a number", check = function(v) return type(v) == "number" and v or nil end }
KINDS.integer = {
  expect = "an integer",
  check = function(v)
    if not util.is_int(v) then return nil end
    if math.abs(v) > M.EXACT_INT then
      return nil, "integers are exact up to 2^53 = 9007199254740992; past it no count or size is meant"
    end
    return v
  end,
}
-- A seed: a uint64 (T.manual_seed's and T.Generator's range); exactness past 2^53 is
-- the reader's to check (a JSON literal that a double rounds: recipe.lua).
KINDS.seed = {
  expect = "a seed (an integer in 0..2^64-1)",
  check = function(v)
    if util.is_int(v) and v >= 0 and v < 2 ^ 64 then return v end
    return nil
  end,
}
KINDS.boolean = { expect = "a boolean", check = function(v) if type(v) == "boolean" then return v end end }
KINDS["function"] = {
  expect = "a function or the name of a registered function",
  check = function(v)
    if type(v) == "function" then return v end
    if type(v) == "table" and v.use ~= nil and not is_tensor(v) and not is_td(v) then return M.resolve_use(v) end
    if type(v) == "string" then
      local fn = M.resolve_function(v)
      if fn then return fn end
      if require("tensordict.flow.fn_args").factories[v] then return M.resolve_use({ use = v }) end
      local hint = M.nearest(v, M.function_list())
      return nil, "unknown function" .. (hint and ("; did you mean '" .. hint .. "'?") or "")
    end
    return nil
  end,
}

-- What a function named in a parameter that calls it with `takes` is, when its
-- declaration says otherwise: a problem's text, or nil.
local TAKES_TEXT = { batch = "a batch (fn(td))", tensors = "tensors (fn(leaf, ...))" }
local function takes_problem(name, value, takes)
  if type(value) == "table" and not is_tensor(value) and not is_td(value) then value = value.use end
  if type(value) == "string" then M.resolve_function(value) end -- "Tensor.x" declares itself when resolved
  local declared = type(value) == "string" and M.function_takes[value]
  if not takes or not declared or declared == takes then return nil end
  return ("%s: '%s' is a function of %s, but this parameter calls it with %s%s"):format(name, value,
    TAKES_TEXT[declared], TAKES_TEXT[takes], takes == "batch"
      and " (a function of tensors goes in Apply or Module)" or " (a function of a batch goes in Lambda or Map)")
end
M.takes_problem = takes_problem
KINDS.dtype = {
  expect = "a dtype name (" .. table.concat(dtypes.list(), ", ") .. ")",
  check = function(v)
    if type(v) ~= "string" then return nil end
    local ok, code = pcall(dtypes.code, v, "dtype")
    return ok and dtypes.name(code) or nil
  end,
}
KINDS.node = {
  expect = "a node (or a node's spec)",
  check = function(v)
    if M.is_node(v) then return v end
    if type(v) == "table" and type(M.spec_type(v)) == "string" then return M.build(v) end
    return nil
  end,
}
KINDS.nodes = {
  expect = "a list of nodes (or node specs)",
  check = function(v)
    if type(v) ~= "table" or is_tensor(v) or is_td(v) or M.is_node(v) then return nil end
    local out = {}
    for i = 1, #v do
      out[i] = KINDS.node.check(v[i])
      if out[i] == nil then return nil end
    end
    return out
  end,
}
KINDS.table = {
  expect = "a table",
  check = function(v) if type(v) == "table" and not is_tensor(v) and not is_td(v) then return v end end,
}
KINDS.tensordict = { expect = "a TensorDict", check = function(v) if is_td(v) then return v end end }
KINDS.any = { expect = "any value", check = function(v) return v end }

local function show(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "number" then return util.number_text(v) end
  return describe(v)
end

-- Whether kind names a parameter kind (a factory's args are declared with them).
function M.is_param_kind(kind) return KINDS[kind] ~= nil end

-- Checks params against cls.params. Returns the normalised params, a list of
-- problems, each "<where><name>: expected ..., got ..." (where is a prefix such as
-- "steps[3]." for the host's check; "" for a node made in a script), and the set of
-- parameter names that have one.
function M.check_params(cls, params, where)
  where = where or ""
  local problems, p, bad = {}, {}, {}
  if type(params) ~= "table" or is_tensor(params) or is_td(params) then
    problems[1] = ("%sexpected a table of parameters, got %s"):format(where, describe(params))
    return p, problems
  end
  local known = {}
  for _, spec in ipairs(cls.params) do known[spec[1]] = spec end
  for k in pairs(params) do
    if k ~= "type" and not known[k] then
      local names = {}
      for _, spec in ipairs(cls.params) do names[#names + 1] = spec[1] end
      problems[#problems + 1] = ("%s%s: unknown parameter%s (%s)"):format(where,
        tostring(k), util.did_you_mean(k, names),
        #names > 0 and ("parameters: " .. table.concat(names, ", ")) or (cls.type_name .. " takes no parameters"))
      bad[k] = true
    end
  end
  if params.type ~= nil and params.type ~= cls.type_name then
    problems[#problems + 1] = ("%stype: %s does not match the node type '%s'"):format(where,
      show(params.type), cls.type_name)
  end
  for _, spec in ipairs(cls.params) do
    local name, kind = spec[1], KINDS[spec[2]]
    local v = params[name]
    local before = #problems
    if v == nil then
      if spec.required then
        problems[#problems + 1] = ("%s%s: required (%s)"):format(where, name, kind.expect)
      end
      p[name] = spec.default
    else
      local ok, value, why = pcall(kind.check, v)
      if not ok then
        problems[#problems + 1] = ("%s%s: %s"):format(where, name, tostring(value):gsub("^.-tensordict: ", ""))
      elseif value == nil then
        problems[#problems + 1] = ("%s%s: expected %s, got %s%s"):format(where, name, kind.expect,
          show(v), why and (" (" .. why .. ")") or "")
      elseif spec.one_of then
        local found = false
        for _, allowed in ipairs(spec.one_of) do found = found or allowed == value end
        if not found then
          local names = {}
          for i, allowed in ipairs(spec.one_of) do names[i] = show(allowed) end
          problems[#problems + 1] = ("%s%s: expected one of %s, got %s%s"):format(where, name,
            table.concat(names, ", "), show(v), util.did_you_mean(value, spec.one_of))
        end
      elseif spec.min and value < spec.min then
        problems[#problems + 1] = ("%s%s: expected %s >= %s, got %s"):format(where, name,
          kind.expect:gsub("^an? ", ""), tostring(spec.min), show(v))
      elseif spec.max and value > spec.max then
        problems[#problems + 1] = ("%s%s: expected %s <= %s, got %s"):format(where, name,
          kind.expect:gsub("^an? ", ""), tostring(spec.max), show(v))
      elseif spec.takes and takes_problem(name, v, spec.takes) then
        problems[#problems + 1] = where .. takes_problem(name, v, spec.takes)
      end
      p[name] = value
    end
    if #problems > before then bad[name] = true end
  end
  return p, problems, bad
end

------------------------------------------------------------------------ node types

local Node = {}  -- methods every node, source and sink has
M.Node = Node

-- Raises "tensordict: <Type>: msg" (flow.run and Seq add the position).
function Node:fail(fmt, ...)
  fail(self.type_name .. ": " .. (select("#", ...) > 0 and fmt:format(...) or fmt))
end

-- The spec: plain, JSON-safe data from which flow.build makes an equal node.
function Node:spec()
  local out = { type = self.type_name }
  for _, spec in ipairs(self.params) do
    local name, kind = spec[1], spec[2]
    local v = self.p[name]
    if v ~= nil and not (spec.default ~= nil and v == spec.default) then
      out[name] = M.to_plain(self, name, kind, v)
    end
  end
  return out
end

-- A parameter value as plain data (functions by their registered name, or {use =, args =};
-- a function in a parameter of kind any, a mask, too).
function M.to_plain(node, name, kind, v)
  if kind == "function" or (kind == "any" and type(v) == "function") then
    local fname = function_names[v] or require("tensordict.flow.fn_args").plain(v)
    if not fname then
      node:fail("spec: %s is a function without a name; register it with "
        .. "flow.register_function(name, fn) or pass its name", name)
    end
    return fname
  elseif kind == "node" then
    return v:spec()
  elseif kind == "nodes" then
    local list = {}
    for i, n in ipairs(v) do list[i] = n:spec() end
    return list
  elseif kind == "tensordict" then
    node:fail("spec: %s is an in-memory TensorDict, which has no plain form; save it with "
      .. "memmap and read it with MemmapSource", name)
  end
  return M.plain_copy(node, name, v)
end

-- A deep copy of v that holds only strings, numbers, booleans and tables.
function M.plain_copy(node, name, v)
  local t = type(v)
  if t == "string" or t == "boolean" then return v end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      node:fail("spec: %s holds %s, which JSON cannot represent", name, tostring(v))
    end
    return v
  end
  if t == "table" and not is_tensor(v) and not is_td(v) then
    local out = {}
    for k, x in pairs(v) do out[k] = M.plain_copy(node, name, x) end
    return out
  end
  node:fail("spec: %s holds %s, which has no plain form", name, describe(v))
end

function M.is_node(x)
  local mt = type(x) == "table" and getmetatable(x)
  return mt and rawget(mt, "__flow_node") == true or false
end

-- Calling a node: forward for 1:1 nodes; a stream node returns what it emitted for
-- this batch (several as several values), after draining work still in flight.
local function call_node(self, td)
  local forward = self.forward
  if forward then return forward(self, td) end
  if not self.push then
    self:fail("a %s is not called on batches (%s)", self.kind,
      self.kind == "source" and "it yields them: iter(ctx)" or "it takes them: write(td), then finish()")
  end
  local out, n = {}, 0
  local function collect(r) n = n + 1; out[n] = r end
  self:push(td, collect)
  if self.drain then self:drain(collect) end
  return unpack(out, 1, n)
end
M.call_node = call_node

-- flow.Normalize{keys = {"energy"}, out_keys = {"energy_z"}}: flow/node_text.lua.
local function node_tostring(self)
  return require("tensordict.flow.node_text")(self)
end

-- The protocol's entry points, checked once for every node type (issue 28: the misuse
-- fuzzer found forward, push and write of most types indexing a nil or a number as a
-- batch, flush calling a nil emit, open and iter a cdata as ctx, keys_after a string as
-- a KeySet; preflight a number as its options): a class's
-- methods of these names are wrapped as they are defined, their arguments checked.
local function plain_table_or_nil(v)
  return type(v) == "nil" or (type(v) == "table" and not is_td(v) and not is_tensor(v))
end
local ARG_CHECKS = {
  td = function(v) return is_td(v) end, emit = function(v) return type(v) == "function" end,
  ctx = plain_table_or_nil, opts = plain_table_or_nil,
  ks = function(v) return getmetatable(v) == M.KeySet end, -- (defined below)
}
local ARG_WANTED = { td = "a TensorDict batch", emit = "emit to be a function", ctx = "a ctx table (or nil)",
  ks = "a flow.KeySet", opts = "an options table (or nil)" }
local ENTRIES = { forward = { "td" }, push = { "td", "emit" }, flush = { "emit" }, drain = { "emit" },
  write = { "td" }, open = { "ctx" }, iter = { "ctx" }, keys_after = { "ks" }, check_keys = { "ks" },
  check_dtypes = { "ks" }, preflight = { "opts" } }

-- ctx.dist, when there, is what the host hands the nodes of a data-parallel run
-- (host/dist.lua: rank, size and the exchanges); nodes read rank and size from it.
local function valid_dist(d)
  return type(d) == "table" and util.is_int(d.size) and d.size >= 1 and util.is_int(d.rank)
    and d.rank >= 0 and d.rank < d.size
end

local function check_arg(self, method, what, v)
  if not ARG_CHECKS[what](v) then self:fail("%s: expected %s, got %s", method, ARG_WANTED[what], describe(v)) end
  if what == "ctx" and v ~= nil and v.dist ~= nil and not valid_dist(v.dist) then
    self:fail("%s: ctx.dist must be the host's table of a data-parallel run {rank =, size =, ...} "
      .. "(docs/dist.md), got %s", method, describe(v.dist))
  end
end

local function checked_entry(name, f)
  local args = ENTRIES[name]
  if not args then return f end
  local first, second = args[1], args[2]
  if second then
    return function(self, a, b, ...)
      check_arg(self, name, first, a)
      check_arg(self, name, second, b)
      return f(self, a, b, ...)
    end
  end
  return function(self, a, ...)
    check_arg(self, name, first, a)
    return f(self, a, ...)
  end
end

-- core.define(name, {kind =, doc =, params = {...}, stateful =, keeps_rows =}): a new node type. flow.<name>
-- (the returned class, callable) makes nodes; the registry maps the name to it. A name
-- is defined once, unless its class is marked redefinable (tdrepl marks the types
-- defined at its prompt, so a type can be written again there). cls.defined_in is the
-- chunk that defined it ("=stdin" at tdrepl's prompt).
function M.define(name, def)
  local old = M.registry[name]
  if old and not (type(old) == "table" and old.redefinable) then
    local first = type(old) == "table" and old.defined_in and old.defined_in:gsub("^[@=]", "")
    error("tensordict: flow: node type '" .. name .. "' is defined twice"
      .. (first and (" (first in " .. first .. ")") or ""), 2)
  end
  local cls = setmetatable({}, { __index = Node })
  cls.type_name = name
  local caller = debug.getinfo(2, "S")
  cls.defined_in = caller and caller.source or "?"
  cls.kind = def.kind or "node"
  cls.doc = def.doc or ""
  cls.params = def.params or {}
  cls.examples = def.examples
  cls.stateful = def.stateful -- keeps state across batches without state()/restore()
  -- the rows out are the rows in, as a rule (a hint: MemmapSink under mpirun plans its
  -- folder from it, and a node that breaks it costs a copy, not a wrong result)
  cls.keeps_rows = def.keeps_rows
  for _, spec in ipairs(cls.params) do
    assert(KINDS[spec[2]], "unknown parameter kind " .. tostring(spec[2]))
  end
  local mt = { __index = cls, __call = call_node, __tostring = node_tostring, __flow_node = true }
  cls.__mt = mt
  -- cls.new(params): check, fill defaults, init. Classes may wrap it (Seq does).
  function cls.new(params)
    local p, problems = M.check_params(cls, params == nil and {} or params)
    if #problems > 0 then
      fail(("%s: %s"):format(name, table.concat(problems, "; ")))
    end
    local self = setmetatable({ p = p }, mt)
    if cls.init then cls.init(self) end
    self.in_keys = self.in_keys or {}
    self.out_keys = self.out_keys or {}
    return self
  end
  setmetatable(cls, { __index = Node, __call = function(_, params) return cls.new(params) end,
    __newindex = function(t, k, v)
      rawset(t, k, type(v) == "function" and checked_entry(k, v) or v)
    end })
  M.registry[name] = cls
  return cls
end

-- flow.register(name, constructor): a plugin's node type. constructor(params) returns
-- a node; a class made by core.define registers itself already.
function M.register(name, ctor)
  if type(name) ~= "string" or not name:match("^[%a_][%w_.]*$") then
    fail(("register: a node type name is an identifier (dots allowed), got %s"):format(describe(name)))
  end
  if type(ctor) ~= "function" and not (type(ctor) == "table" and ctor.new) then
    fail(("register: '%s' needs a constructor function or a node class, got %s"):format(name, describe(ctor)))
  end
  M.registry[name] = ctor
  return ctor
end

---------------------------------------------------------------------- checkpoints

-- The checkpoint protocol (docs/flow.md, "Checkpoints and resume"). A node that keeps
-- something from one batch to the next (rows held, a count, statistics, a generator)
-- defines node:state(), a state value (nil, booleans, numbers, strings, tables,
-- tensors, TensorDicts: flow/checkpoint.lua writes it), taken between batches after
-- drain; and node:restore(state), called after open and before the first batch of a
-- resumed run. A source's state() is the position of its pass in progress, and
-- restore(state) makes its next iter() start there. A node that keeps state it cannot
-- save declares it (flow.define's stateful = true), and so does every stream node with
-- flush (it holds rows until the end): a run that checkpoints refuses them instead of
-- resuming wrong. Functions given to nodes are taken to keep no state of their own;
-- what they draw from the global generator is recorded with the run.

-- Why node x cannot take part in a checkpoint, or nil when it can (or keeps nothing).
function M.checkpoint_problem(x)
  if type(x.state) == "function" and type(x.restore) == "function" then return nil end
  if x.stateful then
    return "it keeps state from batch to batch and has no state()/restore() to save it"
  end
  if x.flush then
    return "it holds rows until the end of the stream (it has flush) and has no state()/restore() to save them"
  end
  return nil
end

------------------------------------------------------------------------- key sets

-- The keys a batch holds at some point of a pipeline, for deriving a Seq's in_keys and
-- out_keys and for checking that every node's in_keys are produced upstream. A key
-- covers the paths under it; a path is present when it or a prefix of it was added.
local KeySet = {}
KeySet.__index = KeySet
M.KeySet = KeySet

-- A KeySet also knows, where someone declared it, each key's dtype and who gave it
-- ("the source", "steps[2] (Cast)"): checks compare it with what a node accepts.
function KeySet.new(keys)
  local self = setmetatable({ ids = {}, order = {}, produced = {}, dtypes = {}, origins = {} }, KeySet)
  for _, k in ipairs(keys or {}) do self:add(k) end
  return self
end

function KeySet:has(key)
  if self.open then return true end -- a node upstream adds keys nobody declared
  return self:known(key)
end

-- Whether key was given or produced by a node that declared it (KeySet:has, without
-- counting keys that a node adding undeclared keys may have added).
function KeySet:known(key)
  local ids = self.ids
  if type(key) == "string" then
    if ids[key] then return true end
    local prefix = key .. "\0"
    for id in pairs(ids) do if id:sub(1, #prefix) == prefix then return true end end
    return false
  end
  for n = 1, #key do
    if ids[table.concat(key, "\0", 1, n)] then return true end
  end
  local prefix = table.concat(key, "\0") .. "\0"
  for id in pairs(ids) do if id:sub(1, #prefix) == prefix then return true end end
  return false
end

-- Adds key; produced marks it as made by a node (a candidate out_key). dtype (nil:
-- unknown) is what it holds from here on, origin who said so.
function KeySet:add(key, produced, dtype, origin)
  local id = M.key_id(key)
  if not self.ids[id] then
    self.ids[id] = key
    self.order[#self.order + 1] = key
  end
  self.dtypes[id], self.origins[id] = dtype, dtype and origin or nil
  if produced and not self.produced[id] then
    self.produced[id] = true
    self.produced[#self.produced + 1] = key
  end
end

-- The dtype key holds (nil: unknown) and who declared it.
function KeySet:dtype(key)
  local id = M.key_id(key)
  return self.dtypes[id], self.origins[id]
end

-- Removes key and every path under it.
function KeySet:remove(key)
  local id = M.key_id(key)
  local prefix = id .. "\0"
  for other in pairs(self.ids) do
    if other == id or other:sub(1, #prefix) == prefix then
      self.ids[other], self.dtypes[other], self.origins[other] = nil, nil, nil
    end
  end
end

-- Keeps only the given keys (and what is under them).
function KeySet:restrict(keys)
  local keep = {}
  for _, k in ipairs(keys) do keep[#keep + 1] = M.key_id(k) end
  for id in pairs(self.ids) do
    local kept = false
    for _, kid in ipairs(keep) do
      if id == kid or id:sub(1, #kid + 1) == kid .. "\0" or kid:sub(1, #id + 1) == id .. "\0" then
        kept = true
      end
    end
    if not kept then self.ids[id], self.dtypes[id], self.origins[id] = nil, nil, nil end
  end
end

-- The keys still present, in the order they were first added.
function KeySet:list(only_produced)
  local out = {}
  local from = only_produced and self.produced or self.order
  for _, k in ipairs(from) do
    if self.ids[M.key_id(k)] ~= nil then out[#out + 1] = k end
  end
  return out
end

-- What node does to the keys of a batch: its own keys_after, or "adds out_keys" (of
-- dtypes unknown from here on). A node whose function may add keys it does not declare
-- (Lambda, Map without out_keys) sets keys_unknown: after it every key counts as
-- present (KeySet:has), and the host's check notes the keys it could not verify
-- (KeySet:known). where names the node's place, for the dtypes it declares.
function M.keys_after(node, ks, where)
  if node.keys_after then return node:keys_after(ks, where) end
  for _, k in ipairs(node.out_keys) do ks:add(k, true) end
  if node.keys_unknown then ks.open = true end
end

-- What a source holding td (rows along its first batch dim) declares of its batches:
-- each leaf's dtype (by key_id) and the bytes of one row.
function M.leaf_dtypes(td)
  local out = {}
  for _, k in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(k)
    if is_tensor(v) then out[M.key_id(k)] = v:dtype() end
  end
  return out
end

function M.row_bytes(td)
  local rows, bytes = math.max(#td, 1), 0
  for _, k in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(k)
    if is_tensor(v) then bytes = bytes + v:numel() / rows * dtypes.itemsize(v:dtype()) end
  end
  return bytes
end

-- A problem for check_dtypes when key's dtype is declared upstream and accepts(dtype)
-- says no: "key 'species' has dtype int64 (as the source declares it); <what>".
function M.dtype_problem(ks, key, accepts, what)
  local dtype, origin = ks:dtype(key)
  if dtype == nil or accepts(dtype) then return nil end
  return ("key %s has dtype %s (%s); %s"):format(M.key_text(key), dtype, origin or "declared upstream", what)
end

-- What a node holds at once against the machine's memory: a problem's text when bytes
-- (estimated) exceed physical memory, else nil. what names the request ("n = 2e15
-- particles"), for the preflight checks of nodes whose parameters are sizes.
function M.memory_problem(bytes, what)
  local have = memory.physical()
  if have > 0 and bytes > have then
    return ("%s needs about %s of memory at once, more than this machine's %s"):format(what,
      util.bytes_text(bytes), util.bytes_text(have))
  end
  return nil
end

function M.type_names() return sorted_keys(M.registry) end

-- The type a spec names, and the field naming it: spec() writes type, recipes write use.
-- They are one field under two names (flow/build.lua refuses a spec where they differ).
function M.spec_type(spec)
  if spec.use ~= nil then return spec.use, "use" end
  return spec.type, "type"
end

-- flow.build(spec): the node (source, sink) a spec describes; raises its problems. The
-- builder is flow/build.lua, required here at the call: it requires this module.
function M.build(spec)
  return require("tensordict.flow.build").build(spec)
end

return M
