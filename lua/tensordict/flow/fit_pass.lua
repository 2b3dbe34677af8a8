-- flow/fit_pass.lua: the first pass of steps that take something from the data before
-- the run proper (Normalize{fit = true}: its statistics). For each such step of the
-- run's top-level steps, in order, flow.run runs the source through fresh copies of
-- the steps before it (built from their specs, so the run's own nodes keep their state:
-- running statistics, Take's count) into a sink that folds the batches into the step
-- (fit_begin, fit_batch, fit_end). The pass is a flow.run of its own: Map workers,
-- seeds and, under mpirun, each rank's share of the source are as in the run; fit_end
-- merges the ranks' so every rank applies the same. What each step fitted goes into the
-- run's record (record.fitted["steps[i]"]).
local util = require("tensordict.util")
local core = require("tensordict.flow.core")
local Seq = require("tensordict.flow.seq")

local M = {}

local function is_seq(node) return getmetatable(node) == Seq.__mt end

local function top_steps(node)
  if node == nil then return {} end
  return is_seq(node) and node.nodes or { node }
end

local function fits(step) return type(step.fit_begin) == "function" and step.p and step.p.fit end

-- A step to fit inside a nested Seq: its place, or nil. The pass runs the top-level
-- steps before a step; one nested deeper would need its Seq cut in two.
local function nested_fit(seq, where)
  for j, step in ipairs(seq.nodes) do
    local here = ("%s[%d]"):format(where, j)
    if is_seq(step) then
      for i, inner in ipairs(step.nodes) do
        if fits(inner) then return ("%s.steps[%d]"):format(here, i), inner end
      end
      local deeper, inner = nested_fit(step, here .. ".steps")
      if deeper then return deeper, inner end
    end
  end
  return nil
end

-- Whether node has a step to fit before the run (one nested in a Seq is refused).
function M.needed(node)
  if is_seq(node) then
    local where, inner = nested_fit(node, "steps")
    if where then
      util.fail(("%s: %s{fit = true} must be a top-level step (the fitting pass runs the steps before it); "
        .. "move it out of its Seq"):format(where, inner.type_name))
    end
  end
  for _, step in ipairs(top_steps(node)) do
    if fits(step) then return true end
  end
  return false
end

-- A fresh node equal to step (steps fitted already keep their statistics).
local function fresh(step, where, fitting)
  local ok, copy = pcall(function() return core.build(step:spec()) end)
  if not ok then
    util.fail(("%s (%s): fit = true runs the steps before it twice, so each must be rebuilt from its spec; "
      .. "%s (%s) cannot be: %s"):format(fitting, "Normalize", where, step.type_name or "?",
      tostring(copy):gsub("^.-tensordict: ", "")))
  end
  if fits(step) then copy:fit_end(step.stats) end
  return copy
end

-- Runs the fitting passes. run: flow.run; opts: the run's (seed, workers, ctx);
-- record: the run's provenance record or nil.
function M.run(run, source, node, opts, record)
  local steps = top_steps(node)
  local prefix_where = "steps[%d]" -- as the run's report names places (a single node is steps[1])
  for j, step in ipairs(steps) do
    if fits(step) then
      local where = prefix_where:format(j)
      local prefix = {}
      for i = 1, j - 1 do prefix[i] = fresh(steps[i], prefix_where:format(i), where) end
      local acc = step:fit_begin()
      local sink = { type_name = "fitting pass of " .. where,
        write = function(_, td) step:fit_batch(acc, td) end, finish = function() end, abort = function() end }
      local ctx = opts.ctx or {}
      local ok, err = pcall(run, source, #prefix > 0 and Seq.new(prefix) or nil, sink,
        { seed = opts.seed, workers = opts.workers, ctx = ctx, signals = false })
      if not ok then
        if type(err) ~= "string" then error(err, 0) end
        util.fail(("%s (%s{fit = true}): the fitting pass failed: %s"):format(where, step.type_name,
          (err:gsub("^.-tensordict: ", ""):gsub("^sink: ", "")))) -- the sink is the step itself
      end
      local plain = step:fit_end(acc, ctx.dist)
      if record then
        record.fitted = record.fitted or {}
        record.fitted[where] = plain
      end
    end
  end
end

return M
