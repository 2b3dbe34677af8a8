-- host/progress.lua: tdflow's progress on stderr. On a terminal, one line redrawn in
-- place at most 10 times a second: rows, rows/s, elapsed and, when the source knows its
-- length, a bar and the ETA. Elsewhere (a log file, CI), a plain line every few seconds.
local fs = require("tensordict.fs")
local now = require("tensordict.util").now

local M = {}

local function clock(seconds)
  seconds = math.max(0, math.floor(seconds + 0.5))
  local h, m, s = math.floor(seconds / 3600), math.floor(seconds / 60) % 60, seconds % 60
  if h > 0 then return ("%d:%02d:%02d"):format(h, m, s) end
  return ("%02d:%02d"):format(m, s)
end
M.clock = clock

-- 1234567 -> "1,234,567"
local function grouped(n)
  local s = tostring(math.floor(n))
  local out = s:reverse():gsub("(%d%d%d)", "%1,"):reverse()
  return (out:gsub("^,", ""))
end
M.grouped = grouped

-- The status text for rows done of total (nil when unknown) after elapsed seconds.
function M.line(rows, total, elapsed, width)
  local rate = elapsed > 0 and rows / elapsed or 0
  local parts = { ("%s rows"):format(grouped(rows)), ("%s rows/s"):format(grouped(rate)), clock(elapsed) }
  if total and total > 0 then
    local frac = math.min(1, rows / total)
    local bar_width = math.max(10, math.min(30, (width or 80) - 60))
    local filled = math.floor(frac * bar_width + 0.5)
    local bar = ("#"):rep(filled) .. ("."):rep(bar_width - filled)
    table.insert(parts, 1, ("[%s] %3d%%"):format(bar, math.floor(frac * 100)))
    if rate > 0 and rows < total then parts[#parts + 1] = "ETA " .. clock((total - rows) / rate) end
  end
  return (table.concat(parts, "  "))
end

-- A progress reporter: p:update(rows) after each batch, p:done() at the end.
-- opts: total (rows, or nil), quiet, out (a file, default io.stderr), tty (default:
-- whether stderr is a terminal), every (seconds between plain lines, default 5).
function M.new(opts)
  local self = { total = opts.total, quiet = opts.quiet, out = opts.out or io.stderr,
    tty = opts.tty, every = opts.every or 5, started = now(), last = 0, drawn = false }
  self.last = self.started -- plain lines start after the first interval
  if self.tty == nil then self.tty = fs.isatty(2) end
  function self.update(p, rows)
    if p.quiet then return end
    local t = now()
    local elapsed = t - p.started
    if p.tty then
      if t - p.last < 0.1 then return end
      p.out:write("\r", M.line(rows, p.total, elapsed), "\027[K")
      p.out:flush()
      p.drawn = true
    elseif t - p.last >= p.every then
      p.out:write("tdflow: ", M.line(rows, p.total, elapsed), "\n")
      p.out:flush()
    else
      return
    end
    p.last = t
  end
  function self.done(p, rows)
    if p.quiet then return end
    local elapsed = now() - p.started
    if p.tty then
      p.out:write("\r", M.line(rows, p.total, elapsed), "\027[K\n")
    else
      p.out:write("tdflow: ", M.line(rows, p.total, elapsed), "\n")
    end
    p.out:flush()
  end
  return self
end

return M
