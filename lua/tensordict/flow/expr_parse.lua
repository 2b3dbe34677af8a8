-- flow/expr_parse.lua: reads the expression language of recipes (docs/recipes.md,
-- "Expressions") into a tree: {k = "num" | "bool" | "key" | "call" | "bin" | "un", col =}.
-- Binding, loosest first: or; and; not; comparisons (one per operand: they do not chain);
-- + -; * / // %; unary minus; ^ (right-associative, tighter than a unary minus on its
-- left, as in Lua and Python: -x^2 = -(x^2), 2^-1 = 0.5). A name followed by "(" is a
-- call; any other name is a key, dotted names a nested key path (obs.pos), and a key
-- that is no identifier is written in backquotes (`pt-x`). A syntax error raises
-- {col =, msg =} (flow/expr.lua words it), never a string: the column is the point.
local M = {}

local KEYWORDS = { ["and"] = true, ["or"] = true, ["not"] = true, ["true"] = true, ["false"] = true }
-- The operators, longest first where one is the start of another.
local SYMBOLS = { "//", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "^", "(", ")", "," }
local COMPARE = { ["=="] = true, ["!="] = true, ["<"] = true, ["<="] = true, [">"] = true, [">="] = true }

local function err(col, fmt, ...)
  error({ col = col, msg = select("#", ...) > 0 and fmt:format(...) or fmt }, 0)
end

-- A token's text for messages.
local function shown(tok)
  if tok.t == "end" then return "the end of the expression" end
  return ("'%s'"):format(tok.text)
end

-- The tokens of text: {t = "num" | "name" | "quoted" | "op" | "end", text =, v =, col =}.
local function lex(text)
  local toks, i, n = {}, 1, #text
  while true do
    local s = text:find("%S", i)
    if not s then break end
    i = s
    local c = text:sub(i, i)
    local num = text:match("^%d+%.?%d*[eE][%+%-]?%d+", i) or text:match("^%d+%.?%d*", i)
      or text:match("^%.%d+[eE][%+%-]?%d+", i) or text:match("^%.%d+", i)
    if num then
      if text:find("^[%a_]", i + #num) then
        err(i, "a number runs into a name ('%s')", text:match("^[%w_.]*", i))
      end
      toks[#toks + 1] = { t = "num", text = num, v = tonumber(num), col = i }
      i = i + #num
    elseif c:match("[%a_]") then
      local word = text:match("^[%a_][%w_]*", i)
      local path = { word }
      local j = i + #word
      while text:sub(j, j) == "." do
        local part = text:match("^[%a_][%w_]*", j + 1)
        if not part then err(j + 1, "expected a name after '.' in '%s'", text:sub(i, j)) end
        path[#path + 1] = part
        j = j + 1 + #part
      end
      toks[#toks + 1] = { t = "name", text = text:sub(i, j - 1), path = path, col = i }
      i = j
    elseif c == "`" then
      local close = text:find("`", i + 1, true)
      if not close then err(i, "a backquoted key has no closing '`'") end
      if close == i + 1 then err(i, "a backquoted key is empty") end
      toks[#toks + 1] = { t = "quoted", text = text:sub(i, close), key = text:sub(i + 1, close - 1), col = i }
      i = close + 1
    else
      local sym
      for _, s2 in ipairs(SYMBOLS) do
        if text:sub(i, i + #s2 - 1) == s2 then sym = s2; break end
      end
      if not sym then
        if c == "=" then err(i, "unexpected '=' (comparison is '==')") end
        err(i, "unexpected character '%s'", c)
      end
      toks[#toks + 1] = { t = "op", text = sym, col = i }
      i = i + #sym
    end
  end
  toks[#toks + 1] = { t = "end", text = "", col = n + 1 }
  return toks
end

local Parser = {}
Parser.__index = Parser

function Parser:peek() return self.toks[self.pos] end
function Parser:next()
  local tok = self.toks[self.pos]
  self.pos = self.pos + 1
  return tok
end
-- Whether the next token is the operator or keyword text (a name token for keywords).
function Parser:is(text)
  local tok = self:peek()
  return (tok.t == "op" or (tok.t == "name" and KEYWORDS[tok.text])) and tok.text == text
end

function Parser:expect(text, what)
  local tok = self:peek()
  if not self:is(text) then err(tok.col, "expected '%s' %s, got %s", text, what, shown(tok)) end
  return self:next()
end

-- How deep a tree may nest: deeper, its compiling and evaluating would recurse past what
-- the Lua stack holds; nobody writes such an expression by hand.
local MAX_DEPTH = 200

-- node, with its depth (d) checked against MAX_DEPTH.
local function nested(node)
  local d = 0
  for _, child in ipairs({ node.a, node.b }) do d = math.max(d, child.d or 1) end
  for _, child in ipairs(node.args or {}) do d = math.max(d, child.d or 1) end
  node.d = d + 1
  if node.d > MAX_DEPTH then
    err(node.col, "the expression nests deeper than %d operations (split it into Eval steps)", MAX_DEPTH)
  end
  return node
end

-- The parser's own recursion (parentheses, unary operators), bounded the same way.
function Parser:enter(col)
  self.level = self.level + 1
  if self.level > MAX_DEPTH then
    err(col, "the expression nests deeper than %d operations (split it into Eval steps)", MAX_DEPTH)
  end
end
function Parser:leave(node)
  self.level = self.level - 1
  return node
end

local function binary(op, a, b, col) return nested({ k = "bin", op = op, a = a, b = b, col = col }) end

-- A left-associative level: operand (the next tighter level) {op operand}.
function Parser:left(ops, operand)
  local a = operand(self)
  while true do
    local tok = self:peek()
    if not ((tok.t == "op" or tok.t == "name") and ops[tok.text]) then return a end
    self:next()
    a = binary(tok.text, a, operand(self), tok.col)
  end
end

local OR, AND = { ["or"] = true }, { ["and"] = true }
local ADD, MUL = { ["+"] = true, ["-"] = true }, { ["*"] = true, ["/"] = true, ["//"] = true, ["%"] = true }

function Parser:disjunction() return self:left(OR, Parser.conjunction) end
function Parser:conjunction() return self:left(AND, Parser.negation) end

function Parser:negation()
  if self:is("not") then
    local tok = self:next()
    self:enter(tok.col)
    return self:leave(nested({ k = "un", op = "not", a = self:negation(), col = tok.col }))
  end
  return self:comparison()
end

function Parser:comparison()
  local a = self:sum()
  local tok = self:peek()
  if tok.t ~= "op" or not COMPARE[tok.text] then return a end
  self:next()
  local r = binary(tok.text, a, self:sum(), tok.col)
  local again = self:peek()
  if again.t == "op" and COMPARE[again.text] then
    err(again.col, "comparisons do not chain: write (a %s b) and (b %s c)", tok.text, again.text)
  end
  return r
end

function Parser:sum() return self:left(ADD, Parser.product) end
function Parser:product() return self:left(MUL, Parser.unary) end

function Parser:unary()
  if self:is("-") then
    local tok = self:next()
    self:enter(tok.col)
    return self:leave(nested({ k = "un", op = "-", a = self:unary(), col = tok.col }))
  end
  if self:is("+") then
    self:next()
    return self:unary()
  end
  return self:power()
end

function Parser:power()
  local base = self:primary()
  if not self:is("^") then return base end
  local tok = self:next()
  self:enter(tok.col)
  return self:leave(binary("^", base, self:unary(), tok.col)) -- the exponent may carry its own sign
end

function Parser:primary()
  local tok = self:next()
  if tok.t == "num" then return { k = "num", v = tok.v, col = tok.col } end
  if tok.t == "quoted" then return { k = "key", key = tok.key, text = tok.text, col = tok.col } end
  if tok.t == "name" then
    if tok.text == "true" or tok.text == "false" then return { k = "bool", v = tok.text == "true", col = tok.col } end
    if KEYWORDS[tok.text] then err(tok.col, "expected a value, got '%s'", tok.text) end
    if self:is("(") then return self:call(tok) end
    local key = #tok.path == 1 and tok.path[1] or tok.path
    return { k = "key", key = key, text = tok.text, col = tok.col }
  end
  if tok.t == "op" and tok.text == "(" then
    self:enter(tok.col)
    local inner = self:disjunction()
    self:expect(")", ("to close the '(' at column %d"):format(tok.col))
    return self:leave(inner)
  end
  err(tok.col, "expected a value (a number, a key, a call or '('), got %s", shown(tok))
end

function Parser:call(name)
  local open = self:next()
  self:enter(open.col)
  local args = {}
  if not self:is(")") then
    repeat
      args[#args + 1] = self:disjunction()
    until not (self:is(",") and self:next())
  end
  self:expect(")", ("to close the call of '%s' at column %d"):format(name.text, open.col))
  return self:leave(nested({ k = "call", name = name.text, args = args, col = name.col }))
end

-- The tree of text; raises {col =, msg =} at its first syntax error.
function M.parse(text)
  local p = setmetatable({ toks = lex(text), pos = 1, level = 0 }, Parser)
  if p:peek().t == "end" then err(1, "the expression is empty") end
  local tree = p:disjunction()
  local tok = p:peek()
  if tok.t ~= "end" then err(tok.col, "unexpected %s after a complete expression", shown(tok)) end
  return tree
end

return M
