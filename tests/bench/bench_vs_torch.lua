-- bench_vs_torch.lua: the elementwise, reduction, gathering and matmul ops next to
-- PyTorch's, measured in the same run (tests/bench/bench_vs_torch.py), as time ratios
-- (ours / torch: below 1 is faster). Skipped, and said so, where torch is not
-- installed; TD_TORCH_PYTHON names the Python that has it (default python3).
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local now = require("clock")

local threads = T.get_num_threads()
local python = os.getenv("TD_TORCH_PYTHON") or "python3"
local pipe = io.popen(("%s tests/bench/bench_vs_torch.py %d 2>/dev/null; echo \"exit $?\"")
  :format(python, threads))
local torch_times = {}
for line in pipe:lines() do
  local name, seconds = line:match("^(%S+) (%S+)$")
  if name and name ~= "exit" then torch_times[name] = tonumber(seconds) end
end
pipe:close()
if next(torch_times) == nil then
  print("PyTorch is not installed for " .. python .. ": comparison skipped")
  return
end

-- As users write code, results are dropped to the garbage collector; the freed variant
-- beside it frees each one at once, as torch's reference counting does.
local function dropped(fn) fn() end
local function freed(fn)
  local r = fn()
  if T.is_tensor(r) then r:free() end
end

local function best(fn, call)
  call = call or dropped
  call(fn)
  local t = math.huge
  for _ = 1, 5 do
    local t0 = now()
    call(fn)
    t = math.min(t, now() - t0)
  end
  return t
end

local N = 16 * 1024 * 1024
local g = T.Generator(0)
local a, b = T.rand({ N }, g), T.rand({ N }, g)
local m = T.rand({ 2048, 2048 }, g)
local rows = T.rand({ 1048576, 64 }, g)
local idx = T.randint(1, 1048576, { 1048576 }, g)
local mask = T.rand({ 1048576 }, g):lt(0.5)

local cases = {
  { "add", function() return a + b end },
  { "add_", function() a:add_(b) end },
  { "mul", function() return a * b end },
  { "exp", function() return a:exp() end },
  { "sum", function() return a:sum() end },
  { "mean", function() return a:mean() end },
  { "max", function() return a:max() end },
  { "var", function() return a:var() end },
  { "sum_dim0", function() return m:sum(1) end },
  { "matmul", function() return T.matmul(m, m) end },
  { "index_select", function() return rows:index_select(1, idx) end },
  { "mask_rows", function() return rows[mask] end },
}
print(("threads: %d (both sides)"):format(threads))
for _, case in ipairs(cases) do
  local name, fn = case[1], case[2]
  local ours, theirs = best(fn), torch_times[name]
  if theirs then
    local ours_freed = best(fn, freed)
    print(("%-13s ours %8.2f ms (freed %8.2f), torch %8.2f ms, time ratio %.2f (freed %.2f)")
      :format(name, ours * 1e3, ours_freed * 1e3, theirs * 1e3, ours / theirs, ours_freed / theirs))
  end
end
