-- host/tdflow.lua: the host's command line (scripts/tdflow calls main). Commands:
--   tdflow run RECIPE [--set PATH=VALUE ...] [--workers N] [--seed N] [--quiet] [--report FILE]
--              [--checkpoint ROWS] [--resume]
--   tdflow rerun OUTPUT [--into PATH] [--set PATH=VALUE ...] [--workers N] [--verify] ...
--   tdflow sweep RECIPE [--grid PATH=VALUES ...] [--set PATH=VALUE ...] [--out OUT] [--jobs N] [--resume]
--   tdflow check RECIPE [--set PATH=VALUE ...]
--   tdflow inspect PATH [--stats | --head N | --hist KEY [--bins N] [--plot FILE.png]]
--   tdflow report FILE [--metric NAME] [--png OUT.png]
--   tdflow plugins
--   tdflow help [COMMAND]
--   tdflow --version
-- RECIPE may be "-": the recipe is read from standard input (JSON or Lua).
-- Exit codes: 0 done, 2 usage or recipe errors, 1 runtime errors, 130/143/129 stopped by
-- SIGINT/SIGTERM/SIGHUP.
local argparse = require("argparse")
local T = require("tensordict")
local signals = require("tensordict.signals")
local util = require("tensordict.util")
local fs = require("tensordict.fs")
local flow = require("tensordict.flow")
local recipe = require("tensordict.host.recipe")
local plugins = require("tensordict.host.plugins")
local progress = require("tensordict.host.progress")
local report = require("tensordict.host.report")
local inspect_views = require("tensordict.host.inspect_views")
local report_command = require("tensordict.host.report_command")
local host_dist = require("tensordict.host.dist")
local provenance = require("tensordict.host.provenance")
local rerun = require("tensordict.host.rerun")
local metrics = require("tensordict.host.metrics")
local sweep = require("tensordict.host.sweep")

local now = util.now
local kit = flow.kit.new()

local M = {}

M.EXIT_OK, M.EXIT_RUNTIME, M.EXIT_USAGE, M.EXIT_INTERRUPTED = 0, 1, 2, 130
local EPILOG = "Exit codes: 0 done, 2 usage or recipe errors, 1 runtime errors, 130, 143 or 129 "
  .. "stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP (workers stopped, the sink aborted)."

-- A converter for options taking a non-negative (positive: min 1) integer, with a
-- message naming them.
local function count_arg(name, min)
  return function(x)
    local n = tonumber(x)
    if util.is_int(n) and n >= (min or 0) then return n end
    return nil, ("%s expects a %s integer, got '%s'"):format(name, min == 1 and "positive" or "non-negative", x)
  end
end

-- --seed: a uint64, written exactly (a double rounds integers past 2^53: 2^53 + 1 would
-- silently seed 2^53).
local function seed_arg(x)
  local n = tonumber(x)
  if x:match("^%d+$") and n and n < 2 ^ 64 and ("%.0f"):format(n) == x:gsub("^0+(%d)", "%1") then return n end
  return nil, ("--seed expects an integer in 0..2^64-1 that a double holds exactly (any up to 2^53), got '%s'")
    :format(x)
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
    :epilog(EPILOG)
  p:command_target("command")
  p:require_command(false)
  p:flag("--version", "Print tdflow's, the library's and LuaJIT's versions and exit.")
  p:add_help_command()
  local run = p:command("run", "Check a recipe, then run it with progress and a per-node report.")
  run:argument("recipe", "The recipe: a .json file, a .lua file returning a table, or - (read from standard input).")
  run:option("--set", "Override a recipe value: PATH=VALUE (e.g. steps.2.scale=0.5); repeatable.")
    :count("*"):argname("PATH=VALUE")
  run:option("--workers", "Worker processes for Map steps (the recipe's 'workers').")
    :convert(count_arg("--workers"))
  run:option("--seed", "The pipeline seed (the recipe's 'seed').")
    :convert(seed_arg)
  run:flag("-q --quiet", "No progress and no report table.")
  run:option("--report", "Also write the report as JSON to FILE."):argname("FILE")
  run:option("--timeout", "Seconds a Map batch may take, and under mpirun a rank waits for the others "
    .. "at an exchange, before the run fails (the recipe's 'timeout'; default: none for Map, 600 for "
    .. "exchanges; docs/recipes.md).")
    :convert(seconds_arg("--timeout"))
  run:option("--checkpoint", "Commit a checkpoint every ROWS rows of the MemmapSink's output "
    .. "(its checkpoint parameter), which --resume continues after a kill.")
    :convert(count_arg("--checkpoint", 1)):argname("ROWS")
  run:flag("--resume", "Continue from the sink's last checkpoint (the same recipe and overrides).")
  rerun.add_command(p, count_arg)
  sweep.add_command(p, count_arg)
  local check = p:command("check", "Report every problem of a recipe at once, before any data moves.")
  check:argument("recipe", "The recipe: a .json or .lua file, or - (read from standard input).")
  check:option("--set", "Override a recipe value: PATH=VALUE; repeatable."):count("*"):argname("PATH=VALUE")
  local ins = p:command("inspect", "Show a memmap folder, a consolidated file or an HDF5 file as a tree, or "
    .. "look at its values (--stats, --head, --hist).")
  ins:argument("path", "A memmap folder (meta.json inside), a consolidated file or an HDF5 file.")
  inspect_views.add_options(ins, count_arg)
  report_command.add_command(p)
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
  if type(err) == "table" and err.interrupted then
    return "interrupted by " .. signals.name(err.signal or signals.SIGINT)
  end
  local text = tostring(err)
  local stripped = text:match("^[^\n]-:%d+: tensordict: (.*)$") or text:match("^tensordict: (.*)$")
  return stripped or text
end

local function is_interrupt(err)
  if type(err) == "table" and err.interrupted then return true end
  return tostring(err):find("interrupted", 1, true) ~= nil
end

-- The recipe as messages name it ("-" is standard input).
local function recipe_name(path) return path == "-" and "stdin" or path end

local function print_problems(io_err, path, problems)
  say(io_err, ("tdflow: %s: %d problem%s:"):format(recipe_name(path), #problems, #problems == 1 and "" or "s"))
  for _, pb in ipairs(problems) do say(io_err, "  " .. pb) end
end

-- What check could not verify (a step adding keys it does not declare, a source that
-- does not say its keys): said, never passed over.
local function print_notes(io, path, notes)
  if #notes == 0 then return end
  say(io, ("tdflow: %s: %d thing%s not checked:"):format(recipe_name(path), #notes, #notes == 1 and "" or "s"))
  for _, note in ipairs(notes) do say(io, "  " .. note) end
end

-- --report FILE, checked before any data moves: the report is committed as a temporary
-- sibling renamed over FILE, so FILE's folder must exist and be writable, and FILE
-- must not be a folder.
local function report_problems(path)
  if not path then return {} end
  local dir = fs.dirname(path)
  if path == "" or path:sub(-1) == "/" or fs.is_dir(path) then
    return { ("--report %s: a folder, not a file"):format(path) }
  elseif not fs.is_dir(dir) then
    return { ("--report %s: the folder '%s' does not exist"):format(path, dir) }
  elseif not fs.is_writable(dir) then
    return { ("--report %s: the folder '%s' is not writable"):format(path, dir) }
  end
  return {}
end

-- Writes the report to FILE (committed like every save); false and the message when it
-- cannot be written.
local function write_report(path, rep)
  local ok, err = pcall(kit.write_file, path, report.json(rep) .. "\n", { who = "--report " .. path })
  if ok then return true end
  return false, message(err)
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
-- source and the sink; progress; flow.run stops on the signals tdflow watches) and
-- returns ok, result or error, the report. A run stopped by a signal gives the error
-- {interrupted = true, signal = signo}. The benchmark of host overhead calls this too.
-- opts: quiet, signals (signals.snapshot() before the recipe was prepared), dist
-- (host/dist.lua's ctx.dist in a data-parallel run: the nodes get it, only rank 0 draws
-- progress, an estimate of all ranks' rows from its own, and the report is every rank's
-- summed).
function M.execute(r, opts)
  opts = opts or {}
  local snap = opts.signals or signals.snapshot()
  -- what made the run: flow.run fills r.provenance in (and the sink commits it); a
  -- resume must continue the same recipe
  local record = r.provenance
  local on_resume = record and function(saved)
    local why = provenance.difference(saved, record)
    if why then util.fail("resume: " .. why .. " (run the recipe of the checkpoint, or start over with existsok)") end
  end
  local d = opts.dist
  local total = r.source.len and r.source:len() or nil
  local bar = progress.new({ total = total, quiet = opts.quiet or (d and d.rank ~= 0) })
  local ranks = d and d.size or 1
  local seen -- the run's summary so far: a failed run's report says how far it came
  local function on_batch(summary)
    seen = summary
    if signals.arrived(snap) then error({ interrupted = true }, 0) end -- came before the run
    bar:update(summary.rows_in * ranks)
  end
  local t0 = now()
  local ok, result, summary = pcall(flow.run, by_place(r.source), r.node, by_place(r.sink), { seed = r.seed,
    workers = r.workers, on_batch = on_batch, profile = true, ctx = { dist = d, timeout = r.timeout },
    provenance = record, resume = opts.resume, on_resume = opts.resume and on_resume or nil })
  if not ok then
    if bar.drawn then io.stderr:write("\n") end
    local signo = signals.arrived(snap)
    if signo then result = { interrupted = true, signal = signo } end
    return false, result, report.build({ rows = {}, seconds = now() - t0, rows_in = seen and seen.rows_in or 0,
      rows_out = seen and seen.rows_out or 0, recipe = r.path, seed = r.seed, workers = r.workers,
      status = is_interrupt(result) and "interrupted" or "failed", error = message(result), provenance = record })
  end
  local info = { rows = summary.nodes, seconds = summary.seconds, rows_in = summary.rows_in,
    rows_out = summary.rows_out, recipe = r.path, seed = r.seed, workers = r.workers, provenance = record }
  if d then info = host_dist.aggregate(d, info) end
  bar:done(info.rows_in)
  -- the recipe's metrics, over the sink's output (rank 0's, which reports)
  local mok, values = true, nil
  if not d or d.rank == 0 then mok, values = pcall(metrics.compute, r.metrics, result) end
  if not mok then
    info.status, info.error = "failed", message(values)
    return false, values, report.build(info)
  end
  info.metrics = values
  return true, result, report.build(info)
end

-- Reads, checks and builds the recipe of a run (tdflow run, tdflow rerun), with the
-- options that change it and the record of what made it; nil after printing problems.
function M.prepare_run(source, args, err, extra)
  local r, problems, notes = recipe.prepare(source, { set = args.set, workers = args.workers, resume = args.resume })
  problems = problems or {}
  for _, pb in ipairs(report_problems(args.report)) do problems[#problems + 1] = pb end
  if r and #problems == 0 and args.checkpoint then
    if type(r.sink.set_checkpoint) ~= "function" then
      problems[#problems + 1] = ("--checkpoint: the sink (%s) keeps no checkpoints; MemmapSink does")
        :format(r.sink.type_name)
    else
      r.sink:set_checkpoint(args.checkpoint)
    end
  end
  local name = type(source) == "string" and source or (extra and extra.name or "recipe")
  if #problems > 0 then
    print_problems(err, name, problems)
    return nil
  end
  if not args.quiet then print_notes(err, name, notes) end
  if args.seed then r.seed = args.seed end
  r.provenance = provenance.record(r, { command = M.argv, set = args.set, seed = args.seed, workers = args.workers,
    checkpoint = args.checkpoint, rerun_of = extra and extra.rerun_of })
  return r
end

-- After a failed or interrupted run whose sink keeps a checkpoint: how to go on.
local function checkpoint_hint(r, err)
  local path = r.sink.p and r.sink.checkpointing and r.sink.p.path
  local rank, size = host_dist.launched_rank()
  local rows = path and flow.MemmapSink.checkpoint_rows(path, rank, size)
  if rows then
    say(err, ("tdflow: the last checkpoint (%s rows) is kept beside '%s': run again with --resume to continue"):format(
      progress.grouped(rows), path))
  end
end

function M.run_command(args, out, err)
  -- Counted for good: flow.run stops on them and leaves the exit to tdflow.
  for _, signo in ipairs(signals.STOPPING) do signals.watch(signo) end
  local snap = signals.snapshot()
  local r = M.prepare_run(args.recipe, args, err)
  if not r then return M.EXIT_USAGE end
  return M.run_prepared(r, args, out, err, snap)
end

-- Runs a prepared recipe as `tdflow run` does, from the start of MPI to the report; the
-- exit code. args: quiet, report, timeout, resume. snap: the signal counts before the
-- recipe was prepared (default: now).
function M.run_prepared(r, args, out, err, snap)
  for _, signo in ipairs(signals.STOPPING) do signals.watch(signo) end
  snap = snap or signals.snapshot()
  if args.timeout then r.timeout = args.timeout end
  -- Under mpirun: one rank of a data-parallel run (docs/dist.md); the recipe's timeout
  -- bounds every exchange too.
  local d = host_dist.launched() and host_dist.start(r.timeout or 600) or nil
  local ok, result, rep = M.execute(r, { quiet = args.quiet, signals = snap, dist = d, resume = args.resume })
  if not ok then
    local code = M.EXIT_RUNTIME
    if is_interrupt(result) then
      local signo = type(result) == "table" and result.signal or signals.SIGINT
      say(err, ("tdflow: interrupted by %s: workers stopped, the sink aborted (nothing was committed)")
        :format(signals.name(signo)))
      code = signals.exit_code(signo)
    else
      say(err, "tdflow: " .. (d and ("rank %d: "):format(d.rank) or "") .. message(result))
    end
    checkpoint_hint(r, err)
    -- a failed or interrupted run has a report too (status and error); rank 0 writes it
    if args.report and (not d or d.rank == 0) then
      local wok, werr = write_report(args.report, rep)
      if not wok then say(err, "tdflow: " .. werr) end
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
    local wok, werr = write_report(args.report, rep)
    if not wok then
      say(err, "tdflow: " .. werr)
      return M.EXIT_RUNTIME
    end
  end
  return M.EXIT_OK
end

function M.check_command(args, out, err)
  local t0 = now()
  local problems, notes = recipe.check(args.recipe, { set = args.set })
  if #problems > 0 then
    print_problems(err, args.recipe, problems)
    print_notes(err, args.recipe, notes)
    return M.EXIT_USAGE
  end
  say(out, ("tdflow: %s: ok (checked in %.1f ms)"):format(recipe_name(args.recipe), (now() - t0) * 1e3))
  print_notes(out, args.recipe, notes)
  return M.EXIT_OK
end

function M.inspect_command(args, out, err)
  local ok, text = pcall(inspect_views.text, args)
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

-- tdflow --version: the host's (the library's) version, the ABI, the flow protocol and
-- the Lua it runs on.
function M.version_text()
  return ("tdflow %s (libtensordict %s, ABI %d, flow protocol %d) on %s"):format(T.version, T.version,
    T.abi_version, flow.PROTOCOL_VERSION, jit and jit.version or _VERSION)
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
  if args.version then
    say(out, M.version_text())
    return M.EXIT_OK
  end
  if not args.command then
    say(err, p:get_help())
    return M.EXIT_USAGE
  end
  local handlers = { run = M.run_command, check = M.check_command, inspect = M.inspect_command,
    plugins = M.plugins_command, report = report_command.command,
    rerun = function(a, o, e) return rerun.command(M, a, o, e) end,
    sweep = function(a, o, e) return sweep.command(M, a, o, e) end }
  M.argv = { "tdflow", unpack(argv) } -- the command as given, for the provenance record
  local handler_ok, code = pcall(handlers[args.command], args, out, err)
  if not handler_ok then
    if is_interrupt(code) then return M.EXIT_INTERRUPTED end
    say(err, "tdflow: " .. message(code))
    return tostring(code):find("plugin ", 1, true) and M.EXIT_USAGE or M.EXIT_RUNTIME
  end
  return code
end

return M
