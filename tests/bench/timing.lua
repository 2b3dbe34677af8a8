-- timing.lua: the measuring loop the Lua benchmarks share.
local now = require("clock")

-- Best of 5 runs of body(n), in ns per call.
return function(n, body)
  local best = math.huge
  for _ = 1, 5 do
    local t0 = now()
    body(n)
    best = math.min(best, now() - t0)
  end
  return best / n * 1e9
end
