-- host/inspect_hist.lua: `tdflow inspect PATH --hist KEY [--bins N] [--plot FILE.png]`: T.hist
-- of one leaf (dotted key) drawn in the terminal, and with --plot the same bins drawn
-- by gnuplot (host/gnuplot.lua).
local T = require("tensordict")
local inspect_leaves = require("tensordict.host.inspect_leaves")
local gnuplot = require("tensordict.host.gnuplot")

local M = {}

M.BINS = 10

-- The histogram's bins as a gnuplot chart at out.
local function plot(h, key, out)
  local data = {}
  for i, c in ipairs(h.counts) do
    data[i] = ("%.17g %.17g %.17g"):format((h.edges[i] + h.edges[i + 1]) / 2, c, h.edges[i + 1] - h.edges[i])
  end
  local body = ("set title %s noenhanced\nset xlabel %s noenhanced\nset ylabel 'count'\nset style fill solid 0.8\n"
    .. "set grid ytics\nset yrange [0:*]\nplot $DATA using 1:2:3 with boxes notitle\n")
    :format(gnuplot.quote(("%s: %d values, %d bins"):format(key, h.total, #h.counts)), gnuplot.quote(key))
  gnuplot.png(out, body, data, "--plot " .. out)
end

-- The text for --hist on the opened container c (from path); opts: bins, plot.
function M.text(c, key, path, opts)
  local t = inspect_leaves.tensor(c, key, "inspect --hist", path)
  local h = T.hist(t, { bins = opts.bins or M.BINS })
  local text = ("%s  %s: %s"):format(path, key, tostring(h))
  if opts.plot then
    plot(h, key, opts.plot)
    text = text .. "\nwrote " .. opts.plot
  end
  return text
end

return M
