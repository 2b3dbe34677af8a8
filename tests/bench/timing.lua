-- timing.lua: the measuring loop the Lua benchmarks share.
local best_of = require("best")

-- Best of 5 runs of body(n), in ns per call.
return function(n, body)
  return best_of(5, function() body(n) end) / n * 1e9
end
