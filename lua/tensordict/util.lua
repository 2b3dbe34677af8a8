-- util.lua: the checks every Lua module shares: errors raised at the caller's line,
-- integer and dim validation, and shape arguments read into one reused C buffer.
local ffi = require("ffi")
local C = require("tensordict.lib").C

local M = {}

-- Errors blame the user's line: the first stack frame outside this folder's modules.
-- Walking the stack (on the error path only) keeps that right through tail calls and
-- metamethods, where counting levels by hand goes wrong.
local own_prefix = "@" .. ((debug.getinfo(1, "S").source:match("^@(.*[/\\])[^/\\]*$")) or "")

-- True for a chunk of this folder's modules (flow/ and host/ included). A path that
-- leaves the folder ("lua/tensordict/../../plugins/x.lua", how the plugin loader names
-- the tree's plugins) is not the library's.
local function is_own(source)
  return source:sub(1, #own_prefix) == own_prefix and not source:find("/../", #own_prefix, true)
end
M.is_own_source = is_own

-- The main chunks of the hosts' launchers (scripts/tdflow, scripts/tdrepl): ours, not
-- the user's, and they call the library only to start a host, so an error that reaches
-- one of them names no line (the host names the user's place: a recipe's step).
local host_chunks = {}

-- Marks the chunk source (debug.getinfo(1, "S").source of a launcher) as a host's.
function M.host_chunk(source) host_chunks[source] = true end

-- The error level of the first frame outside the library and outside the chunk skip (a
-- plugin's file: its users are blamed, not the plugin); the first frame of skip itself
-- when nothing outside it called; 0 (no position) when that is a host's launcher.
local function user_level(skip)
  local level, fallback = 3, nil -- 1: user_level, 2: fail, 3: fail's caller
  while true do
    local info = debug.getinfo(level, "S")
    if not info then return fallback or 1 end
    if info.what ~= "C" and not is_own(info.source) then
      if host_chunks[info.source] then return 0 end
      if info.source ~= skip then return level - 1 end
      fallback = fallback or level - 1
    end
    level = level + 1
  end
end

-- Raises "tensordict: msg" at the user's line.
function M.fail(msg)
  error("tensordict: " .. msg, user_level())
end

-- Raises "tensordict: msg" at the first line outside the library and outside the chunk
-- whose source is skip (flow.kit's fail: a plugin's errors blame the plugin's user).
function M.fail_beyond(msg, skip)
  error("tensordict: " .. msg, user_level(skip))
end

-- Raises the message the C library left for the failed call.
function M.c_fail()
  error("tensordict: " .. ffi.string(C.td_last_error()), user_level())
end

-- Raises for a method called on something that is not its object (t.sum() instead of
-- t:sum(), or a method table's function given a number). The method's name is found by
-- looking up the function the user called in methods (a tail call such as
-- `return t.sum()` leaves no call name in the frame), on this error path only.
function M.bad_self(kind, got, methods)
  -- The method is the outermost library frame that is in methods; failing that, the
  -- call name of the outermost library frame (C frames such as pcall's are stepped over).
  local by_func = {}
  for k, f in pairs(methods or {}) do by_func[f] = k end
  local level, name, outer = 3, nil, nil
  while true do
    local info = debug.getinfo(level, "Sf")
    if not info then break end
    if info.what ~= "C" then
      if not is_own(info.source) then break end
      name = by_func[info.func] or name
      outer = level
    end
    level = level + 1
  end
  if not name and outer then name = debug.getinfo(outer, "n").name end
  name = name or "method"
  M.fail(("%s: expected %s, got %s (call it as x:%s(...))"):format(name, kind,
    M.describe(got), name))
end

-- The options table of a call, checked: nil (or a NULL cdata, which == nil) gives {};
-- anything but a plain table raises naming the options; with fields ({name = "number",
-- other = "boolean|string", ...}, "any" for any type), an unknown option or one of the
-- wrong type raises too. The one checker every call's options go through.
local NO_OPTIONS = setmetatable({}, { __newindex = function() error("options are read-only", 2) end })
function M.options(call, opts, fields)
  if type(opts) == "nil" then return NO_OPTIONS end
  local names
  if fields then
    names = {}
    for k in pairs(fields) do names[#names + 1] = k end
    table.sort(names)
  end
  if type(opts) ~= "table" or getmetatable(opts) ~= nil then
    local shape = names and (" {" .. table.concat(names, " =, ") .. " =}") or ""
    M.fail(("%s: options must be a table%s, got %s"):format(call, shape, M.describe(opts)))
  end
  if fields then
    for k, v in pairs(opts) do
      local want = fields[k]
      if want == nil then
        M.fail(("%s: unknown option '%s' (options: %s)"):format(call, tostring(k),
          table.concat(names, ", ")))
      end
      if want ~= "any" and want ~= true and not ("|" .. want .. "|"):find("|" .. type(v) .. "|", 1, true) then
        M.fail(("%s: option %s must be a %s, got %s"):format(call, k, want:gsub("|", " or "),
          M.describe(v)))
      end
    end
  end
  return opts
end

-- The arguments of a call taking numbers or one table of them (t:permute(2, 1) or
-- t:permute({2, 1})) as one array; none gives {}. A nil among them raises (an array
-- cannot hold it, and every caller wants numbers).
function M.list_args(call, ...)
  local n = select("#", ...)
  if n == 1 and type((...)) == "table" then return (...) end
  local list = { ... }
  for i = 1, n do
    if list[i] == nil then M.fail(("%s: argument %d is nil"):format(call, i)) end
  end
  return list
end

function M.is_int(x)
  return type(x) == "number" and x % 1 == 0
end

-- Recognisers for the library's own types, set by tensor/core.lua and dict/core.lua, so that
-- messages say "a tensor" rather than "a table".
M.kinds = {}

-- A short description of any Lua value for error messages.
function M.describe(x)
  if type(x) == "string" then return ("'%s'"):format(x) end
  if type(x) == "number" or type(x) == "boolean" or x == nil then return (tostring(x)) end
  for name, is in pairs(M.kinds) do
    if is(x) then return name end
  end
  return "a " .. type(x)
end

-- 1-based (negative from the end) dim d of a tensor of n dims -> 0-based.
-- extra = 1 admits one past the end (unsqueeze). what names the dims in messages
-- ("a tensor of %d dims" unless given, e.g. "%d batch dims").
function M.dim0(call, d, n, extra, what)
  local limit = n + (extra or 0)
  if not M.is_int(d) or d == 0 or d > limit or d < -limit then
    local of = (what or "a tensor of %d dims"):format(n)
    if limit == 0 then
      M.fail(("%s: dim %s is out of range: there are no dims (%s)"):format(call, M.describe(d), of))
    end
    M.fail(("%s: dim %s is out of range for %s (expected 1..%d or -%d..-1)")
      :format(call, M.describe(d), of, limit, limit))
  end
  return d > 0 and d - 1 or limit + d
end

M.shape_buf = ffi.new("int64_t[?]", C.TD_MAX_DIMS)
M.dims_buf = ffi.new("int32_t[?]", C.TD_MAX_DIMS)

-- Reads a shape given as one table or as leading numbers into shape_buf.
-- Returns the dim count and the index in ... of the first argument after the shape.
-- allow_neg1: -1 is accepted (view, reshape, expand resolve it in C).
function M.read_shape(call, allow_neg1, ...)
  local first = ...
  local sizes, count, nxt
  if type(first) == "table" then
    sizes, count, nxt = first, #first, 2
  else
    sizes, count = { ... }, 0
    while type(sizes[count + 1]) == "number" do count = count + 1 end
    nxt = count + 1
  end
  if count > C.TD_MAX_DIMS then
    M.fail(("%s: %d dims given, at most %d supported"):format(call, count, C.TD_MAX_DIMS))
  end
  local buf = M.shape_buf
  for i = 1, count do
    local s = sizes[i]
    -- 2^63 and past would wrap to a negative int64 and be reported as that number.
    if not M.is_int(s) or (s < 0 and not (allow_neg1 and s == -1)) or s >= 2 ^ 63 then
      local parts = {}
      for j = 1, count do parts[j] = M.is_int(sizes[j]) and ("%.0f"):format(sizes[j]) or tostring(sizes[j]) end
      M.fail(("%s: size %s in shape [%s] is not %s"):format(call, M.describe(s),
        table.concat(parts, ", "), (allow_neg1 and "an integer >= -1" or "a non-negative integer")
          .. (M.is_int(s) and s >= 2 ^ 63 and " below 2^63" or "")))
    end
    buf[i - 1] = s
  end
  return count, nxt
end

-- A number for messages that must not round it (tostring keeps 14 digits, so 2^64
-- shows as 1.844674407371e+19): an integer below 1e21 in full, others in the fewest of
-- 14..17 significant digits that read back as v.
function M.number_text(v)
  if v ~= v or v == math.huge or v == -math.huge then return (tostring(v)) end
  if v % 1 == 0 and math.abs(v) < 1e21 then return ("%.0f"):format(v) end -- an integer: every digit
  for digits = 14, 17 do
    local s = ("%." .. digits .. "g"):format(v)
    if tonumber(s) == v then return s end
  end
  return ("%.17g"):format(v)
end

-- A byte count for messages: "512 B", "1.5 GiB".
function M.bytes_text(bytes)
  local units = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" }
  local i = 1
  while bytes >= 1024 and i < #units do bytes, i = bytes / 1024, i + 1 end
  return i == 1 and ("%d B"):format(bytes) or ("%.1f %s"):format(bytes, units[i])
end

local function format_list(t)
  local parts = {}
  for i = 1, #t do parts[i] = tostring(t[i]) end
  return "[" .. table.concat(parts, ", ") .. "]"
end
M.format_list = format_list

-- Shapes, strides and batch sizes print as [3, 4] and compare by value with each other
-- (t:shape() == u:shape()); they stay plain arrays otherwise.
M.size_mt = {
  __tostring = format_list,
  __eq = function(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do
      if a[i] ~= b[i] then return false end
    end
    return true
  end,
}

-- A Lua array of the n int64 values at p (a shape, strides or a batch size).
function M.int64_list(p, n)
  local t = {}
  for i = 1, n do t[i] = tonumber(p[i - 1]) end
  return (setmetatable(t, M.size_mt))
end

-- Wall-clock seconds from a monotonic clock (os.clock sums CPU time over threads).
local timespec = require("tensordict.once")("timespec", function()
  ffi.cdef [[
    typedef struct { int64_t tv_sec; int64_t tv_nsec; } td_lua_timespec;
    int clock_gettime(int clock, td_lua_timespec *ts);
  ]]
  return (ffi.new("td_lua_timespec"))
end)
function M.now()
  ffi.C.clock_gettime(1, timespec) -- CLOCK_MONOTONIC
  return tonumber(timespec.tv_sec) + tonumber(timespec.tv_nsec) * 1e-9
end

-- The wall clock (CLOCK_REALTIME) as seconds and nanoseconds since the epoch, for
-- timestamps (now() is for durations: it never jumps).
function M.wall_clock()
  ffi.C.clock_gettime(0, timespec)
  return tonumber(timespec.tv_sec), tonumber(timespec.tv_nsec)
end


-- Edit distance, for "did you mean" hints on unknown names.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:sub(i, i) == b:sub(j, j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

-- The keys of table t as strings, sorted (a stable order for messages and output).
function M.sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = tostring(k) end
  table.sort(keys)
  return keys
end

-- The closest of names to word (case-insensitive), or nil when none is close. Names
-- that are not strings (the keys of a Lua table given where an object was expected)
-- are never close.
function M.nearest(word, names)
  local best, best_d = nil, math.huge
  if type(word) ~= "string" then return nil end
  for _, name in ipairs(names) do
    local d = type(name) == "string" and distance(word:lower(), name:lower()) or math.huge
    if d < best_d then best, best_d = name, d end
  end
  if best and best_d <= math.max(2, math.floor(#word / 3)) then return best end
  return nil
end

-- The hint an unknown name's message ends with: " (did you mean 'best'?)", or "" when
-- no name is close (or word is not a string).
function M.did_you_mean(word, names)
  local best = type(word) == "string" and M.nearest(word, names)
  return best and (" (did you mean '" .. best .. "'?)") or ""
end

return M
