-- repl/init.lua: tdrepl, the interactive LuaJIT prompt with T and flow loaded (docs/repl.md).
--   local repl = require("tensordict.repl")
--   repl.run{ input =, output =, readline = true|false }   -- the whole session
--   local st = repl.new()                                  -- or one line at a time:
--   local text, status = repl.eval_line(st, "T.zeros(3, 4):shape()")  --> "[3, 4]\n", "ok"
--   repl.complete(st, "td:ma")                             --> {"td:masked_fill", ...}
-- A line is tried as an expression first (`return <line>`), then as a statement; its
-- values print side by side; an incomplete chunk waits for more lines; errors print
-- their message, and `:trace` their traceback. Lines starting with ':' are commands.
-- Code typed at the prompt runs in LuaJIT's interpreter, so Ctrl-C stops it even in a
-- loop the JIT would compile (`:jit on` compiles it; repl/signals.lua).
local T = require("tensordict")
local base_signals = require("tensordict.signals")
local show = require("tensordict.repl.show")
local completion = require("tensordict.repl.complete")
local stepper = require("tensordict.repl.stepper")
local readline = require("tensordict.repl.readline")
local signals = require("tensordict.repl.signals")

local M = {}

M.PROMPT, M.MORE = "> ", ">> "
M.stepper = stepper.new -- p = repl.stepper(r) steps a recipe outside :load too
M.show = show.value

--------------------------------------------------------------------------- state

-- repl.new{env =, write =} -> state. env: the globals lines run in (default: a table
-- with T and flow over _G; the session sets print, _, and r and p on :load in it);
-- write(text): where print() inside a line goes as it happens (default: kept and
-- returned by eval_line before the line's values).
function M.new(opts)
  opts = opts or {}
  local env = opts.env or setmetatable({ T = T, flow = T.flow }, { __index = _G })
  local st = { env = env, write = opts.write, commands = M.commands, trace = false, jit = false }
  rawset(env, "print", function(...)
    local parts = {}
    for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
    local s = table.concat(parts, "\t") .. "\n"
    if st.write then st.write(s) else st.captured[#st.captured + 1] = s end
  end)
  st.captured = {}
  return st
end

local function error_text(e)
  if type(e) == "string" then return e end
  local mt = getmetatable(e)
  if type(mt) == "table" and mt.__tostring then return (tostring(e)) end
  return ("(error object is a %s value)"):format(type(e))
end

-- The traceback down to the line's own frames (the REPL's frames are not the user's).
local function traceback(e)
  local tb = debug.traceback(error_text(e), 3)
  local cut = tb:find("\n[^\n]*tensordict/repl/init%.lua:")
  if cut then tb = tb:sub(1, cut - 1) end
  return (tb:gsub("\n%s*%[C%]: in function 'xpcall'$", ""))
end

local function failed(st, msg, tb)
  st.last_error, st.last_traceback = msg, tb or msg
  if st.trace and tb then return tb .. "\n", "error" end
  return msg .. "\n", "error"
end

------------------------------------------------------------------------- commands

local function help()
  local lines = { "Commands (at the start of a line):" }
  for _, c in ipairs(M.command_list) do lines[#lines + 1] = ("  %-22s %s"):format(c[2], c[3]) end
  lines[#lines + 1] = "Lines: an expression prints its values (tables of integers as shapes, [3, 4]);"
  lines[#lines + 1] = "a statement runs; top-level `local` names stay defined for later lines; an"
  lines[#lines + 1] = "incomplete chunk continues on the next line (prompt >>). _ holds the last value."
  lines[#lines + 1] = "Tab completes globals, fields (T.fl), methods (t:ma, td:ke) and keys (td.ob)."
  return table.concat(lines, "\n") .. "\n", "ok"
end

local function trace_cmd(st, arg)
  if arg == "on" or arg == "off" then
    st.trace = arg == "on"
    return ("tracebacks %s\n"):format(st.trace and "shown with every error" or "off (:trace shows the last one)"), "ok"
  elseif arg ~= "" then
    return ("usage: :trace [on|off], got '%s'\n"):format(arg), "error"
  end
  if not st.last_traceback then return "no error yet\n", "ok" end
  return st.last_traceback .. "\n", "ok"
end

-- ":load PATH [steps.2.scale=0.5 ...]": builds the recipe and a stepper over it.
local function load_cmd(st, arg)
  local words = {}
  for w in arg:gmatch("%S+") do words[#words + 1] = w end
  if #words == 0 then return "usage: :load RECIPE [name=value ...]\n", "error" end
  local path = table.remove(words, 1)
  local ok, recipe = pcall(require, "tensordict.host.recipe")
  if not ok then return failed(st, "tensordict: recipes are not available: " .. error_text(recipe)) end
  local opts = #words > 0 and { set = words } or nil
  local lok, r = xpcall(function() return recipe.load(path, opts) end, traceback)
  if not lok then
    -- the recipe's own message: the position blamed would be the REPL's, not the user's
    local msg = (r:match("^(.-)\nstack traceback:") or r):gsub("^[^\n]-:%d+: (tensordict: )", "%1")
    return failed(st, msg, r)
  end
  if st.stepper then pcall(st.stepper.reset, st.stepper) end -- the previous one's nodes
  local p = stepper.new(r)
  rawset(st.env, "r", r)
  rawset(st.env, "p", p)
  st.stepper = p
  local notes = "" -- what the checks could not verify, as tdflow check says it
  for _, note in ipairs(r.notes or {}) do notes = notes .. "not checked: " .. note .. "\n" end
  return ("%s\nr is the recipe, p its stepper: p:next() runs one batch through every step, "
    .. "p:reset() starts over, p:run() runs it all into the sink\n%s"):format(tostring(p), notes), "ok"
end

local function jit_cmd(st, arg)
  if arg == "on" or arg == "off" then
    st.jit = arg == "on"
  elseif arg ~= "" then
    return ("usage: :jit [on|off], got '%s'\n"):format(arg), "error"
  end
  return st.jit and "code typed at the prompt is compiled by the JIT (Ctrl-C cannot stop a compiled loop)\n"
    or "code typed at the prompt runs in the interpreter (Ctrl-C stops any loop)\n", "ok"
end

-- { name, usage, what it does, handler(st, arg) -> text, status }
M.command_list = {
  { "help", ":help", "this list", help },
  { "load", ":load RECIPE [k=v ...]", "build a recipe (JSON or Lua): r = the recipe, p = its stepper", load_cmd },
  { "trace", ":trace [on|off]", "the last error's traceback; on/off: with every error", trace_cmd },
  { "jit", ":jit [on|off]", "compile code typed here with the JIT (off: Ctrl-C stops any loop)", jit_cmd },
  { "quit", ":quit", "leave (also Ctrl-D)", function() return "", "quit" end },
}
M.commands = {}
for _, c in ipairs(M.command_list) do M.commands[c[1]] = c[4] end

local function command(st, name, arg)
  local fn = st.commands[name]
  if not fn then
    return ("unknown command ':%s' (:help lists them)\n"):format(name), "error"
  end
  return fn(st, arg)
end

----------------------------------------------------------------------- evaluation

-- Top-level `local` declarations become session globals, so a name defined on one line
-- is there on the next (each line is its own chunk, whose locals would end with it).
local function unlocal(chunk)
  local s = chunk:gsub("^(%s*)local%s+function(%s)", "%1function%2", 1)
  if s ~= chunk then return s end
  local lead, names, rest = chunk:match("^(%s*)local%s+([%a_][%w_]*[%w_%s,]*)(.*)$")
  if not lead then return chunk end
  if rest:match("^=[^=]") or rest == "=" then return lead .. names .. rest end
  if rest == "" or rest:match("^;") or rest:match("^\n") then
    return lead .. names .. "= nil" .. rest
  end
  return chunk
end

local function incomplete(err) return err:find("'?<eof>'?$") ~= nil end

-- Compiles the chunk: an expression list when `return chunk` compiles, else a
-- statement. An expression list runs as the arguments of a pack function (given as the
-- chunk's vararg) rather than after `return`, which would make `error("x")` a tail
-- call and lose the line's position from the message. The pack call closes on the
-- chunk's last line (an error in a metamethod names the line of the call), unless the
-- chunk ends in a comment, which needs the parenthesis on a line of its own.
local PACK_HEAD = "local __tdrepl_pack = ... return __tdrepl_pack("

-- Returns the function, or nil, the error and whether more lines could complete it
-- (either form stopped at the end of input: "{" or "x =").
local function compile(chunk)
  local _, expr_err = loadstring("return " .. chunk, "=stdin")
  if not expr_err then
    return loadstring(PACK_HEAD .. chunk .. ")", "=stdin")
      or assert(loadstring(PACK_HEAD .. chunk .. "\n)", "=stdin"))
  end
  local f, err = loadstring(unlocal(chunk), "=stdin")
  if f then return f end
  -- report the error of the chunk as typed (not of its rewrite)
  local _, original = loadstring(chunk, "=stdin")
  err = original or err
  return nil, err, incomplete(err) or incomplete(expr_err)
end

-- The node types defined at the prompt may be defined again there (flow.define).
local function mark_redefinable()
  for _, cls in pairs(T.flow.registry) do
    if type(cls) == "table" and cls.defined_in == "=stdin" then cls.redefinable = true end
  end
end

local function run_chunk(st, f)
  setfenv(f, st.env)
  if not st.jit then jit.off(f, true) end -- interpreted: the interrupt hook reaches its loops
  local res = { n = 0 }
  local function pack(...) res = { n = select("#", ...), ... } end
  local unhook = signals.interruptible(base_signals.snapshot())
  local ok, err = xpcall(f, function(e) return { msg = error_text(e), tb = traceback(e) } end, pack)
  unhook()
  mark_redefinable()
  if not ok then return failed(st, err.msg, err.tb) end
  if res.n == 0 then return "", "ok" end
  rawset(st.env, "_", res[1])
  local sok, text = pcall(show.values, res.n, unpack(res, 1, res.n))
  if not sok then return ("(the value could not be printed: %s)\n"):format(error_text(text)), "ok" end
  return text .. "\n", "ok"
end

-- repl.eval_line(st, line) -> text, status. status: "ok", "error", "more" (the chunk
-- continues on the next line), "quit". text is what to print (print()'s output
-- included unless st.write takes it), each line ending in "\n".
function M.eval_line(st, line)
  if not st.pending then
    local name, arg = line:match("^%s*:(%S*)%s*(.-)%s*$")
    if name then return command(st, name, arg) end
    if line:match("^%s*$") then return "", "ok" end
  end
  local chunk = st.pending and (st.pending .. "\n" .. line) or line
  local f, err, more = compile(chunk)
  if not f then
    if more then
      st.pending = chunk
      return "", "more"
    end
    st.pending = nil
    return failed(st, err)
  end
  st.pending = nil
  st.captured = {}
  local text, status = run_chunk(st, f)
  if #st.captured > 0 then text = table.concat(st.captured) .. text end
  st.captured = {}
  return text, status
end

-- The end of input: a chunk still waiting for lines is reported as the error it is.
function M.finish(st)
  if not st.pending then return "" end
  local _, err = loadstring(st.pending, "=stdin")
  local _, expr_err = loadstring("return " .. st.pending, "=stdin")
  if not incomplete(err or "") and expr_err and incomplete(expr_err) then err = expr_err end
  st.pending = nil
  return (failed(st, err or "incomplete input"))
end

function M.prompt(st) return st.pending and M.MORE or M.PROMPT end

function M.complete(st, line) return completion.complete(st, line) end

-- Stops what the session holds (a stepper's open nodes and workers).
function M.close(st)
  if st.stepper then pcall(st.stepper.reset, st.stepper) end
end

-------------------------------------------------------------------------- session

-- Lines from a string, read like a file handle.
local function string_input(s)
  local pos = 1
  return {
    read = function()
      if pos > #s then return nil end
      local nl = s:find("\n", pos, true)
      local line = s:sub(pos, (nl or #s + 1) - 1)
      pos = (nl or #s) + 1
      return line
    end,
  }
end

function M.banner()
  return ("tdrepl: tensordict %s on %s; T and flow are loaded. :help lists commands, Ctrl-D leaves.\n")
    :format(T.version, jit and jit.version or _VERSION)
end

function M.history_path()
  local env = os.getenv("TDREPL_HISTORY")
  if env and env ~= "" then return env end
  local home = os.getenv("HOME")
  return home and home ~= "" and (home .. "/.tdrepl_history") or nil
end

-- repl.run{...}: a whole session. input: a file handle or a string (default stdin);
-- output: a file handle or anything with :write (default stdout); readline: true/false
-- (default: when the input is a terminal and libreadline is there); history: a path,
-- or false (default: $TDREPL_HISTORY, or ~/.tdrepl_history when the input is a
-- terminal); prompt, banner: booleans (default: when the input is a terminal);
-- env: the globals; load: a recipe to :load first; signals: take SIGINT, SIGTERM and
-- SIGHUP for the session (default: when the input is stdin); errors: where the line
-- saying a signal ended the session goes (default stderr). Returns the state, with
-- st.signal and st.exit_code (128 + signo) when SIGTERM or SIGHUP ended it.
function M.run(opts)
  opts = opts or {}
  local input = opts.input or io.stdin
  if type(input) == "string" then input = string_input(input) end
  local output = opts.output or io.stdout
  local tty = input == io.stdin and readline.isatty(0)
  local function write(s)
    if s == "" then return end
    output:write(s)
    if output.flush then output:flush() end
  end
  local history = opts.history
  if history == nil then
    history = (tty or (os.getenv("TDREPL_HISTORY") or "") ~= "") and M.history_path() or false
  end
  local use_rl = opts.readline
  if use_rl == nil then use_rl = tty end
  local st = M.new({ env = opts.env, write = write })
  local ed = readline.open({
    history = history or nil,
    readline = use_rl and true or false,
    input = input,
    output = output,
    prompt = opts.prompt == nil and tty or opts.prompt,
    complete = function(line) return M.complete(st, line) end,
  })
  if opts.banner == nil and tty or opts.banner then write(M.banner()) end
  if ed.history_error then write(("(history is not kept: %s)\n"):format(ed.history_error)) end
  -- SIGINT, SIGTERM and SIGHUP are counted for the session (the program's, on stdin):
  -- Ctrl-C stops a line, never the session; SIGTERM and SIGHUP end it cleanly
  local own = opts.signals
  if own == nil then own = input == io.stdin end
  local taken = own and base_signals.take_stopping() or {}
  local function stopped(snap)
    local signo = base_signals.arrived(snap)
    if signo and signo ~= base_signals.SIGINT then return signo end
  end
  local snap = base_signals.snapshot()
  if opts.load then write((M.eval_line(st, ":load " .. opts.load))) end
  while not stopped(snap) do
    snap = base_signals.snapshot()
    local ok, line = pcall(ed.read, ed, M.prompt(st))
    if stopped(snap) then
      if tty then write("\n") end
      break
    elseif not ok or line == false then
      -- Ctrl-C while reading: the chunk being typed is dropped
      st.pending = nil
      if not ok and not error_text(line):find("interrupted!$") then write(error_text(line) .. "\n") end
      if ok and not use_rl and tty then write("\n") end -- plain lines: ^C left the cursor there
    elseif line == nil then
      if tty then write("\n") end -- Ctrl-D left the cursor after the prompt
      write(M.finish(st))
      break
    else
      local eok, text, status = pcall(M.eval_line, st, line)
      if not eok then text, status = error_text(text) .. "\n", "error" end
      if stopped(snap) then break end -- the line was cut short: one message below says why
      write(text)
      if status == "quit" then break end
    end
  end
  local signo = stopped(snap)
  if signo then
    st.signal, st.exit_code = signo, base_signals.exit_code(signo)
    -- the stepper's workers first, then the message
    M.close(st)
    local err = opts.errors or io.stderr
    err:write(("tdrepl: stopped by %s: the session ended (workers stopped, any run's sink aborted)\n")
      :format(base_signals.name(signo)))
    err:flush()
  end
  base_signals.restore_taken(taken)
  ed:close()
  M.close(st)
  return st
end

return M
