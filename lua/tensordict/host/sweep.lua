-- host/sweep.lua: `tdflow sweep RECIPE`: many variants of one recipe (docs/recipes.md,
-- "Sweeps"). The variants come from the recipe's "sweep" block and --grid
-- (host/sweep_variants.lua); each is checked as `tdflow run --set` would check it
-- before anything runs, then run as a child `tdflow run` (--jobs at a time, each with
-- its share of the threads and of --workers; under mpirun the variants are dealt to the
-- ranks) into OUT/<id>, its sink's path redirected there by one more override. At the
-- end a table, OUT/sweep.json and OUT/sweep.csv: one row per variant with its
-- overrides, status, rows, time and metrics (host/metrics.lua, from its report).
local json = require("tensordict.json")
local fs = require("tensordict.fs")
local proc = require("tensordict.proc")
local signals = require("tensordict.signals")
local util = require("tensordict.util")
local T = require("tensordict")
local flow = require("tensordict.flow")
local recipe = require("tensordict.host.recipe")
local overrides = require("tensordict.host.overrides")
local variants_of = require("tensordict.host.sweep_variants")
local host_dist = require("tensordict.host.dist")
local summary = require("tensordict.host.sweep_summary")

local M = {}

M.REPORT, M.LOG = "report.json", "log.txt"
M.POLL = 0.005 -- seconds between looks at the children and the signals
M.MAX_SHOWN = 20 -- problems listed before "... and N more"

-- The environment variables a launcher (OpenMPI, PMIx, MPICH's Hydra) gives its ranks:
-- a variant's child must not take itself for one.
local MPI_PREFIXES = { "OMPI_", "OPAL_", "PMIX_", "PMI_", "HYDRA_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS" }
local THREAD_VARS = { "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS" }

function M.add_command(p, count_arg)
  local c = p:command("sweep", "Run many variants of a recipe (a grid, a list, seeded random samples), "
    .. "each into its own folder, and summarise them (docs/recipes.md, \"Sweeps\").")
  c:epilog("Exit codes: 0 every variant ok (or skipped), 1 any failed (the others still ran), 2 usage or recipe "
    .. "problems (nothing ran), 130, 143 or 129 stopped by SIGINT, SIGTERM or SIGHUP (the summary written).")
  c:argument("recipe", "The recipe: a .json or .lua file (its \"sweep\" block says the variants).")
  c:option("--grid", "Vary PATH over VALUES: comma-separated --set values, a..b for the integers a to b "
    .. "(e.g. steps.2.max=1,2,3 or seed=1..4); adds to the recipe's grid, replacing a path it has; repeatable.")
    :count("*"):argname("PATH=VALUES")
  c:option("--set", "Override a recipe value in every variant: PATH=VALUE (before the variant's own); "
    .. "repeatable."):count("*"):argname("PATH=VALUE")
  c:option("--out", "The sweep's folder (default: the recipe's \"sweep.out\", else the recipe's name with "
    .. ".sweep, in the current folder)."):argname("OUT")
  c:option("--jobs", "Variants run at a time (child processes; each gets its share of the threads).")
    :convert(count_arg("--jobs", 1)):default("1"):argname("N")
  c:option("--workers", "Map worker processes shared by the variants running at a time (each gets "
    .. "W / N, rounded down; default: each keeps its recipe's).")
    :convert(count_arg("--workers")):argname("W")
  c:flag("--resume", "Skip the variants OUT holds complete (their report says ok); run the others again.")
  c:flag("--dry-run", "Check every variant and list them, without running any.")
  c:flag("-q --quiet", "No line per finished variant and no summary table (sweep.json and sweep.csv are "
    .. "written; failures and the counts line still print).")
end

local function say(out, text)
  out:write(text, "\n")
  out:flush()
end

local function strip(path) return (path:gsub("(.)/+$", "%1")) end

local function read_json(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  local ok, v = pcall(json.decode, text)
  return ok and type(v) == "table" and v or nil
end

-- The folder a sweep writes by default: the recipe's file name without .json/.lua,
-- with .sweep, in the current folder ("recipes/demo.json" -> "demo.sweep").
function M.default_out(path)
  local name = path:match("([^/]+)$") or path
  return (name:gsub("%.json$", ""):gsub("%.lua$", "")) .. ".sweep"
end

-- How to start `tdflow`: this interpreter and the launcher script that started us
-- (scripts/tdflow, or an installed bin/tdflow).
local function launcher()
  local exe = proc.self_exe() or "luajit"
  local script = arg and arg[0]
  if script and script:match("tdflow$") and fs.exists(script) then return exe, script end
  local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
  for _, candidate in ipairs({ here .. "/../../../scripts/tdflow", here .. "/../../../../../bin/tdflow" }) do
    if fs.exists(candidate) then return exe, candidate end
  end
  return exe, "tdflow"
end

-- Threads each variant may use: the budget (TD_NUM_THREADS, else this machine's
-- count, the library's default) over the variants at a time on this node.
local function thread_share(jobs)
  local budget = T.get_num_threads()
  local local_ranks = tonumber(os.getenv("OMPI_COMM_WORLD_LOCAL_SIZE") or os.getenv("MPI_LOCALNRANKS") or "") or 1
  return (math.max(1, math.floor(budget / (jobs * local_ranks))))
end

-- A child's environment: ours without the MPI launcher's variables, with its thread
-- share (TD_NUM_THREADS, and the OpenBLAS/OpenMP counts the user set) and its variant.
local function child_env(threads, id, rank)
  local env = {}
  for _, kv in ipairs(proc.environment()) do
    local name = kv:match("^([^=]*)")
    local drop = name == "TD_NUM_THREADS" or name == "TDFLOW_SWEEP_VARIANT" or name == "TDFLOW_SWEEP_RANK"
    for _, prefix in ipairs(MPI_PREFIXES) do drop = drop or name:sub(1, #prefix) == prefix end
    for _, v in ipairs(THREAD_VARS) do
      if name == v and kv ~= name .. "=" then
        drop = true
        env[#env + 1] = ("%s=%d"):format(name, threads)
      end
    end
    if not drop then env[#env + 1] = kv end
  end
  env[#env + 1] = ("TD_NUM_THREADS=%d"):format(threads)
  env[#env + 1] = "TDFLOW_SWEEP_VARIANT=" .. id
  if rank then env[#env + 1] = ("TDFLOW_SWEEP_RANK=%d"):format(rank) end
  return env
end

---------------------------------------------------------------------------- planning

-- Whether a variant's folder holds a complete run: its report, status ok.
local function complete_report(v)
  local rep = read_json(v.path .. "/" .. M.REPORT)
  return rep and rep.status == "ok" and rep or nil
end

-- The path a variant's sink writes, as the recipe says it once the variant's overrides
-- apply (nil: the sink takes no path).
local function sink_path_of(source, sets)
  local r, _, _, effective = recipe.prepare(source, { set = sets })
  local e = r and r.effective or effective
  local path = type(e) == "table" and type(e.sink) == "table" and e.sink.path
  return type(path) == "string" and path ~= "" and path or nil
end

-- Plans variant v: its folder, its overrides (the sweep's --set, its own, then its sink
-- redirected into its folder unless it sets sink.path itself), and on --resume whether
-- it is complete or goes on from a checkpoint. Adds its problems.
local function plan(v, ctx, problems)
  v.path = ctx.out .. "/" .. v.id
  v.report = v.path .. "/" .. M.REPORT
  v.log = v.path .. "/" .. M.LOG
  local own = variants_of.assignments(v.set)
  v.overrides = setmetatable({}, json.object_mt)
  local sets_path = false
  for _, o in ipairs(v.set) do
    v.overrides[o[1]] = (overrides.value(o[2]))
    sets_path = sets_path or o[1] == "sink.path"
  end
  local sets = {}
  for _, s in ipairs(ctx.base_sets) do sets[#sets + 1] = s end
  for _, s in ipairs(own) do sets[#sets + 1] = s end
  if ctx.resume then
    v.done = complete_report(v)
    if v.done then return end
  end
  if not sets_path then
    local sink_path = sink_path_of(ctx.recipe, sets)
    if sink_path then
      v.sink_path = v.path .. "/" .. strip(sink_path):match("([^/]*)$")
      sets[#sets + 1] = "sink.path=" .. json.encode(v.sink_path)
    end
  end
  v.sets = sets
  -- a half-written variant: its run's checkpoint goes on; anything else starts over
  v.resume_run = ctx.resume and v.sink_path and flow.MemmapSink.checkpoint_rows(v.sink_path) ~= nil or false
  if ctx.resume and not v.resume_run and fs.exists(v.path) and not ctx.dry_run and v.own then fs.remove_tree(v.path) end
  local _, found = recipe.prepare(ctx.recipe, { set = sets, resume = v.resume_run or nil })
  for _, pb in ipairs(found or {}) do problems[#problems + 1] = ("variant %s: %s"):format(v.id, pb) end
end

local function print_problems(err, name, problems)
  say(err, ("tdflow: sweep %s: %d problem%s:"):format(name, #problems, #problems == 1 and "" or "s"))
  for i, pb in ipairs(problems) do
    if i > M.MAX_SHOWN then
      say(err, ("  ... and %d more"):format(#problems - M.MAX_SHOWN))
      break
    end
    say(err, "  " .. pb)
  end
end

---------------------------------------------------------------------------- running

-- The result of a variant whose child ended with code (or never started: code nil,
-- error given): its summary row.
local function result_of(v, code, seconds, stopping, why)
  local rep = read_json(v.report) or {}
  local status
  if code == 0 then status = "ok"
  elseif code == 129 or code == 130 or code == 143 or (stopping and code == nil) then status = "interrupted"
  else status = "failed" end
  local row = { id = v.id, path = v.path, overrides = v.overrides, status = status, rows_in = rep.rows_in or 0,
    rows_out = rep.rows_out or 0, seconds = seconds, metrics = rep.metrics or setmetatable({}, json.object_mt) }
  if status == "failed" then
    local text = why or (rep.status ~= "ok" and rep.error) or summary.last_line(v.log)
    if not text or text == "" then
      text = code and code > 128 and ("ended by signal %d"):format(code - 128) or ("exited with %s"):format(code)
    end
    row.error = text
  end
  return row
end

-- Runs the variants (a list) jobs at a time; their summary rows by id, and the signal
-- that stopped them (nil when none did).
local function run_all(list, ctx, out)
  local exe, script = launcher()
  local threads = thread_share(ctx.jobs)
  local workers = ctx.workers and math.floor(ctx.workers / ctx.jobs) or nil
  local rows, running, count = {}, {}, 0
  local queue, next_i, finished = list, 1, 0
  local stopping, kill_snap
  local function start(v)
    local ok, why = fs.make_dirs(v.path)
    if ok then
      os.remove(v.report)
      local argv = { exe, script, "run", ctx.recipe }
      for _, s in ipairs(v.sets) do argv[#argv + 1] = "--set"; argv[#argv + 1] = s end
      argv[#argv + 1] = "--report"
      argv[#argv + 1] = v.report
      if workers then argv[#argv + 1] = "--workers"; argv[#argv + 1] = tostring(workers) end
      if v.resume_run then argv[#argv + 1] = "--resume" end
      local pid
      pid, why = proc.spawn(argv, child_env(threads, v.id, ctx.rank), v.log)
      if pid then
        running[pid] = { v = v, t0 = util.now() }
        count = count + 1
        return
      end
    end
    rows[v.id] = result_of(v, nil, 0, nil, why)
  end
  while (next_i <= #queue and not stopping) or count > 0 do
    local signo = signals.arrived(ctx.snap)
    if signo and not stopping then
      stopping, kill_snap = signo, signals.snapshot()
      for pid in pairs(running) do proc.kill(pid, proc.SIGTERM) end
    elseif stopping and signals.arrived(kill_snap) then -- a second signal: no more waiting
      kill_snap = signals.snapshot()
      for pid in pairs(running) do proc.kill(pid, proc.SIGKILL) end
    end
    while not stopping and count < ctx.jobs and next_i <= #queue do
      start(queue[next_i])
      next_i = next_i + 1
    end
    local pid, code = proc.reap()
    if pid and running[pid] then
      local job = running[pid]
      running[pid], count = nil, count - 1
      local row = result_of(job.v, code, util.now() - job.t0, stopping)
      rows[job.v.id] = row
      finished = finished + 1
      if not ctx.quiet_progress then
        say(out, ("tdflow: sweep: %s%s %s (%.2f s)%s"):format(ctx.rank and ("rank %d: "):format(ctx.rank) or "",
          row.status, job.v.id, row.seconds, row.error and (": " .. row.error) or ""))
      end
    elseif not pid then
      proc.sleep(M.POLL)
    end
  end
  for i = next_i, #queue do rows[queue[i].id] = result_of(queue[i], nil, 0, true) end
  return rows, stopping
end

---------------------------------------------------------------------------- the command

-- `tdflow sweep`: tdflow is the host module (exit codes).
function M.command(tdflow, args, out, err)
  for _, signo in ipairs(signals.STOPPING) do signals.watch(signo) end
  local snap = signals.snapshot()
  local name = args.recipe
  if name == "-" then
    say(err, "tdflow: sweep: the recipe must be a file (each variant runs it again): save it and give its path")
    return tdflow.EXIT_USAGE
  end
  local doc, read_problems = recipe.read(name)
  if not doc then
    print_problems(err, name, read_problems)
    return tdflow.EXIT_USAGE
  end
  local block = type(doc.sweep) == "table" and doc.sweep or nil
  local list, problems = variants_of.expand(doc.sweep, args.grid)
  if list and #list == 1 and list[1].id == "base" then
    problems = { 'nothing to sweep: give --grid PATH=VALUES or a "sweep" block ({"grid": ..., "list": ..., '
      .. '"random": ...}) in the recipe' }
    list = nil
  end
  if not list then
    print_problems(err, name, problems)
    return tdflow.EXIT_USAGE
  end
  local out_dir = strip(args.out or (block and type(block.out) == "string" and block.out) or M.default_out(name))
  local rank, size = host_dist.launched_rank()
  if not args.resume and not args.dry_run and fs.is_dir(out_dir) and #(fs.list(out_dir) or {}) > 0 then
    if not rank or rank == 0 then
      say(err, ("tdflow: sweep: '%s' is not empty (a sweep ran there?): continue it with --resume, or give "
        .. "another --out"):format(out_dir))
    end
    return tdflow.EXIT_USAGE
  end
  local ctx = { out = out_dir, recipe = name, base_sets = args.set or {}, resume = args.resume,
    jobs = args.jobs, workers = args.workers, dry_run = args.dry_run, snap = snap, rank = rank,
    quiet_progress = args.quiet }
  problems = {}
  for i, v in ipairs(list) do
    v.own = not rank or (i - 1) % size == rank -- under mpirun, the rank that runs it
    plan(v, ctx, problems)
  end
  if #problems > 0 then
    if not rank or rank == 0 then print_problems(err, name, problems) end
    return tdflow.EXIT_USAGE
  end
  if args.dry_run then
    for _, v in ipairs(list) do
      local sets = {}
      for i, a in ipairs(variants_of.assignments(v.set)) do sets[i] = "--set " .. a end
      say(out, ("%s%s  %s"):format(v.id, v.done and " (complete)" or "", table.concat(sets, " ")))
    end
    say(out, ("tdflow: sweep %s: %d variant%s, each checked; they would run into %s"):format(name, #list,
      #list == 1 and "" or "s", out_dir))
    return tdflow.EXIT_OK
  end
  -- Under mpirun: rank r runs the variants r + 1, r + 1 + size, ...; rank 0 gathers the
  -- rows and writes the summary. No timeout: a rank waits for the slowest's variants.
  local d = rank and host_dist.start(nil) or nil
  if d then d.barrier() end
  local ok, why = fs.make_dirs(out_dir)
  if not ok then
    say(err, "tdflow: sweep: " .. why)
    if d then d.abort(tdflow.EXIT_RUNTIME) end
    return tdflow.EXIT_RUNTIME
  end
  local mine, rows = {}, {}
  for _, v in ipairs(list) do
    if v.own then
      if v.done then
        rows[v.id] = { id = v.id, path = v.path, overrides = v.overrides, status = "skipped",
          rows_in = v.done.rows_in or 0, rows_out = v.done.rows_out or 0, seconds = v.done.seconds or 0,
          metrics = v.done.metrics or setmetatable({}, json.object_mt) }
      else
        mine[#mine + 1] = v
      end
    end
  end
  local ran, stopping = run_all(mine, ctx, out)
  for id, row in pairs(ran) do rows[id] = row end
  if d then
    local all = d.all_values({ rows = rows, stopping = stopping or json.null })
    rows = {}
    for _, part in ipairs(all) do
      for id, row in pairs(part.rows) do rows[id] = row end
      if part.stopping ~= json.null and not stopping then stopping = part.stopping end
    end
    d.finalize()
  end
  local ordered = {}
  for i, v in ipairs(list) do ordered[i] = rows[v.id] end
  local failed = 0
  for _, row in ipairs(ordered) do failed = failed + (row.status == "failed" and 1 or 0) end
  if not d or d.rank == 0 then
    local wok, werr = summary.write(out_dir, name, ordered)
    if not args.quiet then say(out, summary.table_text(ordered)) end
    for _, row in ipairs(ordered) do
      if row.error then say(err, ("tdflow: sweep: %s failed: %s"):format(row.id, row.error)) end
    end
    say(out, summary.counts_text(ordered, out_dir))
    if not wok then say(err, "tdflow: sweep: " .. werr) end
    if stopping then
      say(err, ("tdflow: sweep interrupted by %s: the variants running were stopped, the summary written "
        .. "(run again with --resume to finish)"):format(signals.name(stopping)))
    end
    if not wok and not stopping then return tdflow.EXIT_RUNTIME end
  end
  if stopping then return signals.exit_code(stopping) end
  return failed > 0 and tdflow.EXIT_RUNTIME or tdflow.EXIT_OK
end

return M
