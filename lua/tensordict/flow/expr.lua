-- flow/expr.lua: expressions over a batch's leaves, as recipes write them
-- ("sqrt(vx^2 + vy^2) < 2 and label != 2"; docs/recipes.md, "Expressions"). The text is
-- parsed (flow/expr_parse.lua) and compiled once into a tree of closures, each one call
-- of a vectorised method (flow/expr_ops.lua): evaluating it on a batch costs what the
-- same calls written by hand cost, and no Lua runs per row. Sub-expressions without keys
-- are computed once, when compiling. The same tree is evaluated on probes (one-element
-- tensors of the dtypes declared upstream) by `tdflow check`, so that its type errors
-- are the library's own, found before any data moves. Every message points at a column.
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local create = require("tensordict.tensor.create")
local dict = require("tensordict.dict")
local core = require("tensordict.flow.core")
local parse = require("tensordict.flow.expr_parse")
local eops = require("tensordict.flow.expr_ops")

local is_tensor = tensor.is_tensor

local M = {}

-- The value of an operand whose dtype a check does not know.
local UNKNOWN = setmetatable({}, { __tostring = function() return "<unknown>" end })

-- msg at col of text, the text shown with a caret under the column (a long text: the 60
-- characters on either side of it).
local SHOWN = 60
function M.at(text, col, msg)
  local from, to = math.max(1, col - SHOWN), math.min(#text, col + SHOWN)
  local shown = (from > 1 and "..." or "") .. text:sub(from, to) .. (to < #text and "..." or "")
  local caret = col - from + (from > 1 and 3 or 0)
  return ("%s at column %d:\n    %s\n    %s^"):format(msg, col, shown, (" "):rep(caret))
end

-- A raised error as the problem's words: no "file:line: tensordict: ".
local function words(e)
  if type(e) == "table" then return e.msg end
  return (tostring(e):gsub("^.-tensordict: ", ""))
end

-- Runs fn(a, b, c) at col: in a check (env.probe) a failure is noted and the value is
-- unknown, so that every type error of an expression is found at once.
local function apply(env, col, fn, a, b, c)
  env.col = col
  if not env.probe then return fn(a, b, c) end
  local ok, r = pcall(fn, a, b, c)
  if ok then return r end
  env.problems[#env.problems + 1] = { col = col, msg = words(r) }
  return UNKNOWN
end

local function scalar(v) return type(v) == "number" or type(v) == "boolean" end

local compile_node

local function compile_binary(node, problems, refs)
  local op = eops.binary[node.op]
  local ca, cb = compile_node(node.a, problems, refs), compile_node(node.b, problems, refs)
  local fn, fold, operand, col = op.fn, op.fold, op.operand, node.col
  return function(env)
    local a, b = ca(env), cb(env)
    if a == UNKNOWN or b == UNKNOWN then
      -- a check with one dtype unknown: the other operand may still be wrong for and / or
      if operand and (a ~= UNKNOWN or b ~= UNKNOWN) then apply(env, col, operand, a == UNKNOWN and b or a) end
      return UNKNOWN
    end
    if scalar(a) and scalar(b) then return apply(env, col, fold, a, b) end
    return apply(env, col, fn, a, b)
  end
end

local function compile_unary(node, problems, refs)
  local op = eops.unary[node.op]
  local ca = compile_node(node.a, problems, refs)
  local fn, fold, col = op.fn, op.fold, node.col
  return function(env)
    local a = ca(env)
    if a == UNKNOWN then return UNKNOWN end
    return apply(env, col, scalar(a) and fold or fn, a)
  end
end

local function compile_call(node, problems, refs)
  local f = eops.functions[node.name]
  local args = {}
  for i, a in ipairs(node.args) do args[i] = compile_node(a, problems, refs) end
  if not f then
    problems[#problems + 1] = { col = node.col, msg = ("unknown function '%s'%s"):format(node.name,
      util.did_you_mean(node.name, eops.function_names())) }
    return nil
  end
  if #args ~= f.arity then
    problems[#problems + 1] = { col = node.col, msg = ("%s takes %d argument%s, got %d"):format(node.name,
      f.arity, f.arity == 1 and "" or "s", #args) }
    return nil
  end
  local fn, col = f.fn, node.col
  local c1, c2, c3 = args[1], args[2], args[3]
  if f.arity == 1 then
    return function(env)
      local a = c1(env)
      if a == UNKNOWN then return UNKNOWN end
      return apply(env, col, fn, a)
    end
  elseif f.arity == 2 then
    return function(env)
      local a, b = c1(env), c2(env)
      if a == UNKNOWN or b == UNKNOWN then return UNKNOWN end
      return apply(env, col, fn, a, b)
    end
  end
  return function(env)
    local a, b, c = c1(env), c2(env), c3(env)
    if a == UNKNOWN or b == UNKNOWN or c == UNKNOWN then return UNKNOWN end
    return apply(env, col, fn, a, b, c)
  end
end

local function compile_key(node, refs)
  local key, col = node.key, node.col
  refs[#refs + 1] = { key = key, col = col }
  return function(env)
    env.col = col
    return env.read(env, key)
  end
end

-- The closure of a tree node; problems found (unknown functions, arity) are added and
-- compiling goes on, so that all of them are reported at once.
function compile_node(node, problems, refs)
  local k = node.k
  if k == "num" or k == "bool" then
    local v = node.v
    return function() return v end
  elseif k == "key" then
    return compile_key(node, refs)
  end
  local before = #refs
  local c
  if k == "bin" then c = compile_binary(node, problems, refs)
  elseif k == "un" then c = compile_unary(node, problems, refs)
  else c = compile_call(node, problems, refs) end
  if c and #refs == before and #problems == 0 then
    -- no key below: its value is the same for every batch, computed once here
    local env = { problems = {}, read = function() end }
    local ok, v = pcall(c, env)
    if not ok then
      problems[#problems + 1] = { col = env.col or node.col, msg = words(v) }
      return nil
    end
    return function() return v end
  end
  return c or function() return UNKNOWN end
end

local Expr = {}
Expr.__index = Expr

-- M.compile(text) -> the compiled expression, or nil and its problems ({col =, msg =}).
-- e.keys: the keys it reads (each once, in order); e.refs: every mention, with its column.
function M.compile(text)
  if type(text) ~= "string" then
    return nil, { { col = 1, msg = ("an expression is a string, got %s"):format(util.describe(text)) } }
  end
  local ok, tree = pcall(parse.parse, text)
  if not ok then
    if type(tree) ~= "table" then error(tree, 0) end -- a bug, not a syntax error
    return nil, { tree }
  end
  local problems, refs = {}, {}
  local root = compile_node(tree, problems, refs)
  if #problems > 0 then return nil, problems end
  local keys, seen = {}, {}
  for _, r in ipairs(refs) do
    local id = core.key_id(r.key)
    if not seen[id] then seen[id], keys[#keys + 1] = true, r.key end
  end
  return setmetatable({ text = text, root = root, refs = refs, keys = keys }, Expr), {}
end

-- The problems of compile, worded: "<prefix><msg> at column N:" and the caret lines.
function M.problems_text(text, problems, prefix)
  local out = {}
  for i, pb in ipairs(problems) do out[i] = (prefix or "") .. M.at(text, pb.col, pb.msg) end
  return out
end

-- Reading a key of the batch at run time.
local function read_batch(env, key)
  local v = env.td:get(key)
  if v == nil then util.fail(core.missing_key(env.td, key)) end
  if not is_tensor(v) then
    util.fail(("key %s is %s, not a tensor%s"):format(core.key_text(key), util.describe(v),
      dict.is_td(v) and " (name one of its leaves: a.b reads leaf b of a)" or ""))
  end
  return v
end

-- e:eval(td) -> the tensor the expression gives on td; raises "<msg> at column N: ...".
-- A result without a key in it (a constant) fills the batch size.
function Expr:eval(td)
  local env = { td = td, read = read_batch }
  local ok, v = pcall(self.root, env)
  if not ok then util.fail(M.at(self.text, env.col or 1, words(v))) end
  if #self.keys > 0 then return v end
  if not is_tensor(v) then return create.full(td:batch_size(), v) end
  return create.full(td:batch_size(), v:item(), v:dtype())
end

-- Reading a key in a check: a one-element tensor of its declared dtype, else unknown.
local function read_probe(env, key)
  local dtype = env.ks:dtype(key)
  if not dtype then return UNKNOWN end
  return create.full({ 1 }, dtype == "bool" or 1, dtype)
end

-- e:check(ks) -> the dtype of the result (nil when some dtype it needs is unknown) and
-- the type errors found with the dtypes ks declares ({col =, msg =}).
function Expr:check(ks)
  local env = { probe = true, ks = ks, problems = {}, read = read_probe }
  local ok, v = pcall(self.root, env)
  if not ok then return nil, { { col = env.col or 1, msg = words(v) } } end
  if #env.problems > 0 or v == UNKNOWN then return nil, env.problems end
  if is_tensor(v) then return v:dtype(), {} end
  return create.full({}, v):dtype(), {}
end

-- Where key is read in the expression, for the host's key check: " in <param> at column N:" and
-- the caret lines.
function Expr:key_context(key, param)
  local id = core.key_id(key)
  for _, r in ipairs(self.refs) do
    if core.key_id(r.key) == id then return M.at(self.text, r.col, " in " .. param) end
  end
  return ""
end

-- Whether a string names a key itself (an identifier, or a dotted path of them) rather
-- than being an expression: Filter{where = "ok"} reads the bool leaf 'ok' as before.
function M.is_plain_key(s)
  if type(s) ~= "string" then return false end
  for part in (s .. "."):gmatch("([^.]*)%.") do
    if not part:match("^[%a_][%w_]*$") then return false end
  end
  return true
end

-- flow.expr(text) -> fn(td): the expression as a function of a batch (a tensor over its
-- rows); raises its problems, each at its column.
function M.fn(text)
  if type(text) ~= "string" then util.fail(("expr: an expression is a string, got %s"):format(util.describe(text))) end
  local e, problems = M.compile(text)
  if not e then
    util.fail("expr: " .. table.concat(M.problems_text(text, problems), "\n"))
  end
  return function(td)
    if not dict.is_td(td) then
      util.fail(("expr: expected a TensorDict batch, got %s"):format(util.describe(td)))
    end
    return e:eval(td)
  end
end

return M
