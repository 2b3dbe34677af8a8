-- dict/map.lua: td:map(fn, {workers =, chunk =, out =, seed =, ordered =, timeout =}), Python's
-- TensorDictBase.map: fn over chunks of batch dim 1 in forked worker processes
-- (lua/tensordict/dict/workers.lua), the results concatenated in chunk order, or written
-- straight into `out` (a TensorDict in shared memory or a memmap) by the workers.
--
-- The workers are forked at the call, after self exists, so each reads its chunks from
-- its own (copy-on-write) view of self: only results cross between processes. Chunk k
-- seeds the global generator from (seed, k), so the output is the same for any worker
-- count, workers = 0 (inline, in this process) included.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local td_core = require("tensordict.dict.core")
local td_join = require("tensordict.dict.join")
local tensor = require("tensordict.tensor")
local workers = require("tensordict.dict.workers")

local TD = td_core.methods
local fail, describe, is_td = util.fail, util.describe, td_core.is_td

local OPTS = { workers = "number", chunk = "number", out = "any", seed = "number", ordered = "boolean",
  timeout = "number" }
local DEFAULT_CHUNKS = 32 -- chunks when `chunk` is not given (independent of workers)

local function shape_text(s) return "[" .. table.concat(s, ", ") .. "]" end

-- Every tensor leaf of out must live in memory the workers share with this process.
local function check_out(out, rows)
  if not is_td(out) then fail(("map: out must be a TensorDict, got %s"):format(describe(out))) end
  local bs = out:batch_size()
  if #bs < 1 or bs[1] ~= rows then
    fail(("map: out has batch size %s, expected one starting with %d rows"):format(shape_text(bs), rows))
  end
  for _, key in ipairs(out:keys({ include_nested = true, leaves_only = true })) do
    local v = out:get(key)
    if tensor.is_tensor(v) then
      local s = v.h.storage
      local kind = C.td_storage_kind(s)
      if not ((kind == C.TD_STORAGE_SHARED or kind == C.TD_STORAGE_FILE) and C.td_storage_is_writable(s) == 1) then
        fail(("map: out's leaf %s is not in writable shared memory (make out with "
          .. "T.empty(..., {shared = true}) leaves, memmap_like, or a memmap loaded \"r+\")")
          :format(td_core.key_path_text(key)))
      end
    end
  end
end

-- fn's result for the chunk of rows a..b, checked.
local function checked(a, b, r)
  local n = b - a + 1
  if not is_td(r) then
    workers.check_error(("fn returned %s for rows %d..%d, expected a TensorDict")
      :format(describe(r), a, b))
  end
  if r._td_p == nil then workers.check_error(("fn returned a freed TensorDict for rows %d..%d"):format(a, b)) end
  local bs = r:batch_size()
  if #bs < 1 or bs[1] ~= n then
    workers.check_error(("fn returned a TensorDict of batch size %s for rows %d..%d, "
      .. "expected one starting with %d"):format(shape_text(bs), a, b, n))
  end
  return r
end

local M = {}
M.checked = checked

-- The checked arguments of map (and map_iter, call naming it; allowed: its options):
-- the batch's row count, the worker count, the chunk size, the seed, the timeout and
-- the options.
function M.arguments(call, self, fn, opts, allowed)
  td_core.cdict(self)
  if type(fn) ~= "function" and not (getmetatable(fn) or {}).__call then
    fail(("%s: expected a function, got %s"):format(call, describe(fn)))
  end
  opts = util.options(call, opts, allowed)
  local bs = self:batch_size()
  if #bs < 1 then fail(("%s: the TensorDict needs at least one batch dim (it has batch size [])"):format(call)) end
  local rows = bs[1]
  local nworkers = opts.workers
  if nworkers == nil then nworkers = C.td_get_num_threads() end
  if not util.is_int(nworkers) or nworkers < 0 then
    fail(("%s: workers must be a non-negative integer, got %s"):format(call, describe(nworkers)))
  end
  local chunk = opts.chunk or math.max(1, math.ceil(rows / DEFAULT_CHUNKS))
  if not util.is_int(chunk) or chunk < 1 then
    fail(("%s: chunk must be a positive integer, got %s"):format(call, describe(chunk)))
  end
  local seed = opts.seed or 0
  if not util.is_int(seed) or seed < 0 then
    fail(("%s: seed must be a non-negative integer, got %s"):format(call, describe(seed)))
  end
  local timeout = opts.timeout
  if timeout ~= nil and not (timeout > 0) then
    fail(("%s: timeout must be a number of seconds > 0, got %s"):format(call, describe(timeout)))
  end
  return rows, nworkers, chunk, seed, timeout, opts
end

function TD.map(self, fn, opts)
  local rows, nworkers, chunk, seed, timeout
  rows, nworkers, chunk, seed, timeout, opts = M.arguments("map", self, fn, opts, OPTS)
  local out = opts.out
  if out ~= nil then check_out(out, rows) end

  if rows == 0 then -- no chunk: fn sees the empty container once, inline
    workers.seed_batch(seed, 1)
    local ok, r = pcall(fn, self)
    if not ok then fail(("map: chunk 1 (no rows) failed: %s"):format(tostring(r))) end
    local okc, err = pcall(checked, 1, 0, r)
    if not okc then fail("map: chunk 1 failed: " .. (type(err) == "table" and err.check or tostring(err))) end
    return out or r
  end

  local nchunks = math.ceil(rows / chunk)
  local function range(k) return (k - 1) * chunk + 1, math.min(rows, k * chunk) end
  -- What runs on chunk k (in a worker, or inline): its result, or nil once written to out.
  local function handler(k)
    local a, b = range(k)
    local r = checked(a, b, fn(self[{ { a, b } }]))
    if out then
      out[{ { a, b } }] = r
      return nil
    end
    return r
  end

  local results = {}
  if nworkers == 0 then
    for k = 1, nchunks do
      workers.seed_batch(seed, k)
      local ok, r = xpcall(handler, workers.traceback, k)
      if not ok then fail(("map: chunk %d failed: %s"):format(k, r)) end
      results[k] = r
    end
  else
    local pool = workers.open(math.min(nworkers, nchunks), handler, seed, "map", "chunk",
      timeout ~= math.huge and timeout or nil)
    local ok, err = pcall(function()
      local nextk = 1
      while nextk <= nchunks or pool:busy() > 0 do
        while nextk <= nchunks and pool:idle() > 0 do
          pool:submit(nextk)
          nextk = nextk + 1
        end
        local k, r = pool:next()
        results[k] = r
      end
    end)
    pool:close()
    if not ok then
      err = workers.clean_error(err)
      fail(err == "interrupted" and "map: interrupted" or err)
    end
  end
  if out then return out end
  if nchunks == 1 then return results[1] end
  return td_join.cat(results, 1)
end

return M
