-- repl/signals.lua: Ctrl-C, SIGTERM and SIGHUP for tdrepl (Linux, glibc), without Lua
-- in a signal handler. For the session the library's counting handler takes SIGINT,
-- SIGTERM and SIGHUP (tensordict/signals.lua), so no signal ends tdrepl by surprise.
-- While readline reads a line, the terminal's interrupt character is switched off, so
-- Ctrl-C reaches readline as a key (bound to "drop this line") instead of a SIGINT
-- that any thread of the process (the kernel pool, OpenBLAS) could take. While a line
-- runs, a count hook (interruptible) raises "interrupted!" in the user's code once a
-- signal came: the code typed at the prompt runs in LuaJIT's interpreter (the REPL
-- switches the JIT off for it), where hooks run, so even a loop the JIT would have
-- compiled stops; the library's own frames are never interrupted (they stop at their
-- own checks: flow.run between batches, a worker's wait). Anything missing here leaves
-- the defaults alone.
local ffi = require("ffi")
local once = require("tensordict.once")
local signals = require("tensordict.signals")
local util = require("tensordict.util")

local M = {}

local ok = pcall(once, "repl_signal_cdefs", function()
  ffi.cdef [[
    typedef struct {
      uint32_t c_iflag, c_oflag, c_cflag, c_lflag;
      uint8_t c_line;
      uint8_t c_cc[32];
      uint32_t c_ispeed, c_ospeed;
    } td_repl_termios;
    int td_repl_tcgetattr(int fd, td_repl_termios *t) __asm__("tcgetattr");
    int td_repl_tcsetattr(int fd, int when, const td_repl_termios *t) __asm__("tcsetattr");
  ]]
  return true
end)

local VINTR, TCSANOW = 0, 0
local C = ffi.C
M.available = ok and ffi.os == "Linux"

-- Instructions between two looks at the signal counts while a line runs.
M.HOOK_COUNT = 1000

-- While a line runs: raises "interrupted!" (or "interrupted by SIGTERM") in the first
-- user frame the interpreter runs once a stopping signal came since snap. Returns a
-- function that puts back the hook that was there.
function M.interruptible(snap)
  local old = { debug.gethook() }
  debug.sethook(function()
    local signo = signals.arrived(snap)
    if not signo then return end
    local info = debug.getinfo(2, "S")
    if not info or util.is_own_source(info.source) then return end -- the library stops itself
    debug.sethook()
    error(signo == signals.SIGINT and "interrupted!" or ("interrupted by " .. signals.name(signo)), 2)
  end, "", M.HOOK_COUNT)
  return function() debug.sethook(unpack(old, 1, 3)) end
end

-- Switches off the interrupt character of terminal fd; returns what to restore (or nil
-- when fd is no terminal or nothing changed).
function M.ctrl_c_as_key(fd)
  if not M.available then return nil end
  local before = ffi.new("td_repl_termios")
  if C.td_repl_tcgetattr(fd, before) ~= 0 or before.c_cc[VINTR] == 0 then return nil end
  local now = ffi.new("td_repl_termios")
  ffi.copy(now, before, ffi.sizeof(now))
  now.c_cc[VINTR] = 0 -- _POSIX_VDISABLE on Linux
  if C.td_repl_tcsetattr(fd, TCSANOW, now) ~= 0 then return nil end
  return { fd = fd, tio = before }
end

function M.restore_tty(saved)
  if saved then C.td_repl_tcsetattr(saved.fd, TCSANOW, saved.tio) end
end

return M
