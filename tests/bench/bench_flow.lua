-- bench_flow.lua: what flow.run costs per node per batch, against calling the same
-- functions on the same batches in a plain Lua loop (the same run, wall clock), and
-- what the tdflow host adds on top (profiled steps, timed source and sink, progress).
-- Goals (issues 9 and 10): <= 2 us per node per batch for each.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = require("tensordict.flow")
local best_of = require("best")

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

-- Best of 5 runs, in seconds.
local function best(body) return best_of(5, body) end

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

-- A stream node: Rebatch of the size it gets (push/emit instead of a return), against
-- the same plain loop as Lambda's.
steps = {}
for j = 1, NODES do steps[j] = flow.Rebatch { size = 256 } end
seq = flow.Seq(steps)
local piped_stream = best(function() flow.run(source(), seq, sink) end)
report("Rebatch(256) x 8 on 256-row batches", plain_lambda, piped_stream)

-- The host: a recipe of the same 8 Apply steps run as `tdflow run` runs it.
local tdflow = require("tensordict.host.tdflow")
local recipe = require("tensordict.host.recipe")
local spec_steps = {}
for j = 1, NODES do spec_steps[j] = { use = "Apply", keys = "x", fn = touch } end
local function host_run()
  local r = recipe.load({ source = { use = "TensorSource", td = batch, batch_size = 256 }, steps = spec_steps })
  r.source = source()
  r.sink = sink
  local ok, err = tdflow.execute(r, { quiet = true })
  assert(ok, err)
end
steps = {}
for j = 1, NODES do steps[j] = flow.Apply { keys = "x", fn = touch } end
seq = flow.Seq(steps)
local piped = best(function() flow.run(source(), seq, sink) end)
local hosted = best(host_run)
report("tdflow host vs a plain loop, Apply x 8", plain_apply, hosted)
print(("%-44s host over flow.run: %6.3f us/node/batch (goal <= 2)"):format("",
  (hosted - piped) / (NODES * BATCHES) * 1e6))

-- tdflow check of a 50-step JSON recipe (parse, plugins, parameters, key flow).
do
  local parts = {}
  for j = 1, 50 do
    parts[j] = j % 2 == 1 and '{"use": "Apply", "keys": ["pos"], "fn": "Tensor.neg", "out_keys": ["p' .. j .. '"]}'
      or '{"use": "Rebatch", "size": 256}'
  end
  local path = os.tmpname()
  local f = io.open(path, "wb")
  f:write('{"batch_size": 256, "source": {"use": "ParticleSource", "n": 1000, "steps": 2}, "steps": ['
    .. table.concat(parts, ", ") .. '], "sink": {"use": "Discard"}}')
  f:close()
  assert(#recipe.check(path) == 0)
  local t = best(function() assert(#recipe.check(path) == 0) end)
  os.remove(path)
  print(("%-44s %.2f ms (goal <= 50 ms)"):format("tdflow check of a 50-step recipe", t * 1e3))
end
