-- proc.lua: child processes for the host (`tdflow sweep` runs each variant as a child
-- `tdflow run`): spawn with posix_spawn (no fork of a process that holds thread pools:
-- glibc's posix_spawn is a vfork-like clone and runs no fork handlers), an environment
-- of our own and stdout/stderr into a file; reap without blocking; send signals. Linux,
-- glibc (the opaque spawn structs are given room enough for glibc's 80 and 336 bytes).
local ffi = require("ffi")
local once = require("tensordict.once")
local util = require("tensordict.util")
require("tensordict.fs") -- declares strerror

once("proc_cdefs", function()
  ffi.cdef [[
    typedef struct { uint64_t space[64]; } td_proc_actions;
    typedef struct { uint64_t space[64]; } td_proc_attr;
    typedef struct { uint64_t bits[16]; } td_proc_sigset;
    typedef struct { int64_t tv_sec; int64_t tv_nsec; } td_proc_timespec;
    int td_proc_spawn(int *pid, const char *path, const td_proc_actions *fa, const td_proc_attr *attr,
      char *const argv[], char *const envp[]) __asm__("posix_spawn");
    int td_proc_actions_init(td_proc_actions *fa) __asm__("posix_spawn_file_actions_init");
    int td_proc_actions_destroy(td_proc_actions *fa) __asm__("posix_spawn_file_actions_destroy");
    int td_proc_actions_addopen(td_proc_actions *fa, int fd, const char *path, int oflag, uint32_t mode)
      __asm__("posix_spawn_file_actions_addopen");
    int td_proc_actions_adddup2(td_proc_actions *fa, int fd, int newfd) __asm__("posix_spawn_file_actions_adddup2");
    int td_proc_attr_init(td_proc_attr *attr) __asm__("posix_spawnattr_init");
    int td_proc_attr_destroy(td_proc_attr *attr) __asm__("posix_spawnattr_destroy");
    int td_proc_attr_setflags(td_proc_attr *attr, short flags) __asm__("posix_spawnattr_setflags");
    int td_proc_attr_setsigmask(td_proc_attr *attr, const td_proc_sigset *mask) __asm__("posix_spawnattr_setsigmask");
    int td_proc_waitpid(int pid, int *status, int options) __asm__("waitpid");
    int td_proc_kill(int pid, int sig) __asm__("kill");
    int td_proc_nanosleep(const td_proc_timespec *req, td_proc_timespec *rem) __asm__("nanosleep");
    long td_proc_readlink(const char *path, char *buf, size_t size) __asm__("readlink");
    extern char **environ;
  ]]
  return true
end)

local C = ffi.C
local M = {}

local O_WRONLY, O_CREAT, O_TRUNC = 1, 64, 512
local POSIX_SPAWN_SETSIGMASK = 8
local WNOHANG = 1
local EINTR, ECHILD = 4, 10

local function errno_text(e) return (ffi.string(C.strerror(e))) end

-- The environment of this process as {"NAME=value", ...}.
function M.environment()
  local out = {}
  local env = C.environ
  local i = 0
  while env[i] ~= nil do
    out[#out + 1] = ffi.string(env[i])
    i = i + 1
  end
  return out
end

-- The executable of this process (the LuaJIT binary running the host).
function M.self_exe()
  local buf = ffi.new("char[4096]")
  local n = C.td_proc_readlink("/proc/self/exe", buf, 4096)
  if n <= 0 or n >= 4096 then return nil end
  return (ffi.string(buf, n))
end

-- A NULL-terminated char *[] of the strings (kept alive by the returned anchor).
local function string_array(list)
  local arr = ffi.new("char *[?]", #list + 1)
  local keep = {}
  for i, s in ipairs(list) do
    local buf = ffi.new("char[?]", #s + 1, s)
    keep[i] = buf
    arr[i - 1] = buf
  end
  arr[#list] = nil
  return arr, keep
end

-- Starts argv[1] (a path) with the arguments argv and the environment env (a list of
-- "NAME=value"), its stdout and stderr written to the file log (made or emptied), no
-- signal blocked. Returns the pid, or nil and why.
function M.spawn(argv, env, log)
  local fa, attr = ffi.new("td_proc_actions"), ffi.new("td_proc_attr")
  C.td_proc_actions_init(fa)
  C.td_proc_attr_init(attr)
  if log then
    C.td_proc_actions_addopen(fa, 1, log, O_WRONLY + O_CREAT + O_TRUNC, 420) -- 0644
    C.td_proc_actions_adddup2(fa, 1, 2)
  end
  C.td_proc_attr_setsigmask(attr, ffi.new("td_proc_sigset")) -- empty: nothing blocked
  C.td_proc_attr_setflags(attr, POSIX_SPAWN_SETSIGMASK)
  local pid = ffi.new("int[1]")
  local cargv, keep_argv = string_array(argv)
  local cenv, keep_env = string_array(env)
  local rc = C.td_proc_spawn(pid, argv[1], fa, attr, cargv, cenv)
  C.td_proc_actions_destroy(fa)
  C.td_proc_attr_destroy(attr)
  local _ = keep_argv and keep_env
  if rc ~= 0 then return nil, ("cannot start %s: %s"):format(argv[1], errno_text(rc)) end
  return pid[0]
end

-- An exit status as the shell shows it: the code, or 128 + the signal that ended it.
local function status_code(status)
  local sig = bit.band(status, 0x7f)
  if sig == 0 then return (bit.band(bit.rshift(status, 8), 0xff)) end
  return 128 + sig
end

-- A child that ended, without waiting: its pid and exit code (128 + signal when a
-- signal ended it), or nil when none has ended (or there is no child).
function M.reap()
  local status = ffi.new("int[1]")
  while true do
    local pid = C.td_proc_waitpid(-1, status, WNOHANG)
    if pid > 0 then return pid, status_code(status[0]) end
    if pid == 0 then return nil end
    local e = ffi.errno()
    if e == ECHILD then return nil end
    if e ~= EINTR then util.fail("waitpid: " .. errno_text(e)) end
  end
end

-- Sends signal signo to process pid; false when it is gone.
function M.kill(pid, signo) return C.td_proc_kill(pid, signo) == 0 end

-- Sleeps seconds (less when a signal arrives: callers look at the signal counts).
function M.sleep(seconds)
  local ts = ffi.new("td_proc_timespec")
  ts.tv_sec = math.floor(seconds)
  ts.tv_nsec = math.floor((seconds - math.floor(seconds)) * 1e9)
  C.td_proc_nanosleep(ts, nil)
end

M.SIGKILL, M.SIGTERM = 9, 15

return M
