-- tensor/stats.lua: the running-statistics kernels (core/kernels/stats.c) for Lua:
-- per-feature count, mean and M2 (sum of squared deviations) updated by a batch (Welford
-- within it, Chan's formula between batches), merged, and used to standardise. float64,
-- the same bits for any thread count. flow/stats.lua's RunningStats and Normalize are
-- built on these; the arguments are checked there.
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local tensor = require("tensordict.tensor.core")

local header = tensor.handle

local M = {}

local function check(status)
  if status ~= 0 then util.c_fail() end
end

-- The rows of x (its first batch_dims dims) folded into count[0] (an int64_t[1]), mean
-- and m2 (float64, x's feature shape).
function M.update(x, batch_dims, count, mean, m2)
  check(C.td_stats_update(header(x), batch_dims, count, header(mean), header(m2)))
end

-- (count[0], mean, m2) becomes the statistics of both its rows and (count_b, mean_b, m2_b).
function M.merge(count, mean, m2, count_b, mean_b, m2_b)
  check(C.td_stats_merge(count, header(mean), header(m2), count_b, header(mean_b), header(m2_b)))
end

-- out = (x - mean) / sqrt(var + eps), per feature (x's dims after batch_dims).
function M.normalize(x, batch_dims, mean, var, eps, out)
  check(C.td_stats_normalize(header(x), batch_dims, header(mean), header(var), eps, header(out)))
end

return M
