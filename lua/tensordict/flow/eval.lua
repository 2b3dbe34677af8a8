-- flow/eval.lua: Eval, the node that writes an expression's value (flow/expr.lua) as a
-- leaf: {"use": "Eval", "out": "speed", "expr": "sqrt(vx^2 + vy^2)"}. The value's shape
-- and dtype are the library's: operands broadcast and promote as torch's do (int / int
-- is float, comparisons give bool, reductions run along the last dim); it must start
-- with the batch dims, as every leaf does. A value without a key in it fills the batch.
local util = require("tensordict.util")
local core = require("tensordict.flow.core")
local expr = require("tensordict.flow.expr")

local Eval = core.define("Eval", {
  keeps_rows = true,
  doc = "Writes the value of an expression over the batch's leaves as the leaf out.",
  params = {
    { "out", "key", required = true, doc = "where the value goes (a new leaf, or one replaced)" },
    { "expr", "string", required = true,
      doc = "the expression: keys, numbers, + - * / // % ^, comparisons, and or not, calls (docs/recipes.md)" },
  },
  examples = {
    'flow.Eval{out = "speed", expr = "sqrt(vx^2 + vy^2)"}',
    'flow.Eval{out = "bound", expr = "energy < 0 and not isnan(energy)"}',
  },
})

function Eval:init()
  local e, problems = expr.compile(self.p.expr)
  if not e then self:fail(table.concat(expr.problems_text(self.p.expr, problems, "expr: "), "\n  ")) end
  self.expr = e
  self.in_keys = e.keys
  self.out_keys = { self.p.out }
end

-- The host's key check: where in the expression a key nobody gives is read.
function Eval:key_context(key) return self.expr:key_context(key, "expr") end

function Eval:check_dtypes(ks)
  local _, problems = self.expr:check(ks)
  return expr.problems_text(self.p.expr, problems, "expr: ")
end

-- out holds the expression's dtype from here on, when the dtypes it reads are declared.
function Eval:keys_after(ks, where)
  local dtype = self.expr:check(ks)
  ks:add(self.p.out, true, dtype, ("computed by %s"):format(where or "Eval"))
end

function Eval:forward(td)
  local ok, v = pcall(self.expr.eval, self.expr, td)
  if not ok then self:fail("expr: %s", (tostring(v):gsub("^.-tensordict: ", ""))) end
  td = core.writable(td)
  local set_ok, err = pcall(td.set, td, self.p.out, v)
  if not set_ok then
    self:fail("out %s: the value (shape %s, dtype %s) does not fit the batch: %s", core.key_text(self.p.out),
      util.format_list(v:shape()), v:dtype(), (tostring(err):gsub("^.-tensordict: ", "")))
  end
  return td
end

return { Eval = Eval }
