-- flow/seq.lua: flow.Seq{...}, nodes composed in order (tensordict.nn's
-- TensorDictSequential). Its in_keys are what its nodes need from outside, its out_keys
-- what they add; selected_out_keys drops the other intermediates from its output.
-- Batches flow through push/emit, so stream nodes (Batch, Rebatch, Map) may emit any
-- number of batches per input; a failing node is named by its position (steps[3]).
local core = require("tensordict.flow.core")
local meter = require("tensordict.flow.meter")

local now, took, gave, spent = meter.now, meter.took, meter.gave, meter.spent

local Seq = core.define("Seq", {
  kind = "node",
  doc = "Runs nodes in order, each on what the previous one returned.",
  params = {
    { "steps", "nodes",
      doc = "the nodes, in order (also given as the list part: flow.Seq{a, b}); none: the identity" },
    { "selected_out_keys", "keys",
      doc = "keep only these of the keys the steps add (the rest are dropped from the output)" },
  },
})

-- flow.Seq{a, b, c} and flow.Seq{steps = {a, b, c}} are the same.
local new = Seq.new
function Seq.new(params)
  if type(params) == "table" and params[1] ~= nil and params.steps == nil and not core.is_node(params) then
    local p = { steps = {} }
    for k, v in pairs(params) do
      if type(k) == "number" then p.steps[k] = v else p[k] = v end
    end
    params = p
  end
  return new(params)
end

-- Derives in_keys (needed from outside, in order) and out_keys (added) from the steps.
-- No steps (flow.Seq{}, {"type": "Seq", "steps": []}) is the identity, as torch's
-- nn.Sequential(): each batch passes through unchanged.
function Seq:init()
  self.nodes = self.p.steps or {}
  local ks = core.KeySet.new()
  local needed = {}
  for _, node in ipairs(self.nodes) do
    for _, k in ipairs(node.in_keys) do
      if not ks:has(k) then
        needed[#needed + 1] = k
        ks:add(k)
      end
    end
    core.keys_after(node, ks)
  end
  self.in_keys = needed
  self.out_keys = self.p.selected_out_keys or ks:list(true)
  if self.p.selected_out_keys then
    -- what the steps add beyond the selection is dropped from the output
    local keep = core.KeySet.new(self.p.selected_out_keys)
    local drop = {}
    for _, k in ipairs(ks:list(true)) do
      if not keep:has(k) then drop[#drop + 1] = k end
    end
    self.drop_keys = drop
  end
  self.at = nil      -- the step running now, for error positions
  self.emit_for = nil
  self.stages = nil
end

-- A Seq's effect on keys is its steps' effects in order.
function Seq:keys_after(ks)
  for _, node in ipairs(self.nodes) do core.keys_after(node, ks) end
  if self.drop_keys then
    for _, k in ipairs(self.drop_keys) do ks:remove(k) end
  end
end

-- Problems of key flow given the keys a source provides: every step's in_keys must be
-- there or produced upstream. Returns a list of {step =, key =, where =}.
function Seq:check_keys(ks, where)
  where = where or "steps"
  local problems = {}
  for j, node in ipairs(self.nodes) do
    local here = ("%s[%d]"):format(where, j)
    if getmetatable(node) == Seq.__mt then
      for _, pb in ipairs(node:check_keys(ks, here .. ".steps")) do problems[#problems + 1] = pb end
    else
      for _, k in ipairs(node.in_keys) do
        if not ks:has(k) then problems[#problems + 1] = { where = here, node = node, key = k } end
      end
      core.keys_after(node, ks)
    end
  end
  return problems
end

-- Profiled stages: each step's own time (what runs downstream of it is not counted),
-- batches and rows in and out, counted into the step's meter. Built instead of the
-- plain ones when profiling is on.
local function profiled_stages(self, emit, stages)
  local nodes, n, prof = self.nodes, #self.nodes, self.prof
  for j = n, 1, -1 do
    local node, nxt, m = nodes[j], stages[j + 1], prof[j]
    local forward = node.forward
    local started = 0
    if forward then
      stages[j] = function(td)
        self.at = j
        took(m, td)
        local t0 = now()
        local r = forward(node, td)
        spent(m, t0)
        if r ~= nil then
          gave(m, r)
          return nxt(r)
        end
      end
    else
      local down = function(r)
        spent(m, started)
        gave(m, r)
        nxt(r)
        self.at = j
        started = now()
      end
      local timed = function(call)
        started = now()
        call()
        spent(m, started)
      end
      stages[j] = function(td)
        self.at = j
        took(m, td)
        started = now()
        node:push(td, down)
        spent(m, started)
      end
      stages[-j] = down
      -- flush and drain run timed too (Map's waits count as its time)
      stages["timed" .. j] = timed
    end
  end
  self.emit_for, self.stages = emit, stages
  return stages
end

-- seq:set_profile(true) starts counting each step's time and rows (nested Seqs too);
-- seq:profile() returns them as a flat list of {where, type, seconds, batches_in,
-- rows_in, batches_out, rows_out}, steps of nested Seqs under their paths.
function Seq:set_profile(on)
  self.prof = nil
  if on then
    self.prof = {}
    for j = 1, #self.nodes do self.prof[j] = meter.new() end
  end
  for _, node in ipairs(self.nodes) do
    if getmetatable(node) == getmetatable(self) then node:set_profile(on) end
  end
  self.emit_for, self.stages = nil, nil
end

-- The entries of seq's steps under where, appended to out (nested Seqs recursively).
-- Not the method itself: profile() takes no arguments (issue 28: called with some, it
-- took them for these).
local function profile_into(seq, where, out)
  for j, node in ipairs(seq.nodes) do
    local here = ("%s[%d]"):format(where, j)
    if getmetatable(node) == getmetatable(seq) then
      profile_into(node, here .. ".steps", out)
    elseif seq.prof then
      out[#out + 1] = meter.labelled(seq.prof[j], here, node.type_name)
      out[#out].counts = meter.counts_of(node)
    end
  end
  return out
end

function Seq:profile() return profile_into(self, "steps", {}) end

-- The chain of stage functions ending in emit: stage j runs step j and hands its
-- output to stage j + 1. Built once per downstream emit function.
local function stages_for(self, emit)
  if self.emit_for == emit then return self.stages end
  local nodes, n = self.nodes, #self.nodes
  local stages = {}
  local drop = self.drop_keys
  if drop then
    stages[n + 1] = function(td) return emit(td:exclude(unpack(drop))) end
  else
    stages[n + 1] = emit
  end
  if self.prof then return profiled_stages(self, emit, stages) end
  for j = n, 1, -1 do
    local node, nxt = nodes[j], stages[j + 1]
    local forward = node.forward
    if forward then
      stages[j] = function(td)
        self.at = j
        local r = forward(node, td)
        if r ~= nil then return nxt(r) end
      end
    else
      -- downstream may run inside the node's push: the position comes back to j after
      local down = function(r) nxt(r); self.at = j end
      stages[j] = function(td)
        self.at = j
        node:push(td, down)
      end
      stages[-j] = down
    end
  end
  self.emit_for, self.stages = emit, stages
  return stages
end

function Seq:push(td, emit)
  return stages_for(self, emit)[1](td)
end

-- Calls method (drain or flush) on every step that has it, in order, each emitting
-- into the steps after it (timed when profiling).
local function each_step(self, emit, method)
  local stages = stages_for(self, emit)
  for j, node in ipairs(self.nodes) do
    if node[method] then
      self.at = j
      local timed, down = stages["timed" .. j], stages[-j] or stages[j + 1]
      if timed then
        timed(function() node[method](node, down) end)
      else
        node[method](node, down)
      end
    end
  end
end

-- Work still in flight (Map's batches) is emitted; held rows (Batch) stay.
function Seq:drain(emit) each_step(self, emit, "drain") end

-- End of stream: each step in order emits what it holds into the steps after it.
function Seq:flush(emit) each_step(self, emit, "flush") end

function Seq:open(ctx)
  for j, node in ipairs(self.nodes) do
    if node.open then
      self.at = j
      node:open(ctx)
    end
  end
end

-- Closes every step, even when one fails to close; the first error is raised after.
-- failed: the run ended with an error (nodes then keep nothing, e.g. saved statistics).
function Seq:close(failed)
  local first
  for j = #self.nodes, 1, -1 do
    local node = self.nodes[j]
    if node.close then
      local ok, err = pcall(node.close, node, failed)
      if not ok and not first then first = err end
    end
  end
  if first then error(first, 0) end
end

-- True once a step will pass nothing more (Take has its n rows): the steps after it
-- only have to be flushed, so a driver may stop pulling from the source.
function Seq:is_done()
  for _, node in ipairs(self.nodes) do
    if node.done or (node.is_done and node:is_done()) then return true end
  end
  return false
end

-- Checkpoints (flow/core.lua's protocol): every step that cannot take part, as
-- {where =, node =, why =}; a Seq's own state is its steps'.
function Seq:checkpoint_problems(where, out)
  where, out = where or "steps", out or {}
  for j, node in ipairs(self.nodes) do
    local here = ("%s[%d]"):format(where, j)
    if getmetatable(node) == Seq.__mt then
      node:checkpoint_problems(here .. ".steps", out)
    else
      local why = core.checkpoint_problem(node)
      if why then out[#out + 1] = { where = here, node = node, why = why } end
    end
  end
  return out
end

-- Each step's state, in order ({} for a step that keeps none).
function Seq:state()
  local steps = {}
  for j, node in ipairs(self.nodes) do
    steps[j] = { state = node.state and node:state() or nil }
  end
  return { steps = steps }
end

function Seq:restore(state)
  local steps = type(state) == "table" and state.steps or {}
  if #steps ~= #self.nodes then
    self:fail("restore: the state has %d steps, this Seq %d", #steps, #self.nodes)
  end
  for j, node in ipairs(self.nodes) do
    if node.restore then
      self.at = j
      node:restore(steps[j].state)
    end
  end
end

-- Where the last error happened: "steps[2].steps[1] (Apply)".
function Seq:position()
  local parts, node = {}, self
  while getmetatable(node) == Seq.__mt and node.at do
    parts[#parts + 1] = ("steps[%d]"):format(node.at)
    node = node.nodes[node.at]
  end
  return table.concat(parts, "."), node
end

-- Calling a Seq directly runs one batch through it (what its stream steps emit for it
-- comes back as several values) and names the failing step in errors.
Seq.__mt.__call = function(self, td)
  self.at = nil
  local res = { pcall(core.call_node, self, td) }
  if res[1] then return unpack(res, 2, table.maxn(res)) end
  error(core.annotate(res[2], self:position()), 0)
end

return Seq
