-- bench_expr.lua: what an expression costs against the same ops written by hand (issue
-- 31). `sqrt(vx^2 + vy^2) < 2 and label != 2` over 1M rows, compiled once by flow.expr,
-- against vx:pow(2):add(vy:pow(2)):sqrt():lt(2):logical_and(label:ne(2)) in Lua: the
-- same seven kernel calls, so the ratio is the closures' and the error handling's cost
-- (it should be 1.0 up to noise). Filter with the expression against Filter with a
-- function doing the hand-written ops, too. Results are dropped to the garbage
-- collector, as users' code does (no :free(), no collectgarbage() in the timed loops).
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local T = require("tensordict")
local flow = T.flow
local now = require("clock")

local ROWS, CALLS, REPEATS = 1000000, 20, 9
local TEXT = "sqrt(vx^2 + vy^2) < 2 and label != 2"

local g = T.Generator(0)
local td = T.TensorDict({ vx = T.randn({ ROWS }, "float32", g), vy = T.randn({ ROWS }, "float32", g),
  label = T.randint(0, 4, { ROWS }, "int64", g) }, { ROWS })

local function by_hand(b)
  return b.vx:pow(2):add(b.vy:pow(2)):sqrt():lt(2):logical_and(b.label:ne(2))
end
local expr = flow.expr(TEXT)
assert(expr(td):eq(by_hand(td)):all(), "the expression and the hand-written ops differ")

-- Seconds for CALLS calls of fn(td).
local function once(fn)
  local t0 = now()
  for _ = 1, CALLS do fn(td) end
  return now() - t0
end

-- Best of REPEATS for each function, taking turns within each repeat so that a busy
-- machine's drift reaches them alike.
local function best_of(fns)
  local best = {}
  for i = 1, #fns do best[i] = math.huge end
  for _ = 1, REPEATS do
    for i, fn in ipairs(fns) do best[i] = math.min(best[i], once(fn)) end
  end
  return best
end

local t = best_of({ by_hand, expr })
print(("%q over %d rows, %d calls: by hand %.3f s (%.1f M rows/s), expression %.3f s = %.3fx"):format(TEXT,
  ROWS, CALLS, t[1], ROWS * CALLS / t[1] / 1e6, t[2], t[2] / t[1]))

local filter_expr, filter_fn = flow.Filter { where = TEXT }, flow.Filter { where = by_hand }
t = best_of({ function(b) return filter_fn(b) end, function(b) return filter_expr(b) end })
print(("Filter over %d rows, %d batches: where = fn(td) by hand %.3f s, where = the expression %.3f s = %.3fx")
  :format(ROWS, CALLS, t[1], t[2], t[2] / t[1]))
