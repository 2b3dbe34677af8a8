-- bench_sweep.lua: the size sweep of issue 11: elementwise, reductions, copies, masks,
-- gathers, joins, a chain of three temporaries ((a + b) * c):exp():sum() (1e2..1e7
-- elements) and matmul (64, 256, 1024), each ours next to
-- PyTorch's measured in the same run (sweep_ops.py), at 1 and 2 threads, wall clock,
-- median of 7 timed batches. Writes tests/bench/results/latest.md and latest.json
-- (TD_SWEEP_OUT names another folder: make bench-quick writes under build/).
-- TD_TORCH_PYTHON (or TD_PYTHON) names the Python that has torch; without it, our
-- times alone. Then plot_sweep.lua draws sweep_1thread.png and sweep_2threads.png
-- next to them (skipped, with a message, without gnuplot).
-- TD_SWEEP_QUICK=1 (CI) runs the sizes up to 1e5 only.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local json = require("tensordict.json")
local now = require("clock")

local quick = os.getenv("TD_SWEEP_QUICK") == "1"
local SIZES = quick and { 100, 1000, 10000, 100000 } or { 100, 1000, 10000, 100000, 1000000, 10000000 }

-- Measured as users write code: each result is dropped to the garbage collector (no
-- free(), no collectgarbage() in the loop). The freed variant beside it frees each
-- result at once, as torch's reference counting does: the gap between the two is what
-- waiting for the collector costs.
local function dropped(fn) fn() end
local function freed(fn)
  local r = fn()
  if T.is_tensor(r) then r:free() end
end

-- A loop's first collection period gets fresh pages for its results (page faults,
-- cold lines: `a + b` on 1e3 floats 1.8 us there against 0.7 us after): before the
-- timed batches, each case runs until the collector has finished two cycles (a weak
-- probe emptied twice), or 0.25 s for one that makes no garbage, so the figures are a
-- loop's steady state, as a script that runs for more than a few milliseconds sees.
local function warm_up(fn, call)
  local t0 = now()
  for _ = 1, 2 do
    local probe = setmetatable({ {} }, { __mode = "v" })
    while probe[1] ~= nil and now() - t0 < 0.25 do
      for _ = 1, 16 do call(fn) end
    end
  end
end

local function median_time(fn, call)
  call = call or dropped
  warm_up(fn, call)
  local reps = 1
  while reps < 65536 do -- enough calls per batch for ~2 ms, so the clock's cost does not count
    local t0 = now()
    for _ = 1, reps do call(fn) end
    if now() - t0 >= 2e-3 then break end
    reps = reps * 4
  end
  local times = {}
  for i = 1, 7 do
    local t0 = now()
    for _ = 1, reps do call(fn) end
    times[i] = (now() - t0) / reps
  end
  table.sort(times)
  return times[4]
end

local ORDER = { "add", "add_", "mul_scalar", "exp", "sigmoid", "sum", "sum_dim", "transpose_copy",
  "where", "masked_select", "index_select_rows", "gather", "cat8", "stack8", "chain" }

local function cases(n, g)
  local a, b, c = T.rand({ n }, g), T.rand({ n }, g), T.rand({ n }, g)
  local acc = a:clone() -- add_ grows its own tensor: exp of a grown `a` overflowed (slow inf paths)
  local rows = math.max(math.floor(n / 64), 1)
  local m = T.rand({ rows, 64 }, g)
  local mask = T.rand({ n }, g):lt(0.5)
  local idx_rows = T.randint(1, rows, { rows }, g)
  local idx = T.randint(1, n, { n }, g)
  local parts = {}
  for i = 1, 8 do parts[i] = T.rand({ math.max(math.floor(n / 8), 1) }, g) end
  return {
    add = function() return a + b end,
    add_ = function() acc:add_(b) end,
    mul_scalar = function() return a * 2 end,
    exp = function() return a:exp() end,
    sigmoid = function() return a:sigmoid() end,
    sum = function() return a:sum() end,
    sum_dim = function() return m:sum(1) end,
    transpose_copy = function() -- contiguous() gives the view itself when it is dense (as torch)
      local r = m:t():contiguous()
      if r.o ~= m.o then return r end
    end,
    where = function() return T.where(mask, a, b) end,
    masked_select = function() return a[mask] end,
    index_select_rows = function() return m:index_select(1, idx_rows) end,
    gather = function() return a:gather(1, idx) end,
    cat8 = function() return T.cat(parts) end,
    stack8 = function() return T.stack(parts) end,
    -- three temporaries a user leaves to the collector, then a full reduction
    chain = function() return ((a + b) * c):exp():sum() end,
  }
end

-- torch's side, run first so the two do not share the cores.
local torch = {}
local python = os.getenv("TD_TORCH_PYTHON") or os.getenv("TD_PYTHON") or "python3"
if python ~= "none" then -- TD_TORCH_PYTHON=none: our side only
  local pipe = io.popen(("%s tests/bench/sweep_ops.py 2>/dev/null"):format(python))
  for line in pipe:lines() do
    local name, n, threads, s = line:match("^(%S+) (%d+) (%d+) (%S+)$")
    if name then torch[name .. " " .. n .. " " .. threads] = tonumber(s) end
  end
  pipe:close()
end
local have_torch = next(torch) ~= nil
if not have_torch then print("PyTorch is not installed for " .. python .. ": our times only") end

local rows, g = {}, T.Generator(0)
for _, threads in ipairs({ 1, 2 }) do
  T.set_num_threads(threads)
  for _, n in ipairs(SIZES) do
    local c = cases(n, g)
    for _, name in ipairs(ORDER) do
      rows[#rows + 1] = { op = name, size = n, threads = threads, ours = median_time(c[name]),
        freed = median_time(c[name], freed) }
    end
    collectgarbage()
  end
  for _, k in ipairs(quick and { 64, 256 } or { 64, 256, 1024 }) do
    local x = T.rand({ k, k }, g)
    local mm = function() return T.matmul(x, x) end
    rows[#rows + 1] = { op = "matmul", size = k, threads = threads, ours = median_time(mm),
      freed = median_time(mm, freed) }
  end
end

local lines = {
  "| op | size | threads | ours, dropped (us) | ours, freed (us) | torch (us) | ours/torch | freed/torch |",
  "| --- | --- | --- | --- | --- | --- | --- | --- |",
}
for _, r in ipairs(rows) do
  r.torch = torch[r.op .. " " .. r.size .. " " .. r.threads]
  r.ratio = r.torch and r.ours / r.torch or nil
  r.freed_ratio = r.torch and r.freed / r.torch or nil
  lines[#lines + 1] = ("| %s | %s | %d | %.2f | %.2f | %s | %s | %s |"):format(r.op, r.size, r.threads,
    r.ours * 1e6, r.freed * 1e6, r.torch and ("%.2f"):format(r.torch * 1e6) or "-",
    r.ratio and ("%.2f"):format(r.ratio) or "-", r.freed_ratio and ("%.2f"):format(r.freed_ratio) or "-")
  print(lines[#lines])
end
local machine = require("machine")()
for _, r in ipairs(rows) do r.machine = machine end
local header = ("Size sweep, %s, %s; medians of 7 batches, wall clock. `make bench` (bench_sweep.lua).\n"
  .. "Ours as users write code (results dropped to the GC); freed: each result freed at once.\n\n"
  .. "Machine: %s."):format(os.date("!%Y-%m-%d %H:%M UTC"),
  have_torch and "ours and torch in the same run" or "ours only", machine)
local out = os.getenv("TD_SWEEP_OUT") or "tests/bench/results"
os.execute("mkdir -p '" .. out .. "'")
local f = assert(io.open(out .. "/latest.md", "w"))
f:write("# Latest size sweep\n\n", header, "\n\n", table.concat(lines, "\n"), "\n")
f:close()
f = assert(io.open(out .. "/latest.json", "w"))
f:write(json.encode(rows), "\n")
f:close()
print(("wrote %s/latest.md and %s/latest.json"):format(out, out))
-- The plots (ratio against size, one per thread count), where gnuplot is installed.
require("plot_sweep")(out)
