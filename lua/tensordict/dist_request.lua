-- dist_request.lua: the requests of dist.isend and dist.irecv (docs/dist.md).
--
-- A send posts all its messages at once (header, structure, leaves; dist_wire.lua).
-- A receive goes in stages, since each stage's sizes come with the one before:
--   1. the header; 2. the structure; 3. the leaves (into new tensors, or into `like`).
-- MPI matches messages from one rank on one tag in the order their receives are posted,
-- so two receives from the same (source, tag) must not interleave their stages: they
-- queue, and a receive posts its header only once the one before it has posted its
-- leaves. test() and wait() on any request drive the requests queued before it.
local ffi = require("ffi")
local util = require("tensordict.util")
local wire = require("tensordict.dist_wire")

local M = {}
local MPI, check

function M.bind(C, checker) MPI, check = C, checker end

local queues = {} -- "src:tag" -> receives not yet past stage 2, oldest first

local Request = {}
Request.__index = Request

local function post(r, c_request)
  if c_request == nil then check(r.call, -1) end
  r.pending[#r.pending + 1] = ffi.gc(c_request, MPI.td_mpi_request_free)
end

local function new(call, fields)
  fields.call, fields.pending, fields.done = call, {}, false
  return setmetatable(fields, Request)
end

---------------------------------------------------------------------------- sends

function M.send(out, dst, tag)
  local r = new("isend", { keep = out })
  post(r, MPI.td_mpi_isend(out.header, 16, dst, tag))
  post(r, MPI.td_mpi_isend(wire.region_data(out.region), out.size, dst, tag))
  for _, t in ipairs(out.tensors) do
    post(r, MPI.td_mpi_isend(wire.data(t), wire.nbytes(t), dst, tag))
  end
  r.advance = function(self) self.done = true end
  r.started = true
  return r
end

------------------------------------------------------------------------- receives

local function dequeue(r)
  local q = queues[r.key]
  if q and q[1] == r then
    table.remove(q, 1)
  elseif q then
    for i, x in ipairs(q) do if x == r then table.remove(q, i) break end end
  end
end

-- Stage 3: the leaves go into new tensors or like's leaves.
local function post_leaves(r)
  local td, paths, leaves = wire.structure(r.region)
  r.region = nil
  -- A like that does not match still takes the message off the wire (into new
  -- tensors), so the sender completes; the wait then raises.
  local ok, targets = pcall(wire.targets, td, paths, leaves, r.like, function(msg) error(msg, 0) end)
  if not ok then
    r.mismatch = targets
    targets = wire.targets(td, paths, leaves, nil)
  end
  r.targets = targets
  for _, t in ipairs(r.targets.tensors) do
    post(r, MPI.td_mpi_irecv(wire.data(t), wire.nbytes(t), r.src, r.tag))
  end
  r.result = r.targets.result
  dequeue(r) -- the next receive from (src, tag) may post its header now
end

local function advance_recv(r)
  r.stage = r.stage + 1
  if r.stage == 1 then
    r.header = wire.header()
    post(r, MPI.td_mpi_irecv(r.header, 16, r.src, r.tag))
  elseif r.stage == 2 then
    local size = tonumber(r.header[0])
    r.nleaves = tonumber(r.header[1])
    r.region = wire.region(size)
    post(r, MPI.td_mpi_irecv(wire.region_data(r.region), size, r.src, r.tag))
  elseif r.stage == 3 then
    post_leaves(r)
  else
    r.done = true
    if r.mismatch then r:fail(r.mismatch) end
    wire.finish(r.targets)
  end
end

function M.recv(src, tag, like)
  local r = new("irecv", { src = src, tag = tag, like = like, stage = 0, key = src .. ":" .. tag })
  r.advance = advance_recv
  local q = queues[r.key] or {}
  queues[r.key] = q
  q[#q + 1] = r
  return r
end

-------------------------------------------------------------------------- driving

function Request:fail(msg)
  self:cancel()
  util.fail(("dist.%s: %s"):format(self.call, msg))
end

-- A receive starts (posts its header) when it heads its queue.
local function can_start(r)
  if r.started then return true end
  local q = queues[r.key]
  if q[1] ~= r then return false end
  r.started = true
  r:advance()
  return true
end

-- Moves r on without blocking: true when done.
local function poll(r)
  while not r.done do
    if not can_start(r) then
      if not poll(queues[r.key][1]) and not can_start(r) then return false end
    else
      for i = #r.pending, 1, -1 do
        local st = check(r.call, MPI.td_mpi_test(r.pending[i]))
        if st == 0 then return false end
        r.pending[i] = nil
      end
      r:advance()
    end
  end
  return true
end

function Request:test()
  return poll(self)
end

-- wait({timeout = s}): raises "timed out" when the deadline passes (the request stays
-- pending: wait again, or cancel).
function Request:wait(opts, call)
  local timeout = opts and opts.timeout or -1
  local deadline = timeout >= 0 and util.now() + timeout or nil
  local function left()
    if not deadline then return -1 end
    return math.max(0, deadline - util.now())
  end
  while not self.done do
    if not can_start(self) then
      queues[self.key][1]:wait({ timeout = left() }, call)
    else
      while #self.pending > 0 do
        check(call or self.call, MPI.td_mpi_wait(self.pending[#self.pending], left()), timeout)
        self.pending[#self.pending] = nil
      end
      self:advance()
    end
  end
  return self.result
end

-- Cancels what is posted and leaves the queue (a cancelled send may still arrive).
function Request:cancel()
  for i = #self.pending, 1, -1 do
    local p = self.pending[i]
    self.pending[i] = nil
    MPI.td_mpi_request_free(ffi.gc(p, nil))
  end
  if self.key then dequeue(self) end
  self.done = true
end

return M
