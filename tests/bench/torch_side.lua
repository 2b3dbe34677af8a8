-- torch_side.lua: torch timed beside us in the same run, for the benchmarks that compare
-- with it: the Python that has torch, and one run of a script that prints its figures
-- as a JSON object.
local json = require("tensordict.json")

local M = {}

-- TD_TORCH_PYTHON, else TD_PYTHON, else python3; nil when that one has no torch.
function M.python()
  local py = os.getenv("TD_TORCH_PYTHON") or os.getenv("TD_PYTHON") or "python3"
  if os.execute(py .. " -c 'import torch' >/dev/null 2>&1") ~= 0 then return nil end
  return py
end

-- The JSON object the Python source script prints when py runs it ({} when it fails).
function M.run(py, script)
  local path = os.tmpname()
  local f = assert(io.open(path, "wb"))
  f:write(script)
  f:close()
  local p = io.popen(("%s %s 2>/dev/null"):format(py, path))
  local text = p:read("*a")
  p:close()
  os.remove(path)
  local ok, t = pcall(json.decode, text)
  return ok and type(t) == "table" and t or {}
end

-- A script timing torch on cases at each size, as our side times them: best of 3 runs
-- of reps calls, seconds per call, keyed "<case> <n>". setup: Python run for each size n
-- (tensors the cases use); cases: a Python tuple of (name, lambda) pairs; reps: a
-- Python expression of n.
function M.cases_script(threads, sizes, setup, cases, reps)
  return ([[
import json, math, time, torch
torch.set_num_threads(%d)
torch.manual_seed(0)
out = {}
for n in %s:
    n = int(n)
%s
    reps = %s
    for name, fn in %s:
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best = min(best, (time.perf_counter() - t0) / reps)
        out[f"{name} {n}"] = best
print(json.dumps(out))
]]):format(threads, json.encode(sizes), setup, reps, cases)
end

-- One line of a ours-vs-torch table: the case, ours and torch's ms, and the ratio.
function M.row(key, ours, theirs)
  return ("%-20s %10.4f %10s %7s"):format(key, ours * 1e3, theirs and ("%.4f"):format(theirs * 1e3) or "-",
    theirs and ("%.2f"):format(ours / theirs) or "-")
end

return M
