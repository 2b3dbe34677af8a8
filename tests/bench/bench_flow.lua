-- bench_flow.lua: what flow.run costs per node per batch, against calling the same
-- functions on the same batches in a plain Lua loop (the same run, wall clock).
-- Goal (issue 9): <= 2 us per node per batch.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = require("tensordict.flow")
local now = require("clock")

local NODES, BATCHES = 8, 20000
local batch = T.TensorDict({ x = T.rand(256, 4), y = T.rand(256) }, { 256 })
local function touch(t) return t end -- the work itself is the same on both sides

-- A source handing out the same batch BATCHES times, and a sink that counts.
local function source()
  return { iter = function()
    local i = 0
    return function()
      i = i + 1
      if i <= BATCHES then return batch end
    end
  end }
end
local count = 0
local sink = { write = function() count = count + 1 end, finish = function() end, abort = function() end }

local function best(body)
  local b = math.huge
  for _ = 1, 5 do
    local t0 = now()
    body()
    b = math.min(b, now() - t0)
  end
  return b
end

local function report(name, plain, piped)
  local per = (piped - plain) / (NODES * BATCHES) * 1e6
  print(("%-44s plain %7.1f ms  flow.run %7.1f ms  overhead %6.3f us/node/batch (goal <= 2)")
    :format(name, plain * 1e3, piped * 1e3, per))
end

-- Apply: fn over one leaf, written back (td:get, fn, td:set on both sides).
local plain_apply = best(function()
  local nxt = source().iter()
  for td in nxt do
    for _ = 1, NODES do td:set("x", touch(td:get("x"))) end
    sink.write(td)
  end
end)
local steps = {}
for j = 1, NODES do steps[j] = flow.Apply { keys = "x", fn = touch } end
local seq = flow.Seq(steps)
local piped_apply = best(function() flow.run(source(), seq, sink) end)
report("Apply x 8 (get, fn, set)", plain_apply, piped_apply)

-- Lambda: a whole-batch function (the smallest node there is).
local function whole(td) return td end
local plain_lambda = best(function()
  local nxt = source().iter()
  for td in nxt do
    for _ = 1, NODES do td = whole(td) end
    sink.write(td)
  end
end)
steps = {}
for j = 1, NODES do steps[j] = flow.Lambda { fn = whole } end
seq = flow.Seq(steps)
local piped_lambda = best(function() flow.run(source(), seq, sink) end)
report("Lambda x 8 (fn(td))", plain_lambda, piped_lambda)

-- A stream node: Rebatch of the size it gets (push/emit instead of a return).
local plain_stream = best(function()
  local nxt = source().iter()
  for td in nxt do
    for _ = 1, NODES do td = whole(td) end
    sink.write(td)
  end
end)
steps = {}
for j = 1, NODES do steps[j] = flow.Rebatch { size = 256 } end
seq = flow.Seq(steps)
local piped_stream = best(function() flow.run(source(), seq, sink) end)
report("Rebatch(256) x 8 on 256-row batches", plain_stream, piped_stream)
