-- flow/expr_ops.lua: what the expression language (flow/expr.lua) calls. Its functions
-- are the library's own, read from the op tables (tensor/ops.lua's BINARY, UNARY and
-- REDUCE, which come from core/include/op_table.h) and the dtype table's cast methods
-- (float(x), long(x), ...), plus where(c, a, b) and clamp(x, lo, hi). Each is one call of
-- a vectorised method; nothing here loops over rows. Operands are tensors or Lua
-- scalars (numbers, booleans), mixed as the methods mix them: broadcasting and dtype
-- promotion are the kernels' (torch's rules).
local util = require("tensordict.util")
local tensor = require("tensordict.tensor")
local ops = require("tensordict.tensor.ops")
local create = require("tensordict.tensor.create")
local dtypes = require("tensordict.tensor.dtype")

local is_tensor, Tensor = tensor.is_tensor, tensor.Tensor
local fail = util.fail

local M = {}

-- What an operand is, for messages: "a float32 tensor", "the number 2", "true".
function M.operand_text(v)
  if is_tensor(v) then return ("a %s tensor"):format(v:dtype()) end
  if type(v) == "number" then return "the number " .. util.number_text(v) end
  return util.describe(v)
end

-- and, or and not take bool operands only: logical_and would take any dtype (nonzero
-- counts as true), which hides a forgotten comparison (`x and y` for `x > 0 and y > 0`).
local function bool_operand(word, v)
  if type(v) == "boolean" or (is_tensor(v) and v:dtype() == "bool") then return end
  fail(("'%s' needs bool operands (a comparison, isnan(x), a bool leaf), got %s"):format(word, M.operand_text(v)))
end

-- A method of the op table as a function of its operands (a scalar may come first:
-- the methods take it there, as 2 - t does).
local function method(name) return Tensor[name] end

-- The operators: symbol -> the op-table method it calls. These are the language's
-- syntax (the ops themselves come from the table), allowed as a list in check_tables.sh.
local BINARY_SYMBOLS = {
  ["+"] = "add", ["-"] = "sub", ["*"] = "mul", ["/"] = "div", ["//"] = "floor_divide", ["%"] = "remainder",
  ["^"] = "pow", ["=="] = "eq", ["!="] = "ne", ["<"] = "lt", ["<="] = "le", [">"] = "gt", [">="] = "ge",
}
local LOGICAL_WORDS = { ["and"] = "logical_and", ["or"] = "logical_or" }

-- The same operators on two Lua scalars, folded when an expression is compiled (as
-- Python folds 2 * 3 before torch sees it). Booleans count as 0 and 1 there, as in torch.
local function num(v) if type(v) == "boolean" then return v and 1 or 0 end return v end
local FOLD = {
  ["+"] = function(a, b) return a + b end, ["-"] = function(a, b) return a - b end,
  ["*"] = function(a, b) return a * b end, ["/"] = function(a, b) return a / b end,
  ["//"] = function(a, b) return math.floor(a / b) end,
  ["%"] = function(a, b) return a - math.floor(a / b) * b end, -- the sign of the divisor
  ["^"] = function(a, b) return a ^ b end,
  ["=="] = function(a, b) return a == b end, ["!="] = function(a, b) return a ~= b end,
  ["<"] = function(a, b) return a < b end, ["<="] = function(a, b) return a <= b end,
  [">"] = function(a, b) return a > b end, [">="] = function(a, b) return a >= b end,
}

-- op(symbol) -> {name =, fn = function(a, b), fold = function(a, b) for two scalars,
-- operand = function(v) raising for an operand it never takes (and, or), or nil}.
local OPERATORS = {}
for symbol, name in pairs(BINARY_SYMBOLS) do
  local m, fold = method(name), FOLD[symbol]
  OPERATORS[symbol] = { name = name, fn = m, fold = function(a, b) return fold(num(a), num(b)) end }
end
for word, name in pairs(LOGICAL_WORDS) do
  local m = method(name)
  local both = word == "and"
  OPERATORS[word] = { name = name,
    operand = function(v) bool_operand(word, v) end, -- what one operand must be, alone
    fn = function(a, b)
      bool_operand(word, a)
      bool_operand(word, b)
      return m(a, b)
    end,
    fold = function(a, b)
      bool_operand(word, a)
      bool_operand(word, b)
      if both then return a and b end
      return a or b
    end }
end
M.binary = OPERATORS

-- Unary minus and not.
local neg, logical_not = method("neg"), method("logical_not")
M.unary = {
  ["-"] = { name = "neg", fn = neg, fold = function(a) return -num(a) end },
  ["not"] = { name = "logical_not",
    fn = function(a) bool_operand("not", a); return logical_not(a) end,
    fold = function(a) bool_operand("not", a); return not a end },
}

-- The callable functions: name -> {arity =, fn =, what =} (what: the kind, for the docs).
local FUNCTIONS = {}
M.functions = FUNCTIONS

-- A function of one tensor: a scalar argument becomes a 0-dim tensor first (sqrt(2)).
local function of_tensor(m)
  return function(x)
    if not is_tensor(x) then x = create.full({}, x) end
    return m(x)
  end
end

for name in pairs(ops.UNARY) do
  FUNCTIONS[name] = { arity = 1, fn = of_tensor(method(name)), what = "elementwise" }
end
for name in pairs(ops.BINARY) do
  local m = method(name)
  FUNCTIONS[name] = { arity = 2, fn = function(a, b)
    if not is_tensor(a) and not is_tensor(b) then a = create.full({}, a) end
    return m(a, b)
  end, what = "elementwise, two operands" }
end
-- Reductions run along the last dim (a [B, 3] leaf gives [B]); min and max give values.
for name in pairs(ops.REDUCE) do
  local m = method(name)
  local reduce = function(x) return (m(x, -1)) end
  if ops.REDUCE_PARAM_FIRST[name] then reduce = function(x) return (m(x, nil, -1)) end end -- norm: p = 2
  FUNCTIONS[name] = { arity = 1, fn = of_tensor(reduce), what = "along the last dim" }
end
-- Casts: float(x), long(x), ... (torch's cast methods) and every dtype name (float32(x)).
local casts = {}
for cast, dtype in pairs(dtypes.CASTS) do casts[cast] = dtype end
for _, dtype in ipairs(dtypes.list()) do casts[dtype] = dtype end
for name, dtype in pairs(casts) do
  if not FUNCTIONS[name] then
    FUNCTIONS[name] = { arity = 1, fn = of_tensor(function(x) return x:to(dtype) end), what = "cast to " .. dtype }
  end
end

-- where(c, a, b): a where c holds, else b (c bool; a and b tensors or scalars).
FUNCTIONS.where = { arity = 3, what = "choice", fn = function(c, a, b)
  if type(c) == "boolean" then c = create.full({}, c) end
  if not is_tensor(c) or c:dtype() ~= "bool" then
    fail(("where: the condition must be bool (a comparison, a bool leaf), got %s"):format(M.operand_text(c)))
  end
  return ops.where(c, a, b)
end }

-- clamp(x, lo, hi): number bounds clamp as Tensor.clamp does; a tensor bound is taken
-- elementwise (clamp_min / clamp_max, torch's broadcast forms).
FUNCTIONS.clamp = { arity = 3, what = "bounds", fn = function(x, lo, hi)
  if not is_tensor(x) then x = create.full({}, x) end
  if type(lo) == "number" and type(hi) == "number" then return x:clamp(lo, hi) end
  return x:clamp_min(lo):clamp_max(hi)
end }

-- The function names, sorted (for "did you mean" and the docs).
function M.function_names()
  local names = {}
  for name in pairs(FUNCTIONS) do names[#names + 1] = name end
  table.sort(names)
  return names
end

-- A result of the folded call of a function on scalars: a 0-dim tensor's value.
function M.scalar_of(v)
  if is_tensor(v) and v:dim() == 0 then return v:item() end
  return v
end

return M
