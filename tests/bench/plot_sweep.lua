-- plot_sweep.lua: one PNG per thread count of the size sweep, ours/torch against the
-- size for every op (log-log; the goals 1.0 and 0.3 drawn), made with gnuplot from
-- <dir>/latest.json into <dir>/sweep_1thread.png and sweep_2threads.png.
-- gnuplot is a bench and docs tool, not a dependency: without it this says so and
-- skips. Usage: luajit tests/bench/plot_sweep.lua [dir] (default tests/bench/results);
-- bench_sweep.lua calls it (require("plot_sweep")(dir)) after writing latest.json.
package.path = "lua/?.lua;lua/?/init.lua;tests/bench/?.lua;" .. package.path
local json = require("tensordict.json")

-- os.execute's result: a status number in LuaJIT (5.1), true/nil with 5.2 compatibility.
local function succeeded(command)
  local r = os.execute(command)
  return r == 0 or r == true
end

local function plot(dir)
  if not succeeded("command -v gnuplot >/dev/null 2>&1") then
    print("plot_sweep: gnuplot is not installed (apt-get install gnuplot-nox): no plots")
    return
  end
  local f = assert(io.open(dir .. "/latest.json"))
  local rows = json.decode(f:read("*a"))
  f:close()

  -- series[threads][op] = { {elements, ratio}, ... } in the order of the sweep.
  local series, order = {}, {}
  for _, r in ipairs(rows) do
    if r.ratio then
      local s = series[r.threads] or {}
      series[r.threads] = s
      if not s[r.op] then
        s[r.op] = {}
        if not order[r.threads] then order[r.threads] = {} end
        table.insert(order[r.threads], r.op)
      end
      local elements = r.op == "matmul" and r.size * r.size or r.size -- matmul k: k*k elements
      table.insert(s[r.op], { elements, r.ratio })
    end
  end

  local made = 0
  for threads, by_op in pairs(series) do
    local png = ("%s/sweep_%d%s.png"):format(dir, threads, threads == 1 and "thread" or "threads")
    local lines = {
      "set terminal pngcairo size 1100,700 font ',10'",
      ("set output '%s'"):format(png),
      ("set title 'Size sweep, %d thread%s: ours (results dropped to the GC) / torch (below 1: faster)'")
        :format(threads, threads == 1 and "" or "s"),
      "set logscale xy", "set xlabel 'elements (matmul: n x n)'", "set ylabel 'ours / torch'",
      "set format x '10^{%L}'", "set grid", "set key outside right top",
      "set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb 'black'",
      "set arrow from graph 0, first 0.3 to graph 1, first 0.3 nohead dt 2 lc rgb 'gray40'",
      "set label 'goal: <= 0.3 up to 1e3 elements' at graph 0.01, first 0.34 left tc rgb 'gray40'",
    }
    local plots = {}
    for i, op in ipairs(order[threads]) do
      lines[#lines + 1] = ("$%s << EOD"):format(op)
      for _, p in ipairs(by_op[op]) do lines[#lines + 1] = ("%.17g %.17g"):format(p[1], p[2]) end
      lines[#lines + 1] = "EOD"
      plots[#plots + 1] = ("$%s with linespoints lw 1.5 pt %d dt %d title '%s' noenhanced")
        :format(op, i % 13 + 1, math.floor((i - 1) / 8) + 1, op)
    end
    lines[#lines + 1] = "plot " .. table.concat(plots, ", \\\n  ")
    local script = os.tmpname()
    local g = assert(io.open(script, "w"))
    g:write(table.concat(lines, "\n"), "\n")
    g:close()
    local ok = succeeded(("gnuplot '%s'"):format(script))
    os.remove(script)
    if ok then
      made = made + 1
      print("wrote " .. png)
    else
      print("plot_sweep: gnuplot failed for " .. png)
    end
  end
  if made == 0 and not next(series) then print("plot_sweep: no torch figures in latest.json: no plots") end
end

-- Run as a script: plot the folder named, or the committed results.
if arg and arg[0] and arg[0]:match("plot_sweep%.lua$") then plot(arg[1] or "tests/bench/results") end
return plot
