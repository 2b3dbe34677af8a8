-- best.lua: the best-of-N loop the Lua benchmarks share.
local now = require("clock")

-- The shortest wall-clock time of runs calls of body(), in seconds. before, when given,
-- runs ahead of each call and is not timed (e.g. collectgarbage, so that a collection
-- the previous run left due does not land in this one).
return function(runs, body, before)
  local best = math.huge
  for _ = 1, runs do
    if before then before() end
    local t0 = now()
    body()
    best = math.min(best, now() - t0)
  end
  return best
end
