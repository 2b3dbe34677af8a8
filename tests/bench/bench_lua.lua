-- bench_lua.lua: the cost of the Lua binding's hot paths, in ns per call, next to a
-- plain Lua reference measured in the same run (a Lua table read through a method).
-- Run by 'make bench'; never by the tests.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")

local ns_per_call = require("timing") -- best of 5, ns per call

local N = 2000000
local m = T.zeros(100, 100)
local plain = { shape = { 100, 100 } }
function plain:size(d) return self.shape[d] end

-- The dim varies with the loop counter so the JIT cannot hoist the call out of the loop.
local reference = ns_per_call(N, function(n)
  local s = 0
  for i = 1, n do s = s + plain:size(i % 2 + 1) end
  return s
end)

local function report(name, ns, target)
  print(("%-34s %8.1f ns/call, Lua method reference %5.1f ns, ratio %6.1f (target <= %d ns)")
    :format(name, ns, reference, ns / reference, target))
end

report("t:size(d)", ns_per_call(N, function(n)
  local s = 0
  for i = 1, n do s = s + m:size(i % 2 + 1) end
  return s
end), 20)

report("t[{{1, k}}] (a view)", ns_per_call(N / 10, function(n)
  for i = 1, n do local _ = m[{ { 1, i % 10 + 1 } }] end
end), 300)

report("t[i] on a 2-D tensor (a view)", ns_per_call(N / 10, function(n)
  for i = 1, n do local _ = m[i % 100 + 1] end
end), 300)

local v = T.zeros(100)
report("t[i] on a 1-D tensor (a number)", ns_per_call(N, function(n)
  local s = 0
  for i = 1, n do s = s + v[i % 100 + 1] end
  return s
end), 300)
