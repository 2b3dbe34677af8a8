-- dist/request.lua: the requests of dist.isend and dist.irecv (docs/dist.md), over
-- libtensordict_mpi's transfers (core/mpi/mpi_dict.c).
--
-- A send posts all its messages at once. A receive posts nothing until driven (test or
-- wait); it then probes for the container's structure and posts the leaves' receives.
-- MPI matches messages from one rank on one tag in order, so two receives from the same
-- (source, tag) must not interleave: they queue, and a receive is driven only once the
-- ones before it have posted their leaves' receives (stage TD_MPI_STAGE_DATA). test()
-- and wait() on any request drive the requests queued before it.
local ffi = require("ffi")
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local wire = require("tensordict.dist.wire")

local M = {}
local MPI, check

function M.bind(C, checker) MPI, check = C, checker end

local queues = {} -- "src:tag" -> receives not yet past their structure, oldest first

local Request = {}
Request.__index = Request

local function new(call, x, fields)
  if x == nil then check(call, -1) end
  fields.call, fields.done = call, false
  fields.x = ffi.gc(x, MPI.td_mpi_transfer_free)
  return (setmetatable(fields, Request))
end

local function dequeue(r)
  if not r.queued then return end
  r.queued = false
  local q = queues[r.key]
  if q[1] == r then table.remove(q, 1) return end -- the usual case, without a loop (JIT)
  for i, x in ipairs(q) do if x == r then table.remove(q, i) break end end
end

-- Frees the transfer now (its hold on the leaves ends with it).
local function drop(r)
  if r.x then MPI.td_mpi_transfer_free(ffi.gc(r.x, nil)) end
  r.x = nil
end

function M.send(td, dst, tag, call)
  return new(call, MPI.td_mpi_isend_dict(td_core.cdict(td), dst, tag), {})
end

function M.recv(src, tag, like, call)
  local r = new(call, MPI.td_mpi_irecv_dict(src, tag, like and td_core.cdict(like) or nil), {
    like = like, key = src .. ":" .. tag, queued = true })
  local q = queues[r.key] or {}
  queues[r.key] = q
  q[#q + 1] = r
  return r
end

-- (Its own function: a closure made in settle would keep settle from compiling.)
local function fill_like(r, msg)
  wire.fill_like(msg, r.like, function(text) r:fail(text) end)
  r.result = r.like
end

-- After driving r's transfer: leaves the queue once its leaves' receives are posted;
-- when done, takes the result (filling like from it when the bytes could not go there
-- directly; a like that does not match raises now, the message off the wire).
local function settle(r)
  local stage = MPI.td_mpi_transfer_stage(r.x)
  if stage >= MPI.TD_MPI_STAGE_DATA then dequeue(r) end
  if stage ~= MPI.TD_MPI_STAGE_DONE then return end
  r.done = true
  local d = MPI.td_mpi_transfer_result(r.x)
  drop(r)
  if r.key == nil then return end -- a send
  if d == nil then r.result = r.like return end
  local msg = wire.received(d)
  if r.like then fill_like(r, msg) else r.result = msg end
end

-- A failed C call on r: dead unless it only timed out (then the request stays usable).
local function failed(r, status, call, timeout)
  if status ~= MPI.TD_MPI_ETIMEOUT then r:cancel() end -- cancelling keeps the error's text
  check(call or r.call, status, timeout)
end

-- The receive queued ahead of r, if any.
local function ahead(r)
  local q = r.queued and queues[r.key]
  return q and q[1] ~= r and q[1] or nil
end

-- Moves r on without blocking: true when done.
local function poll(r)
  while not r.done do
    local head = ahead(r)
    if head then
      poll(head)
      if ahead(r) == head then return false end -- head still waits for its structure
    else
      local st = MPI.td_mpi_transfer_test(r.x)
      if st < 0 then failed(r, st) end
      settle(r)
      if st == 0 then return false end
    end
  end
  return true
end

function Request:test()
  return poll(self)
end

-- Seconds left before deadline (nil: no deadline, -1).
local function left_until(deadline)
  if not deadline then return -1 end
  return (math.max(0, deadline - util.now()))
end

-- One move of r's wait: the receive queued ahead of it, or r itself.
local function wait_step(r, deadline, call, timeout)
  local head = ahead(r)
  if head then
    head:wait({ timeout = left_until(deadline) }, call)
  else
    local st = MPI.td_mpi_transfer_wait(r.x, left_until(deadline))
    if st < 0 then failed(r, st, call, timeout) end
    settle(r)
  end
end

-- wait({timeout = s}): raises "timed out" when the deadline passes (the request stays
-- pending: wait again, or cancel).
function Request:wait(opts, call)
  if self.done then return self.result end
  local timeout = opts and opts.timeout or -1
  local deadline = timeout >= 0 and util.now() + timeout or nil
  -- One step first: usually all it takes, and a loop that runs once per call keeps the
  -- caller's loop from compiling (LuaJIT: "inner loop in root trace").
  wait_step(self, deadline, call, timeout)
  while not self.done do wait_step(self, deadline, call, timeout) end
  return self.result
end

-- Cancels what is posted and leaves the queue (a cancelled send may still arrive).
function Request:cancel()
  drop(self)
  dequeue(self)
  self.done = true
end

function Request:fail(msg)
  self:cancel()
  util.fail(("dist.%s: %s"):format(self.call, msg))
end

return M
