-- host/gnuplot.lua: PNG charts through gnuplot, for `tdflow inspect --hist KEY --plot` and
-- `tdflow report --png`. gnuplot is optional (Debian's gnuplot-nox; scripts/deps.sh
-- installs it): without it these options fail with how to install it, and nothing else
-- changes. $TDFLOW_GNUPLOT names another gnuplot (or none, to test that path). The
-- terminal is pngcairo where the build has it (anti-aliased), else png (libgd).
local fs = require("tensordict.fs")
local util = require("tensordict.util")

local M = {}

M.MISSING = "gnuplot is not installed (apt-get install gnuplot-nox)"

local function shell_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
-- A gnuplot string literal (single quotes: no escapes inside but '' for ').
local function gp_quote(s) return "'" .. s:gsub("'", "''") .. "'" end
M.quote = gp_quote

local function command() return os.getenv("TDFLOW_GNUPLOT") or "gnuplot" end

-- Whether gnuplot runs here.
function M.available()
  local p = io.popen(shell_quote(command()) .. " --version 2>/dev/null")
  local out = p and p:read("*a") or ""
  if p then p:close() end
  return out:find("gnuplot", 1, true) ~= nil
end

local terminal
local function png_terminal()
  if not terminal then
    local p = io.popen("echo 'set terminal' | " .. shell_quote(command()) .. " 2>&1")
    local list = p and p:read("*a") or ""
    if p then p:close() end
    terminal = list:find("pngcairo", 1, true) and "pngcairo" or "png"
  end
  return terminal
end

-- Draws a PNG at out: data (lines of whitespace-separated columns, strings in double
-- quotes) is written to a temporary file that body refers to as $DATA. who names the
-- option in messages ("--plot out.png").
function M.png(out, body, data, who)
  if not M.available() then util.fail(("%s: %s"):format(who, M.MISSING)) end
  local dir = out:match("^(.*)/[^/]*$") or "."
  if not fs.is_dir(dir) then util.fail(("%s: the folder '%s' does not exist"):format(who, dir)) end
  local data_path, script_path = os.tmpname(), os.tmpname()
  local f = assert(io.open(data_path, "w"))
  f:write(table.concat(data, "\n"), "\n")
  f:close()
  local script = ("set terminal %s size 900,540\nset output %s\n%s\nunset output\n"):format(png_terminal(),
    gp_quote(out), (body:gsub("%$DATA", function() return gp_quote(data_path) end)))
  f = assert(io.open(script_path, "w"))
  f:write(script)
  f:close()
  local p = io.popen(shell_quote(command()) .. " " .. shell_quote(script_path) .. " 2>&1")
  local said = p:read("*a")
  local ok = p:close()
  os.remove(data_path)
  os.remove(script_path)
  if not ok or said:find("error", 1, true) or not fs.exists(out) then
    util.fail(("%s: gnuplot failed: %s"):format(who, (said:gsub("%s+$", ""))))
  end
end

return M
