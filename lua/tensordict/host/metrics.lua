-- host/metrics.lua: a recipe's "metrics" block (docs/recipes.md, "Metrics"): named
-- scalars that `tdflow run` computes over the sink's output once the run is done,
-- prints, and puts in its --report (`tdflow sweep` collects them from each variant):
--   "metrics": {"mean_energy": {"key": "energy", "stat": "mean"}, "rows": {"stat": "count"}}
-- Stats over every element of the key's leaf (as float64): mean, std (the sample
-- standard deviation, n - 1: the library's default), min, max, sum, count (elements;
-- without a key, the rows of the output) and nan_count. A key path is written with dots
-- ("next.obs"). A value with no meaning (the mean of nothing, a NaN) is null.
local T = require("tensordict")
local json = require("tensordict.json")
local util = require("tensordict.util")
local core = require("tensordict.flow.core")

local describe = util.describe

local M = {}

M.STATS = { "mean", "std", "min", "max", "sum", "count", "nan_count" }
local STAT_SET = {}
for _, s in ipairs(M.STATS) do STAT_SET[s] = true end
local FIELDS = { "key", "stat" }

local sorted_keys = util.sorted_keys

local function is_object(v)
  return type(v) == "table" and getmetatable(v) ~= json.array_mt and not core.is_node(v)
end

-- "a.b" -> {"a", "b"}; "a" -> "a".
local function key_of(text)
  if not text:find(".", 1, true) then return text end
  local parts = {}
  for part in (text .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  return parts
end

local function key_name(k) return type(k) == "table" and table.concat(k, ".") or k end

-- Appends the problems of block (the recipe's metrics) to problems, and what cannot be
-- checked to notes. ks: the keys that reach the sink (a flow.KeySet, nil when unknown);
-- sink: the sink node, or nil (Discard).
function M.check(block, ks, sink, problems, notes)
  if block == nil then return end
  if not is_object(block) then
    problems[#problems + 1] = ('metrics: expected an object {"name": {"key": "KEY", "stat": "STAT"}, ...}, got %s')
      :format(describe(block))
    return
  end
  local type_name = sink and sink.type_name or "Discard"
  if type_name == "Discard" and next(block) ~= nil then
    problems[#problems + 1] = ("metrics: the sink (Discard) keeps no rows to compute them over (MemmapSink, "
      .. "H5Sink and Collect do)")
  end
  for _, name in ipairs(sorted_keys(block)) do
    local spec, where = block[name], "metrics." .. name
    if not is_object(spec) then
      problems[#problems + 1] = ('%s: expected an object {"key": "KEY", "stat": "STAT"}, got %s'):format(where,
        describe(spec))
    else
      for _, f in ipairs(sorted_keys(spec)) do
        if f ~= "key" and f ~= "stat" then
          problems[#problems + 1] = ("%s.%s: unknown field%s (fields: key, stat)"):format(where, f,
            util.did_you_mean(f, FIELDS))
        end
      end
      local stat = spec.stat
      if stat == nil then
        problems[#problems + 1] = ("%s.stat: required (one of %s)"):format(where, table.concat(M.STATS, ", "))
      elseif not STAT_SET[stat] then
        problems[#problems + 1] = ("%s.stat: unknown stat %s%s (stats: %s)"):format(where, describe(stat),
          util.did_you_mean(stat, M.STATS), table.concat(M.STATS, ", "))
      end
      local key = spec.key
      if key == nil then
        if stat ~= "count" and STAT_SET[stat] then
          problems[#problems + 1] = ("%s.key: required for the stat '%s' (only count goes without a key: the rows)")
            :format(where, stat)
        end
      elseif type(key) ~= "string" or key == "" or key:find("^%.") or key:find("%.$") or key:find("..", 1, true) then
        problems[#problems + 1] = ('%s.key: expected a key (a string; nested keys as "a.b"), got %s'):format(where,
          describe(key))
      elseif ks and not ks:known(key_of(key)) then
        if ks.open then
          notes[#notes + 1] = ("%s.key: key '%s' is not known at the sink; %s adds keys it does not declare, so it "
            .. "may come from there (not checked)"):format(where, key, ks.opened_by or "a step")
        else
          local names = {}
          for _, k in ipairs(ks:list()) do names[#names + 1] = key_name(k) end
          problems[#problems + 1] = ("%s.key: key '%s' does not reach the sink%s (keys at the sink: %s)"):format(
            where, key, util.did_you_mean(key, names), table.concat(names, ", "))
        end
      end
    end
  end
end

-- One stat of tensor x (nil: count of rows n).
local function stat_of(stat, x, rows)
  if stat == "count" then return x and x:numel() or rows end
  local v = x:to("float64")
  local n = v:numel()
  if stat == "nan_count" then return n == 0 and 0 or v:isnan():sum() end
  if stat == "sum" then return n == 0 and 0 or v:sum() end
  if n == 0 or (stat == "std" and n < 2) then return nil end
  if stat == "mean" then return v:mean() end
  if stat == "std" then return v:std() end
  if stat == "min" then return v:min() end
  return v:max()
end

-- The metrics of block over result (what the sink gave: a TensorDict), as
-- {name = number or json.null}; raises when result holds no rows to compute over or a
-- key is missing.
function M.compute(block, result)
  if block == nil or next(block) == nil then return nil end
  if not T.is_tensordict(result) then
    util.fail(("metrics: the sink gave %s, not rows to compute the metrics over (MemmapSink, H5Sink and Collect "
      .. "give them)"):format(describe(result)))
  end
  local out = setmetatable({}, json.object_mt)
  local rows = #result
  for _, name in ipairs(sorted_keys(block)) do
    local spec = block[name]
    local x
    if spec.key then
      local k = key_of(spec.key)
      local ok, v = pcall(result.get, result, k)
      if (not ok or v == nil) and rows == 0 then -- an empty output keeps no leaves: the stat of nothing
        v = T.tensor({}):to("float64")
      elseif not ok or not T.is_tensor(v) then
        util.fail(("metrics.%s: the output has no leaf '%s' (its keys: %s)"):format(name, spec.key,
          core.keys_text(result)))
      end
      x = v
    end
    local value = stat_of(spec.stat, x, rows)
    if value == nil or value ~= value or value == math.huge or value == -math.huge then value = json.null end
    out[name] = value
  end
  return out
end

-- The metrics as text: "name = value" pairs (null as "-").
function M.text(values)
  local parts = {}
  for _, name in ipairs(sorted_keys(values or {})) do
    local v = values[name]
    parts[#parts + 1] = ("%s = %s"):format(name, v == json.null and "-" or util.number_text(v))
  end
  return (table.concat(parts, ", "))
end

return M
