-- flow/resume.lua: what flow.run does for checkpoints and resumes (docs/flow.md,
-- "Checkpoints and resume"): the checks that every part can take part, the pipeline's
-- state between two batches (the source's position, every node's state(), the global
-- generator's position, the seed, the counts, the provenance record) and its return
-- into a resumed run, refused when the checkpoint is of another pipeline or seed. The
-- sink keeps the state with its rows (MemmapSink, flow/checkpoint.lua).
local util = require("tensordict.util")
local random = require("tensordict.tensor.random")
local core = require("tensordict.flow.core")
local Seq = require("tensordict.flow.seq")
local provenance = require("tensordict.flow.provenance")

local fail = util.fail

local M = {}

local function is_seq(node) return getmetatable(node) == Seq.__mt end

-- What a checkpoint is of: the place and type of every part, so that a resume refuses
-- another pipeline instead of restoring states into the wrong nodes.
function M.signature(source, node, sink)
  local parts = { "source " .. (source.type_name or "?") }
  local function walk(n, where)
    if is_seq(n) then
      for j, sub in ipairs(n.nodes) do walk(sub, ("%s[%d]"):format(where, j)) end
    else
      parts[#parts + 1] = where .. " " .. (n.type_name or "?")
    end
  end
  if node then
    if is_seq(node) then walk(node, "steps") else walk(node, "steps[1]") end
  end
  parts[#parts + 1] = "sink " .. (sink.type_name or "?")
  return parts
end

-- Raises naming every part that cannot take part in a checkpoint (flow/core.lua).
function M.check(source, node)
  local problems = {}
  if type(source.state) ~= "function" or type(source.restore) ~= "function" then
    problems[1] = ("source (%s): it has no state()/restore() to record its position")
      :format(source.type_name or "?")
  end
  if node then
    local list = is_seq(node) and node:checkpoint_problems() or {}
    if not is_seq(node) then
      local why = core.checkpoint_problem(node)
      if why then list[1] = { where = "steps[1]", node = node, why = why } end
    end
    for _, pb in ipairs(list) do
      problems[#problems + 1] = ("%s (%s): %s"):format(pb.where, pb.node.type_name or "?", pb.why)
    end
  end
  if #problems > 0 then
    fail(("run: the run cannot checkpoint: %s"):format(table.concat(problems, "; ")))
  end
end

-- The pipeline's state between two batches (after the node was drained).
function M.capture(run)
  local s = run.summary
  return {
    format = 1, pipeline = run.signature, seed = run.seed, rng = random.get_rng_state(),
    source = run.source:state(), node = run.node and run.node:state() or nil,
    counts = { batches_in = s.batches_in, rows_in = s.rows_in, batches_out = s.batches_out, rows_out = s.rows_out },
    provenance = run.record and provenance.resumable(run.record) or nil,
  }
end

-- A resumed run: the recorded state checked against this pipeline, then put back.
function M.restore(run, saved)
  if type(saved) ~= "table" or saved.format ~= 1 then
    fail("run: resume: the checkpoint holds no pipeline state of this library's format")
  end
  local mine = run.signature
  for i = 1, math.max(#mine, #saved.pipeline) do
    if mine[i] ~= saved.pipeline[i] then
      fail(("run: resume: the checkpoint was made by another pipeline: it has %s where this one has %s")
        :format(saved.pipeline[i] or "nothing", mine[i] or "nothing"))
    end
  end
  if saved.seed ~= run.seed then
    fail(("run: resume: the checkpoint was made with seed %s, this run has seed %s")
      :format(tostring(saved.seed), tostring(run.seed)))
  end
  if run.on_resume then run.on_resume(saved.provenance) end
  run.set_phase("source")
  run.source:restore(saved.source)
  run.set_phase("node")
  if run.node then run.node:restore(saved.node) end
  random.set_rng_state(saved.rng)
  for k, v in pairs(saved.counts) do run.summary[k] = v end
  if run.record then provenance.resumed(run.record, saved.provenance, run.sink:rows()) end
end

return M
