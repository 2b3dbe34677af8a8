-- bench_common_ops.lua: the workloads of Python tensordict's
-- benchmarks/common/common_ops_test.py (creation, indexing, setitem, get/set nested,
-- update, select/exclude, key flattening, clone, unbind, split, chunk, stack, cat,
-- lock/unlock, items/keys/values, apply), ours next to Python tensordict's measured in
-- the same run (bench_common_ops_python.py, under TD_PYTHON, default python3; skipped
-- when it lacks tensordict). One thread; each figure the median of 5 loops of ~20 ms.
-- Prints a markdown table and writes it to <out>/common_ops.md (TD_SWEEP_OUT, default
-- tests/bench/results; not when TD_COMMON_OPS names a subset: "keys,items,apply_nested").
-- Run by 'make bench'; never by tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local now = require("clock")
T.set_num_threads(1)

local subset = os.getenv("TD_COMMON_OPS")
local only = {}
for name in (subset or ""):gmatch("[^,%s]+") do only[name] = true end

-- Python's side first, so the two never share the cores.
local python = {}
do
  local py = os.getenv("TD_PYTHON") or "python3"
  local names = (subset or ""):gsub(",", " ")
  local pipe = io.popen(py .. " tests/bench/bench_common_ops_python.py " .. names .. " 2>/dev/null")
  for line in pipe:lines() do
    local name, value = line:match("^(%S+) (%S+)$")
    if name and tonumber(value) then python[name] = tonumber(value) end
  end
  pipe:close()
end

-- Median of 5 loops sized to ~20 ms, in seconds per call (results dropped to the GC,
-- as user code does).
local function per_call(fn)
  fn()
  local n = 1
  while true do
    local t0 = now()
    for _ = 1, n do fn() end
    if now() - t0 >= 0.02 or n >= 2 ^ 20 then break end
    n = n * 2
  end
  local runs = {}
  for r = 1, 5 do
    local t0 = now()
    for _ = 1, n do fn() end
    runs[r] = (now() - t0) / n
  end
  table.sort(runs)
  return runs[3]
end

local function zeros() return T.zeros(3, 4, 5) end

-- 19 leaves, leaf i at depth i: {"0", "t"}, {"0", "1", "t"}, ... built from dotted keys.
local function chain(size)
  local flat = {}
  for i = 1, 19 do
    local parts = {}
    for j = 0, i - 1 do parts[#parts + 1] = tostring(j) end
    parts[#parts + 1] = "t"
    flat[table.concat(parts, ".")] = T.zeros(size) + i
  end
  return T.TensorDict(flat, size):unflatten_keys(".")
end

local function numbered(n, make)
  local t = {}
  for i = 0, n - 1 do t[tostring(i)] = make(i) end
  return t
end

local a, b, c = zeros(), zeros(), zeros()
local td = T.TensorDict({ a = a, b = { b1 = b } }, { 3, 4 })
local td2 = td:clone()
local flat2 = T.TensorDict({ a = a, b = b }, { 3, 4 })
local flat2_other = flat2:clone()
local keys10, keys100 = numbered(10, zeros), numbered(100, zeros)
local nested10 = numbered(10, zeros)
nested10.nested = numbered(10, zeros)
local big = T.TensorDict(numbered(100, function(i) return T.zeros(3, 4) + i end), { 3, 4 })
local deep, deep_wide = chain({ 3, 4 }), chain({ 3, 20 })
local deep_flat = deep:flatten_keys(".")
local sub_key, new_key = {}, {}
for i = 0, 18 do sub_key[#sub_key + 1] = tostring(i) end
local leaf_key = { unpack(sub_key) }
leaf_key[#leaf_key + 1] = "t"
for j = 20, 1, -1 do new_key[#new_key + 1] = tostring(j) end
local leaf_keys = deep:keys({ include_nested = true, leaves_only = true })
local last_leaf = leaf_keys[#leaf_keys]
local row, column = td[2]:clone():zero_(), td[{ {}, 2 }]:clone():zero_()
local idx, mask = T.tensor({ 1, 3 }, "int64"), T.tensor({ true, false, true })
local z34 = T.zeros(3, 4)
local key_bb1, key_ccc = { "b", "b1" }, { "c", "c", "c" }
local k_slice_int, k_range, k_range_int, k_tuple = { {}, 2 }, { { 1, 2 } }, { { 1, 2 }, 2 }, { 3, 2 }
local k_ellipsis = { T.ellipsis, 2 }
local function identity(x) return x end
local four = { deep, deep, deep, deep }
local function collect(iter)
  local out = {}
  for k, v in iter do out[#out + 1] = { k, v } end
  return out
end
local function collect_values(iter)
  local out = {}
  for v in iter do out[#out + 1] = v end
  return out
end
local NESTED_LEAVES = { include_nested = true, leaves_only = true }
local NESTED = { include_nested = true }

local WORKLOADS = {
  { "creation_empty", function() return T.TensorDict({}, { 3, 4 }) end },
  { "creation_2keys", function() return T.TensorDict({ a = a, b = b }, { 3, 4 }) end },
  { "creation_nested", function() return T.TensorDict({ a = a, b = { b1 = b } }, { 3, 4 }) end },
  { "creation_10keys", function() return T.TensorDict(keys10, { 3, 4 }) end },
  { "creation_100keys", function() return T.TensorDict(keys100, { 3, 4 }) end },
  { "creation_nested_10keys", function() return T.TensorDict(nested10, { 3, 4 }) end },
  { "clone", function() return td:clone() end },
  { "getitem_int", function() return td[2] end },
  { "getitem_slice_int", function() return td[k_slice_int] end },
  { "getitem_range", function() return td[k_range] end },
  { "getitem_range_int", function() return td[k_range_int] end },
  { "getitem_tuple", function() return td[k_tuple] end },
  { "getitem_tensor", function() return td[idx] end },
  { "getitem_mask", function() return td[mask] end },
  { "getitem_ellipsis", function() return td[k_ellipsis] end },
  { "setitem_int", function() td[2] = row end },
  { "setitem_slice_int", function() td[k_slice_int] = column end },
  { "setitem_key", function() local tdc = td:clone(); tdc.c = c end },
  { "set_nested", function() local tdc = td:clone(); tdc[key_bb1] = b end },
  { "set_nested_new", function() local tdc = td:clone(); tdc[key_ccc] = c end },
  { "get_nested_leaf", function() return deep:get(leaf_key) end },
  { "get_nested_td", function() return deep:get(sub_key) end },
  { "set_deep_new", function() deep:set(new_key, z34) end },
  { "update", function() flat2:clone():update(flat2_other) end },
  { "update_nested", function() td:clone():update(td2) end },
  { "update__nested", function() td:clone():update_(td2) end },
  { "select_nested", function() return deep:select(last_leaf) end },
  { "exclude_nested", function() return deep:exclude(last_leaf) end },
  { "flatten_keys", function() return deep:flatten_keys() end },
  { "unflatten_keys", function() return deep_flat:unflatten_keys() end },
  { "unbind", function() return deep:unbind(1) end },
  { "split", function() return deep_wide:split(2, 2) end },
  { "chunk", function() return deep_wide:chunk(10, 2) end },
  { "stack", function() return T.stack(four, 1) end },
  { "cat", function() return T.cat(four, 1) end },
  { "lock_unlock", function() deep:lock(); deep:unlock() end },
  { "items", function() return collect(big:pairs()) end },
  { "keys", function() return big:keys() end },
  { "values", function() return collect_values(big:values()) end },
  { "keys_nested_leaves", function() return deep:keys(NESTED_LEAVES) end },
  { "items_nested", function() return collect(deep:pairs(NESTED)) end },
  { "membership", function() return big:has("a") end },
  { "apply_nested", function() return deep:apply(identity) end },
}

local lines = {
  "| workload | ours (us) | Python tensordict (us) | ours/python |",
  "| --- | --- | --- | --- |",
}
local faster = 0
local ran = 0
for _, w in ipairs(WORKLOADS) do
  local name, fn = w[1], w[2]
  if subset and not only[name] then goto continue end
  ran = ran + 1
  local ours = per_call(fn)
  local py = python[name]
  if py and ours < py then faster = faster + 1 end
  lines[#lines + 1] = ("| %s | %.2f | %s | %s |"):format(name, ours * 1e6,
    py and ("%.2f"):format(py * 1e6) or "-", py and ("%.3f"):format(ours / py) or "-")
  ::continue::
end
local summary = next(python) and ("%d of %d workloads faster than Python tensordict."):format(faster, ran)
  or "Python tensordict not installed (TD_PYTHON): our times alone."
local text = table.concat(lines, "\n") .. "\n\n" .. summary .. "\n"
io.write(text)
local out = (os.getenv("TD_SWEEP_OUT") or "tests/bench/results") .. "/common_ops.md"
local f = not subset and io.open(out, "w")
if f then
  f:write("# Common ops (bench_common_ops.lua)\n\n", os.date("!%Y-%m-%d %H:%M UTC"),
    ", ours and Python tensordict's in the same run, one thread; medians of 5 loops of ~20 ms.\n\n", text)
  f:close()
end
