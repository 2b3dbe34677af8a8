-- repl_spec.lua: tdrepl (lua/tensordict/repl*.lua, readline.lua, scripts/tdrepl). Lines
-- are evaluated one at a time through repl.eval_line, whole sessions through repl.run
-- on strings, the launcher through a pipe, and line editing (completion, history)
-- through a pseudo-terminal made by util-linux's `script`. Every check is on text.
local T = require("tensordict")
local flow = require("tensordict.flow")
local repl = require("tensordict.repl")
local readline = require("tensordict.repl.readline")
local H = require("helpers")

local tmpdir, write_file, read_file = H.tmpdir, H.write, H.read

-- Output and exit code of a shell command (LuaJIT's close() does not give the code).
local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"<rc=$?>\"")
  local out = p:read("*a")
  p:close()
  local body, code = out:match("^(.*)<rc=(%d+)>\n$")
  return body, tonumber(code)
end

-- Runs lines through a fresh state; returns the texts joined and the last status.
local function session(lines, st)
  st = st or repl.new()
  local out, status = {}, nil
  for _, line in ipairs(lines) do
    local text
    text, status = repl.eval_line(st, line)
    out[#out + 1] = text
  end
  return table.concat(out), status, st
end

local function sorted_with_prefix(tbl, prefix, head)
  local out = {}
  for k in pairs(tbl) do
    if type(k) == "string" and k:sub(1, #prefix) == prefix and k:match("^[%a_][%w_]*$") then
      out[#out + 1] = head .. k
    end
  end
  table.sort(out)
  return out
end

describe("repl.eval_line", function()
  it("prints an expression's value without '='", function()
    assert.are.same({ "3\n", "ok" }, { repl.eval_line(repl.new(), "1 + 2") })
    assert.are.same({ "hello\n", "ok" }, { repl.eval_line(repl.new(), "'hello'") })
    assert.are.equal("0.5\n", (session({ "0.5" })))
  end)

  it("prints shapes (arrays of integers) as [3, 4]", function()
    assert.are.equal("[3, 4]\n", (session({ "T.zeros(3, 4):shape()" })))
    assert.are.equal("[4]\n", (session({ "T.TensorDict({ x = T.zeros(4, 2) }, { 4 }):batch_size()" })))
    assert.are.equal("[1, -2, 3]\n", (session({ "{1, -2, 3}" })))
  end)

  it("prints several results side by side", function()
    assert.are.equal("1\ta\tnil\ttrue\n", (session({ "1, 'a', nil, true" })))
    assert.are.equal("3\t4\n", (session({ "T.zeros(3, 4):size(1), T.zeros(3, 4):size(2)" })))
  end)

  it("prints other tables as short constructors", function()
    assert.are.equal('{"s", a = 1, b = [1, 2]}\n', (session({ '{a = 1, b = {1, 2}, "s"}' })))
    assert.are.equal("{}\n", (session({ "{}" })))
    assert.are.equal('{["a b"] = true, x = {y = {z = {...}}}}\n',
      (session({ '{x = {y = {z = {w = 1}}}, ["a b"] = true}' })))
    assert.are.equal("{self = <cycle>}\n", (session({ "c = {}; c.self = c", "c" })))
    assert.are.equal('{"obs", {"next", "obs"}}\n', (session({ '{"obs", {"next", "obs"}}' })))
    assert.are.equal("{1.5, 2}\n", (session({ "{1.5, 2}" })))
  end)

  it("prints tensors and TensorDicts with tostring, briefly inside tables", function()
    local t = T.arange(1, 4):view(2, 2)
    local td = T.TensorDict({ obs = T.zeros(4, 3), reward = T.ones(4) }, { 4 })
    local st = repl.new()
    st.env.t, st.env.td = t, td
    assert.are.equal(tostring(t) .. "\n", (repl.eval_line(st, "t")))
    assert.are.equal(tostring(td) .. "\n", (repl.eval_line(st, "td")))
    assert.are.equal("{tensor(shape=[2, 2], dtype=int64), TensorDict(batch_size=[4], keys={obs, reward})}\n",
      (repl.eval_line(st, "{t, td}")))
  end)

  it("runs statements silently, and globals and top-level locals live on", function()
    local text, status = session({ "x = 5", "local y, z = 6, 7", "local function f(a) return a * 2 end", "local w" })
    assert.are.same({ "", "ok" }, { text, status })
    assert.are.equal("5\t6\t7\t10\tnil\n", (session({ "x = 5", "local y, z = 6, 7",
      "local function f(a) return a * 2 end", "local w", "x, y, z, f(x), w" })))
    assert.is_nil(rawget(_G, "x")) -- a session's globals stay in its own environment
  end)

  it("passes print() output through, before the line's value", function()
    assert.are.equal("a\tb\nc\n", (session({ "print('a', 'b'); print('c')" })))
    assert.are.equal("side\n42\n", (session({ "function g() print('side') return 42 end", "g()" })))
  end)

  it("keeps the last value in _", function()
    local st = repl.new()
    repl.eval_line(st, "T.zeros(2, 3)")
    assert.are.equal("[2, 3]\n", (repl.eval_line(st, "_:shape()")))
    assert.are.equal("7\n7\n", (session({ "x = 7", "x", "_" })))
  end)

  it("prints an error's message without a traceback", function()
    assert.are.same({ "stdin:1: boom\n", "error" }, { repl.eval_line(repl.new(), "error('boom')") })
    assert.are.same({ "stdin:1: tensordict: add: shapes [2] and [3] do not broadcast\n", "error" },
      { repl.eval_line(repl.new(), "T.zeros(2) + T.zeros(3)") })
    assert.are.equal("stdin:1: attempt to call global 'nope' (a nil value)\n", (session({ "nope()" })))
    assert.are.equal("(error object is a table value)\n", (session({ "error({})" })))
    assert.are.equal("stdin:1: unexpected symbol near ')'\n", (session({ "x = )" })))
  end)

  it("shows the last error's traceback with :trace, and every one with :trace on", function()
    assert.are.equal("no error yet\n", (session({ ":trace" })))
    local st = repl.new()
    session({ "function inner() error('deep') end", "function outer() inner() end", "outer()" }, st)
    local tb = repl.eval_line(st, ":trace")
    assert.are.equal("stdin:1: deep\nstack traceback:\n\t[C]: in function 'error'\n\tstdin:1: in function 'inner'\n"
      .. "\tstdin:1: in function 'outer'\n\tstdin:1: in main chunk\n", tb)
    assert.are.equal("tracebacks shown with every error\n", (repl.eval_line(st, ":trace on")))
    assert.are.equal(tb, (repl.eval_line(st, "outer()")))
    assert.are.equal("tracebacks off (:trace shows the last one)\n", (repl.eval_line(st, ":trace off")))
    assert.are.equal("stdin:1: deep\n", (repl.eval_line(st, "outer()")))
    assert.are.same({ "usage: :trace [on|off], got 'maybe'\n", "error" }, { repl.eval_line(st, ":trace maybe") })
  end)

  it("continues an incomplete chunk on the next lines", function()
    local st = repl.new()
    assert.are.equal("> ", repl.prompt(st))
    assert.are.same({ "", "more" }, { repl.eval_line(st, "for i = 1, 2 do") })
    assert.are.equal(">> ", repl.prompt(st))
    assert.are.same({ "", "more" }, { repl.eval_line(st, "  print(i)") })
    assert.are.same({ "1\n2\n", "ok" }, { repl.eval_line(st, "end") })
    assert.are.equal("> ", repl.prompt(st))
    assert.are.equal("[2, 2]\n", (session({ "t = T.zeros(", "2,", "2)", "t:shape()" })))
    assert.are.equal("{a = 1}\n", (session({ "{", "a = 1", "}" })))
    -- a chunk that cannot be completed stops waiting
    local st2 = repl.new()
    repl.eval_line(st2, "if true then")
    assert.are.same({ "stdin:2: unexpected symbol near ')'\n", "error" }, { repl.eval_line(st2, ")") })
    assert.are.equal("> ", repl.prompt(st2))
  end)

  it("reports a chunk still open at the end of input", function()
    local st = repl.new()
    repl.eval_line(st, "function f(")
    assert.are.equal("stdin:1: <name> or '...' expected near '<eof>'\n", repl.finish(st))
    assert.are.equal("", repl.finish(st))
    repl.eval_line(st, "t = {")
    assert.are.equal("stdin:1: unexpected symbol near '<eof>'\n", repl.finish(st))
    repl.eval_line(st, "{")
    assert.are.equal("stdin:1: unexpected symbol near '<eof>'\n", repl.finish(st)) -- not "near '{'"
  end)

  it("lists the commands with :help, quits with :quit, names unknown commands", function()
    local text = repl.eval_line(repl.new(), ":help")
    for _, c in ipairs({ ":help", ":load RECIPE", ":trace [on|off]", ":quit" }) do
      assert.is_truthy(text:find(c, 1, true), c)
    end
    assert.are.same({ "", "quit" }, { repl.eval_line(repl.new(), ":quit") })
    assert.are.same({ "unknown command ':frob' (:help lists them)\n", "error" },
      { repl.eval_line(repl.new(), ":frob") })
  end)

  it("survives values whose printing fails", function()
    assert.are.equal("(the value could not be printed: stdin:1: bad)\n",
      (session({ "setmetatable({}, {__tostring = function() error('bad') end})" })))
  end)
end)

describe("repl.complete", function()
  local st = repl.new()
  st.env.td = T.TensorDict({ obs = T.zeros(4, 3), reward = T.ones(4), ["a b"] = T.ones(4),
    nested = { deep = T.zeros(4) } }, { 4 })
  st.env.t = T.zeros(2)

  it("completes TensorDict methods after ':' and keys after '.'", function()
    local words, token = repl.complete(st, "td:ma")
    assert.are.equal("td:ma", token)
    assert.are.same(sorted_with_prefix(T.TensorDict.methods, "ma", "td:"), words)
    assert.is_truthy(#words >= 3)
    assert.are.same({ "td.nested", "td.obs", "td.reward" }, (repl.complete(st, "td.")))
    assert.are.same({ "td.obs" }, (repl.complete(st, "td.ob")))
    assert.are.same({ "td.nested.deep" }, (repl.complete(st, "td.nested.")))
    assert.are.same({ "td:keys" }, (repl.complete(st, "x = f(td:ke")))
  end)

  it("completes tensor methods, fields of tables and globals", function()
    assert.are.same(sorted_with_prefix(T.Tensor, "resh", "t:"), (repl.complete(st, "t:resh")))
    assert.are.same({ "t:reshape" }, (repl.complete(st, "t:resh")))
    assert.are.same({ "T.flip", "T.fliplr", "T.flipud", "T.float_power", "T.floor", "T.floor_divide", "T.flow" },
      (repl.complete(st, "T.fl")))
    assert.are.same({ "T.flow" }, (repl.complete(st, "T.flow")))
    assert.are.same({ "T.flow.Apply" }, (repl.complete(st, "T.flow.Ap")))
    local words = repl.complete(st, "flow.Re")
    assert.are.same(sorted_with_prefix(flow, "Re", "flow."), words)
    assert.are.same({ "flow.Rebatch", "flow.Rename" }, { words[1], words[2] })
    assert.are.same({ "print" }, (repl.complete(st, "pri")))
    assert.are.same({ "while" }, (repl.complete(st, "whil")))
    assert.are.same({ "td" }, (repl.complete(st, "(td")))
  end)

  it("completes commands and the files :load takes", function()
    assert.are.same({ ":load" }, (repl.complete(st, ":lo")))
    local dir = tmpdir()
    write_file(dir .. "/recipe-a.json", "{}")
    write_file(dir .. "/recipe-b.lua", "return {}")
    assert(os.execute("mkdir " .. dir .. "/recipes.d") == 0)
    local words, token = repl.complete(st, ":load " .. dir .. "/rec")
    assert.are.equal(dir .. "/rec", token)
    assert.are.same({ dir .. "/recipe-a.json", dir .. "/recipe-b.lua", dir .. "/recipes.d/" }, words)
    H.rmtree(dir)
  end)

  it("offers nothing where nothing fits, and never calls anything", function()
    assert.are.same({}, (repl.complete(st, "nope.x")))
    assert.are.same({}, (repl.complete(st, "1.5")))
    assert.are.same({}, (repl.complete(st, "td:ma():")))
    st.env.guard = setmetatable({}, { __index = function() error("looked up") end })
    assert.are.same({}, (repl.complete(st, "guard.x.")))
  end)
end)

describe("repl.run", function()
  local function capture()
    local buf = {}
    return { write = function(_, s) buf[#buf + 1] = s end, text = function() return table.concat(buf) end }
  end

  it("runs a session from a string into any writer, printing as it goes", function()
    local out = capture()
    repl.run({ input = "x = 2\nprint('now')\nx * 21\nT.ones(2, 5):shape()\n", output = out, history = false })
    assert.are.equal("now\n42\n[2, 5]\n", out.text())
  end)

  it("stops at :quit and reports an unfinished chunk at the end", function()
    local out = capture()
    repl.run({ input = "1\n:quit\n2\n", output = out, history = false })
    assert.are.equal("1\n", out.text())
    out = capture()
    repl.run({ input = "for i = 1, 3 do\n", output = out, history = false })
    assert.are.equal("stdin:1: 'end' expected near '<eof>'\n", out.text())
  end)

  it("writes the history file it is given, one line per entry", function()
    local dir = tmpdir()
    local path = dir .. "/hist"
    repl.run({ input = "a = 1\n\na = 1\nb = a + 1\n", output = capture(), history = path })
    assert.are.equal("a = 1\nb = a + 1\n", read_file(path))
    H.rmtree(dir)
  end)

  it("says once that history cannot be kept", function()
    local out = capture()
    repl.run({ input = "1\n", output = out, history = "/nonexistent-dir/h" })
    assert.are.equal("(history is not kept: /nonexistent-dir/h: No such file or directory)\n1\n", out.text())
  end)
end)

describe("tensordict.repl.readline", function()
  it("reads plain lines and trims the history file to its newest entries", function()
    local dir = tmpdir()
    local path = dir .. "/hist"
    write_file(dir .. "/in", "one\ntwo\nthree\nfour\n")
    local keep = readline.HISTORY_LINES
    readline.HISTORY_LINES = 3
    local input = assert(io.open(dir .. "/in"))
    local ed = readline.open({ readline = false, input = input, history = path })
    local got = {}
    for line in function() return ed:read("> ") end do got[#got + 1] = line end
    ed:close()
    input:close()
    readline.HISTORY_LINES = keep
    assert.are.same({ "one", "two", "three", "four" }, got)
    assert.are.equal("two\nthree\nfour\n", read_file(path))
    H.rmtree(dir)
  end)
end)

describe(":load and the stepper", function()
  -- x = 1..10, y = x * 10; the stub stands for tensordict.host.recipe (the contract:
  -- recipe.load(path, opts) -> r with source, steps, node, sink, seed, path)
  local function stub_recipe()
    local data = T.TensorDict({ x = T.arange(1, 10, "float32"), y = T.arange(1, 10) * 10 }, { 10 })
    local steps = {
      flow.Apply({ keys = "x", fn = function(v) return v * 2 end, out_keys = "x2" }),
      flow.Filter({ where = function(td) return td.y:gt(20) end }),
      flow.Rebatch({ size = 3 }),
    }
    return { source = flow.TensorSource({ td = data, batch_size = 4 }), steps = steps, node = flow.Seq(steps),
      sink = flow.Collect({ cat = true }), seed = 0, path = "stub.json" }
  end

  local saved, calls
  before_each(function()
    saved = package.loaded["tensordict.host.recipe"]
    calls = {}
    package.loaded["tensordict.host.recipe"] = {
      load = function(path, opts)
        calls[#calls + 1] = { path, opts }
        if path == "bad.json" then error("tensordict: recipe: steps[1].fn: required", 0) end
        return stub_recipe()
      end,
    }
  end)
  after_each(function() package.loaded["tensordict.host.recipe"] = saved end)

  it("builds the recipe as r and a stepper p that shows each node's output", function()
    local st = repl.new()
    assert.are.equal("stepper over stub.json: source TensorSource, steps Apply -> Filter -> Rebatch, sink Collect; "
      .. "0 batches so far\nr is the recipe, p its stepper: p:next() runs one batch through every step, "
      .. "p:reset() starts over, p:run() runs it all into the sink\n", (repl.eval_line(st, ":load stub.json")))
    assert.are.same({ { "stub.json" } }, calls)
    assert.are.equal("flow.TensorSource{td = <TensorDict [10]>, batch_size = 4}\n",
      (repl.eval_line(st, "r.source")))
    assert.are.equal('flow.Apply{keys = {"x"}, fn = <function>, out_keys = {"x2"}}\n',
      (repl.eval_line(st, "r.steps[1]")))
    assert.are.equal(table.concat({
      "batch 1 from source (TensorSource): [4] x: float32, y: int64",
      "steps[1] (Apply): [4] +x2: float32",
      "steps[2] (Filter): [2] keys unchanged",
      "steps[3] (Rebatch): nothing yet (held for a later batch)",
    }, "\n") .. "\n", (repl.eval_line(st, "p:next()")))
    assert.are.equal(table.concat({
      "batch 2 from source (TensorSource): [4] x: float32, y: int64",
      "steps[1] (Apply): [4] +x2: float32",
      "steps[2] (Filter): [4] keys unchanged",
      "steps[3] (Rebatch): 2 batches",
      "  1. [3] keys unchanged",
      "  2. [3] keys unchanged",
    }, "\n") .. "\n", (repl.eval_line(st, "p:next()")))
    assert.are.equal("[60, 70, 80]\n", (repl.eval_line(st, "p.last.out[2].y:totable()")))
    assert.are.equal(table.concat({
      "batch 3 from source (TensorSource): [2] x: float32, y: int64",
      "steps[1] (Apply): [2] +x2: float32",
      "steps[2] (Filter): [2] keys unchanged",
      "steps[3] (Rebatch): nothing yet (held for a later batch)",
    }, "\n") .. "\n", (repl.eval_line(st, "p:next()")))
    assert.are.equal(table.concat({
      "end of the source after 3 batches: flushing the nodes",
      "steps[1] (Apply): nothing to flush",
      "steps[2] (Filter): nothing to flush",
      "steps[3] (Rebatch): [2] x: float32, y: int64, x2: float32",
    }, "\n") .. "\n", (repl.eval_line(st, "p:next()")))
    assert.are.equal("end of stream after 3 batches (p:reset() starts over)\n", (repl.eval_line(st, "p:next()")))
    assert.are.equal("[90, 100]\n", (repl.eval_line(st, "p.last.batch.y:totable()")))
    -- reset starts over with the same batches
    repl.eval_line(st, "p:reset()")
    assert.are.equal("nil\n", (repl.eval_line(st, "p:next().batch")))
    assert.are.equal("[30, 40]\n", (repl.eval_line(st, "p.last.steps[2][1].y:totable()")))
    -- run drives the whole recipe into the sink
    assert.are.equal("", (repl.eval_line(st, "out, summary = p:run()")))
    assert.are.equal("[8]\t8\n", (repl.eval_line(st, "out:batch_size(), summary.rows_out")))
  end)

  it("passes name=value settings and reports a recipe's errors as they are", function()
    local st = repl.new()
    repl.eval_line(st, ":load stub.json steps.1.x=2 seed=3")
    assert.are.same({ "stub.json", { set = { "steps.1.x=2", "seed=3" } } }, calls[1])
    assert.are.same({ "tensordict: recipe: steps[1].fn: required\n", "error" },
      { repl.eval_line(st, ":load bad.json") })
    assert.are.same({ "usage: :load RECIPE [name=value ...]\n", "error" }, { repl.eval_line(st, ":load") })
  end)

  it("names the failing step of a batch", function()
    local st = repl.new()
    st.env.bad = function() error("tensordict: boom", 0) end
    repl.eval_line(st, ":load stub.json")
    repl.eval_line(st, "p.steps[2] = flow.Lambda{fn = bad}")
    assert.are.same({ "tensordict: steps[2] (Lambda): boom\n", "error" }, { repl.eval_line(st, "p:next()") })
    local broken = { iter = function() return function() error("tensordict: no more data", 0) end end }
    st.env.q = repl.stepper({ source = broken, steps = {} })
    assert.are.same({ "tensordict: source: no more data\n", "error" }, { repl.eval_line(st, "q:next()") })
    assert.are.equal("stepper over a recipe: source ?, steps (none), sink (none); 0 batches so far\n",
      (repl.eval_line(st, "q")))
    assert.are.same({ "stdin:1: tensordict: stepper: expected a recipe with a source (r.source with an iter method)\n",
      "error" }, { repl.eval_line(st, "require('tensordict.repl').stepper({})") })
  end)
end)

describe("scripts/tdrepl", function()
  local root = H.pwd()

  it("prints values through a pipe: no prompts, no banner", function()
    local dir = tmpdir()
    write_file(dir .. "/in", "T.zeros(3, 4):shape()\n1, 'a'\nerror('x')\nfor i = 1, 2 do\nprint(i)\nend\n")
    local out, code = sh(("cd %s && env -u TDREPL_HISTORY %s/scripts/tdrepl < in"):format(dir, root))
    assert.are.equal("[3, 4]\n1\ta\nstdin:1: x\n1\n2\n", out)
    assert.are.equal(0, code)
    H.rmtree(dir)
  end)

  it("keeps history in $TDREPL_HISTORY, and none by default through a pipe", function()
    local dir = tmpdir()
    write_file(dir .. "/in", "x = 1\nx\n")
    sh(("HOME=%s TDREPL_HISTORY=%s/h scripts/tdrepl < %s/in"):format(dir, dir, dir))
    assert.are.equal("x = 1\nx\n", read_file(dir .. "/h"))
    sh(("HOME=%s env -u TDREPL_HISTORY scripts/tdrepl < %s/in"):format(dir, dir))
    assert.is_nil(read_file(dir .. "/.tdrepl_history"))
    H.rmtree(dir)
  end)

  it("has --help and refuses unknown options", function()
    local out, code = sh("scripts/tdrepl --help")
    assert.are.equal(0, code)
    assert.is_truthy(out:find("usage: tdrepl [--plain] [RECIPE [name=value ...]]", 1, true))
    out, code = sh("scripts/tdrepl --frob < /dev/null")
    assert.are.equal(2, code)
    assert.is_truthy(out:find("tdrepl: unknown option '--frob'", 1, true), out)
  end)

  it("loads a recipe named on the command line (Lua recipe, real loader)", function()
    local dir = tmpdir()
    write_file(dir .. "/r.lua", [[
      local T = require("tensordict")
      return { seed = 0,
        source = { use = "TensorSource", td = T.TensorDict({ v = T.arange(1, 6, "float32") }, { 6 }), batch_size = 4 },
        steps = { { use = "Rebatch", size = 5 } }, sink = { use = "Collect" } }
    ]])
    write_file(dir .. "/in", "p:next()\np:next()\n")
    local out, code = sh(("env -u TDREPL_HISTORY scripts/tdrepl %s/r.lua < %s/in"):format(dir, dir))
    assert.are.equal(0, code)
    assert.are.equal(table.concat({
      "stepper over " .. dir .. "/r.lua: source TensorSource, steps Rebatch, sink Collect; 0 batches so far",
      "r is the recipe, p its stepper: p:next() runs one batch through every step, p:reset() starts over, "
        .. "p:run() runs it all into the sink",
      "batch 1 from source (TensorSource): [4] v: float32",
      "steps[1] (Rebatch): nothing yet (held for a later batch)",
      "batch 2 from source (TensorSource): [2] v: float32",
      "steps[1] (Rebatch): [5] keys unchanged",
    }, "\n") .. "\n", out)
    H.rmtree(dir)
  end)
end)

describe("scripts/tdrepl on a terminal", function()
  local root = H.pwd()
  -- util-linux's script (BSD's takes other arguments)
  local has_script = os.execute("script --version 2>/dev/null | grep -q util-linux") == 0

  it("edits lines with readline: tab completion, prompts, history in ~/.tdrepl_history", function()
    if not (has_script and readline.available) then return pending("needs util-linux script and libreadline") end
    local dir = tmpdir()
    write_file(dir .. "/in", "td = T.TensorDict({obs = T.zeros(4, 3), reward = T.ones(4)}, {4})\n"
      .. "td:batch_s\t()\ntd.rew\t:sum()\nfor i = 1, 2 do\nprint(i)\nend\n")
    local cmd = "cd %s && HOME=%s TERM=dumb env -u TDREPL_HISTORY script -qec 'exec %s/scripts/tdrepl' /dev/null < in"
    local out, code = sh(cmd:format(dir, dir, root))
    assert.are.equal(0, code)
    out = out:gsub("\r", "")
    -- what the terminal echoed before readline took it over is not ours: start at the banner
    local from = out:find("tdrepl: tensordict", 1, true)
    assert.is_truthy(from, out)
    local banner_end = out:find("\n", from, true)
    assert.are.equal(table.concat({
      "> td = T.TensorDict({obs = T.zeros(4, 3), reward = T.ones(4)}, {4})",
      "> td:batch_size()",
      "[4]",
      "> td.reward:sum()",
      "4",
      "> for i = 1, 2 do",
      ">> print(i)",
      ">> end",
      "1",
      "2",
      "> ",
    }, "\n") .. "\n", out:sub(banner_end + 1))
    assert.are.equal("td = T.TensorDict({obs = T.zeros(4, 3), reward = T.ones(4)}, {4})\ntd:batch_size()\n"
      .. "td.reward:sum()\nfor i = 1, 2 do\nprint(i)\nend\n", read_file(dir .. "/.tdrepl_history"))
    H.rmtree(dir)
  end)
end)

describe("tdrepl lines: positions, redefinitions, nodes, :jit", function()
  it("names line 1 of a one-line chunk, also for errors raised in metamethods", function()
    local out = session({ "T.zeros(2)[5]", "td = T.TensorDict({ a = T.zeros(3) }, { 3 })", "td.zzz",
      "1 + 1 -- a comment", "x = 1 -- another" })
    assert.are.equal("stdin:1: tensordict: index: index 5 is out of range for dim 1 of size 2 (valid: 1..2 or -2..-1)\n"
      .. "stdin:1: tensordict: index: no key 'zzz' in the TensorDict (keys: 'a')\n2\n", out)
  end)

  it("lets a node type defined at the prompt be defined again, not one of the library", function()
    local st = repl.new()
    local def = 'flow.define("ReplScale", { params = { { "keys", "keys", required = true }, '
      .. '{ "by", "number", default = %d } } })'
    assert.are.equal("", (repl.eval_line(st, "S = " .. def:format(2))))
    assert.are.equal("", (repl.eval_line(st, "S = " .. def:format(3))))
    assert.are.equal('flow.ReplScale{keys = {"x"}, by = 2}\n',
      (repl.eval_line(st, 'flow.ReplScale{keys = "x", by = 2}')))
    assert.are.equal(3, flow.ReplScale({ keys = "x" }).p.by)
    local text, status = repl.eval_line(st, 'flow.define("Map", {})')
    assert.are.equal("error", status)
    assert.is_truthy(text:match("^stdin:1: tensordict: flow: node type 'Map' is defined twice %(first in "
      .. "[^\n]*tensordict/flow/map%.lua%)\n$"), text)
    flow.registry.ReplScale = nil
  end)

  it("prints nodes with their parameters (those a spec would write)", function()
    local out = session({ 'flow.Normalize{keys = "obs", eps = 1e-3}', "flow.Take{n = 5}",
      'flow.Seq{flow.Select{keys = {"a", {"n", "b"}}}, flow.Apply{fn = "Tensor.abs", keys = "obs"}}' })
    assert.are.equal(table.concat({
      'flow.Normalize{keys = {"obs"}, eps = 0.001}',
      "flow.Take{n = 5}",
      "flow.Seq{",
      '  flow.Select{keys = {"a", {"n", "b"}}},',
      '  flow.Apply{keys = {"obs"}, fn = "Tensor.abs"},',
      "}",
    }, "\n") .. "\n", out)
    assert.are.equal("flow.Collect{}", tostring(flow.Collect {}))
  end)

  it("says how code typed at the prompt runs: interpreted (Ctrl-C stops any loop) or compiled", function()
    local out = session({ ":jit", ":jit on", ":jit", ":jit off", ":jit frob" })
    local interp = "code typed at the prompt runs in the interpreter (Ctrl-C stops any loop)\n"
    local compiled = "code typed at the prompt is compiled by the JIT (Ctrl-C cannot stop a compiled loop)\n"
    assert.are.equal(interp .. compiled .. compiled .. interp .. "usage: :jit [on|off], got 'frob'\n", out)
  end)
end)

describe("tdrepl and signals (through a pipe: the signals come from the lines themselves)", function()
  local root = H.pwd()
  local KILL = 'ffi = require("ffi"); ffi.cdef("int kill(int pid, int sig); int getpid(void);"); '
    .. "kill = function(s) ffi.C.kill(ffi.C.getpid(), s) end"

  local function tdrepl(lines, dir)
    write_file(dir .. "/in", table.concat(lines, "\n") .. "\n")
    return sh(("cd %s && env -u TDREPL_HISTORY scripts/tdrepl < %s/in"):format(root, dir))
  end

  it("stops a loop on Ctrl-C, twice, and keeps the session (loops typed at the prompt run interpreted)", function()
    local dir = tmpdir()
    local out, code = tdrepl({ KILL,
      "for i = 1, 1e15 do x = i; if i == 100000 then kill(2) end end",
      "print('alive', x >= 100000)",
      "function spin() local s = 0 for i = 1, 1e15 do s = s + i; if i == 1000 then kill(2); kill(2) end end end",
      "spin()",
      "print('still alive')" }, dir)
    assert.are.equal("stdin:1: interrupted!\nalive\ttrue\nstdin:1: interrupted!\nstill alive\n", out)
    assert.are.equal(0, code)
    H.rmtree(dir)
  end)

  it("stops p:run() between batches with the run's message at the line, sink aborted", function()
    local dir = tmpdir()
    write_file(dir .. "/r.lua", ([[
      local T = require("tensordict")
      local ffi = require("ffi")
      local n = 0
      return { seed = 0,
        source = { use = "TensorSource", td = T.TensorDict({ v = T.arange(1, 100) }, { 100 }), batch_size = 10 },
        steps = { { use = "Apply", keys = "v", fn = function(v)
          n = n + 1
          if n == 3 then ffi.C.kill(ffi.C.getpid(), 2) end
          return v
        end } },
        sink = { use = "MemmapSink", path = %q } }
    ]]):format(dir .. "/out"))
    local out, code = tdrepl({ KILL, ":load " .. dir .. "/r.lua", "p:run()", "print('alive')" }, dir)
    local lines = {}
    for line in out:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal("stdin:1: tensordict: run: interrupted by SIGINT: the nodes were closed and the sink aborted "
      .. "(nothing was committed)", lines[#lines - 1])
    assert.are.equal("alive", lines[#lines])
    assert.are.equal(0, code)
    local names = {}
    for _, name in ipairs(H.output_lines("ls -A " .. dir)) do names[#names + 1] = name end
    assert.are.same({ "in", "r.lua" }, names)
    H.rmtree(dir)
  end)

  for _, case in ipairs({ { "SIGTERM", 15, 143 }, { "SIGHUP", 1, 129 } }) do
    local name, signo, status = case[1], case[2], case[3]
    it(("ends the session on %s with one line and status %d"):format(name, status), function()
      local dir = tmpdir()
      local line = ("kill(%d); for i = 1, 1e15 do end"):format(signo)
      local out, code = tdrepl({ KILL, line, "print('not reached')" }, dir)
      assert.are.equal(("tdrepl: stopped by %s: the session ended (workers stopped, any run's sink aborted)\n")
        :format(name), out)
      assert.are.equal(status, code)
      H.rmtree(dir)
    end)
  end

  it("ends the session on SIGTERM while it waits for a line", function()
    local dir = tmpdir()
    local mark = dir .. "/reading"
    -- the input is a FIFO the shell keeps open, so tdrepl waits in its read
    local cmd = ("cd %s && mkfifo %s/fifo && { env -u TDREPL_HISTORY scripts/tdrepl < %s/fifo > %s/out 2>&1 & "
      .. "pid=$!; exec 3> %s/fifo; echo 'f = io.open(%q, \"w\") f:close()' >&3; "
      .. "while [ ! -f %s ]; do sleep 0.05; done; kill -TERM $pid; wait $pid; echo $?; exec 3>&-; } 2>/dev/null")
      :format(root, dir, dir, dir, dir, mark, mark)
    local text = sh(cmd)
    assert.are.equal("tdrepl: stopped by SIGTERM: the session ended (workers stopped, any run's sink aborted)\n",
      read_file(dir .. "/out"))
    assert.is_truthy(text:find("^143"), text)
    H.rmtree(dir)
  end)
end)

describe("tdrepl on a terminal: Ctrl-C", function()
  local root = H.pwd()
  local has_script = os.execute("script --version 2>/dev/null | grep -q util-linux") == 0

  it("stops a running loop and keeps the session, a second Ctrl-C too", function()
    if not (has_script and readline.available) then return pending("needs util-linux script and libreadline") end
    local dir = tmpdir()
    -- each Ctrl-C (byte 3) is typed once the loop has started (its mark is there); the
    -- input ends (Ctrl-D) once the last line ran
    local feed = table.concat({
      "echo 'io.open(\"started1\", \"w\"):close(); for i = 1, 1e15 do x = i end'",
      "while [ ! -f started1 ]; do sleep 0.05; done; printf '\\003'",
      "echo 'io.open(\"started2\", \"w\"):close(); for i = 1, 1e15 do x = i end'",
      "while [ ! -f started2 ]; do sleep 0.05; done; printf '\\003'; printf '\\003'",
      "echo 'print(\"alive\") io.open(\"done\", \"w\"):close()'",
      "while [ ! -f done ]; do sleep 0.05; done",
    }, "; ")
    -- script runs its command through $SHELL -c; exec, or a shell that stays (dash does)
    -- between script and tdrepl takes the Ctrl-C too and dies of it with status 130
    local cmd = ("cd %s && (%s) | HOME=%s TERM=dumb env -u TDREPL_HISTORY timeout 120 "
      .. "script -qec 'exec %s/scripts/tdrepl' /dev/null"):format(dir, feed, dir, root)
    local out, code = sh(cmd)
    out = out:gsub("\r", "")
    assert.are.equal(0, code, out)
    local from = out:find("tdrepl: tensordict", 1, true)
    assert.is_truthy(from, out)
    local session_text = out:sub(out:find("\n", from, true) + 1)
    assert.is_truthy(session_text:find("\nstdin:1: interrupted!\n> io.open(\"started2\"", 1, true), session_text)
    assert.is_truthy(session_text:find("stdin:1: interrupted!\n", session_text:find("started2", 1, true), true),
      session_text)
    assert.is_truthy(session_text:find("\nalive\n", 1, true), session_text)
    H.rmtree(dir)
  end)
end)
