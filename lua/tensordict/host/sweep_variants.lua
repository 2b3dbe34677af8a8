-- host/sweep_variants.lua: what `tdflow sweep` runs (docs/recipes.md, "Sweeps"): the
-- recipe's "sweep" block and the command line's --grid expanded into variants, each a
-- list of overrides in `--set PATH=VALUE` form (so a variant's override means exactly
-- what `tdflow run --set` means: host/overrides.lua reads both), and each variant's id,
-- the name of its folder. Forms:
--   "grid":   {"PATH": [values] or "a..b"}: the cartesian product (paths sorted, the
--             last one varying fastest);
--   "list":   [{"PATH": value, ...}, ...]: one override set per entry;
--   "random": {"n": N, "seed": S, "ranges": {"PATH": range}}: N seeded samples, a range
--             being [lo, hi] (uniform), {"int": [a, b]}, {"log": [lo, hi]} or
--             {"choice": [values]}.
-- Forms given together multiply (grid x list x random). The samples depend only on the
-- seed, n and the ranges: the generator is mulberry32, written here in LuaJIT's bit ops.
local json = require("tensordict.json")
local util = require("tensordict.util")
local overrides = require("tensordict.host.overrides")

local describe = util.describe
local band, bor, bxor, rshift, lshift, tobit = bit.band, bit.bor, bit.bxor, bit.rshift, bit.lshift, bit.tobit

local M = {}

M.FIELDS = { "grid", "list", "random", "out" }
M.RANGE_KINDS = { "int", "log", "choice" }
M.MAX_VARIANTS = 100000
M.MAX_ID = 200 -- characters of an id before its hash (a file name holds 255 bytes)

local sorted_keys = util.sorted_keys

-- A JSON array read from a recipe, or a Lua sequence (a Lua recipe's list).
local function is_list(v)
  if type(v) ~= "table" then return false end
  if getmetatable(v) == json.array_mt then return true end
  if getmetatable(v) ~= nil then return false end
  local n = 0
  for _ in pairs(v) do n = n + 1 end
  return n == #v and n > 0
end

local function is_object(v)
  return type(v) == "table" and not is_list(v) and getmetatable(v) ~= json.array_mt
    and (getmetatable(v) == nil or getmetatable(v) == json.object_mt)
end

------------------------------------------------------------------------ generator

-- 32-bit multiply, low half (Math.imul): the halves keep every product below 2^53.
local function imul(a, b)
  local ah, al = band(rshift(a, 16), 0xffff), band(a, 0xffff)
  local bh, bl = band(rshift(b, 16), 0xffff), band(b, 0xffff)
  return tobit(al * bl + lshift(tobit(ah * bl + al * bh), 16))
end

-- mulberry32: a function returning uniform doubles in [0, 1), from a seed.
local function generator(seed)
  local state = tobit(seed % 4294967296)
  return function()
    state = tobit(state + 0x6D2B79F5)
    local t = imul(bxor(state, rshift(state, 15)), bor(state, 1))
    t = bxor(t, tobit(t + imul(bxor(t, rshift(t, 7)), bor(t, 61))))
    return (bxor(t, rshift(t, 14)) % 4294967296) / 4294967296
  end
end
M.generator = generator

-- FNV-1a, 32 bits, as 8 hex digits: the suffix of ids that lost characters.
local function hash_text(s)
  local h = tobit(2166136261)
  for i = 1, #s do h = imul(bxor(h, s:byte(i)), 16777619) end
  return ("%08x"):format(h % 4294967296)
end

------------------------------------------------------------------------ values

-- The --set text of a recipe value (JSON: overrides.value reads it back the same), or
-- nil and why for a value JSON cannot write (a Lua recipe's function, a NaN).
local function text_of(v)
  local ok, text = pcall(json.encode, v)
  if ok then return text end
  return nil, ("%s cannot be given as a --set value (JSON)"):format(describe(v))
end

-- "a..b" (integers) -> the list of texts a, a+1, .., b; nil when text is no range; and
-- the problem of an empty or oversized one.
local function range_texts(text)
  local a, b = text:match("^%s*(-?%d+)%.%.(-?%d+)%s*$")
  if not a then return nil end
  a, b = tonumber(a), tonumber(b)
  if b < a then return {}, ("the range %s is empty (a..b counts up from a to b)"):format(text) end
  if b - a >= M.MAX_VARIANTS then
    return {}, ("the range %s has %d values, more than %d"):format(text, b - a + 1, M.MAX_VARIANTS)
  end
  local out = {}
  for i = a, b do out[#out + 1] = ("%d"):format(i) end
  return out
end

-- Splits "1,[2,3],\"a,b\"" at its top-level commas.
local function split_values(text)
  local parts, depth, quoted, start = {}, 0, false, 1
  local i = 1
  while i <= #text do
    local c = text:sub(i, i)
    if quoted then
      if c == "\\" then i = i + 1 elseif c == '"' then quoted = false end
    elseif c == '"' then quoted = true
    elseif c == "[" or c == "{" then depth = depth + 1
    elseif c == "]" or c == "}" then depth = depth - 1
    elseif c == "," and depth == 0 then
      parts[#parts + 1] = text:sub(start, i - 1)
      start = i + 1
    end
    i = i + 1
  end
  parts[#parts + 1] = text:sub(start)
  return parts
end

-- --grid PATH=VALUES: the path and the list of value texts, or nil and the problem.
-- VALUES: comma-separated --set values (JSON or text); an element "a..b" is the
-- integers a to b.
function M.parse_grid(arg)
  local path, values = arg:match("^([^=]*)=(.*)$")
  local function problem(fmt, ...) return nil, ("--grid %s: " .. fmt):format(arg, ...) end
  if not path or path == "" or path:find("%s") then
    return problem("expected PATH=VALUES, e.g. steps.2.max=1,2,3 or seed=1..4")
  end
  if values == "" then return problem("no values after '=' (give VALUES, e.g. %s=1,2,3)", path) end
  local texts = {}
  for _, part in ipairs(split_values(values)) do
    if part == "" then return problem("an empty value between commas") end
    local range, why = range_texts(part)
    if why then return problem("%s", why) end
    for _, t in ipairs(range or { part }) do texts[#texts + 1] = t end
  end
  return path, texts
end

------------------------------------------------------------------------ the block

-- The value texts of one grid entry of the block, or nil and the problem.
local function block_grid_values(path, v)
  local where = "sweep.grid." .. path
  if type(v) == "string" then
    local range, why = range_texts(v)
    if why then return nil, ("%s: %s"):format(where, why) end
    if range then return range end
  end
  if type(v) == "table" and next(v) == nil then return nil, ("%s: no values (an empty list)"):format(where) end
  if not is_list(v) then
    return nil, ('%s: expected a list of values or an integer range "a..b", got %s'):format(where, describe(v))
  end
  local texts = {}
  for i, x in ipairs(v) do
    local text, why = text_of(x)
    if not text then return nil, ("%s[%d]: %s"):format(where, i, why) end
    texts[i] = text
  end
  return texts
end

local function number_pair(v)
  return is_list(v) and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number"
end

-- A sampler for one range of the random block (a function of the generator, giving
-- a value), or nil and the problem.
local function sampler(path, spec)
  local where = "sweep.random.ranges." .. path
  if number_pair(spec) then
    local lo, hi = spec[1], spec[2]
    if not (lo < hi) then return nil, ("%s: [lo, hi] needs lo < hi, got [%s, %s]"):format(where, lo, hi) end
    return function(u) return lo + (hi - lo) * u() end
  end
  if not is_object(spec) then
    return nil, ('%s: expected [lo, hi], {"int": [a, b]}, {"log": [lo, hi]} or {"choice": [values]}, got %s')
      :format(where, describe(spec))
  end
  local kinds = sorted_keys(spec)
  if #kinds ~= 1 or not (spec.int or spec.log or spec.choice) then
    return nil, ("%s: expected one of the fields int, log, choice, got %s%s"):format(where,
      #kinds == 0 and "none" or table.concat(kinds, ", "),
      #kinds == 1 and util.did_you_mean(kinds[1], M.RANGE_KINDS) or "")
  end
  if spec.choice ~= nil then
    if not is_list(spec.choice) or #spec.choice == 0 then
      return nil, ("%s.choice: expected a non-empty list of values, got %s"):format(where, describe(spec.choice))
    end
    local choices = spec.choice
    for i, x in ipairs(choices) do
      local text, why = text_of(x)
      if not text then return nil, ("%s.choice[%d]: %s"):format(where, i, why) end
    end
    return function(u) return choices[math.floor(u() * #choices) + 1] end
  end
  local kind = spec.int ~= nil and "int" or "log"
  local pair = spec[kind]
  if not number_pair(pair) then
    return nil, ("%s.%s: expected [lo, hi] (two numbers), got %s"):format(where, kind, describe(pair))
  end
  local lo, hi = pair[1], pair[2]
  if kind == "int" then
    if not (util.is_int(lo) and util.is_int(hi) and lo <= hi) then
      return nil, ("%s.int: expected integers a <= b, got [%s, %s]"):format(where, lo, hi)
    end
    return function(u) return lo + math.floor(u() * (hi - lo + 1)) end
  end
  if not (lo > 0 and lo < hi) then
    return nil, ("%s.log: expected 0 < lo < hi, got [%s, %s]"):format(where, lo, hi)
  end
  local a, b = math.log(lo), math.log(hi)
  return function(u) return math.exp(a + (b - a) * u()) end
end

-- The random block's samples: a list of override sets ({{path, text}, ...}), or nil
-- and the problems.
local function random_sets(spec, problems)
  if not is_object(spec) then
    problems[#problems + 1] = ('sweep.random: expected {"n": N, "seed": S, "ranges": {"PATH": range, ...}}, got %s')
      :format(describe(spec))
    return nil
  end
  for _, k in ipairs(sorted_keys(spec)) do
    if k ~= "n" and k ~= "seed" and k ~= "ranges" then
      problems[#problems + 1] = ("sweep.random.%s: unknown field%s (fields: n, seed, ranges)"):format(k,
        util.did_you_mean(k, { "n", "seed", "ranges" }))
    end
  end
  local n, seed = spec.n, spec.seed or 0
  local ok = true
  if not (util.is_int(n) and n >= 1 and n <= M.MAX_VARIANTS) then
    problems[#problems + 1] = ("sweep.random.n: expected an integer in 1..%d, got %s"):format(M.MAX_VARIANTS,
      describe(n))
    ok = false
  end
  if not (util.is_int(seed) and seed >= 0) then
    problems[#problems + 1] = ("sweep.random.seed: expected an integer >= 0, got %s"):format(describe(seed))
    ok = false
  end
  if not is_object(spec.ranges) or next(spec.ranges) == nil then
    problems[#problems + 1] = ('sweep.random.ranges: expected an object {"PATH": range, ...} with at least one '
      .. "range, got %s"):format(describe(spec.ranges))
    return nil
  end
  local paths, samplers = sorted_keys(spec.ranges), {}
  for i, path in ipairs(paths) do
    local s, why = sampler(path, spec.ranges[path])
    if not s then
      problems[#problems + 1] = why
      ok = false
    end
    samplers[i] = s
  end
  if not ok then return nil end
  local u = generator(seed)
  local sets = {}
  for j = 1, n do
    local set = {}
    for i, path in ipairs(paths) do set[i] = { path, text_of(samplers[i](u)) } end
    sets[j] = set
  end
  return sets
end

-- The list block's override sets, or nil (problems added).
local function list_sets(spec, problems)
  if not is_list(spec) then
    problems[#problems + 1] = ('sweep.list: expected a non-empty list of override sets [{"PATH": value, ...}, ...], '
      .. "got %s"):format(describe(spec))
    return nil
  end
  local sets = {}
  for i, entry in ipairs(spec) do
    if not is_object(entry) or next(entry) == nil then
      problems[#problems + 1] = ('sweep.list[%d]: expected an object {"PATH": value, ...}, got %s'):format(i,
        describe(entry))
    else
      local set = {}
      for _, path in ipairs(sorted_keys(entry)) do
        local text, why = text_of(entry[path])
        if not text then problems[#problems + 1] = ("sweep.list[%d].%s: %s"):format(i, path, why) end
        set[#set + 1] = { path, text }
      end
      sets[#sets + 1] = set
    end
  end
  return sets
end

-- The product of lists of override sets.
local function product(a, b)
  local out = {}
  for _, x in ipairs(a) do
    for _, y in ipairs(b) do
      local set = {}
      for _, o in ipairs(x) do set[#set + 1] = o end
      for _, o in ipairs(y) do set[#set + 1] = o end
      out[#out + 1] = set
    end
  end
  return out
end

------------------------------------------------------------------------ ids

-- The id of an override set: "path=value" parts joined by commas (a string value
-- without its quotes, a number in at most 4 significant digits); characters other than
-- letters, digits and . _ + - = , become "_", and an id that lost characters or digits,
-- or is longer than MAX_ID characters, is cut to MAX_ID and ends with "~" and a hash of
-- the overrides, so ids stay distinct. No overrides: "base".
function M.id(set)
  if #set == 0 then return "base" end
  local parts, exact, lossy = {}, {}, false
  for i, o in ipairs(set) do
    local v, text = overrides.value(o[2]), o[2]
    if type(v) == "string" then
      text = v
    elseif type(v) == "number" and util.number_text(v) == text then
      text = ("%.4g"):format(v) -- a random sample's 17 digits would bury the others
      lossy = lossy or tonumber(text) ~= v
    end
    parts[i] = o[1] .. "=" .. text
    exact[i] = o[1] .. "=" .. o[2]
  end
  local raw = table.concat(parts, ",")
  local safe = raw:gsub("[^%w%._%+%-=,]", "_")
  if lossy or safe ~= raw or #safe > M.MAX_ID then
    safe = safe:sub(1, M.MAX_ID) .. "~" .. hash_text(table.concat(exact, "\n"))
  end
  return safe
end

------------------------------------------------------------------------ expansion

-- Expands the block (or nil) and the command line's --grid arguments into variants:
-- a list of {id =, set = {{path, text}, ...}} (set in the order the overrides apply),
-- and the problems. A --grid path also in the block's grid replaces its values; other
-- --grid paths are added to the grid.
function M.expand(block, grid_args)
  local problems = {}
  if block ~= nil and not is_object(block) then
    return nil, { ('sweep: expected an object {"grid": ..., "list": ..., "random": ..., "out": ...}, got %s')
      :format(describe(block)) }
  end
  block = block or {}
  for _, k in ipairs(sorted_keys(block)) do
    local known = false
    for _, f in ipairs(M.FIELDS) do known = known or f == k end
    if not known then
      problems[#problems + 1] = ("sweep.%s: unknown field%s (fields: %s)"):format(k, util.did_you_mean(k, M.FIELDS),
        table.concat(M.FIELDS, ", "))
    end
  end
  if block.out ~= nil and (type(block.out) ~= "string" or block.out == "") then
    problems[#problems + 1] = ("sweep.out: expected a folder path (a string), got %s"):format(describe(block.out))
  end
  local grid = {}
  if block.grid ~= nil then
    if not is_object(block.grid) then
      problems[#problems + 1] = ('sweep.grid: expected an object {"PATH": [values] or "a..b", ...}, got %s')
        :format(describe(block.grid))
    else
      for _, path in ipairs(sorted_keys(block.grid)) do
        local texts, why = block_grid_values(path, block.grid[path])
        if texts then grid[path] = texts else problems[#problems + 1] = why end
      end
    end
  end
  for _, arg in ipairs(grid_args or {}) do
    local path, texts = M.parse_grid(arg)
    if path then grid[path] = texts else problems[#problems + 1] = texts end
  end
  local sets = { {} }
  for _, path in ipairs(sorted_keys(grid)) do
    local column = {}
    for i, t in ipairs(grid[path]) do column[i] = { { path, t } } end
    sets = product(sets, column)
    if #sets > M.MAX_VARIANTS then break end
  end
  if block.list ~= nil then
    local l = list_sets(block.list, problems)
    if l then sets = product(sets, l) end
  end
  if block.random ~= nil then
    local r = random_sets(block.random, problems)
    if r then sets = product(sets, r) end
  end
  if #problems > 0 then return nil, problems end
  if #sets > M.MAX_VARIANTS then
    return nil, { ("the sweep has more than %d variants"):format(M.MAX_VARIANTS) }
  end
  local variants, seen = {}, {}
  for i, set in ipairs(sets) do
    local id = M.id(set)
    if seen[id] then
      problems[#problems + 1] = ("variants %d and %d are the same (%s): give each override set once"):format(seen[id],
        i, id)
    end
    seen[id] = i
    variants[i] = { id = id, set = set }
  end
  if #problems > 0 then return nil, problems end
  return variants, {}
end

-- The problems of a recipe's sweep block alone (tdflow check).
function M.check(block)
  local _, problems = M.expand(block, {})
  return problems
end

-- A variant's overrides as "PATH=VALUE" texts (what tdflow run --set takes).
function M.assignments(set)
  local out = {}
  for i, o in ipairs(set) do out[i] = o[1] .. "=" .. o[2] end
  return out
end

return M
