-- flow/run.lua: flow.run(source, node, sink, opts) drives one pipeline in plain Lua:
-- open everything, pull batches from the source, push them through the node, write
-- what comes out to the sink, flush, finish. On any error every node is closed, the
-- sink aborted (nothing it wrote claims to be complete) and the error re-raised with
-- the failing node's place; SIGINT, SIGTERM and SIGHUP stop it the same way
-- (flow/interrupt.lua). It owns the run's accounting (flow/meter.lua): the
-- summary, and with profile = true every place's own time and rows, which hosts
-- (tdflow's report) only format; checkpoints and resumes are flow/resume.lua's, the
-- provenance record flow/provenance.lua's.
local util = require("tensordict.util")
local random = require("tensordict.tensor.random")
local core = require("tensordict.flow.core")
local meter = require("tensordict.flow.meter")
local Seq = require("tensordict.flow.seq")
local shard_rows = require("tensordict.flow.sources").shard_rows
local provenance = require("tensordict.flow.provenance")
local resume = require("tensordict.flow.resume")
local interrupt = require("tensordict.flow.interrupt")
local fit_pass = require("tensordict.flow.fit_pass")

local fail, describe = util.fail, util.describe
local now, took, gave, spent = meter.now, meter.took, meter.gave, meter.spent

local M = {}

-- seed is checked below (an integer), workers by the nodes that take it (Map).
local RUN_OPTIONS = { seed = "any", workers = "any", on_batch = "function", ctx = "table", profile = "boolean",
  resume = "boolean", provenance = "table", on_resume = "function", signals = "boolean" }

local function check_role(x, role, methods)
  if type(x) ~= "table" then
    fail(("run: the %s must be a table with %s, got %s"):format(role, table.concat(methods, "/"), describe(x)))
  end
  for _, m in ipairs(methods) do
    if type(x[m]) ~= "function" then
      fail(("run: the %s has no %s method (a %s needs %s)"):format(role, m, role, table.concat(methods, ", ")))
    end
  end
end

local function is_seq(node) return getmetatable(node) == Seq.__mt end

-- Whether node's type says its rows out are its rows in (core.define's keeps_rows; a
-- Seq's when all of its steps' do).
local function keeps_rows(node)
  if node == nil then return true end
  if is_seq(node) then
    for _, step in ipairs(node.nodes) do
      if not keeps_rows(step) then return false end
    end
    return true
  end
  return node.keeps_rows == true
end

-- ctx.rows_hint in a data-parallel run: the rows this rank's source yields (its share
-- of source:len()) when every step keeps rows, else nil. MemmapSink plans its folder
-- from it; a hint that misses costs the sink a copy, never a wrong result.
local function rows_hint(source, node, ctx)
  if not ctx.dist or type(source.len) ~= "function" or not keeps_rows(node) then return nil end
  local ok, n = pcall(source.len, source)
  if not ok or not util.is_int(n) or n < 0 then return nil end
  local lo, hi = shard_rows(n, ctx)
  return hi - lo + 1
end

-- The position of a failure inside node, for messages. A node flow.run wrapped in a
-- Seq to profile it is named as itself, as it is without profiling.
local function position(node, wrapped)
  if is_seq(node) then
    local where, inner = node:position()
    if wrapped then where = "" end
    return where, inner
  end
  return "", node
end

-- The source's iterator, timed and counted into m (rows in and out alike).
local function metered_source(nxt, m)
  return function()
    local t0 = now()
    local td = nxt()
    spent(m, t0)
    if td ~= nil then
      took(m, td)
      gave(m, td)
    end
    return td
  end
end

-- flow.run(source, node, sink [, opts]) -> sink:finish()'s result, a summary table.
-- node may be nil (batches go straight to the sink) or a list of nodes (a Seq).
-- opts: seed (the pipeline seed, default 0: seeds the global generator and reaches
-- every node's open as ctx.seed), workers (ctx.workers, a default for Map), ctx (more
-- fields for open), on_batch(summary) called after each source batch, profile (the
-- summary gets nodes: the source's, each step's and the sink's own time and rows),
-- resume (continue from the sink's checkpoint), on_resume(recorded provenance) (a host
-- checks it is the same run; raising stops the resume), provenance (a table the run
-- fills: flow/provenance.lua; the sink commits it with the output), signals (false:
-- SIGINT, SIGTERM and SIGHUP are left as they are, see flow/interrupt.lua).
function M.run(source, node, sink, opts)
  opts = util.options("run", opts, RUN_OPTIONS)
  check_role(source, "source", { "iter" })
  if type(node) == "table" and not core.is_node(node) and node[1] ~= nil then node = Seq.new(node) end
  if node ~= nil and not core.is_node(node) then
    fail(("run: the node must be a flow node (or a list of nodes), got %s"):format(describe(node)))
  end
  check_role(sink, "sink", { "write", "finish", "abort" })
  local seed = opts.seed or 0
  if not util.is_int(seed) then fail(("run: seed must be an integer, got %s"):format(describe(seed))) end

  local ctx = {}
  for k, v in pairs(opts.ctx or {}) do ctx[k] = v end
  ctx.seed, ctx.workers, ctx.resume = seed, opts.workers, opts.resume or nil
  local summary = meter.new()
  local on_batch = opts.on_batch
  local phase, opened = "source", {}
  local checkpointing = sink.checkpointing ~= nil and sink:checkpointing()
  -- a run that checkpoints keeps a record even unasked: a later resume continues it
  local record = opts.provenance or ((checkpointing or opts.resume) and {} or nil)
  if record then provenance.start(record, seed, opts.workers) end
  if opts.resume and type(sink.resume_state) ~= "function" then
    fail(("run: resume: the sink (%s) keeps no checkpoint (MemmapSink{checkpoint = rows} does)")
      :format(sink.type_name or describe(sink)))
  end
  local run -- what checkpoints and resume work on

  -- profiling: the source and the sink are metered here, the steps by their Seq
  local source_m, sink_m, wrapped
  if opts.profile then
    source_m, sink_m = meter.new("source", source.type_name or "?"), meter.new("sink", sink.type_name or "?")
    if node ~= nil and not is_seq(node) then node, wrapped = Seq.new({ node }), true end
    if node then node:set_profile(true) end
  end

  -- The per-place report: the source, every step, the sink (what the sink took, it
  -- keeps: its rows out are its rows in).
  local function profile_list()
    sink_m.batches_out, sink_m.rows_out = sink_m.batches_in, sink_m.rows_in
    source_m.counts = meter.counts_of(source)
    local nodes = { source_m }
    for _, p in ipairs(node and node:profile() or {}) do nodes[#nodes + 1] = p end
    nodes[#nodes + 1] = sink_m
    return nodes
  end

  local function emit(td)
    phase = "sink"
    if sink_m then
      local t0 = now()
      sink:write(td)
      spent(sink_m, t0)
      took(sink_m, td)
    else
      sink:write(td)
    end
    gave(summary, td)
    phase = "node"
  end

  local t0 = now()
  local result
  local watch = interrupt.watch(opts.signals)
  local ok, err = xpcall(function()
    if checkpointing or opts.resume then
      phase = "run" -- the checks name no place: they are of the whole run
      resume.check(source, node)
      run = { summary = summary, source = source, node = node, sink = sink, seed = seed, record = record,
        signature = resume.signature(source, node, sink), on_resume = opts.on_resume,
        set_phase = function(p) phase = p end }
    end
    if fit_pass.needed(node) then -- Normalize{fit = true}: a first pass (of its own) before this one
      phase = "run"
      fit_pass.run(M.run, source, node, { seed = seed, workers = opts.workers, ctx = ctx }, record)
    end
    random.manual_seed(seed)
    for _, part in ipairs({ { "source", source }, { "node", node }, { "sink", sink } }) do
      phase = part[1]
      local x = part[2]
      if x == sink and ctx.dist and ctx.rows_hint == nil then ctx.rows_hint = rows_hint(source, node, ctx) end
      if x and x.open then
        x:open(ctx)
      end
      opened[#opened + 1] = x
    end
    if opts.resume then
      phase = "sink"
      local saved = sink:resume_state()
      phase = "run"
      resume.restore(run, saved)
    end
    phase = "source"
    local nxt = source:iter(ctx)
    if type(nxt) ~= "function" then
      fail(("run: source:iter(ctx) must return an iterator function, got %s"):format(describe(nxt)))
    end
    if source_m then nxt = metered_source(nxt, source_m) end
    local push = node and node.push
    local forward = node and node.forward
    while true do
      interrupt.check(watch)
      phase = "source"
      local td = nxt()
      if td == nil then break end
      took(summary, td)
      phase = "node"
      if node == nil then
        emit(td)
      elseif forward then
        local r = forward(node, td)
        if r ~= nil then emit(r) end
      else
        if node.at ~= nil then node.at = nil end
        push(node, td, emit)
      end
      if on_batch then
        summary.seconds = now() - t0
        on_batch(summary)
      end
      if run and sink:checkpoint_due() then
        -- between batches, nothing in flight: the state is the source's position
        phase = "node"
        if node and node.drain then node:drain(emit) end
        local state = resume.capture(run)
        phase = "sink"
        sink:checkpoint(state)
      end
      if node and (node.done or (node.is_done and node:is_done())) then break end
    end
    interrupt.check(watch)
    phase = "node"
    if node and node.flush then node:flush(emit) end
    phase = "sink"
    if opts.provenance and sink.set_provenance then
      -- committed with the output: the run as it stands when the last row is written
      summary.seconds = now() - t0
      provenance.finish(record, "ok", nil, summary, source_m and profile_list())
      sink:set_provenance(provenance.json(record))
    end
    if sink_m then
      local f0 = now()
      result = sink:finish()
      spent(sink_m, f0)
    else
      result = sink:finish()
    end
  end, function(e)
    if type(e) == "string" and not e:find("stack traceback:", 1, true) and os.getenv("TD_FLOW_TRACEBACK") then
      e = debug.traceback(e, 2)
    end
    return e
  end)
  summary.seconds = now() - t0

  -- close nodes (workers stop) before the sink is aborted, the source last
  local close_err
  for i = #opened, 1, -1 do
    local x = opened[i]
    if x.close then
      local cok, cerr = pcall(x.close, x, not ok)
      if not cok and not close_err then close_err = cerr end
    end
  end
  if opts.profile then
    summary.nodes = profile_list()
    if node then node:set_profile(false) end
  end
  if not ok then pcall(sink.abort, sink) end
  -- a signal that came stops the run (whatever error it caused: a worker's wait cut
  -- short, a worker killed with the process group), or is passed on once it completed;
  -- either way after the record says how the run ended
  local taken = interrupt.release(watch)
  local signo = interrupt.arrived(watch)
  if not ok then
    if phase == "node" and node then
      err = core.annotate(err, position(node, wrapped))
    elseif phase ~= "run" then
      local label = phase == "source" and source or sink
      err = core.annotate(err, phase, core.is_node(label) and label or nil)
    end
    if record then
      provenance.finish(record, signo and "interrupted" or provenance.status_of(err), err, summary, summary.nodes)
    end
    if signo then interrupt.conclude(taken, signo, false) end
    error(err, 0)
  end
  if record then
    provenance.finish(record, close_err and "failed" or "ok", close_err, summary, summary.nodes)
  end
  if signo then interrupt.conclude(taken, signo, true) end
  if close_err then error(close_err, 0) end
  return result, summary
end

return M
