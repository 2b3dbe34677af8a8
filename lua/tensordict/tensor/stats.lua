-- tensor/stats.lua: the running-statistics kernels (core/kernels/stats.c) for Lua:
-- per-feature count, mean and M2 (sum of squared deviations) updated by a batch (Welford
-- within it, Chan's formula between batches), merged, and used to standardise. float64,
-- the same bits for any thread count; variants that refuse or skip NaNs and infinities
-- (Normalize's nan policy). flow/stats.lua's RunningStats and Normalize are built on
-- these; the arguments are checked there.
local ffi = require("ffi")
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

-- The two counts a non-finite check fills: NaNs, then infinities.
local nonfinite = ffi.new("int64_t[2]")

-- As update, when every value of x is finite; else nothing is folded in and it returns
-- the counts of NaNs and infinities of x (0, 0 when x was folded in).
function M.update_strict(x, batch_dims, count, mean, m2)
  check(C.td_stats_update_strict(header(x), batch_dims, count, header(mean), header(m2), nonfinite))
  return tonumber(nonfinite[0]), tonumber(nonfinite[1])
end

-- As update, skipping non-finite values feature by feature: counts (int64, the feature
-- shape) counts the values each feature took; count[0] the rows seen.
function M.update_finite(x, batch_dims, count, counts, mean, m2)
  check(C.td_stats_update_finite(header(x), batch_dims, count, header(counts), header(mean), header(m2)))
end

-- merge with a count per feature (counts, counts_b: int64 tensors of the feature shape).
function M.merge_counts(counts, mean, m2, counts_b, mean_b, m2_b)
  check(C.td_stats_merge_counts(header(counts), header(mean), header(m2), header(counts_b), header(mean_b),
    header(m2_b)))
end

-- normalize, returning the NaNs and the infinities of x it met.
function M.normalize_counted(x, batch_dims, mean, var, eps, out)
  check(C.td_stats_normalize_counted(header(x), batch_dims, header(mean), header(var), eps, header(out), nonfinite))
  return tonumber(nonfinite[0]), tonumber(nonfinite[1])
end

-- The NaNs and the infinities of x.
function M.count_nonfinite(x)
  check(C.td_stats_count_nonfinite(header(x), nonfinite))
  return tonumber(nonfinite[0]), tonumber(nonfinite[1])
end

return M
