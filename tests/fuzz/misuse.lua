-- misuse.lua: random calls of every public function, method and metamethod with wrong,
-- odd and hostile arguments. The only outcomes allowed are a result and a
-- "tensordict: " error; anything else (an internal Lua error, a C crash) is a finding.
--   luajit tests/fuzz/misuse.lua [calls] [seed] [surfaces]   (make fuzz: 100,000 calls)
-- surfaces: a comma-separated list of api (tensors and TensorDicts), flow (T.flow's
-- nodes), recipe (recipe.load and recipe.check) and dist (T.dist on one rank); all of
-- them by default (tests/fuzz/misuse_surfaces.lua has the last three).
-- The spec tests/spec/misuse_spec.lua runs a few thousand with a fixed seed.
-- It runs inside a scratch folder (calls such as td:memmap("x") write there).
local ffi = require("ffi")
local T = require("tensordict")
local surfaces = require("misuse_surfaces")
local now = require("tensordict.util").now

local M = {}

-- Calls left out: they end the process's library state, fork workers or wait for input.
local SKIP = {
  shutdown = true, map = true, map_iter = true, Map = true, repl = true, flow = true,
  manual_seed = false,
}

-- The values arguments are drawn from; objects are rebuilt every few hundred calls,
-- since calls free, lock and change them.
local SCALARS = {
  true, false, 0, 1, 2, 3, -1, -2, 1.5, -0.5, 0 / 0, math.huge, -math.huge, 2 ^ 45,
  2 ^ 53, 2 ^ 62, 2 ^ 63, -2 ^ 63, 2 ^ 40, "", "x", "a", "float32", "int64", "bool", "cuda",
  "cpu", "sum", "..", "/", "a/b", "\0",
}

local function tensors()
  local t = {
    T.zeros(3), T.arange(1, 6), T.ones(2, 3), T.tensor(1.5), T.zeros(0), T.zeros(2, 0, 3),
    T.tensor({ true, false, true }), T.arange(1, 12, "float32"):view(3, 4):t(),
    T.tensor({ 1, 2, 3 }, "int64"), T.ones(2, 2, "float64"), T.zeros(3, "uint8"),
    T.tensor({ 0 / 0, math.huge, -1 }), T.ones(4, "float16"), T.ones(2, "bfloat16"),
  }
  local freed = T.ones(2)
  freed:free()
  t[#t + 1] = freed
  return t
end

local function dicts(dir, n)
  local td = T.TensorDict({ a = T.zeros(3, 2), b = T.arange(1, 3), s = "x", n = { c = T.ones(3) } }, { 3 })
  local locked = T.TensorDict({ a = T.ones(2) }, { 2 }, { lock = true })
  local freed = T.TensorDict({ a = T.ones(2) }, { 2 })
  freed:free()
  local stacked = T.stack({ T.TensorDict({ s = "p", x = T.zeros(2) }), T.TensorDict({ s = "q", x = T.ones(2) }) })
  local out = { td, locked, freed, stacked, T.TensorDict(), T.TensorDict({ e = T.zeros(0, 2) }, { 0 }),
    td[{ { 2, 3 } }], T.TensorDict({ x = T.ones(2, 3) }, { 2, 3 }, { names = { "r", "c" } }) }
  local path = ("%s/pool%d"):format(dir, n)
  local ok, ro = pcall(function()
    T.TensorDict({ a = T.zeros(4, 2), s = "v" }, { 4 }):memmap(path)
    return T.load_memmap(path) -- read-only
  end)
  if ok then out[#out + 1] = ro end
  return out
end

local function pool(dir, n, on)
  local p = {}
  for _, v in ipairs(SCALARS) do p[#p + 1] = v end -- nil comes from pick()
  for _, v in ipairs(tensors()) do p[#p + 1] = v end
  for _, v in ipairs(dicts(dir, n)) do p[#p + 1] = v end
  local extra = {
    {}, { 1, 2 }, { {} }, { -1 }, { 0 }, { 2 ^ 40 }, { 1, { 2, 3 } }, { "a" }, { "n", "c" },
    { a = 1 }, { { 1, 2, 3 } }, { T.zeros(2) }, { dim = 1 }, { keepdim = true }, { reduce = true },
    { correction = "x" }, { strict = false }, { include_nested = true }, { mode = "w" },
    function(x) return x end, function() error("user error") end, function() return 5 end,
    ffi.new("int[3]"), ffi.new("double", 1), ffi.new("int64_t", 3), ffi.cast("void *", 0),
    T.newaxis, T.ellipsis, T, T.Tensor, coroutine.create(function() end),
  }
  for _, v in ipairs(extra) do p[#p + 1] = v end
  if on.flow or on.recipe then surfaces.values(p, dir, n) end
  if on.dist then
    for _, v in ipairs(surfaces.DIST_VALUES) do p[#p + 1] = v end
  end
  return p
end

local function describe(v)
  if type(v) == "string" then return ("%q"):format(v) end
  if type(v) == "table" and T.is_tensor(v) then
    local ok, s = pcall(function() return ("tensor(%s %s)"):format(v:dtype(), tostring(v:shape())) end)
    return ok and s or "tensor(freed)"
  end
  if T.is_tensordict(v) then
    local ok, s = pcall(function() return ("TensorDict(%s)"):format(tostring(v:batch_size())) end)
    return ok and s or "TensorDict(freed)"
  end
  if type(v) == "table" then
    local parts = {}
    for k, x in pairs(v) do
      parts[#parts + 1] = (type(k) == "number" and "" or tostring(k) .. "=") .. tostring(x)
      if #parts > 4 then break end
    end
    return "{" .. table.concat(parts, ", ") .. "}"
  end
  return tostring(v)
end

-- The targets: {name, function(receiver?, args...), receiver}: receiver nil (no
-- receiver), "tensor", "dict", "object" (either), a predicate, or "pool" (the function
-- takes the pool itself and draws what it needs).
local function targets(on)
  local out = {}
  for _, name in ipairs({ "flow", "recipe", "dist" }) do
    if on[name] then
      for _, t in ipairs(surfaces[name .. "_targets"]()) do out[#out + 1] = t end
    end
  end
  if not on.api then return out end
  local function add(prefix, tbl, with_self)
    local names = {}
    for k, f in pairs(tbl) do
      if type(f) == "function" and type(k) == "string" and not SKIP[k] then names[#names + 1] = k end
    end
    table.sort(names)
    for _, k in ipairs(names) do out[#out + 1] = { prefix .. k, tbl[k], with_self } end
  end
  add("T.", T, nil)
  add("Tensor:", T.Tensor, "tensor")
  add("TensorDict:", T.TensorDict.methods, "dict")
  add("TensorDict.", { fromkeys = T.TensorDict.fromkeys }, nil)
  -- metamethods through the operators
  local ops = {
    ["a+b"] = function(a, b) return a + b end, ["a-b"] = function(a, b) return a - b end,
    ["a*b"] = function(a, b) return a * b end, ["a/b"] = function(a, b) return a / b end,
    ["a%b"] = function(a, b) return a % b end, ["a^b"] = function(a, b) return a ^ b end,
    ["-a"] = function(a) return -a end, ["a[b]"] = function(a, b) return a[b] end,
    ["a[b]=c"] = function(a, b, c) a[b] = c end, ["tostring(a)"] = function(a) return tostring(a) end,
    ["#a"] = function(a) return #a end, ["a==b"] = function(a, b) return a == b end,
    ["a<b"] = function(a, b) return a < b end, ["a..b"] = function(a, b) return a .. b end,
    ["a(b)"] = function(a, b) return a(b) end,
  }
  local names = {}
  for k in pairs(ops) do names[#names + 1] = k end
  table.sort(names)
  -- the first operand a library object: raw cdata indexed out of bounds is the FFI's
  -- own undefined behaviour, not the library's
  for _, k in ipairs(names) do out[#out + 1] = { k, ops[k], "object" } end
  return out
end

-- An error is allowed when the library raised it ("tensordict: ..."), when it is the
-- user's own (a function from the pool raising), or when Lua raised it at the caller's
-- line for an operator the library does not define (tensor < tensor). An error raised
-- inside the library's Lua files without the prefix is a finding: a leak.
local LIBRARY = "/tensordict/"
local function allowed(err, args)
  local msg = tostring(err)
  if msg:find("tensordict: ", 1, true) or msg:find("user error", 1, true) then return true end
  if msg:find("is not callable$") then return true end -- calling a handle: the FFI's own
  local where = msg:match("^(.-):%d+: ")
  if where then return not where:find(LIBRARY, 1, true) end
  for i = 1, args.n do
    if T.is_tensor(args[i]) or T.is_tensordict(args[i]) then return false end
  end
  return true -- no library object took part: Lua's own error
end

ffi.cdef [[
  int chdir(const char *path);
  char *getcwd(char *buf, size_t size);
]]

local ALL = { api = true, flow = true, recipe = true, dist = true }

function M.run(opts)
  local calls, seed = opts.calls or 3000, opts.seed or 1
  local on = opts.surfaces or ALL
  local dir = opts.dir or os.tmpname() .. ".d"
  os.execute("mkdir -p '" .. dir .. "'")
  -- calls such as td:memmap("a") write into the working folder: run inside a scratch one
  local list = targets(on)
  local cwd = ffi.new("char[4096]")
  assert(ffi.C.getcwd(cwd, 4096) ~= nil, "misuse: getcwd failed")
  -- modules load lazily (T.dist): their relative search paths must outlive the chdir
  local here = ffi.string(cwd)
  local saved_path = package.path
  package.path = package.path:gsub("[^;]+", function(entry)
    if entry:sub(1, 1) == "/" then return entry end
    return here .. "/" .. entry:gsub("^%./", "")
  end)
  assert(ffi.C.chdir(dir) == 0, "misuse: cannot enter " .. dir)
  math.randomseed(seed)
  local findings, counts = {}, { ok = 0, errors = 0 }
  local values, n_pool = nil, 0
  for i = 1, calls do
    if i % 300 == 1 then
      n_pool = n_pool + 1
      values = pool(dir, n_pool, on)
      collectgarbage()
    end
    local target = list[math.random(#list)]
    local args = { n = 0 }
    if target[3] == "pool" then
      args.n, args[1] = 1, values
    elseif target[3] then
      -- a receiver of the right kind; for methods sometimes anything but raw cdata
      local want = type(target[3]) == "function" and target[3] or target[3] == "tensor" and T.is_tensor
        or target[3] == "dict" and T.is_tensordict or function(v) return T.is_tensor(v) or T.is_tensordict(v) end
      local recv
      repeat
        recv = values[math.random(#values)]
      until want(recv) or (target[3] ~= "object" and type(recv) ~= "cdata" and math.random() < 0.05)
      args.n = 1
      args[1] = recv
    end
    local extra = math.random(0, 4)
    for _ = 1, extra do
      args.n = args.n + 1
      if math.random() >= 0.08 then args[args.n] = values[math.random(#values)] end -- else nil
    end
    if opts.trace then -- to find the call a crash ended on
      local shown = {}
      for j = 1, args.n do shown[j] = describe(args[j]) end
      io.stderr:write(("%d %s(%s)\n"):format(i, target[1], table.concat(shown, ", ")))
    end
    local t0 = opts.profile and now()
    local ok, err = pcall(target[2], unpack(args, 1, args.n))
    if t0 then opts.profile[target[1]] = (opts.profile[target[1]] or 0) + now() - t0 end
    if ok then
      counts.ok = counts.ok + 1
    else
      counts.errors = counts.errors + 1
      if not allowed(err, args) then
        local shown = {}
        for j = 1, args.n do shown[j] = describe(args[j]) end
        findings[#findings + 1] = ("%s(%s): %s"):format(target[1], table.concat(shown, ", "),
          tostring(err))
      end
    end
  end
  ffi.C.chdir(cwd)
  package.path = saved_path
  os.execute("rm -rf '" .. dir .. "'")
  -- MPI started for the dist surface ends with the run (a singleton keeps a session
  -- folder until MPI_Finalize)
  if on.dist and T.dist.is_available() and T.dist.is_initialized() then pcall(T.dist.finalize) end
  return { calls = calls, ok = counts.ok, errors = counts.errors, findings = findings }
end

-- "api,dist" -> {api = true, dist = true}; nil -> every surface.
function M.surfaces(list)
  if not list or list == "" or list == "all" then return ALL end
  local on = {}
  for name in list:gmatch("[^,]+") do
    if not ALL[name] then error("misuse: unknown surface '" .. name .. "' (api, flow, recipe, dist)", 0) end
    on[name] = true
  end
  return on
end

if arg and arg[0] and arg[0]:match("misuse%.lua$") then
  local calls, seed = tonumber(arg[1]) or 100000, tonumber(arg[2]) or 1
  local profile = os.getenv("MISUSE_PROFILE") and {} or nil -- seconds per target
  local report = M.run({ calls = calls, seed = seed, surfaces = M.surfaces(arg[3]),
    trace = os.getenv("MISUSE_TRACE") ~= nil, profile = profile })
  if profile then
    local names = {}
    for name in pairs(profile) do names[#names + 1] = name end
    table.sort(names, function(a, b) return profile[a] > profile[b] end)
    for i = 1, math.min(10, #names) do print(("profile %8.3f s  %s"):format(profile[names[i]], names[i])) end
  end
  local seen = {}
  for _, f in ipairs(report.findings) do
    local key = f:gsub("%(.-%)", "()", 1):sub(1, 160)
    if not seen[key] then seen[key] = true; print("FINDING " .. f) end
  end
  print(("misuse: %d calls (seed %d, surfaces %s), %d results, %d tensordict errors, %d findings")
    :format(report.calls, seed, arg[3] or "all", report.ok, report.errors - #report.findings, #report.findings))
  os.exit(#report.findings == 0 and 0 or 1)
end

return M
