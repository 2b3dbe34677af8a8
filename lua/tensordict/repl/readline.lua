-- repl/readline.lua: line input for tdrepl. GNU readline through the FFI when libreadline
-- is installed (line editing, in-memory history, tab completion); plain lines from a
-- file handle otherwise. The history file is read by readline and appended to by plain
-- Lua writes, so both editors keep the same file format (one line per entry).
--   local rl = require("tensordict.repl.readline")
--   local ed = rl.open{ history = path, complete = fn(line_before_cursor) -> words, token,
--                       readline = true|false, input = fh, output = fh }
--   local line = ed:read("> ")   -- nil at end of input (Ctrl-D), false after Ctrl-C
--   ed:close()                   -- trims the history file
local ffi = require("ffi")

local M = {}

M.HISTORY_LINES = 1000 -- entries kept in the history file

-- The characters that end a completion word: everything but identifiers, '.' and ':',
-- so "td:ma" or "T.flow.Ap" reach the completer whole (repl.complete splits them).
M.WORD_BREAKS = " \t\n\"'`@$><=;|&{}()[],+-*/%^~#!?\\"

local once = require("tensordict.once")
local fs = require("tensordict.fs") -- isatty
local signals = require("tensordict.repl.signals")

-- Declared once per Lua state; malloc/free under private names so no other module's
-- declaration of them can clash with ours.
once("readline_cdefs", function()
  ffi.cdef [[
    char *readline(const char *prompt);
    void add_history(const char *line);
    void using_history(void);
    int read_history(const char *filename);
    typedef char **td_rl_completion_fn(const char *text, int start, int end);
    td_rl_completion_fn *rl_attempted_completion_function;
    int rl_attempted_completion_over;
    int rl_completion_suppress_append;
    char *rl_line_buffer;
    const char *rl_readline_name;
    const char *rl_completer_word_break_characters;
    typedef int td_rl_command_fn(int count, int key);
    int rl_bind_key(int key, td_rl_command_fn *fn);
    int rl_insert_text(const char *text);
    void rl_redisplay(void);
    int rl_newline(int count, int key);
    void *td_rl_malloc(size_t size) __asm__("malloc");
    void td_rl_free(void *ptr) __asm__("free");
  ]]
  return true
end)

-- The library, found once; the completion callback and the completer it calls live
-- in the registry too: readline holds the callback, and a reload of this module must
-- neither make a second one nor leave the first calling a stale completer.
local lib_ok, lib = pcall(ffi.load, "readline.so.8")
if not lib_ok then lib_ok, lib = pcall(ffi.load, "readline") end
M.available = lib_ok
M.load_error = not lib_ok and tostring(lib) or nil
local shared = once("readline_state", function() return {} end)

M.isatty = fs.isatty

-------------------------------------------------------------------------- history file

local function read_lines(path)
  local f = io.open(path, "r")
  if not f then return {} end
  local out = {}
  for line in f:lines() do out[#out + 1] = line end
  f:close()
  return out
end

-- Appends one entry at once, so a killed session keeps what was typed before.
local function append_line(path, line)
  local f = io.open(path, "a")
  if not f then return end
  f:write(line, "\n")
  f:close()
end

-- Keeps the newest HISTORY_LINES entries.
local function trim_file(path)
  local lines = read_lines(path)
  if #lines <= M.HISTORY_LINES then return end
  local f = io.open(path, "w")
  if not f then return end
  for i = #lines - M.HISTORY_LINES + 1, #lines do f:write(lines[i], "\n") end
  f:close()
end

------------------------------------------------------------------------ the editors

local Editor = {}
Editor.__index = Editor

-- Remembers a line typed (not blank, not a repeat of the previous one).
function Editor:remember(line)
  if line:find("^%s*$") or line == self.last then return end
  self.last = line
  if self.rl then lib.add_history(line) end
  if self.history then append_line(self.history, line) end
end

function Editor:close()
  if self.closed then return end
  self.closed = true
  if self.rl then lib.rl_attempted_completion_function = nil end
  if self.history then trim_file(self.history) end
end

-- Plain lines: the prompt is written only when asked to (an interactive terminal). A
-- read cut short by a signal (Ctrl-C, counted by the session's handler) gives false,
-- as Ctrl-C in readline does; any other failure ends the input.
local function plain_read(self, prompt)
  if self.prompt and prompt then
    self.output:write(prompt)
    self.output:flush()
  end
  local line, err = self.input:read("*l")
  if line == nil and err and tostring(err):find("Interrupted system call", 1, true) then return false end
  if line ~= nil then self:remember(line) end
  return line
end

-- The array readline takes from a completer (it frees it, so malloc'd): the
-- replacement first (the one match, or the prefix all share), then the matches, NULL.
local function matches_array(words)
  local n = #words
  local arr = ffi.cast("char **", ffi.C.td_rl_malloc(ffi.sizeof("char *") * (n + 2)))
  local function cstr(s)
    local p = ffi.cast("char *", ffi.C.td_rl_malloc(#s + 1))
    ffi.copy(p, s)
    return p
  end
  local common = words[1]
  for i = 2, n do
    local w, j = words[i], 0
    while j < #common and j < #w and common:byte(j + 1) == w:byte(j + 1) do j = j + 1 end
    common = common:sub(1, j)
  end
  arr[0] = cstr(common)
  for i = 1, n == 1 and 0 or n do arr[i] = cstr(words[i]) end
  arr[n == 1 and 1 or n + 1] = nil
  return arr
end

local function on_complete(text, start, finish)
  lib.rl_attempted_completion_over = 1 -- never fall back to file names
  lib.rl_completion_suppress_append = 1
  local ok, arr = pcall(function()
    local word = ffi.string(text)
    local before = ffi.string(lib.rl_line_buffer, finish)
    if not shared.complete then return nil end
    -- candidates replace the completer's token; readline replaces its own word, a
    -- suffix of that token when they differ (a path's last part after '/')
    local words, token = shared.complete(before, word, start)
    token = token or word
    if token:sub(#token - #word + 1) ~= word then return nil end
    local keep = {}
    for _, w in ipairs(words or {}) do
      if w:sub(1, #token) == token then keep[#keep + 1] = word .. w:sub(#token + 1) end
    end
    if #keep == 0 then return nil end
    return matches_array(keep)
  end)
  if ok then return arr end
  return nil -- a failing completer must not take the session down
end

-- Ctrl-C, bound as a key while a line is read (see repl_signals): marks the line as
-- dropped, shows ^C after it, and ends it.
local function on_ctrl_c()
  shared.interrupted = true
  lib.rl_insert_text("^C")
  lib.rl_redisplay()
  return (lib.rl_newline(1, 10)) -- ends the line as Enter does (cursor to a new line)
end

-- readline calls back into Lua: that must not happen from compiled code.
-- Returns the line, nil at the end of input, or false after Ctrl-C.
local function rl_read(self, prompt)
  shared.interrupted = false
  local tty = signals.ctrl_c_as_key(0)
  local ok, p = pcall(lib.readline, prompt or "")
  signals.restore_tty(tty)
  if not ok then error(p, 0) end
  local line = p ~= nil and ffi.string(p) or nil
  if p ~= nil then ffi.C.td_rl_free(p) end
  if shared.interrupted then return false end
  if line ~= nil then self:remember(line) end
  return line
end
jit.off(rl_read)

-- readline keeps these pointers: the buffers live as long as the Lua state.
local name_buf = once("readline_name", function() return ffi.new("char[?]", 7, "tdrepl") end)
local breaks_buf = once("readline_breaks", function()
  return (ffi.new("char[?]", #M.WORD_BREAKS + 1, M.WORD_BREAKS))
end)

-- opts: history (file path or nil); complete (fn(line_before_cursor, word) -> the
-- candidates and the token they replace, which ends with word (default: word));
-- readline (false: plain lines even when libreadline is there; readline reads the
-- terminal on stdin); input, output (plain mode; default io.stdin/io.stdout); prompt
-- (plain mode writes prompts).
function M.open(opts)
  opts = opts or {}
  local self = setmetatable({
    history = opts.history,
    input = opts.input or io.stdin,
    output = opts.output or io.stdout,
    prompt = opts.prompt,
  }, Editor)
  if self.history then
    -- make sure the file can be written now, so a bad path is said once, up front
    local f, err = io.open(self.history, "a")
    if not f then
      self.history_error = err
      self.history = nil
    else
      f:close()
    end
  end
  if opts.readline ~= false and M.available then
    self.rl = true
    self.read = rl_read
    lib.using_history()
    if self.history then lib.read_history(self.history) end
    lib.rl_readline_name = name_buf
    lib.rl_completer_word_break_characters = breaks_buf
    shared.complete = opts.complete
    if not shared.callback then
      shared.callback = ffi.cast("td_rl_completion_fn *", on_complete)
    end
    lib.rl_attempted_completion_function = shared.callback
    if signals.available then
      shared.ctrl_c = shared.ctrl_c or ffi.cast("td_rl_command_fn *", on_ctrl_c)
      lib.rl_bind_key(3, shared.ctrl_c)
    end
  else
    self.read = plain_read
  end
  return self
end

return M
