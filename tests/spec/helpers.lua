-- helpers.lua: shared assertions for the specs.
local M = {}

-- Calls fn, which must raise; the message must contain every given text (plain find)
-- and blame a line of the spec file that called, not one inside the library.
function M.raises(fn, ...)
  local ok, err = pcall(fn)
  assert(not ok, "expected an error, got none")
  err = tostring(err)
  for _, text in ipairs({ ... }) do
    if not err:find(text, 1, true) then
      error(("error message %q does not contain %q"):format(err, text), 2)
    end
  end
  if not err:find("_spec.lua:%d+: tensordict: ") then
    error(("error %q is not raised at the caller's line with the 'tensordict: ' prefix"):format(err), 2)
  end
  return err
end

-- Element-wise comparison of nested tables of numbers with a tolerance (NaN == NaN).
function M.near(a, b, tol, path)
  path = path or ""
  tol = tol or 0
  if type(a) == "table" and type(b) == "table" then
    if #a ~= #b then return false, ("length %d vs %d at %s"):format(#a, #b, path) end
    for i = 1, #a do
      local ok, why = M.near(a[i], b[i], tol, path .. "[" .. i .. "]")
      if not ok then return false, why end
    end
    return true
  end
  if a ~= a and b ~= b then return true end
  if type(a) == "number" and type(b) == "number" and math.abs(a - b) <= tol then return true end
  if a == b then return true end
  return false, ("%s vs %s at %s"):format(tostring(a), tostring(b), path)
end

function M.assert_near(a, b, tol)
  local ok, why = M.near(a, b, tol)
  if not ok then error("values differ: " .. why, 2) end
end

-- Files and folders for the specs that write to disk.

-- A fresh empty folder (mktemp -d: made atomically, nothing else can hold the name);
-- the caller removes it with M.rmtree.
function M.tmpdir()
  local p = io.popen("mktemp -d")
  local d = p:read("*l")
  p:close()
  assert(d and d ~= "", "mktemp -d failed")
  return d
end

function M.exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- A path that does not exist yet, for a file or folder the code under test makes.
function M.tmpname()
  local name = os.tmpname()
  os.remove(name)
  return name
end

-- Runs a shell command; true when it exited 0 (os.execute gives true or 0 by Lua version).
function M.sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

function M.rmtree(dir)
  return M.sh("rm -rf '" .. dir .. "'")
end

-- Writes text to path (binary: the bytes as given) and returns path.
function M.write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

-- The whole file as a string, or nil when it cannot be opened.
function M.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- The lines a shell command prints, as a list. The pipe is closed here: one left to the
-- GC keeps its shell a zombie child until a collection, which the specs that count this
-- process's children (flow_map_spec) then saw.
function M.output_lines(cmd)
  local p = io.popen(cmd)
  local lines = {}
  for line in p:lines() do lines[#lines + 1] = line end
  p:close()
  return lines
end

-- The current folder (the source tree's root, where the specs run).
function M.pwd() return M.output_lines("pwd")[1] end

-- `ls -a` of a folder: its names, "." and ".." included, one a line.
function M.ls_a(dir)
  local p = io.popen(("ls -a '%s'"):format(dir))
  local names = p:read("*a")
  p:close()
  return names
end

-- Starts cmd in the background, lets it run for a random time of min_us..max_us
-- microseconds (math.random: the caller seeds it and prints the seed) and kills it with
-- SIGKILL. The shell waits for cmd, so the killed process is reaped before this returns
-- (a zombie would still count as a live owner of its temporary files).
function M.kill_at_random(cmd, min_us, max_us)
  local ffi = require("ffi")
  pcall(ffi.cdef, "int kill(int pid, int sig); int usleep(unsigned int usec);")
  local p = io.popen(cmd .. " & echo $!; wait")
  local pid = tonumber(p:read("*l"))
  ffi.C.usleep(math.random(min_us, max_us))
  ffi.C.kill(pid, 9)
  p:close()
end

-- The host's command line run as a user runs it (scripts/tdflow in a child process,
-- its output in files of dir): tdflow(args [, env]) -> stdout, stderr, exit code, and
-- expect(args, code, ...) asserting the code and that the output holds every text.
function M.tdflow_runner(dir)
  local function tdflow(args, env)
    local out, err = dir .. "/stdout", dir .. "/stderr"
    local p = io.popen(("%s scripts/tdflow %s >%s 2>%s; echo $?"):format(env or "", args, out, err))
    local code = tonumber(p:read("*a"))
    p:close()
    return M.read(out), M.read(err), code
  end
  local function expect(args, code, ...)
    local out, err, got = tdflow(args)
    local text = out .. err
    if got ~= code then -- (busted's assert is the specs', not this module's)
      error(("tdflow %s exited %s, expected %d:\n%s"):format(args, tostring(got), code, text), 2)
    end
    for _, needle in ipairs({ ... }) do
      if not text:find(needle, 1, true) then
        error(("tdflow %s: output does not contain %q:\n%s"):format(args, needle, text), 2)
      end
    end
    return out, err
  end
  return tdflow, expect
end

-- Lists of batches (what flow.Collect and a source's iter give).

-- { a, a + 1, ..., b }
function M.range(a, b)
  local out = {}
  for i = a, b do out[#out + 1] = i end
  return out
end

-- The row count of every batch.
function M.sizes(list)
  local out = {}
  for i, td in ipairs(list) do out[i] = #td end
  return out
end

-- The values of one 1-d leaf over every batch, joined in order.
function M.column(list, key)
  local out = {}
  for _, td in ipairs(list) do
    for _, v in ipairs(td[key]:totable()) do out[#out + 1] = v end
  end
  return out
end

return M
