-- repl/signals.lua: Ctrl-C for tdrepl (Linux, glibc), without Lua in a signal handler.
-- While readline reads a line, the terminal's interrupt character is switched off, so
-- Ctrl-C reaches readline as a key (bound to "drop this line") instead of a SIGINT
-- that any thread of the process (the kernel pool, OpenBLAS) could take. While a line
-- runs, LuaJIT's own handler is in place: restored before every line, because it
-- resets itself to the default action (end the process) each time it fires. Anything
-- missing here leaves the defaults alone.
local ffi = require("ffi")
local once = require("tensordict.once")

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
    int td_repl_sigaction(int sig, const void *act, void *old) __asm__("sigaction");
  ]]
  return true
end)

local SIGINT, VINTR, TCSANOW = 2, 0, 0
local C = ffi.C
M.available = ok and ffi.os == "Linux"

local saved_action

-- Remembers the SIGINT action in place now (LuaJIT's interrupt handler when tdrepl runs
-- as a script) so restore_action() can put it back.
function M.save_action()
  if not M.available then return end
  saved_action = ffi.new("uint8_t[256]") -- larger than any libc's struct sigaction
  if C.td_repl_sigaction(SIGINT, nil, saved_action) ~= 0 then saved_action = nil end
end

function M.restore_action()
  if saved_action ~= nil then C.td_repl_sigaction(SIGINT, saved_action, nil) end
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
