-- host/dist.lua: tdflow run as one rank of a data-parallel job (docs/dist.md).
-- Under mpirun each rank runs the whole recipe on its share of the rows; this module
-- starts MPI, hands the nodes a ctx.dist (rank, size, and the few exchanges they need:
-- a barrier, rank 0's value to all, every rank's value), and sums the per-node reports
-- of the ranks for rank 0 to print.
local json = require("tensordict.json")
local td_core = require("tensordict.dict")
local util = require("tensordict.util")

local M = {}

-- True when this process was started by mpirun (OpenMPI's, or a PMI launcher's).
function M.launched()
  return os.getenv("OMPI_COMM_WORLD_SIZE") ~= nil or os.getenv("PMI_SIZE") ~= nil
    or os.getenv("PMIX_RANK") ~= nil
end

-- This process's rank and the rank count as the launcher set them (nil when not
-- under mpirun): what a node's checks see before MPI starts.
function M.launched_rank()
  local rank = os.getenv("OMPI_COMM_WORLD_RANK") or os.getenv("PMI_RANK") or os.getenv("PMIX_RANK")
  local size = os.getenv("OMPI_COMM_WORLD_SIZE") or os.getenv("PMI_SIZE")
  if not rank or not size then return nil end
  return tonumber(rank), tonumber(size)
end

-- Starts MPI; the ctx.dist table. timeout: seconds for every exchange (a rank that died
-- makes the others fail after it instead of waiting for ever).
function M.start(timeout)
  local dist = require("tensordict.dist")
  local ok, why = dist.is_available()
  if not ok then util.fail("tdflow run under mpirun: tensordict.dist is not available: " .. why) end
  dist.init({ timeout = timeout })
  local d = { rank = dist.rank(), size = dist.size(), timeout = timeout, dist = dist }

  function d.barrier() dist.barrier() end

  -- Plain Lua values (JSON) travel as a non-tensor value of a one-row TensorDict.
  local function carrier(value) return td_core.construct({ v = json.encode(value) }, { 1 }) end

  -- Rank 0's value, on every rank.
  function d.share(value)
    local got = dist.broadcast(d.rank == 0 and carrier(value) or nil, 0)
    return json.decode(got[1].v)
  end

  -- Every rank's value, in rank order.
  function d.all_values(value)
    local all = dist.all_gather(carrier(value))
    local out = {}
    for r = 1, d.size do out[r] = json.decode(all[r].v) end
    return out
  end

  function d.finalize() dist.finalize() end
  function d.abort(code) dist.abort(code) end
  return d
end

-- The report of every rank made one: rows and batches summed per node, seconds the
-- slowest rank's (the run's wall clock) and per node the sum (time spent over ranks).
function M.aggregate(d, info)
  local all = d.all_values({ rows = info.rows, seconds = info.seconds, rows_in = info.rows_in,
    rows_out = info.rows_out })
  local rows = all[1].rows
  for r = 2, #all do
    for i, row in ipairs(all[r].rows) do
      local into = rows[i]
      for _, k in ipairs({ "seconds", "batches_in", "rows_in", "batches_out", "rows_out" }) do
        into[k] = into[k] + row[k]
      end
      for k, v in pairs(row.counts or {}) do -- a node's own counts (CsvSource's, DropNaN's)
        into.counts = into.counts or {}
        into.counts[k] = (into.counts[k] or 0) + v
      end
    end
  end
  local out = {}
  for k, v in pairs(info) do out[k] = v end
  out.rows, out.seconds, out.rows_in, out.rows_out = rows, 0, 0, 0
  for _, r in ipairs(all) do
    out.seconds = math.max(out.seconds, r.seconds)
    out.rows_in, out.rows_out = out.rows_in + r.rows_in, out.rows_out + r.rows_out
  end
  out.ranks = d.size
  return out
end

return M
