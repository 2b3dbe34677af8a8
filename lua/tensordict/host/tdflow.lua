-- host/tdflow.lua: the host's command line (scripts/tdflow calls main). Commands:
--   tdflow run RECIPE [--set PATH=VALUE ...] [--workers N] [--seed N] [--quiet] [--report FILE]
--   tdflow check RECIPE [--set PATH=VALUE ...]
--   tdflow inspect PATH
--   tdflow plugins
--   tdflow help [COMMAND]
-- Exit codes: 0 done, 2 usage or recipe errors, 1 runtime errors, 130 interrupted.
local argparse = require("argparse")
local T = require("tensordict")
local signals = require("tensordict.signals")
local util = require("tensordict.util")
local flow = require("tensordict.flow")
local recipe = require("tensordict.host.recipe")
local plugins = require("tensordict.host.plugins")
local progress = require("tensordict.host.progress")
local report = require("tensordict.host.report")
local inspect = require("tensordict.host.inspect")
local host_dist = require("tensordict.host.dist")

local now = util.now
local kit = flow.kit.new()
local SIGINT = signals.SIGINT

local M = {}

M.EXIT_OK, M.EXIT_RUNTIME, M.EXIT_USAGE, M.EXIT_INTERRUPTED = 0, 1, 2, 130

-- A converter for options taking a non-negative integer, with a message naming them.
local function count_arg(name)
  return function(x)
    local n = tonumber(x)
    if util.is_int(n) and n >= 0 then return n end
    return nil, ("%s expects a non-negative integer, got '%s'"):format(name, x)
  end
end

-- A converter for options taking seconds: a number > 0.
local function seconds_arg(name)
  return function(x)
    local n = tonumber(x)
    if n and n > 0 and n == n then return n end
    return nil, ("%s expects a number of seconds > 0, got '%s'"):format(name, x)
  end
end

local function parser()
  local p = argparse("tdflow", "Runs tensordict pipeline recipes (docs/recipes.md).")
    :epilog("Exit codes: 0 done, 2 usage or recipe errors, 1 runtime errors, 130 interrupted.")
  p:command_target("command")
  p:add_help_command()
  local run = p:command("run", "Check a recipe, then run it with progress and a per-node report.")
  run:argument("recipe", "The recipe: a .json file, or a .lua file returning a table.")
  run:option("--set", "Override a recipe value: PATH=VALUE (e.g. steps.2.scale=0.5); repeatable.")
    :count("*"):argname("PATH=VALUE")
  run:option("--workers", "Worker processes for Map steps (the recipe's 'workers').")
    :convert(count_arg("--workers"))
  run:option("--seed", "The pipeline seed (the recipe's 'seed').")
    :convert(count_arg("--seed"))
  run:flag("-q --quiet", "No progress and no report table.")
  run:option("--report", "Also write the report as JSON to FILE."):argname("FILE")
  run:option("--timeout", "Seconds a Map batch may take, and under mpirun a rank waits for the others "
    .. "at an exchange, before the run fails (the recipe's 'timeout'; default: none for Map, 600 for "
    .. "exchanges; docs/recipes.md).")
    :convert(seconds_arg("--timeout"))
  local check = p:command("check", "Report every problem of a recipe at once, before any data moves.")
  check:argument("recipe", "The recipe: a .json or .lua file.")
  check:option("--set", "Override a recipe value: PATH=VALUE; repeatable."):count("*"):argname("PATH=VALUE")
  local ins = p:command("inspect", "Show a memmap folder or a consolidated file as a tree.")
  ins:argument("path", "A memmap folder (meta.json inside) or a consolidated file.")
  p:command("plugins", "List the node types and functions of every plugin, with their files.")
  return p
end

local function say(out, ...)
  out:write(...)
  out:write("\n")
  out:flush()
end

-- A Lua error's text without the "file:line: tensordict: " decoration.
local function message(err)
  if type(err) == "table" and err.interrupted then return "interrupted (SIGINT)" end
  local text = tostring(err)
  local stripped = text:match("^[^\n]-:%d+: tensordict: (.*)$") or text:match("^tensordict: (.*)$")
  return stripped or text
end

local function is_interrupt(err)
  if type(err) == "table" and err.interrupted then return true end
  return tostring(err):find("interrupted", 1, true) ~= nil
end

local function print_problems(io_err, path, problems)
  say(io_err, ("tdflow: %s: %d problem%s:"):format(path, #problems, #problems == 1 and "" or "s"))
  for _, pb in ipairs(problems) do say(io_err, "  " .. pb) end
end

-- tdflow names a failing source or sink by its place alone ("tdflow: sink: dist.barrier:
-- timed out ...", where flow.run adds the type: "sink (MemmapSink)"), as it always has:
-- flow.run gets a plain table (not a node) that hands every call to x.
local function by_place(x)
  return setmetatable({}, { __index = function(self, k)
    local v = x[k]
    if type(v) ~= "function" then return v end
    local method = function(_, ...) return v(x, ...) end
    rawset(self, k, method)
    return method
  end })
end

-- What a finished run produced, for the last lines.
local function describe_result(result)
  if T.is_tensordict(result) then
    local prefix = result:memmap_prefix()
    local rows = kit.rows(result)
    if prefix then
      return ("output: %s (%d rows). Open it with T.load_memmap(%q) in Lua or tdrepl, "
        .. "or tensordict.TensorDict.load_memmap(%q) in Python."):format(prefix, rows, prefix, prefix)
    end
    return ("output: a TensorDict of %d rows"):format(rows)
  elseif type(result) == "number" then
    return ("output: %d rows"):format(result)
  end
  return nil
end

-- Runs a prepared recipe the way `tdflow run` does (flow.run profiling every step, the
-- source and the sink; progress; Ctrl-C watched) and returns ok, result or error, the
-- report. The benchmark of host overhead calls this too. opts: quiet, interrupts (the
-- SIGINT count before the run), dist (host/dist.lua's ctx.dist in a data-parallel run:
-- the nodes get it, only rank 0 draws progress, an estimate of all ranks' rows from its
-- own, and the report is every rank's summed).
function M.execute(r, opts)
  opts = opts or {}
  local interrupts = opts.interrupts or signals.count(SIGINT)
  local d = opts.dist
  local total = r.source.len and r.source:len() or nil
  local bar = progress.new({ total = total, quiet = opts.quiet or (d and d.rank ~= 0) })
  local ranks = d and d.size or 1
  local function on_batch(summary)
    if signals.count(SIGINT) ~= interrupts then error({ interrupted = true }, 0) end
    bar:update(summary.rows_in * ranks)
  end
  local ok, result, summary = pcall(flow.run, by_place(r.source), r.node, by_place(r.sink), { seed = r.seed,
    workers = r.workers, on_batch = on_batch, profile = true, ctx = { dist = d, timeout = r.timeout } })
  if not ok then
    if bar.drawn then io.stderr:write("\n") end
    if signals.count(SIGINT) ~= interrupts then result = { interrupted = true } end
    return false, result
  end
  local info = { rows = summary.nodes, seconds = summary.seconds, rows_in = summary.rows_in,
    rows_out = summary.rows_out, recipe = r.path, seed = r.seed, workers = r.workers }
  if d then info = host_dist.aggregate(d, info) end
  bar:done(info.rows_in)
  return true, result, report.build(info)
end

function M.run_command(args, out, err)
  signals.watch(SIGINT)
  local interrupts = signals.count(SIGINT)
  local r, problems = recipe.prepare(args.recipe, { set = args.set, workers = args.workers })
  if not r then
    print_problems(err, args.recipe, problems)
    return M.EXIT_USAGE
  end
  if args.seed then r.seed = args.seed end
  if args.timeout then r.timeout = args.timeout end
  -- Under mpirun: one rank of a data-parallel run (docs/dist.md); the recipe's timeout
  -- bounds every exchange too.
  local d = host_dist.launched() and host_dist.start(r.timeout or 600) or nil
  local ok, result, rep = M.execute(r, { quiet = args.quiet, interrupts = interrupts, dist = d })
  if not ok then
    local code = M.EXIT_RUNTIME
    if is_interrupt(result) then
      say(err, "tdflow: interrupted: workers stopped, the sink aborted (nothing was committed)")
      code = M.EXIT_INTERRUPTED
    else
      say(err, "tdflow: " .. (d and ("rank %d: "):format(d.rank) or "") .. message(result))
    end
    -- This rank cleaned up (sink aborted); the others must not wait for it.
    if d then d.abort(code) end
    return code
  end
  if d then
    d.finalize()
    if d.rank ~= 0 then return M.EXIT_OK end -- rank 0 reports for all
  end
  if not args.quiet then
    say(out, report.text(rep))
    local line = describe_result(result)
    if line then say(out, line) end
  end
  if args.report then
    -- committed like every save (temporary, fsync, rename): never a torn report
    local wok, werr = pcall(kit.write_file, args.report, report.json(rep) .. "\n",
      { who = "--report " .. args.report })
    if not wok then
      say(err, "tdflow: " .. message(werr))
      return M.EXIT_RUNTIME
    end
  end
  return M.EXIT_OK
end

function M.check_command(args, out, err)
  local t0 = now()
  local problems = recipe.check(args.recipe, { set = args.set })
  if #problems > 0 then
    print_problems(err, args.recipe, problems)
    return M.EXIT_USAGE
  end
  say(out, ("tdflow: %s: ok (checked in %.1f ms)"):format(args.recipe, (now() - t0) * 1e3))
  return M.EXIT_OK
end

function M.inspect_command(args, out, err)
  local ok, text = pcall(inspect.text, args.path)
  if not ok then
    say(err, "tdflow: " .. message(text))
    return M.EXIT_RUNTIME
  end
  say(out, text)
  return M.EXIT_OK
end

function M.plugins_command(_, out)
  plugins.load_all()
  for _, name in ipairs(plugins.order) do
    local p = plugins.loaded[name]
    say(out, ("%s %s  (%s)%s"):format(p.name, p.version, p.file, p.doc ~= "" and ("\n  " .. p.doc) or ""))
    if #p.nodes > 0 then
      say(out, "  node types:")
      for _, t in ipairs(p.nodes) do
        local cls = flow.registry[t]
        say(out, ("    %-18s %s"):format(t, type(cls) == "table" and cls.doc or ""))
      end
    end
    if #p.functions > 0 then
      say(out, "  functions:")
      for _, f in ipairs(p.functions) do say(out, ("    %-28s %s"):format(f, p.docs[f] or "")) end
    end
  end
  return M.EXIT_OK
end

-- main(argv [, out, err]) -> exit code.
function M.main(argv, out, err)
  out, err = out or io.stdout, err or io.stderr
  local p = parser()
  local ok, args = p:pparse(argv)
  if not ok then
    say(err, "tdflow: " .. tostring(args))
    say(err, "Run 'tdflow --help' for usage.")
    return M.EXIT_USAGE
  end
  if not args.command then
    say(err, p:get_help())
    return M.EXIT_USAGE
  end
  local handlers = { run = M.run_command, check = M.check_command, inspect = M.inspect_command,
    plugins = M.plugins_command }
  local handler_ok, code = pcall(handlers[args.command], args, out, err)
  if not handler_ok then
    if is_interrupt(code) then return M.EXIT_INTERRUPTED end
    say(err, "tdflow: " .. message(code))
    return tostring(code):find("plugin ", 1, true) and M.EXIT_USAGE or M.EXIT_RUNTIME
  end
  return code
end

return M
