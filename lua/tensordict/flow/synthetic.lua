-- flow/synthetic.lua: ParticleSource, a seeded synthetic source for demos and tests:
-- particle trajectories in 3-D under a damped spring with a magnetic-like swirl,
-- integrated with a fixed step. Everything follows from the seed: the same seed gives
-- the same bytes for any batch_size and thread count.
--
-- Model (float64 inside, float32 out). Particle i (1-based) starts at pos ~ N(0, 1)^3,
-- vel ~ N(0, 0.5^2)^3, mass ~ U(0.5, 2); the draws are, in this order, randn {n, 3}
-- (pos), randn {n, 3} (vel, times 0.5), rand {n} (mass = 0.5 + 1.5 u), all from one
-- T.Generator(seed). Force F = -K pos - DAMP vel + vel x (0, 0, 1); a = F / mass;
-- semi-implicit Euler: vel += a dt, then pos += vel dt. State 1 is the start, state
-- k + 1 the state after k steps (time (k - 1) dt).
local create = require("tensordict.tensor.create")
local random = require("tensordict.tensor.random")
local join = require("tensordict.tensor.join")
local td_core = require("tensordict.dict")
local core = require("tensordict.flow.core")
local shard_rows = require("tensordict.flow.sources").shard_rows
require("tensordict.tensor.ops")
require("tensordict.tensor.reduce")
require("tensordict.tensor.linalg")

local K, DAMP = 1.0, 0.1

local ParticleSource = core.define("ParticleSource", {
  kind = "source",
  doc = "Seeded particle trajectories: id, mass, pos/vel [steps, 3] and energy [steps] per particle (row).",
  params = {
    { "n", "integer", required = true, min = 0, doc = "particles (rows) in all" },
    { "steps", "integer", required = true, min = 1, doc = "states per trajectory (the first is the initial state)" },
    { "batch_size", "integer", required = true, min = 1, doc = "particles per batch (the last batch may be smaller)" },
    { "seed", "seed", doc = "the seed (default: the pipeline seed, ctx.seed)" },
    { "dt", "number", default = 0.01, doc = "the integration step" },
  },
})

ParticleSource.KEYS = { "id", "mass", "pos", "vel", "energy" }

function ParticleSource:init()
  if not (self.p.dt > 0) or self.p.dt == math.huge then
    self:fail("dt must be a finite number > 0, got %s", tostring(self.p.dt))
  end
  if self.p.seed and self.p.seed < 0 then self:fail("seed must be >= 0, got %d", self.p.seed) end
  self.out_keys = { "id", "mass", "pos", "vel", "energy" }
end

function ParticleSource:len() return self.p.n end
function ParticleSource:keys() return self.out_keys end

local DTYPES = { id = "int64", mass = "float32", pos = "float32", vel = "float32", energy = "float32" }
function ParticleSource:key_dtypes() return DTYPES end

-- A row out: id, mass, and pos, vel [steps, 3] and energy [steps] in float32.
function ParticleSource:row_bytes() return 8 + 4 + 28 * self.p.steps end

-- Before any data moves: iter draws every particle's initial state at once (pos, vel
-- [n, 3] and mass [n], float64: 56 bytes a particle), then simulates a batch in float64
-- (each state of pos and vel twice: the list and the stack) beside the float32 rows.
function ParticleSource:preflight()
  local p = self.p
  local b = math.min(p.batch_size, p.n)
  local bytes = 56 * p.n + b * (p.steps * (4 * 24 + 8) + self:row_bytes())
  return { core.memory_problem(bytes, ("n = %.0f particles of steps = %.0f states (batches of %.0f)")
    :format(p.n, p.steps, b)) }
end

-- (vel x (0, 0, 1)) = vel @ SWIRL.
local SWIRL = { { 0, -1, 0 }, { 1, 0, 0 }, { 0, 0, 0 } }

-- The trajectories of particles with initial pos0, vel0 [b, 3] and mass [b].
local function simulate(pos0, vel0, mass, steps, dt)
  local swirl = create.tensor(SWIRL, "float64")
  local m = mass:unsqueeze(2) -- [b, 1], broadcast over the coordinates
  local x, v = pos0, vel0
  local xs, vs = { x }, { v }
  for k = 2, steps do
    local a = (x:mul(-K) - v:mul(DAMP) + v:matmul(swirl)):div(m)
    v = v + a:mul(dt)
    x = x + v:mul(dt)
    xs[k], vs[k] = x, v
  end
  local pos, vel = join.stack(xs, 2), join.stack(vs, 2) -- [b, steps, 3]
  local energy = (vel:mul(vel):sum(3):mul(m) + pos:mul(pos):sum(3):mul(K)):mul(0.5)
  return pos, vel, energy
end

function ParticleSource:iter(ctx)
  local p = self.p
  local n, b = p.n, p.batch_size
  local seed = core.setting(p, "seed", ctx, 0)
  local g = random.Generator(seed)
  local pos0 = random.randn({ n, 3 }, "float64", g)
  local vel0 = random.randn({ n, 3 }, "float64", g):mul(0.5)
  local mass = random.rand({ n }, "float64", g):mul(1.5):add(0.5)
  -- every rank draws all n initial states (cheap) and simulates its share of them, so
  -- a data-parallel run makes the rows a single process makes
  local start, last = shard_rows(n, ctx)
  if self.from then start = self.from.start end
  self.from = nil
  self.position = function() return { start = start } end
  return function()
    if start > last then return nil end
    local stop = math.min(last, start + b - 1)
    local rows = { { start, stop } }
    local pos, vel, energy = simulate(pos0[rows], vel0[rows], mass[rows], p.steps, p.dt)
    local td = td_core.construct(nil, { stop - start + 1 })
    td:set("id", create.arange(start, stop, "int64"))
    td:set("mass", mass[rows]:to("float32"))
    td:set("pos", pos:to("float32"))
    td:set("vel", vel:to("float32"))
    td:set("energy", energy:to("float32"))
    start = stop + 1
    return td
  end
end

-- Checkpoints: the next particle of the pass in progress (every particle's start is
-- drawn from the seed alone); restore makes the next iter() continue there.
function ParticleSource:state() return self.position and self.position() end
function ParticleSource:restore(state) self.from = state end

return { ParticleSource = ParticleSource }
