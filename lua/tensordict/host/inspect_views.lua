-- host/inspect_views.lua: the options of `tdflow inspect` beyond the tree, and which view
-- a call asks for: --stats (host/inspect_stats.lua), --head N (inspect_head.lua), --hist KEY
-- with --bins and --plot (inspect_hist.lua); none of them: the tree (inspect.lua).
local util = require("tensordict.util")
local inspect = require("tensordict.host.inspect")
local inspect_stats = require("tensordict.host.inspect_stats")
local inspect_head = require("tensordict.host.inspect_head")
local inspect_hist = require("tensordict.host.inspect_hist")

local M = {}

-- Adds the options to the inspect command (count_arg: tdflow's converter of counts).
function M.add_options(cmd, count_arg)
  local stats = cmd:flag("--stats", "Per tensor leaf: count, mean, std, min, max (finite values), NaN and inf "
    .. "counts, and distinct values of bool and integer leaves (up to 1000), streamed over the files.")
  local head = cmd:option("--head", "The first N rows as a table, a column per leaf.")
    :convert(count_arg("--head", 1)):argname("N")
  local hist = cmd:option("--hist", "A histogram of the leaf KEY (nested keys with dots) in the terminal.")
    :argname("KEY")
  cmd:option("--bins", "Bins of --hist (default 10)."):convert(count_arg("--bins", 1)):argname("N")
  cmd:option("--plot", "With --hist: also draw the histogram with gnuplot into FILE.png."):argname("FILE.png")
  cmd:mutex(stats, head, hist)
end

-- The text of `tdflow inspect` for its parsed args.
function M.text(args)
  if (args.bins or args.plot) and not args.hist then
    util.fail(("inspect: %s needs --hist KEY"):format(args.bins and "--bins" or "--plot"))
  end
  if args.stats then return inspect_stats.text(args.path) end
  if args.head then return inspect_head.text((inspect.open(args.path)), args.head, args.path) end
  if args.hist then
    return inspect_hist.text((inspect.open(args.path)), args.hist, args.path, { bins = args.bins, plot = args.plot })
  end
  return inspect.text(args.path)
end

return M
