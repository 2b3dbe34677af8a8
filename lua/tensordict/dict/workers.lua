-- dict/workers.lua: the worker-process engine behind td:map and flow.Map.
--
-- workers.open(n, handler, seed) forks n workers once (core/dict/dict_workers.c). They inherit
-- this Lua state, so handler's closures and upvalues work there. The parent submits jobs
-- (a batch number and optionally a TensorDict, packed into the worker's shared input
-- region); a worker unpacks views of it, seeds the global generator from (seed, batch
-- number), runs handler(k, td) and ships what it returns back through its output region
-- (leaves it passed through unchanged travel as references, not copies). Errors in a
-- worker come back as text with the worker's traceback; a worker that dies is reported
-- with its exit status or signal. close() kills and reaps every worker.
--
-- The batch a worker's handler receives views shared memory that the next batch reuses:
-- after the handler returns, the engine frees it (leaves read from it raise "used after
-- free()" if kept) and, if something else still references that memory, moves the
-- worker to a fresh region so nothing kept is overwritten.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local td_core = require("tensordict.dict.core")
local random = require("tensordict.tensor.random")

local fail, describe = util.fail, util.describe
local wrap, is_td, cdict = td_core.wrap, td_core.is_td, td_core.cdict

local M = {}

local REPLY_JOB, REPLY_RESULT = C.TD_REPLY_JOB, C.TD_REPLY_RESULT
local REPLY_ERROR, REPLY_DONE, REPLY_DIED = C.TD_REPLY_ERROR, C.TD_REPLY_DONE, C.TD_REPLY_DIED

-- The generator seed of batch k under pipeline seed s: splitmix64 of both, cut to 53
-- bits so it is an exact Lua number. Any worker count seeds batch k the same way.
local function batch_seed(seed, k)
  local x = ffi.new("uint64_t", seed) * 0x9E3779B97F4A7C15ULL + ffi.new("uint64_t", k)
  x = x + 0x9E3779B97F4A7C15ULL
  x = bit.bxor(x, bit.rshift(x, 30)) * 0xBF58476D1CE4E5B9ULL
  x = bit.bxor(x, bit.rshift(x, 27)) * 0x94D049BB133111EBULL
  x = bit.bxor(x, bit.rshift(x, 31))
  return (tonumber(bit.rshift(x, 11)))
end
M.batch_seed = batch_seed

-- Seeds the global generator for batch k: every mode (inline or any worker count)
-- calls this before running the function on that batch.
function M.seed_batch(seed, k) random.manual_seed(batch_seed(seed, k)) end

-- A check failure raised inside a handler: reported without a traceback.
function M.check_error(msg) error({ check = msg }, 0) end

local ENGINE = "\n\t" .. debug.getinfo(1, "S").short_src .. ":"

local function traceback(err)
  if type(err) == "table" and err.check then return err.check end
  -- The worker's own frames only: the engine's (this file's, and from the xpcall down)
  -- say nothing.
  local tb = debug.traceback(tostring(err), 2)
  local engine = tb:find(ENGINE, 1, true)
  if engine then tb = tb:sub(1, engine - 1) end
  return (tb:gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
end
M.traceback = traceback

-- Runs handler on batch k and stages its reply: everything a batch's outcome depends on
-- (the handler, the checks of what it returned, packing the result) runs here, under
-- the per-batch protection, so a failure in any of it fails the batch and never the
-- worker (issue 28: a freed result used to kill the worker when it was packed).
local function run_batch(w, handler, k, batch)
  local res = handler(k, batch)
  if res == nil then
    C.td_worker_reply_done(w)
    return
  end
  if not is_td(res) then
    M.check_error(("the function returned %s, expected a TensorDict or nil"):format(describe(res)))
  end
  if res._td_p == nil then M.check_error("the function returned a freed TensorDict") end
  if C.td_worker_reply_result(w, cdict(res)) < 0 then
    M.check_error("cannot ship the result: " .. ffi.string(C.td_last_error()))
  end
end

-- The loop a worker runs until the parent goes away; never returns.
local function worker_loop(w, handler, seed, threads)
  -- The workers share the parent's cores: each runs its kernels on its share of the
  -- parent's threads, so n workers do not each start a pool as large as the machine
  -- (what PyTorch's DataLoader workers do with torch.set_num_threads(1)).
  C.td_set_num_threads(threads)
  -- os.exit in a worker leaves at once, without the parent's atexit handlers or
  -- finalisers (the parent sees the status).
  os.exit = function(code) -- luacheck: ignore 122 (the worker's own os.exit, on purpose)
    if code == true or code == nil then code = 0 elseif code == false then code = 1 end
    C.td_worker_exit(tonumber(code) or 1)
  end
  local kind, job = ffi.new("int32_t[1]"), ffi.new("int64_t[1]")
  while true do
    local d = C.td_worker_next(w, kind, job)
    if kind[0] ~= REPLY_JOB then C.td_worker_exit(0) end
    local k = tonumber(job[0])
    local batch = d ~= nil and wrap(d) or nil
    M.seed_batch(seed, k)
    local ok, err = xpcall(run_batch, traceback, w, handler, k, batch)
    if not ok then
      err = tostring(err)
      -- No room for the text: leave rather than let the batch pass as dropped (the
      -- parent reports the batch failed with this status).
      if C.td_worker_reply_error(w, err, #err) < 0 then C.td_worker_exit(5) end
    end
    -- A dead local still holds its value in its stack slot: drop the message and the
    -- batch before the collection below.
    err = nil -- luacheck: ignore 311
    if batch then batch:free() end
    batch = nil -- luacheck: ignore 311
    if C.td_worker_input_busy(w) == 1 then collectgarbage() end
    if C.td_worker_send(w) < 0 then C.td_worker_exit(3) end
  end
end

-- An error caught around the engine, for re-raising: without "tensordict: ", and
-- Ctrl-C (the standalone interpreter's "interrupted!" hook or our poll's) as
-- "interrupted".
function M.clean_error(err)
  err = tostring(err)
  if err:match("interrupted!?$") and not err:find("\n") then return "interrupted" end
  return (err:gsub("^tensordict: ", ""))
end

local Pool = {}
Pool.__index = Pool

-- Errors about a batch carry no position: the callers re-raise them at the user's line.
local function raise(msg) error("tensordict: " .. msg, 0) end

-- Forks n workers running handler(k, td_or_nil) -> TensorDict or nil.
-- call names the caller in messages, unit what a job is ("batch", "chunk"); limit
-- (seconds, nil: none) is how long one job may take in a worker (see Pool:next).
function M.open(n, handler, seed, call, unit, limit)
  call = call or "workers"
  if not util.is_int(n) or n < 1 then
    fail(("%s: the worker count must be a positive integer, got %s"):format(call, describe(n)))
  end
  local w = C.td_workers_new(n)
  if w == nil then util.c_fail() end
  local threads = math.max(1, math.floor(C.td_get_num_threads() / n))
  local who = C.td_workers_fork(w)
  if who >= 0 then
    local ok, err = pcall(worker_loop, w, handler, seed or 0, threads)
    io.stderr:write("tensordict: worker loop failed: ", tostring(err), "\n")
    C.td_worker_exit(ok and 0 or 4)
  end
  if who ~= C.TD_WORKERS_PARENT then
    local msg = ffi.string(C.td_last_error())
    C.td_workers_close(w)
    fail(("%s: %s"):format(call, msg))
  end
  local self = setmetatable({
    w = ffi.gc(w, C.td_workers_close), n = n, call = call, unit = unit or "batch",
    job = {},      -- job[i]: the batch number worker i (1-based) works on, or nil
    started = {},  -- started[i]: when job[i] was sent (util.now), for limit
    limit = limit,
    nbusy = 0,
    kind = ffi.new("int32_t[1]"), jobno = ffi.new("int64_t[1]"),
  }, Pool)
  return self
end

function Pool:idle() return self.n - self.nbusy end
function Pool:busy() return self.nbusy end

function Pool:pid(i) return (tonumber(C.td_workers_pid(self.w, i - 1))) end

-- Sends batch k (td may be nil) to an idle worker; returns its index.
function Pool:submit(k, td)
  if self.w == nil then fail(self.call .. ": the workers are closed") end
  for i = 1, self.n do
    if self.job[i] == nil then
      if C.td_workers_send(self.w, i - 1, k, td and cdict(td) or nil) < 0 then
        -- A worker that died since its last batch (C reaped it and said how) fails this
        -- batch, named as a batch that failed in a worker is (issue 28).
        local why = ffi.string(C.td_last_error())
        if C.td_workers_pid(self.w, i - 1) == 0 then
          why = ("%s while idle, before it took this %s"):format(why, self.unit)
        end
        raise(("%s: %s %d failed: %s"):format(self.call, self.unit, k, why))
      end
      self.job[i] = k
      self.started[i] = util.now()
      self.nbusy = self.nbusy + 1
      return i
    end
  end
  fail(self.call .. ": no idle worker")
end

-- The worker whose job started first, and when its limit passes (nil without a limit).
local function first_deadline(self)
  if not self.limit then return nil end
  local who
  for i = 1, self.n do
    if self.job[i] ~= nil and (who == nil or self.started[i] < self.started[who]) then who = i end
  end
  return who, self.started[who] + self.limit
end

-- Waits up to timeout_ms (nil: as long as it takes) for a worker with a reply, or
-- until the first job's limit passes, which closes the pool (every worker killed and
-- reaped: one that is stuck, or stopped with SIGSTOP, cannot be trusted to come back)
-- and raises "<call>: batch k timed out after S s in worker i".
local function wait_reply(self, timeout_ms)
  local wait_until = timeout_ms and timeout_ms >= 0 and util.now() + timeout_ms / 1000 or nil
  while true do
    local who, deadline = first_deadline(self)
    local until_ = wait_until
    if deadline and (until_ == nil or deadline < until_) then until_ = deadline end
    local ms = until_ and math.max(0, math.ceil((until_ - util.now()) * 1000)) or -1
    local i = C.td_workers_wait(self.w, ms)
    if i ~= C.TD_WORKERS_TIMEOUT then return i end
    local now = util.now()
    if deadline and now >= deadline then
      local k = self.job[who]
      self:close()
      raise(("%s: %s %d timed out after %g s in worker %d"):format(self.call, self.unit, k, self.limit, who))
    end
    if wait_until and now >= wait_until then return i end
  end
end

-- Waits for one reply (timeout_ms: nil waits as long as it takes, 0 polls). Returns
-- k, result (a TensorDict, or nil when the handler returned nil) and the worker's
-- index; nil when nothing came in time. A failed batch raises:
-- "<call>: batch k failed in worker i: <message and traceback>", or names how the
-- worker died, or that it ran past the pool's limit.
function Pool:next(timeout_ms)
  if self.w == nil then fail(self.call .. ": the workers are closed") end
  if self.nbusy == 0 then return nil end
  local i = wait_reply(self, timeout_ms)
  if i == C.TD_WORKERS_TIMEOUT then return nil end
  if i == C.TD_WORKERS_INTERRUPTED then error("tensordict: interrupted", 0) end
  if i < 0 then util.c_fail() end
  local k = self.job[i + 1]
  local d = C.td_workers_recv(self.w, i, self.kind, self.jobno)
  local kind = self.kind[0]
  self.job[i + 1] = nil
  self.nbusy = self.nbusy - 1
  if kind == REPLY_RESULT then
    if d == nil then util.c_fail() end
    return k, wrap(d), i + 1
  elseif kind == REPLY_DONE then
    return k, nil, i + 1
  elseif kind == REPLY_ERROR then
    self.failed_job = k -- the worker lives on: an ordered caller may hold the error until k's turn
    raise(("%s: %s %d failed in worker %d: %s"):format(self.call, self.unit, k, i + 1,
      ffi.string(C.td_workers_message_borrow(self.w, i))))
  elseif kind == REPLY_DIED then
    raise(("%s: %s %d failed: %s"):format(self.call, self.unit, k,
      ffi.string(C.td_workers_message_borrow(self.w, i))))
  end
  util.c_fail()
end

-- Kills and reaps every worker; safe to call twice.
function Pool:close()
  local w = self.w
  if w ~= nil then
    self.w = nil
    ffi.gc(w, nil)
    C.td_workers_close(w)
  end
end

M.Pool = Pool
return M
