-- flow_expr_spec.lua: the expression language of recipes (flow/expr*.lua: docs/recipes.md,
-- "Expressions"), the Eval node, expressions as Filter/MaskedFill/Where masks, and
-- functions with args ({use =, args =}: flow/fn_args.lua), in Lua and through
-- scripts/tdflow (issue 31).
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local json = require("tensordict.json")
local recipe = require("tensordict.host.recipe")
local eops = require("tensordict.flow.expr_ops")
local tensor_ops = require("tensordict.tensor.ops")

require("tensordict.host.plugins").load_all() -- physics.energy_below and the other named functions

local dir = H.tmpdir()
local _, expect = H.tdflow_runner(dir)

-- A batch of 5 rows: float32 x, y; int64 a, label; bool ok; a nested obs.pos [5, 3].
local function batch()
  return T.TensorDict({
    x = T.tensor({ -4, -1, 0, 2, 5 }, "float32"), y = T.tensor({ 1, 2, 3, 4, 5 }, "float32"),
    a = T.tensor({ -7, 7, 3, -3, 8 }, "int64"), label = T.tensor({ 0, 1, 2, 2, 1 }, "int64"),
    ok = T.tensor({ true, false, true, false, true }, "bool"),
    obs = T.TensorDict({ pos = T.arange(1, 15, "float32"):view({ 5, 3 }) }, { 5 }),
  }, { 5 })
end

local function ev(text, td) return flow.expr(text)(td or batch()) end

describe("flow.expr: binding and associativity", function()
  -- every row of the batch gives the same value here: the constants fill the batch
  local cases = {
    { "-2^2", -4 }, { "2^3^2", 512 }, { "2^-1", 0.5 }, { "(-2)^2", 4 }, { "-2^-2", -0.25 },
    { "10 - 4 - 3", 3 }, { "64 / 4 / 2", 8 }, { "2 + 3 * 4", 14 }, { "(2 + 3) * 4", 20 },
    { "7 // 2", 3 }, { "-7 // 2", -4 }, { "7 // -2", -4 }, { "-7 % 3", 2 }, { "7 % -3", -2 }, { "7.5 % 2", 1.5 },
    { "2 * 3 % 4", 2 }, { "1e2 + .5 + 2.5e-1", 100.75 }, { "+3 - -2", 5 },
    { "1 < 2 and 2 < 3", true }, { "not 1 > 2", true }, { "not true or true", true },
    { "true or false and false", true },
    { "(true or false) and false", false }, { "1 + 1 == 2", true }, { "3 != 3", false }, { "2 >= 2", true },
  }
  for _, c in ipairs(cases) do
    it(("%s = %s"):format(c[1], tostring(c[2])), function()
      local v = ev(c[1])
      assert.same({ 5 }, v:shape())
      assert.same(c[2], v:totable()[1])
    end)
  end

  it("binds ^ tighter than a unary minus and a comparison looser than arithmetic, on leaves", function()
    assert.same({ -16, -1, -0, -4, -25 }, ev("-x^2"):totable())
    assert.same({ true, true, true, true, true }, ev("x + 1 < y * 2 - 1"):totable())
    assert.same({ false, false, false, false, true }, ev("x * 2 > y + 1 + 1"):totable())
    assert.same({ false, true, false, true, false }, ev("not ok and x < 3"):totable())
    assert.same({ true, false, true, true, true }, ev("ok or x > 1 and label == 2"):totable())
  end)
end)

describe("flow.expr: operators and functions, with torch's dtypes", function()
  it("gives torch's dtypes: int / int is float, // and % stay int, comparisons are bool", function()
    local td = batch()
    assert.equal("float32", ev("a / label", td):dtype())
    assert.same({ -4, 3, 1, -2, 4 }, ev("a // 2", td):totable())
    assert.same({ 1, 1, 1, 1, 0 }, ev("a % 2", td):totable())
    assert.same({ 0, -1, 0, 0, -1 }, ev("label % -2", td):totable())
    assert.equal("int64", ev("a // 2", td):dtype())
    assert.equal("int64", ev("a ^ 2", td):dtype())
    assert.equal("float32", ev("a * x", td):dtype())
    assert.equal("bool", ev("a > x", td):dtype())
    assert.same({ 49, 49, 9, 9, 64 }, ev("a ^ 2", td):totable())
  end)

  it("calls every unary op of the op table as the method does", function()
    local td = T.TensorDict({ p = T.tensor({ 0.25, 0.5, 0.75 }, "float64") }, { 3 })
    for name in pairs(tensor_ops.UNARY) do
      local ok, want = pcall(T.Tensor[name], td.p)
      if ok then
        local got = ev(name .. "(p)", td)
        assert.equal(want:dtype(), got:dtype(), name)
        assert.is_true(H.near(want:totable(), got:totable(), 0), name)
      end
    end
  end)

  it("calls every binary op and every reduction (along the last dim) as the methods do", function()
    local td = T.TensorDict({ p = T.tensor({ { 1, 2 }, { 3, 4 } }, "int64"),
      q = T.tensor({ { 2, 1 }, { 1, 3 } }, "int64") }, { 2 })
    local floats = T.TensorDict({ p = td.p:to("float64"), q = td.q:to("float64") }, { 2 })
    for name in pairs(tensor_ops.BINARY) do
      local on = pcall(T.Tensor[name], td.p, td.q) and td or floats -- the floating-only ops on floats
      local want = T.Tensor[name](on.p, on.q)
      local got = ev(("%s(p, q)"):format(name), on)
      assert.equal(want:dtype(), got:dtype(), name)
      assert.same(want:totable(), got:totable(), name)
    end
    local f = T.TensorDict({ p = T.tensor({ { 1, 2, 4 }, { 3, 5, 9 } }, "float64") }, { 2 })
    for name in pairs(tensor_ops.REDUCE) do
      local want = tensor_ops.REDUCE_PARAM_FIRST[name] and T.Tensor[name](f.p, 2, -1) or (T.Tensor[name](f.p, -1))
      local got = ev(name .. "(p)", f)
      assert.same({ 2 }, got:shape(), name)
      assert.equal(want:dtype(), got:dtype(), name)
      assert.same(want:totable(), got:totable(), name)
    end
  end)

  it("offers the op table's ops, the casts, where and clamp, and nothing else", function()
    local want = { where = 3, clamp = 3, float = 1, long = 1, float64 = 1 }
    for name in pairs(tensor_ops.UNARY) do want[name] = 1 end
    for name in pairs(tensor_ops.BINARY) do want[name] = 2 end
    for name in pairs(tensor_ops.REDUCE) do want[name] = 1 end
    for name, arity in pairs(want) do assert.equal(arity, eops.functions[name].arity, name) end
    assert.is_nil(eops.functions.masked_fill)
    assert.is_nil(eops.functions.cumsum)
  end)

  it("casts, chooses, clamps and tests", function()
    local td = batch()
    assert.equal("float32", ev("float(label)", td):dtype())
    assert.equal("int32", ev("int32(x)", td):dtype())
    assert.same({ 0, 0, 0, 2, 5 }, ev("where(x > 0, x, 0)", td):totable())
    assert.same({ 1, -1, 3, 2, 5 }, ev("where(ok, y, x)", td):totable())
    assert.same({ 0, 0, 0, 1, 1 }, ev("clamp(x, 0, 1)", td):totable())
    assert.same({ 1, 2, 3, 4, 4.5 }, ev("clamp(x, y, 4.5)", td):totable()) -- a tensor bound, elementwise
    assert.same({ false, false, false, false, false }, ev("isnan(x / y)", td):totable())
    assert.same({ 6, 15, 24, 33, 42 }, ev("sum(obs.pos)", td):totable())
    assert.same({ 3, 6, 9, 12, 15 }, ev("max(obs.pos)", td):totable())
    assert.same({ 7, 7, 7, 7, 7 }, ev("sqrt(49)", td):totable()) -- a constant call, computed once
  end)

  it("reads keys named like functions as keys, and backquoted keys", function()
    local td = T.TensorDict({ abs = T.tensor({ -1, 2 }, "float32"), ["pt-x"] = T.tensor({ 3, 4 }, "float32") }, { 2 })
    assert.same({ 1, 2 }, ev("abs(abs)", td):totable())
    assert.same({ 2, 6 }, ev("abs + `pt-x`", td):totable())
  end)
end)

describe("flow.expr equals the same ops written by hand, on random data", function()
  local g = T.Generator(31)
  local td = T.TensorDict({
    vx = T.randn({ 4000 }, "float32", g), vy = T.randn({ 4000 }, "float32", g),
    e = T.randn({ 4000 }, "float64", g), label = T.randint(0, 4, { 4000 }, "int64", g),
    v = T.randn({ 4000, 3 }, "float32", g),
  }, { 4000 })
  local vx, vy, e, label, v = td.vx, td.vy, td.e, td.label, td.v
  local cases = {
    { "sqrt(vx^2 + vy^2) < 2 and label != 2", function()
      return vx:pow(2):add(vy:pow(2)):sqrt():lt(2):logical_and(label:ne(2)) end },
    { "abs(vx) < 1 or not (vy > 0)", function() return vx:abs():lt(1):logical_or(vy:gt(0):logical_not()) end },
    { "-vx^2 + 3 * vy", function() return vx:pow(2):neg():add(vy:mul(3)) end },
    { "label // 3 + label % 3", function() return label:floor_divide(3):add(label:remainder(3)) end },
    { "label / 3", function() return label:div(3) end },
    { "e * vx - vy / 2", function() return e:mul(vx):sub(vy:div(2)) end },
    { "exp(-e^2 / 2) >= 0.5", function() return e:pow(2):neg():div(2):exp():ge(0.5) end },
    { "where(vx > vy, vx, vy) == maximum(vx, vy)", function()
      return T.where(vx:gt(vy), vx, vy):eq(vx:maximum(vy)) end },
    { "clamp(e, -1, 1) * 2^-1", function() return e:clamp(-1, 1):mul(0.5) end },
    { "sum(v^2) / 3 <= mean(v * v) + 1e-6", function()
      return v:pow(2):sum(-1):div(3):le(v:mul(v):mean(-1):add(1e-6)) end },
    { "atan2(vy, vx) + hypot(vx, vy)", function() return vy:atan2(vx):add(vx:hypot(vy)) end },
    { "float(label) * vx % 1.5", function() return label:to("float32"):mul(vx):remainder(1.5) end },
    { "isfinite(log(abs(e))) and e != 0", function() return e:abs():log():isfinite():logical_and(e:ne(0)) end },
    { "(vx - vy) // 0.5", function() return vx:sub(vy):floor_divide(0.5) end },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local want, got = c[2](), ev(c[1], td)
      assert.equal(want:dtype(), got:dtype())
      assert.same(want:shape(), got:shape())
      local ok, why = H.near(want:totable(), got:totable(), 1e-6)
      assert(ok, why)
    end)
  end
end)

describe("flow.expr: errors at their columns", function()
  local function problem(text, ...) return H.raises(function() flow.expr(text) end, ...) end

  it("words syntax errors with the column and a caret", function()
    problem("x +", "expr: expected a value (a number, a key, a call or '('), got the end of the expression "
      .. "at column 4:\n"
      .. "    x +\n       ^")
    problem("(x + 1", "expected ')' to close the '(' at column 1, got the end of the expression at column 7")
    problem("x = 1", "unexpected '=' (comparison is '==') at column 3")
    problem("x < 1 < 2", "comparisons do not chain: write (a < b) and (b < c) at column 7")
    problem("x $ 2", "unexpected character '$' at column 3")
    problem("3x", "a number runs into a name ('3x') at column 1")
    problem("obs.", "expected a name after '.' in 'obs.' at column 5")
    problem("`pt-x + 1", "a backquoted key has no closing '`' at column 1")
    problem("x 2", "unexpected '2' after a complete expression at column 3")
    problem("", "the expression is empty at column 1")
    problem("sqrt(x,)", "expected a value (a number, a key, a call or '('), got ')' at column 8")
    -- nesting past what the Lua stack holds is refused, at the column where it gets too deep
    problem(("("):rep(100000) .. "x" .. (")"):rep(100000),
      "the expression nests deeper than 200 operations (split it into Eval steps) at column 201")
    problem(("-"):rep(300) .. "x", "nests deeper than 200 operations (split it into Eval steps) at column 201")
    problem("x" .. ("^x"):rep(300), "nests deeper than 200 operations (split it into Eval steps) at column 402")
    problem("x" .. ("+x"):rep(300), "nests deeper than 200 operations (split it into Eval steps) at column 400")
    assert.same({ 199, 199, 199, 199, 199 }, ev("0" .. ("+1"):rep(199)):totable())
    -- a long expression is shown around the column
    problem(("x + "):rep(40) .. "sqrtt(x)" .. (" + x"):rep(40), "at column 161:\n    ..." .. ("x + "):rep(15)
      .. "sqrtt(x)" .. (" + x"):rep(13) .. " ...\n    " .. (" "):rep(63) .. "^")
  end)

  it("reports every unknown function and wrong arity at once, with hints", function()
    local err = problem("sqrtt(x) + clamp(x, 1) + maximum(x)",
      "unknown function 'sqrtt' (did you mean 'sqrt'?) at column 1:\n    sqrtt(x) + clamp(x, 1) + maximum(x)\n    ^",
      "clamp takes 3 arguments, got 2 at column 12", "maximum takes 2 arguments, got 1 at column 26")
    assert.is_nil(err:find("did you mean 'sqrt'?%).*did you mean 'sqrt'"))
  end)

  it("raises the library's errors and its own at run time, at their column", function()
    H.raises(function() ev("x and ok") end,
      "'and' needs bool operands (a comparison, isnan(x), a bool leaf), got a float32 tensor at column 3")
    H.raises(function() ev("not label") end, "'not' needs bool operands")
    H.raises(function() ev("x + -ok") end, "neg: negation of a bool tensor is not supported")
    H.raises(function() ev("ok + nope") end, "key 'nope' is missing from the batch (its keys: ", "at column 6")
    H.raises(function() ev("obs + 1") end, "key 'obs' is a TensorDict, not a tensor (name one of its leaves")
    H.raises(function() ev("label // 0") end, "floor_divide: integer division by zero at column 7")
    H.raises(function() ev("where(x, 1, 2)") end, "where: the condition must be bool")
    H.raises(function() flow.expr(3) end, "an expression is a string, got 3")
  end)
end)

describe("Eval and expression masks", function()
  it("Eval writes the value as a leaf, nested keys in and out", function()
    local out = flow.Eval { out = { "obs", "r" }, expr = "sqrt(sum(obs.pos^2))" }(batch())
    assert.equal("float32", out:get({ "obs", "r" }):dtype())
    assert.is_true(H.near({ math.sqrt(14), math.sqrt(77) }, { out:get({ "obs", "r" }):totable()[1],
      out:get({ "obs", "r" }):totable()[2] }, 1e-5))
    local c = flow.Eval { out = "one", expr = "2 > 1" }(batch())
    assert.same({ true, true, true, true, true }, c.one:totable())
    assert.same({ "obs", "pos" }, flow.Eval { out = "z", expr = "obs.pos * 2" }.in_keys[1])
  end)

  it("Eval refuses a value that does not fit the batch, naming both", function()
    local td = T.TensorDict({ p = T.ones({ 4 }, "float32") }, { 4 })
    H.raises(function() flow.Eval { out = "s", expr = "sum(p)" }(td) end,
      "Eval: out 's': the value (shape [], dtype float32) does not fit the batch")
    H.raises(function() flow.Eval { out = "s", expr = "sqrt(p" } end,
      "Eval: expr: expected ')' to close the call of 'sqrt' at column 5, got the end of the expression at column 7")
  end)

  it("Filter, MaskedFill and Where take expressions; plain names stay keys", function()
    assert.same({ -1 }, flow.Filter { where = "abs(x) < 3 and label != 2" }(batch()).x:totable())
    assert.same({ -4, 0, 5 }, flow.Filter { where = "ok" }(batch()).x:totable())
    assert.same({ -4, -1, 0, 9, 9 }, flow.MaskedFill { mask = "x > 0", value = 9, keys = { "x" } }(batch()).x:totable())
    assert.same({ -1, -1, -1, 2, 5 }, flow.Where { cond = "x > 0", keys = { "x" }, other = -1 }(batch()).x:totable())
    assert.same({ "x", "label" }, flow.Filter { where = "abs(x) < 3 and label != 2 and x > -9" }.in_keys)
    assert.same({ "x", "y" }, flow.MaskedFill { mask = "x > 0", value = 0, keys = { "y" } }.in_keys)
    H.raises(function() flow.Filter { where = "x + 1" }(batch()) end,
      "Filter: where: the expression \"x + 1\" gives float32 values; expected bool")
    H.raises(function() flow.Where { cond = "x >", keys = { "x" } } end, "Where: cond: expected a value")
  end)

  it("keeps expressions through spec() and flow.build", function()
    for _, node in ipairs({ flow.Filter { where = "x > 0 and ok" }, flow.Eval { out = "r", expr = "x^2 + y^2" },
      flow.Where { cond = "not ok", keys = { "x" }, other = 0 } }) do
      local spec = json.decode(json.encode(node:spec()))
      local again = flow.build(spec)
      assert.same(node:spec(), again:spec())
      assert.same(node(batch()):get("x"):totable(), again(batch()):get("x"):totable())
    end
  end)
end)

describe("functions with args ({use =, args =})", function()
  local function particles()
    local g = T.Generator(5)
    return T.TensorDict({ pos = T.randn({ 64, 3 }, "float32", g), vel = T.randn({ 64, 3 }, "float32", g),
      mass = T.rand({ 64 }, "float32", g):add(0.5) }, { 64 })
  end

  it("makes physics.energy_below from its args and keeps them in the spec", function()
    local f = flow.Filter { where = { use = "physics.energy_below", args = { max = 1 } } }
    local td = particles()
    local e = require("tensordict.plugins.physics").functions.total_energy(td.pos, td.vel, td.mass)
    local kept = f(td)
    assert.equal(e:lt(1):sum(), #kept)
    assert.is_true(#kept > 0 and #kept < 64)
    assert.same({ type = "Filter", where = { use = "physics.energy_below", args = { max = 1 } } }, f:spec())
    assert.same(f:spec(), flow.build(json.decode(json.encode(f:spec()))):spec())
    assert.equal('flow.Filter{where = {args = {max = 1}, use = "physics.energy_below"}}', tostring(f))
  end)

  it("refuses unknown and missing args, plain functions given args, unknown names", function()
    H.raises(function() flow.Filter { where = { use = "physics.energy_below", args = { mx = 1 } } } end,
      "Filter: where: physics.energy_below: args.mx: unknown parameter (did you mean 'max'?) (parameters: max, k, "
      .. "pos, vel, mass); args.max: required (a number)")
    H.raises(function() flow.Map { fn = { use = "physics.features", args = { k = 1 } } } end,
      "fn: physics.features takes no args (it is a plain function")
    H.raises(function() flow.Map { fn = { use = "physics.energy_belw", args = {} } } end,
      "fn: unknown function 'physics.energy_belw' (did you mean 'physics.energy_below'?)")
    H.raises(function() flow.Map { fn = { use = "physics.energy_below", arg = {} } } end,
      "fn: unknown field 'arg' in a function with args")
    H.raises(function() flow.Apply { keys = { "pos" }, fn = { use = "physics.energy_below", args = { max = 1 } } } end,
      "fn: 'physics.energy_below' is a function of a batch (fn(td)), but this parameter calls it with tensors")
  end)

  it("registers factories from Lua, checking the declaration", function()
    flow.register_factory("spec.above", { takes = "batch", args = { { "key", "key", required = true },
      { "cut", "number", default = 0 } },
      make = function(a) return function(td) return td:get(a.key):gt(a.cut) end end })
    local above = flow.Filter { where = { use = "spec.above", args = { key = "x", cut = 4 } } }
    assert.same({ 5 }, above(batch()).x:totable())
    H.raises(function() flow.register_factory("spec.bad", { make = print, args = { { "n", "nope" } } }) end,
      "register_factory: 'spec.bad': args[1] must be {name, kind, ...} with a parameter kind")
    H.raises(function() flow.register_factory("spec.bad", {}) end, "register_factory: 'spec.bad' needs {make = ")
  end)
end)

describe("expressions and function args in JSON recipes (scripts/tdflow)", function()
  local csv = H.write(dir .. "/d.csv", "x,y,label\n-4,1,0\n-1,2,1\n0,3,2\n2,4,2\n5,5,1\n")
  local function recipe_text(steps, sink)
    return ('{"source": {"use": "CsvSource", "path": "%s", "batch_size": 2, "columns": {"x": "float32", '
      .. '"y": "float32", "label": "int64"}}, "steps": [%s]%s}'):format(csv, steps, sink or "")
  end

  it("runs Eval, Filter, MaskedFill and Where with expressions", function()
    local out = dir .. "/out"
    local path = H.write(dir .. "/run.json", recipe_text('{"use": "Eval", "out": "r", "expr": "sqrt(x^2 + y^2)"}, '
      .. '{"use": "Filter", "where": "r < 5 and label != 2"}, '
      .. '{"use": "MaskedFill", "mask": "x < -2", "value": 0, "keys": ["y"]}, '
      .. '{"use": "Where", "cond": "label == 1", "keys": ["x"], "other": 7}',
      (', "sink": {"use": "MemmapSink", "path": "%s"}'):format(out)))
    expect("run " .. path .. " --quiet", 0)
    local td = T.load_memmap(out)
    assert.same({ 7, -1 }, td.x:totable())
    assert.same({ 0, 2 }, td.y:totable())
    assert.equal("float32", td.r:dtype())
  end)

  it("checks keys, functions, arity, types and syntax at once, at their columns", function()
    local path = H.write(dir .. "/bad.json", recipe_text(
      '{"use": "Eval", "out": "r", "expr": "sqrt(x^2 + yy^2)"}, '
      .. '{"use": "Filter", "where": "x and label"}, '
      .. '{"use": "Filter", "where": "sqrtt(x) > 0 or clamp(x) > 0"}, '
      .. '{"use": "MaskedFill", "mask": "x + ", "value": 0}, '
      .. '{"use": "Where", "cond": "x + 1", "keys": ["x"]}, '
      .. '{"use": "Filter", "where": {"use": "physics.energy_below", "args": {"mx": 1}}}'))
    local _, out = expect("check " .. path, 2, "6 problems:")
    for _, text in ipairs({
      "steps[1] (Eval): key 'yy' is neither given by the source nor produced upstream (did you mean 'y'?) (source "
        .. "keys: 'label', 'x', 'y') in expr at column 12:\n    sqrt(x^2 + yy^2)\n               ^",
      "steps[2] (Filter): where: 'and' needs bool operands (a comparison, isnan(x), a bool leaf), got a float32 "
        .. "tensor at column 3:\n    x and label\n      ^",
      "steps[3] (Filter): where: unknown function 'sqrtt' (did you mean 'sqrt'?) at column 1",
      "\n  where: clamp takes 3 arguments, got 1 at column 17",
      "steps[4] (MaskedFill): mask: expected a value (a number, a key, a call or '('), got the end of the expression "
        .. "at column 5",
      "steps[5] (Where): cond: the expression \"x + 1\" gives float32 values; a mask must be bool",
      "steps[6] (Filter): where: physics.energy_below: args.mx: unknown parameter (did you mean 'max'?)",
    }) do
      assert(out:find(text, 1, true), ("%q not in:\n%s"):format(text, out))
    end
  end)

  it("checks and / or operands whose dtype is known beside one that is not", function()
    local problems = recipe.check(json.decode(recipe_text('{"use": "Filter", "where": "nope or x"}')))
    assert.equal(2, #problems)
    assert.truthy(problems[1]:find("steps[1] (Filter): key 'nope' is neither given by the source", 1, true))
    assert.truthy(problems[2]:find("steps[1] (Filter): where: 'or' needs bool operands (a comparison, isnan(x), a "
      .. "bool leaf), got a float32 tensor at column 6", 1, true), problems[2])
  end)

  it("declares Eval's dtype to the steps after it", function()
    local problems = recipe.check(json.decode(recipe_text('{"use": "Eval", "out": "big", "expr": "label > 0"}, '
      .. '{"use": "Normalize", "keys": ["big"]}')))
    assert.equal(1, #problems)
    assert.truthy(problems[1]:find("key 'big' has dtype bool (computed by steps[1])", 1, true), problems[1])
  end)
end)
