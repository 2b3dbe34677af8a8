-- dict/map_iter.lua: td:map_iter(fn, {workers =, chunk =, seed =, ordered =, timeout =}),
-- Python's TensorDictBase.map_iter: td:map's chunks of batch dim 1 run in worker
-- processes (dict/workers.lua), each result handed out by an iterator as it is asked
-- for instead of concatenated at the end:
--   for r in td:map_iter(fn, {workers = 2, chunk = 100}) do ... end
-- Chunks are seeded as td:map's, so results do not depend on the worker count. The
-- workers are forked at the iterator's first call and closed after its last chunk or
-- its first error; an iterator dropped before its end has them closed when it is
-- collected (the pool's finaliser).
local util = require("tensordict.util")
local core = require("tensordict.dict.core")
local map = require("tensordict.dict.map")
local workers = require("tensordict.dict.workers")

local TD = core.methods
local fail = util.fail

local OPTS = { workers = "number", chunk = "number", seed = "number", ordered = "boolean", timeout = "number" }

function TD.map_iter(self, fn, opts)
  local rows, nworkers, chunk, seed, timeout
  rows, nworkers, chunk, seed, timeout, opts = map.arguments("map_iter", self, fn, opts, OPTS)
  local ordered = opts.ordered ~= false
  local nchunks = math.ceil(rows / chunk) -- no rows: no chunk, nothing to hand out
  local function handler(k)
    local a, b = (k - 1) * chunk + 1, math.min(rows, k * chunk)
    return (map.checked(a, b, fn(self[{ { a, b } }])))
  end

  local given = 0 -- chunks handed out so far
  if nworkers == 0 then
    return function()
      if given >= nchunks then return nil end
      given = given + 1
      workers.seed_batch(seed, given)
      local ok, r = xpcall(handler, workers.traceback, given)
      if not ok then
        local k = given
        given = nchunks -- the iterator ends after an error
        fail(("map_iter: chunk %d failed: %s"):format(k, r))
      end
      return r
    end
  end

  local pool, submitted, held = nil, 0, {}
  local function take()
    while true do
      if ordered and held[given + 1] then
        local r = held[given + 1]
        held[given + 1] = nil
        if r.failure then error(r.failure, 0) end
        return r.result
      end
      while submitted < nchunks and pool:idle() > 0 do
        submitted = submitted + 1
        pool:submit(submitted)
      end
      local ok, k, r = pcall(pool.next, pool)
      local failed = not ok and pool.failed_job
      pool.failed_job = nil
      if not ok and not (ordered and failed) then error(k, 0) end
      if not ordered then return r end
      -- ordered: a result, or a chunk's error, is kept until its turn (chunk 2's error
      -- is raised after chunk 1's result is handed out, however the workers' timing went)
      if failed then held[failed] = { failure = k } else held[k] = { result = r } end
    end
  end
  return function()
    if given >= nchunks then return nil end
    if pool == nil then
      pool = workers.open(math.min(nworkers, nchunks), handler, seed, "map_iter", "chunk",
        timeout ~= math.huge and timeout or nil)
    end
    local ok, r = pcall(take)
    if not ok then
      pool:close()
      given = nchunks
      local err = workers.clean_error(r)
      fail(err == "interrupted" and "map_iter: interrupted" or err)
    end
    given = given + 1
    if given >= nchunks then pool:close() end
    return r
  end
end

return {}
