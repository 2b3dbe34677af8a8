-- plugins/physics.lua: per-row features of particle data, as a tdflow plugin
-- (docs/plugin-physics.md). A row is a particle: pos and vel are 3-vectors per row,
-- [B, 3], or trajectories of them, [B, T, 3] (what flow.ParticleSource yields), and
-- mass is one value per row, [B]. Every feature is a few whole-tensor ops (no loop
-- over rows), so it costs the same in a worker of flow.Map as in the parent.
--
-- The potential is the isotropic spring of flow.ParticleSource, U = k |r|^2 / 2, so
-- total_energy(pos, vel, mass) reproduces that source's `energy` leaf; the nodes also
-- take a central mass at the origin instead (potential = "gravity": U = -k m / |r|).
--
-- Loaded by require("tensordict.host.plugins") (which registers the functions as
-- "physics.<name>"), or by hand: dofile("plugins/physics.lua").

-- Node types register globally and once; the loader and a script may both run this
-- file in one Lua state, so the second run returns the first one's plugin.
local LOADED = "tensordict.plugins.physics"
if package.loaded[LOADED] then return package.loaded[LOADED] end

local T = require("tensordict")
local flow = T.flow

-- The plugin API (docs/flow.md): its errors blame the line that called the plugin.
local kit = flow.kit.new()
local fail, describe, format_list, key_text = kit.fail, kit.describe, kit.format_list, kit.key_text
local is_tensor = T.is_tensor
local E = T.ellipsis

------------------------------------------------------------------------- checks

local FLOATS = { float16 = true, bfloat16 = true, float32 = true, float64 = true }

-- vec must be a float tensor [B, ..., 3]; name says which value ("vel", "key 'vel'").
local function check_vec(who, name, vec)
  if not is_tensor(vec) then fail(who, "%s must be a tensor, got %s", name, describe(vec)) end
  local s = vec:shape()
  if #s < 2 or s[#s] ~= 3 then
    fail(who, "%s must be [B, 3] or [B, T, 3] (a 3-vector per row), got %s", name, format_list(s))
  end
  if not FLOATS[vec:dtype()] then
    fail(who, "%s must be a floating-point tensor, got %s", name, vec:dtype())
  end
  return vec
end

-- a and b (both checked vectors) must have the same shape: one particle per row.
local function check_same(who, an, a, bn, b)
  local sa, sb = a:shape(), b:shape()
  if format_list(sa) ~= format_list(sb) then
    fail(who, "%s %s and %s %s must have the same shape", an, format_list(sa), bn, format_list(sb))
  end
end

-- mass is a number (every particle alike) or a tensor [B] of any non-bool dtype. Returns
-- it shaped to broadcast over a per-row quantity of `dims` dims ([B, 1, ...]).
local function check_mass(who, name, mass, ref_name, ref, dims)
  if type(mass) == "number" then return mass end
  if not is_tensor(mass) then fail(who, "%s must be a tensor or a number, got %s", name, describe(mass)) end
  local s, rows = mass:shape(), ref:size(1)
  if #s ~= 1 or s[1] ~= rows then
    fail(who, "%s must be [%d] (one per row of %s %s), got %s", name, rows, ref_name,
      format_list(ref:shape()), format_list(s))
  end
  if mass:dtype() == "bool" then fail(who, "%s must be numeric, got bool", name) end
  if dims <= 1 then return mass end
  local shape = { rows }
  for i = 2, dims do shape[i] = 1 end
  return mass:view(shape)
end

local function check_number(who, name, x)
  if type(x) ~= "number" or x ~= x then fail(who, "%s must be a number, got %s", name, describe(x)) end
  return x
end

----------------------------------------------------------------------- the maths
-- Unchecked: inputs already passed the checks above; m is a number or shaped to
-- broadcast (check_mass). Results keep the rows (and time steps) of the inputs.

local function sq_norm(v) return v:mul(v):sum(-1) end -- |v|^2 over the last dim

local function cross(a, b)
  local ax, ay, az = a[{ E, 1 }], a[{ E, 2 }], a[{ E, 3 }]
  local bx, by, bz = b[{ E, 1 }], b[{ E, 2 }], b[{ E, 3 }]
  return T.stack({ ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx }, -1)
end

-- v2 and r2 are |vel|^2 and |pos|^2 when the caller has them already (Features reuses
-- them across features: the reductions over the last dim cost the most here).
local maths = {}
function maths.kinetic_energy(m, vel, v2) return (v2 or sq_norm(vel)):mul(m):mul(0.5) end
function maths.potential_energy(pos, k, r2) return (r2 or sq_norm(pos)):mul(0.5 * k) end
-- -k m / |r| (k = G M of the central mass); -inf at the origin.
function maths.gravitational_energy(pos, m, k, r2) return ((-k) / (r2 or sq_norm(pos)):sqrt()):mul(m) end
function maths.speed(vel, v2) return (v2 or sq_norm(vel)):sqrt() end
function maths.radius(pos, r2) return (r2 or sq_norm(pos)):sqrt() end
function maths.momentum(m, vel) return vel:mul(m) end
function maths.angular_momentum(pos, vel, m) return cross(pos, vel):mul(m) end
-- Sum of the steps' lengths along a trajectory [B, T, 3] (0 for T = 1).
function maths.path_length(pos)
  local steps = pos[{ {}, { 2, -1 } }] - pos[{ {}, { 1, -2 } }]
  return steps:norm(2, -1):sum(2)
end

------------------------------------------------------------------ the functions
-- Tensor in, tensor out: usable with flow.Module and in recipes as "physics.<name>".

local F = {}

-- 0.5 m |v|^2: [B] for vel [B, 3], [B, T] for trajectories.
function F.kinetic_energy(mass, vel)
  local who = "physics.kinetic_energy"
  check_vec(who, "vel", vel)
  return maths.kinetic_energy(check_mass(who, "mass", mass, "vel", vel, vel:dim() - 1), vel)
end

-- k |r|^2 / 2 (the spring of flow.ParticleSource; k defaults to 1).
function F.potential_energy(pos, k)
  local who = "physics.potential_energy"
  check_vec(who, "pos", pos)
  return maths.potential_energy(pos, check_number(who, "k", k == nil and 1 or k))
end

-- -k m / |r|: a central mass at the origin, k = G M (default 1).
function F.gravitational_energy(pos, mass, k)
  local who = "physics.gravitational_energy"
  check_vec(who, "pos", pos)
  local m = check_mass(who, "mass", mass, "pos", pos, pos:dim() - 1)
  return maths.gravitational_energy(pos, m, check_number(who, "k", k == nil and 1 or k))
end

-- kinetic + potential energy (the spring's).
function F.total_energy(pos, vel, mass, k)
  local who = "physics.total_energy"
  check_vec(who, "pos", pos)
  check_vec(who, "vel", vel)
  check_same(who, "pos", pos, "vel", vel)
  local m = check_mass(who, "mass", mass, "vel", vel, vel:dim() - 1)
  k = check_number(who, "k", k == nil and 1 or k)
  return maths.kinetic_energy(m, vel) + maths.potential_energy(pos, k)
end

-- |v|
function F.speed(vel)
  return maths.speed(check_vec("physics.speed", "vel", vel))
end

-- |r|, the distance from the origin (the spring's centre).
function F.radius(pos)
  return maths.radius(check_vec("physics.radius", "pos", pos))
end

-- m v, a 3-vector per row (and step).
function F.momentum(mass, vel)
  local who = "physics.momentum"
  check_vec(who, "vel", vel)
  return maths.momentum(check_mass(who, "mass", mass, "vel", vel, vel:dim()), vel)
end

-- L = m (r x v) about the origin, a 3-vector per row (and step).
function F.angular_momentum(pos, vel, mass)
  local who = "physics.angular_momentum"
  check_vec(who, "pos", pos)
  check_vec(who, "vel", vel)
  check_same(who, "pos", pos, "vel", vel)
  return maths.angular_momentum(pos, vel, check_mass(who, "mass", mass, "vel", vel, vel:dim()))
end

-- The length of each trajectory pos [B, T, 3]: sum over steps of |r(t+1) - r(t)|.
function F.path_length(pos)
  local who = "physics.path_length"
  check_vec(who, "pos", pos)
  if pos:dim() ~= 3 then
    fail(who, "pos must be trajectories [B, T, 3], got %s", format_list(pos:shape()))
  end
  return maths.path_length(pos)
end

--------------------------------------------------------------------- the nodes

-- Every feature: the inputs it reads and how it is made from them (x holds the
-- checked inputs: pos, vel, m shaped for scalar (ms) or vector (mv) results, k and the
-- potential's kind). The energies read mass too under gravity (Features:init).
local function v2(x) x.v2 = x.v2 or sq_norm(x.vel); return x.v2 end
local function r2(x) x.r2 = x.r2 or sq_norm(x.pos); return x.r2 end
local function potential(x)
  if x.potential == "gravity" then return maths.gravitational_energy(x.pos, x.ms, x.k, r2(x)) end
  return maths.potential_energy(x.pos, x.k, r2(x))
end
local FEATURES = {
  { "kinetic_energy", { "mass", "vel" }, function(x) return maths.kinetic_energy(x.ms, x.vel, v2(x)) end },
  { "potential_energy", { "pos" }, potential },
  { "total_energy", { "pos", "vel", "mass" }, function(x, done)
      return (done.kinetic_energy or maths.kinetic_energy(x.ms, x.vel, v2(x))) + (done.potential_energy or potential(x))
    end },
  { "speed", { "vel" }, function(x) return maths.speed(x.vel, v2(x)) end },
  { "radius", { "pos" }, function(x) return maths.radius(x.pos, r2(x)) end },
  { "momentum", { "mass", "vel" }, function(x) return maths.momentum(x.mv, x.vel) end },
  { "angular_momentum", { "pos", "vel", "mass" }, function(x) return maths.angular_momentum(x.pos, x.vel, x.mv) end },
  { "path_length", { "pos" }, function(x) return maths.path_length(x.pos) end },
}
local FEATURE = {}
local FEATURE_NAMES = {}
for i, f in ipairs(FEATURES) do FEATURE[f[1]], FEATURE_NAMES[i] = f, f[1] end
local DEFAULT_FEATURES = { "kinetic_energy", "potential_energy", "total_energy", "speed", "radius",
  "angular_momentum" }

-- The parameters naming the input leaves, shared by the nodes.
local KEY_PARAMS = {
  { "pos", "key", default = "pos", doc = "the positions: [B, 3], or trajectories [B, T, 3]" },
  { "vel", "key", default = "vel", doc = "the velocities, the shape of pos" },
  { "mass", "key", default = "mass", doc = "the masses, [B]" },
  { "potential", "string", default = "spring", one_of = { "spring", "gravity" },
    doc = "the potential energy: spring k |r|^2 / 2 (ParticleSource's), "
      .. "or gravity -k m / |r| of a mass at the origin" },
  { "k", "number", default = 1, doc = "the spring constant, or G M of the central mass" },
}

local function params_with(extra)
  local out = {}
  for _, p in ipairs(KEY_PARAMS) do out[#out + 1] = p end
  for _, p in ipairs(extra) do out[#out + 1] = p end
  return out
end

-- Reads and checks the inputs `needs` names from td, for node self.
local function inputs(self, td, needs)
  local who, p = self, self.p
  local x = { k = p.k, potential = p.potential }
  local want = {}
  for _, n in ipairs(needs) do want[n] = true end
  if want.pos then x.pos = check_vec(who, "key " .. key_text(p.pos), kit.get(self, td, p.pos)) end
  if want.vel then x.vel = check_vec(who, "key " .. key_text(p.vel), kit.get(self, td, p.vel)) end
  if x.pos and x.vel then
    check_same(who, "key " .. key_text(p.pos), x.pos, "key " .. key_text(p.vel), x.vel)
  end
  if want.mass then -- one per row of vel (or of pos: gravity's potential alone)
    local m = kit.get(self, td, p.mass)
    local ref, rname = x.vel or x.pos, "key " .. key_text(x.vel and p.vel or p.pos)
    local mname = "key " .. key_text(p.mass)
    x.ms = check_mass(who, mname, m, rname, ref, ref:dim() - 1)
    x.mv = check_mass(who, mname, m, rname, ref, ref:dim())
  end
  return x
end

------------------------------------------------------------------------ Features

local Features = flow.define("physics.Features", {
  doc = "Adds per-row particle features (energies, speed, radius, angular momentum...) "
    .. "computed from pos, vel and mass.",
  params = params_with({
    { "features", "keys", default = DEFAULT_FEATURES,
      doc = "the features added (default: " .. table.concat(DEFAULT_FEATURES, ", ") .. "), out of: "
        .. table.concat(FEATURE_NAMES, ", ") },
    { "prefix", "string", default = "", doc = "put in front of each feature's name to make its key" },
  }),
})

function Features:init()
  local needs, seen = {}, {}
  self.out_keys = {}
  for i, name in ipairs(self.p.features) do
    local f = type(name) == "string" and FEATURE[name]
    if not f then
      fail(self, "features[%d]: unknown feature %s%s (features: %s)", i, describe(name),
        kit.did_you_mean(name, FEATURE_NAMES), table.concat(FEATURE_NAMES, ", "))
    end
    local reads = f[2]
    if name == "potential_energy" and self.p.potential == "gravity" then reads = { "pos", "mass" } end
    for _, n in ipairs(reads) do
      if not seen[n] then seen[n], needs[#needs + 1] = true, n end
    end
    self.out_keys[i] = self.p.prefix .. name
  end
  self.needs = needs
  self.in_keys = {}
  for _, n in ipairs({ "pos", "vel", "mass" }) do
    if seen[n] then self.in_keys[#self.in_keys + 1] = self.p[n] end
  end
end

function Features:forward(td)
  local x = inputs(self, td, self.needs)
  td = kit.writable(td)
  local done = {}
  for i, name in ipairs(self.p.features) do
    local f = FEATURE[name]
    if f[1] == "path_length" and x.pos:dim() ~= 3 then
      fail(self, "path_length needs trajectories: key %s must be [B, T, 3], got %s",
        key_text(self.p.pos), format_list(x.pos:shape()))
    end
    done[name] = f[3](x, done)
    td:set(self.out_keys[i], done[name])
  end
  return td
end

-- The TensorDict-level function: td with the default features added under their names
-- (for flow.Map{fn = "physics.features"} and flow.Lambda).
local default_features
function F.features(td)
  if not T.is_tensordict(td) then
    fail("physics.features", "expected a TensorDict, got %s", describe(td))
  end
  default_features = default_features or Features {}
  return default_features:forward(td)
end

-------------------------------------------------------------------- EnergyFilter

local REDUCE = { "mean", "first", "last", "min", "max" }

local EnergyFilter = flow.define("physics.EnergyFilter", {
  doc = "Keeps the particles (rows) whose total energy lies in [min, max].",
  params = params_with({
    { "min", "number", doc = "the lowest energy kept (default: no lower bound)" },
    { "max", "number", doc = "the highest energy kept (default: no upper bound)" },
    { "energy", "key",
      doc = "read the energies from this leaf ([B] or [B, T]) instead of computing them from pos, vel and mass" },
    { "reduce", "string", default = "mean", one_of = REDUCE,
      doc = "how a trajectory's energies [T] become the row's one value" },
    { "keep_empty", "boolean", default = false, doc = "emit batches left with no rows (default: drop them)" },
  }),
})

function EnergyFilter:init()
  local p = self.p
  if p.min == nil and p.max == nil then fail(self, "give min, max or both") end
  if p.min and p.max and p.min > p.max then
    fail(self, "min (%s) is greater than max (%s)", tostring(p.min), tostring(p.max))
  end
  self.in_keys = p.energy and { p.energy } or { p.pos, p.vel, p.mass }
end

-- One energy per row.
function EnergyFilter:energies(td)
  local p = self.p
  local e
  if p.energy then
    e = kit.get(self, td, p.energy)
    local s = is_tensor(e) and e:shape() or {}
    if not is_tensor(e) or (#s ~= 1 and #s ~= 2) or s[1] ~= #td or not FLOATS[e:dtype()] then
      fail(self, "key %s must be a float tensor [B] or [B, T] with B = %d, got %s", key_text(p.energy),
        #td, is_tensor(e) and (format_list(s) .. " " .. e:dtype()) or describe(e))
    end
  else
    local x = inputs(self, td, { "pos", "vel", "mass" })
    e = maths.kinetic_energy(x.ms, x.vel, v2(x)) + potential(x)
  end
  if e:dim() == 1 then return e end
  if e:dim() ~= 2 then fail(self, "energies must be [B] or [B, T], got %s", format_list(e:shape())) end
  local r = p.reduce
  if r == "first" then return e[{ {}, 1 }] end
  if r == "last" then return e[{ {}, -1 }] end
  if r == "mean" then return e:mean(2) end
  return (e[r](e, 2)) -- min / max return values and indices: keep the values
end

function EnergyFilter:forward(td)
  if td:batch_dims() < 1 then fail(self, "the batch needs a batch dim of particles, got batch size []") end
  local e, p = self:energies(td), self.p
  local keep
  if p.min then keep = e:ge(p.min) end
  if p.max then keep = keep and keep:logical_and(e:le(p.max)) or e:le(p.max) end
  local out = td[keep]
  if #out == 0 and not p.keep_empty then return nil end
  return out
end

----------------------------------------------------------------------- Histogram

local Histogram = flow.define("physics.Histogram", {
  kind = "sink",
  doc = "Counts the values of one leaf in equal bins over [min, max] (e.g. an energy spectrum); "
    .. "finish() returns the counts.",
  params = {
    { "key", "key", required = true, doc = "the leaf counted (every element of it)" },
    { "min", "number", required = true, doc = "the low edge of the first bin" },
    { "max", "number", required = true, doc = "the high edge of the last bin (included in it)" },
    { "bins", "integer", default = 20, min = 1, doc = "the number of bins" },
    { "path", "string", doc = "also write the counts there as CSV (lo,hi,count), atomically at finish" },
    { "existsok", "boolean", default = false, doc = "replace a file at path (default: an error)" },
  },
})

function Histogram:init()
  local p = self.p
  if not (p.min < p.max) or p.max - p.min == math.huge then
    fail(self, "min (%s) must be less than max (%s), both finite", tostring(p.min), tostring(p.max))
  end
  self.in_keys = { p.key }
  self:reset()
end

-- The counts are made at the first batch, not with the node: a check of the recipe
-- builds nodes, and bins may be more than the machine holds (preflight says so; issue
-- 28: the recipe fuzzer's bins = 91113433 filled 700 MB at check).
function Histogram:reset()
  self.counts = nil
  self.underflow, self.overflow, self.nan, self.total = 0, 0, 0, 0
end

local function counts_of(self)
  if not self.counts then self.counts = T.zeros({ self.p.bins }, "int64") end
  return self.counts
end

-- Before any data moves: the counts (int64) and the edges (float64) of every bin.
function Histogram:preflight()
  return { kit.memory_problem(self.p.bins * 16, ("bins = %.0f"):format(self.p.bins)) }
end

-- The key's dtype, where the source or a step declares it: bool has no bins.
function Histogram:check_dtypes(ks)
  return { kit.dtype_problem(ks, self.p.key, function(dt) return dt ~= "bool" end,
    "physics.Histogram counts numbers, not bool values (cast it first)") }
end

-- Refuses an existing output before any data moves.
function Histogram:open()
  self:reset()
  local path = self.p.path
  if path and not self.p.existsok and kit.exists(path) then
    fail(self, "path '%s' exists (set existsok = true to replace it)", path)
  end
end

function Histogram:write(td)
  local p = self.p
  local v = kit.get(self, td, p.key)
  if not is_tensor(v) or v:dtype() == "bool" then
    fail(self, "key %s must be a numeric tensor, got %s", key_text(p.key),
      is_tensor(v) and "a bool tensor" or describe(v))
  end
  v = v:reshape(-1):to("float64")
  local n = v:numel()
  local counts = counts_of(self)
  if n == 0 then return end
  local lo, hi = v:lt(p.min), v:gt(p.max)
  local inside = v:ge(p.min):logical_and(v:le(p.max))
  local sel = v:masked_select(inside)
  local under, over, m = lo:sum(), hi:sum(), sel:numel()
  self.underflow, self.overflow, self.total = self.underflow + under, self.overflow + over, self.total + n
  self.nan = self.nan + (n - under - over - m) -- NaN compares false everywhere
  if m == 0 then return end
  -- bin i (1-based) holds [min + (i-1) w, min + i w); max itself goes to the last bin
  local bin = sel:sub(p.min):mul(p.bins / (p.max - p.min)):floor():clamp(0, p.bins - 1):to("int64"):add(1)
  counts:index_add_(1, bin, T.ones({ m }, "int64"))
end

function Histogram:edges()
  local p = self.p
  return T.arange(0, p.bins, "float64"):mul((p.max - p.min) / p.bins):add(p.min)
end

-- Returns { counts = int64 [bins], edges = float64 [bins + 1], underflow =, overflow =,
-- nan =, total = } (numbers: values below min, above max, NaN, all).
function Histogram:finish()
  local res = { counts = counts_of(self), edges = self:edges(), underflow = self.underflow,
    overflow = self.overflow, nan = self.nan, total = self.total }
  local path = self.p.path
  if path then
    -- committed as the library's saves are (a temporary, fsync, rename): readers see the
    -- old file or the whole new one, never a part
    local counts, edges = res.counts:totable(), res.edges:totable()
    kit.write_file(path, function(write)
      write("lo,hi,count\n")
      for i = 1, self.p.bins do
        write(("%.15g,%.15g,%d\n"):format(edges[i], edges[i + 1], counts[i]))
      end
    end, { who = self })
  end
  return res
end

-- Nothing is written before finish, so aborting only drops the counts.
function Histogram:abort()
  self.counts = nil
  self.underflow, self.overflow, self.nan, self.total = 0, 0, 0, 0
end

------------------------------------------------------------------ functions with args
-- Made once per step from the args a recipe gives: {"use": "physics.energy_below",
-- "args": {"max": 0.5}} (docs/plugin-physics.md).

local FACTORIES = {
  energy_below = {
    takes = "batch",
    doc = "energy_below{max, k = 1, pos, vel, mass}: fn(td) -> bool [B], total energy (spring k) < max "
      .. "(for trajectories, at every state): a mask",
    args = {
      { "max", "number", required = true, doc = "the energy a row must stay below" },
      { "k", "number", default = 1, doc = "the spring constant of the potential energy" },
      { "pos", "key", default = "pos", doc = "the positions [B, 3]" },
      { "vel", "key", default = "vel", doc = "the velocities [B, 3]" },
      { "mass", "key", default = "mass", doc = "the masses [B]" },
    },
    make = function(a)
      local who = { type_name = "physics.energy_below" }
      return function(td)
        local e = F.total_energy(kit.get(who, td, a.pos), kit.get(who, td, a.vel), kit.get(who, td, a.mass), a.k)
        local below = e:lt(a.max)
        if below:dim() > 1 then below = below:all(-1) end -- trajectories [B, T]: every state below
        return below
      end
    end,
  },
}

--------------------------------------------------------------------- the plugin

local plugin = {
  name = "physics",
  version = "1.0",
  doc = "per-row features of particle data: energies, speed, radius, momenta, path length; energy filter and histogram",
  nodes = {
    ["physics.Features"] = Features,
    ["physics.EnergyFilter"] = EnergyFilter,
    ["physics.Histogram"] = Histogram,
  },
  functions = F,
  factories = FACTORIES,
  -- what each function is a function of: tdflow check refuses one named where the other
  -- kind is called (a function of tensors as Map's fn, say)
  takes = { kinetic_energy = "tensors", potential_energy = "tensors", gravitational_energy = "tensors",
    total_energy = "tensors", speed = "tensors", radius = "tensors", momentum = "tensors",
    angular_momentum = "tensors", path_length = "tensors", features = "batch" },
  docs = { -- one line per function, for `tdflow plugins`
    kinetic_energy = "kinetic_energy(mass, vel): m |v|^2 / 2, [B] (or [B, T] for trajectories)",
    potential_energy = "potential_energy(pos [, k]): k |r|^2 / 2 (k = 1), [B] (or [B, T])",
    gravitational_energy = "gravitational_energy(pos, mass [, k]): -k m / |r| (k = G M = 1), [B] (or [B, T])",
    total_energy = "total_energy(pos, vel, mass [, k]): kinetic + the spring's potential energy",
    speed = "speed(vel): |v|",
    radius = "radius(pos): |r|, the distance from the origin",
    momentum = "momentum(mass, vel): m v, [B, 3] (or [B, T, 3])",
    angular_momentum = "angular_momentum(pos, vel, mass): m (r x v), [B, 3] (or [B, T, 3])",
    path_length = "path_length(pos): the length of each trajectory [B, T, 3], [B]",
    features = "features(td): td with the default features of physics.Features added",
  },
  features = FEATURE_NAMES, -- what physics.Features can add, for docs and completion
}
package.loaded[LOADED] = plugin
return plugin
