-- repl/stepper.lua: steps a recipe's pipeline one source batch at a time, for tdrepl's
-- `:load`. p:next() pulls the next batch from r.source and runs it through r.steps
-- one node at a time, returning a trace that prints every node's output: its batch
-- size and the keys it added, removed or changed (the source's batch in full: keys,
-- dtypes, dims after the batch dims); after the last batch it flushes the stream nodes. The
-- sink is never written while stepping (p:run() runs the whole recipe into it).
-- Nodes are opened on the first next() as flow.run opens them (same seed, same ctx), so
-- stepping shows the batches a run would produce.
local random = require("tensordict.tensor.random")
local tensor = require("tensordict.tensor")
local td_core = require("tensordict.dict")
local show = require("tensordict.repl.show")

local M = {}

M.MAX_KEYS = 12 -- leaves listed per batch summary

local Stepper = {}
Stepper.__index = Stepper
local Trace = {}
Trace.__index = Trace

local function type_of(x) return type(x) == "table" and x.type_name or nil end

local function label(what, node)
  local t = type_of(node)
  return t and ("%s (%s)"):format(what, t) or what
end

-- A batch's layout: its batch size and, per leaf (nested keys joined with "."), the
-- dtype and the dims after the batch dims ("pos: float32[10, 3]", "mass: float32").
function M.layout(td)
  local bs = td:batch_size()
  local out = { batch = #bs > 0 and show.shape(bs) or "[]", names = {}, what = {} }
  for _, k in ipairs(td:keys({ include_nested = true, leaves_only = true })) do
    local v = td:get(k)
    local name = type(k) == "table" and table.concat(k, ".") or k
    local what
    if tensor.is_tensor(v) then
      local shape, feat = v:shape(), {}
      for d = #bs + 1, #shape do feat[#feat + 1] = shape[d] end
      what = v:dtype() .. (#feat > 0 and show.shape(feat) or "")
    else
      what = show.value(v)
      if #what > 40 then what = what:sub(1, 37) .. "..." end
    end
    out.names[#out.names + 1] = name
    out.what[name] = what
  end
  return out
end

local function capped(parts)
  if #parts > M.MAX_KEYS then
    local more = #parts - M.MAX_KEYS
    for i = #parts, M.MAX_KEYS + 1, -1 do parts[i] = nil end
    parts[#parts + 1] = ("... (%d more)"):format(more)
  end
  return (table.concat(parts, ", "))
end

-- "[100] obs: float32[4], reward: float32"; with the layout before the step (prev),
-- only what changed: "+score: float32", "-obs", "~x: float16[4]", or "keys unchanged".
function M.summary(td, prev)
  if not td_core.is_td(td) then return show.value(td) end
  local cur = M.layout(td)
  local parts = {}
  if not prev then
    for _, n in ipairs(cur.names) do parts[#parts + 1] = n .. ": " .. cur.what[n] end
    return ("%s %s"):format(cur.batch, #parts > 0 and capped(parts) or "(no keys)"), cur
  end
  for _, n in ipairs(cur.names) do
    local before = prev.what[n]
    if before == nil then
      parts[#parts + 1] = "+" .. n .. ": " .. cur.what[n]
    elseif before ~= cur.what[n] then
      parts[#parts + 1] = "~" .. n .. ": " .. cur.what[n]
    end
  end
  for _, n in ipairs(prev.names) do
    if cur.what[n] == nil then parts[#parts + 1] = "-" .. n end
  end
  return ("%s %s"):format(cur.batch, #parts > 0 and capped(parts) or "keys unchanged"), cur
end

function Trace.__tostring(self) return (table.concat(self.lines, "\n")) end

-- One step's outputs, as lines of the trace; returns the layout of the first output.
local function describe_outputs(lines, where, outputs, why_empty, prev)
  if #outputs == 0 then
    lines[#lines + 1] = ("%s: %s"):format(where, why_empty)
    return nil
  end
  local text, first = M.summary(outputs[1], prev)
  if #outputs == 1 then
    lines[#lines + 1] = ("%s: %s"):format(where, text)
    return first
  end
  lines[#lines + 1] = ("%s: %d batches"):format(where, #outputs)
  for i, td in ipairs(outputs) do
    lines[#lines + 1] = ("  %d. %s"):format(i, i == 1 and text or (M.summary(td, prev)))
  end
  return first
end

function M.new(r)
  if type(r) ~= "table" or type(r.source) ~= "table" or type(r.source.iter) ~= "function" then
    error("tensordict: stepper: expected a recipe with a source (r.source with an iter method)", 2)
  end
  return (setmetatable({ r = r, steps = r.steps or { r.node }, batches = 0 }, Stepper))
end

-- Calls fn(...); an error comes back naming the place ("source (CsvSource)",
-- "steps[2] (Map)"), as flow.run names it.
local function at(where, node, fn, ...)
  local res = { pcall(fn, ...) }
  if res[1] then return unpack(res, 2, table.maxn(res)) end
  local core = require("tensordict.flow.core")
  if not type_of(node) then node = nil end -- a hand-made source or node has no type name
  error(core.annotate and core.annotate(res[2], where, node) or res[2], 0)
end

function Stepper:open()
  if self.opened then return end
  local r = self.r
  self.ctx = { seed = r.seed or 0, workers = r.workers }
  random.manual_seed(self.ctx.seed)
  self.opened = true -- before opening, so a failing open is still closed by reset()
  if r.source.open then at("source", r.source, r.source.open, r.source, self.ctx) end
  for i, step in ipairs(self.steps) do
    if step.open then at(("steps[%d]"):format(i), step, step.open, step, self.ctx) end
  end
  self.iter = at("source", r.source, r.source.iter, r.source, self.ctx)
end

-- Runs outputs of the previous step through step i; returns this step's outputs.
local function run_step(self, i, inputs, flush)
  local step = self.steps[i]
  local outputs = {}
  local function emit(td) outputs[#outputs + 1] = td end
  at(("steps[%d]"):format(i), step, function()
    for _, td in ipairs(inputs) do
      if step.forward then
        local out = step:forward(td)
        if out ~= nil then emit(out) end
      else
        step:push(td, emit)
        if step.drain then step:drain(emit) end
      end
    end
    if flush and step.flush then step:flush(emit) end
  end)
  if step.done or (step.is_done and step:is_done()) then self.stopping = true end
  return outputs
end

-- p:next() -> a trace (prints every node's output); trace.out lists the last step's
-- outputs, trace.batch is the first of them. After the stream's end: flushes once,
-- then says the stream has ended.
function Stepper:next()
  self:open()
  local lines, trace = {}, setmetatable({ out = {}, steps = {} }, Trace)
  trace.lines = lines
  if self.finished then
    lines[1] = ("end of stream after %d batches (p:reset() starts over)"):format(self.batches)
    return trace
  end
  local batches, flush, prev
  local td = nil
  if not self.stopping then td = at("source", self.r.source, self.iter) end
  if td == nil then
    flush = true
    self.finished = true
    batches = {}
    lines[1] = ("end of the source after %d batches: flushing the nodes"):format(self.batches)
  else
    self.batches = self.batches + 1
    batches = { td }
    trace.source = td
    local text
    text, prev = M.summary(td)
    lines[1] = ("batch %d from %s: %s"):format(self.batches, label("source", self.r.source), text)
  end
  for i, step in ipairs(self.steps) do
    local had_input = #batches > 0
    batches = run_step(self, i, batches, flush)
    trace.steps[i] = batches
    local why = flush and "nothing to flush" or not had_input and "no input"
      or step.forward and "nothing (the batch was dropped)" or "nothing yet (held for a later batch)"
    prev = describe_outputs(lines, label(("steps[%d]"):format(i), step), batches, why, prev)
  end
  trace.out = batches
  trace.batch = batches[1]
  self.last = trace
  return trace
end

-- Closes every node (errors ignored: close must be idempotent) and starts over.
function Stepper:reset()
  if self.opened then
    for i = #self.steps, 1, -1 do
      local step = self.steps[i]
      if step.close then pcall(step.close, step) end
    end
    if self.r.source.close then pcall(self.r.source.close, self.r.source) end
  end
  self.opened, self.iter, self.finished, self.stopping, self.last = false, nil, false, false, nil
  self.batches = 0
  return self
end
Stepper.close = Stepper.reset

-- Runs the whole recipe with flow.run (the sink is written); returns its results.
function Stepper:run()
  self:reset()
  local flow = require("tensordict.flow")
  local r = self.r
  local node = r.node
  if node == nil and #self.steps > 0 then node = flow.Seq(self.steps) end
  return flow.run(r.source, node, r.sink or flow.Collect({ cat = true }), { seed = r.seed or 0, workers = r.workers })
end

function Stepper:__tostring()
  local names = {}
  for i, step in ipairs(self.steps) do names[i] = type_of(step) or "?" end
  local r = self.r
  return ("stepper over %s: source %s, steps %s, sink %s; %d batches so far%s"):format(
    r.path or "a recipe", type_of(r.source) or "?", #names > 0 and table.concat(names, " -> ") or "(none)",
    r.sink and (type_of(r.sink) or "?") or "(none)", self.batches, self.finished and " (ended)" or "")
end

return M
