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

return M
