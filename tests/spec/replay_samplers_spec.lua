-- flow.ReplayBuffer's samplers (flow/samplers.lua): uniform, without_replacement,
-- prioritized and slice, each against what it promises with fixed seeds (frequencies
-- within tolerances, every row once per epoch, the importance weights' formula,
-- trajectories that never cross an end nor the write cursor), reopening, the bad
-- input's messages, and torchrl's weights and slice shapes where TD_PYTHON has torchrl.
local T = require("tensordict")
local H = require("helpers")
local flow = require("tensordict.flow")
local json = require("tensordict.json")

local ReplayBuffer = flow.ReplayBuffer

local dir
before_each(function() dir = H.tmpdir() end)
after_each(function() H.rmtree(dir) end)

-- A batch of n rows whose "id" leaf is first .. first + n - 1.
local function rows(first, n, extra)
  local fields = { id = T.arange(first, first + n - 1, "int64") }
  for k, v in pairs(extra or {}) do fields[k] = v end
  return T.TensorDict(fields, { n })
end

-- torchrl's side (tests/interop/replay_samplers.py), run once: its weights for P under
-- ALPHA, BETA, EPS ("weights") and its slice sample's shapes for TORCHRL_IDS ("slice");
-- without torchrl nil, the test marked pending.
local ALPHA, BETA, EPS = 0.7, 0.5, 1e-8
local P = { 1, 2, 3, 4, 5, 6, 7, 8 }
local TORCHRL_IDS = "1,1,1,1,1,2,2,2,2,2,3,3,3,3,3,3"
local torchrl_said
local function torchrl(part)
  if torchrl_said == nil then
    local py = os.getenv("TD_PYTHON") or "python3"
    -- no separate "import torchrl" check: the import alone takes seconds
    local p = io.popen(("%s tests/interop/replay_samplers.py %s %s %s %s 20 4 %s 2>/dev/null"):format(py, ALPHA,
      BETA, EPS, table.concat(P, ","), TORCHRL_IDS))
    local said = p:read("*a"):match("\n?({\"weights\".*})")
    p:close()
    torchrl_said = said and json.decode(said) or false
  end
  if not torchrl_said then pending("torchrl is not installed where TD_PYTHON points") end
  return torchrl_said and torchrl_said[part] or nil
end

-- How often each value of leaf key came up over calls samples of n (a table value ->
-- count) and the rows drawn in all.
local function counts(rb, n, calls, gen, key)
  local c, total = {}, 0
  for _ = 1, calls do
    for _, v in ipairs(rb:sample(n, gen):get(key):totable()) do
      c[v] = (c[v] or 0) + 1
      total = total + 1
    end
  end
  return c, total
end

describe("ReplayBuffer sampler parameter", function()
  it("names a sampler; its parameters go into the spec and a JSON recipe makes the same buffer", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 8, sampler = "prioritized", alpha = 0.7, beta = 0.5 })
    local spec = rb:spec()
    assert.are.same({ type = "ReplayBuffer", path = dir .. "/rb", capacity = 8, sampler = "prioritized",
      alpha = 0.7, beta = 0.5 }, spec)
    local again = flow.build(json.decode(json.encode(spec)))
    assert.are.same(spec, again:spec())
    local sl = flow.build(json.decode(('{"type": "ReplayBuffer", "path": "%s", "capacity": 8, "sampler": "slice", '
      .. '"traj_key": "episode", "num_slices": 2}'):format(dir .. "/s")))
    assert.are.same({ type = "ReplayBuffer", path = dir .. "/s", capacity = 8, sampler = "slice",
      traj_key = "episode", num_slices = 2 }, sl:spec())
    assert.are.same({ type = "ReplayBuffer", path = "x", capacity = 2 },
      ReplayBuffer({ path = "x", capacity = 2 }):spec())
  end)

  it("refuses a bad sampler name (with a hint), bad alpha/beta/eps and parameters of another sampler", function()
    local function make(p)
      p.path, p.capacity = dir .. "/rb", 4
      return function() ReplayBuffer(p) end
    end
    H.raises(make({ sampler = "prioritised" }), 'ReplayBuffer: sampler: expected one of "uniform", '
      .. '"without_replacement", "prioritized", "slice", got "prioritised" (did you mean \'prioritized\'?)')
    H.raises(make({ sampler = "prioritized", alpha = -1 }), "ReplayBuffer: alpha: expected number >= 0, got -1")
    H.raises(make({ sampler = "prioritized", beta = 0 / 0 }),
      "ReplayBuffer: beta: expected a finite number >= 0, got nan")
    H.raises(make({ sampler = "prioritized", alpha = math.huge }),
      "ReplayBuffer: alpha: expected a finite number >= 0, got inf")
    H.raises(make({ sampler = "prioritized", eps = "x" }), "ReplayBuffer: eps: expected a number, got \"x\"")
    H.raises(make({ alpha = 0.5 }), "ReplayBuffer: alpha: only sampler = \"prioritized\" takes it "
      .. "(this buffer's sampler is \"uniform\")")
    H.raises(make({ sampler = "slice", traj_key = "e", slice_len = 2, drop_last = true }),
      "ReplayBuffer: drop_last: only sampler = \"without_replacement\" takes it (this buffer's sampler is \"slice\")")
    H.raises(make({ sampler = "slice", slice_len = 2 }), "ReplayBuffer: sampler = \"slice\" needs traj_key (rows "
      .. "with equal ids are one trajectory) or end_key (a bool leaf marking each trajectory's last step)")
    H.raises(make({ sampler = "slice", traj_key = "e", end_key = "d", slice_len = 2 }), "end_key (a bool leaf "
      .. "marking each trajectory's last step), not both")
    H.raises(make({ sampler = "slice", traj_key = "e" }),
      "ReplayBuffer: sampler = \"slice\" needs slice_len (steps per piece) or num_slices (pieces per sample)")
    H.raises(make({ sampler = "slice", traj_key = "e", slice_len = 0 }), "slice_len: expected integer >= 1, got 0")
  end)
end)

describe("ReplayBuffer uniform sampler", function()
  it("draws every filled row equally often, and the same rows for a seed", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 16 })
    rb:extend(rows(1, 10))
    local c, total = counts(rb, 500, 40, T.Generator(3), "id")
    assert.are.equal(20000, total)
    for id = 1, 10 do
      assert.is_true(math.abs(c[id] / total - 0.1) < 0.011, ("row %d: %d of %d"):format(id, c[id], total))
    end
    assert.is_nil(c[11])
    assert.is_nil(rb:sample(4, T.Generator(1)):get("index")) -- today's result, no leaf added
    assert.are.same(rb:sample(64, T.Generator(9)):get("id"):totable(),
      rb:sample(64, T.Generator(9)):get("id"):totable())
  end)
end)

describe("ReplayBuffer without_replacement sampler", function()
  it("gives each filled row once per epoch, the last sample of an epoch shorter, then a new order", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 16, sampler = "without_replacement" })
    rb:extend(rows(1, 10))
    local g = T.Generator(5)
    for _ = 1, 3 do -- three epochs: samples of 3, 3, 3, 1 rows
      local seen, sizes = {}, {}
      for s = 1, 4 do
        local b = rb:sample(3, g)
        sizes[s] = #b
        assert.are.same(b:get("id"):totable(), b:get("index"):totable()) -- index: the 1-based ring row
        for _, id in ipairs(b:get("id"):totable()) do
          assert.is_nil(seen[id], "row " .. id .. " twice in an epoch")
          seen[id] = true
        end
      end
      assert.are.same({ 3, 3, 3, 1 }, sizes)
      for id = 1, 10 do assert.is_true(seen[id]) end
    end
    assert.are.equal("int64", rb:sample(3, g):get("index"):dtype())
  end)

  it("with drop_last starts a new epoch instead of a short sample, and refuses n above the filled rows", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 16, sampler = "without_replacement", drop_last = true })
    rb:extend(rows(1, 10))
    local g = T.Generator(5)
    local seen = {}
    for _ = 1, 3 do
      for _, id in ipairs(rb:sample(3, g):get("id"):totable()) do
        assert.is_nil(seen[id])
        seen[id] = true
      end
    end
    local fresh = rb:sample(3, g) -- one row left: a new permutation
    assert.are.equal(3, #fresh)
    H.raises(function() rb:sample(11, g) end, "ReplayBuffer: sample: 11 rows without replacement and drop_last = "
      .. "true need at least 11 filled rows, the buffer has 10")
  end)

  it("starts a new epoch when rows were added, and repeats itself for a seed", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 16, sampler = "without_replacement" })
    rb:extend(rows(1, 4))
    local g = T.Generator(2)
    rb:sample(2, g)
    rb:extend(rows(5, 4))
    local seen = {}
    for _ = 1, 4 do
      for _, id in ipairs(rb:sample(2, g):get("id"):totable()) do seen[#seen + 1] = id end
    end
    table.sort(seen)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, seen)
    local function first(path) -- a new buffer's first sample for seed 4
      local a = ReplayBuffer({ path = dir .. path, capacity = 8, sampler = "without_replacement" }):extend(rows(1, 8))
      return a:sample(5, T.Generator(4)):get("id"):totable()
    end
    assert.are.same(first("/a"), first("/b"))
  end)
end)

describe("ReplayBuffer prioritized sampler", function()
  local function prioritized(path, extra)
    local p = { path = path, capacity = 12, sampler = "prioritized", alpha = ALPHA, beta = BETA }
    for k, v in pairs(extra or {}) do p[k] = v end
    return ReplayBuffer(p)
  end
  -- The spec's own formulas: P(i) and the weight (N P(i))^-beta over the largest one.
  local function q(p) return (p + EPS) ^ ALPHA end
  local function expected(ps)
    local sum, qmin = 0, math.huge
    for _, p in ipairs(ps) do
      sum = sum + q(p)
      qmin = math.min(qmin, q(p))
    end
    local prob, weight, n = {}, {}, #ps
    local wmax = (n * qmin / sum) ^ -BETA
    for i, p in ipairs(ps) do
      prob[i] = q(p) / sum
      weight[i] = (n * prob[i]) ^ -BETA / wmax
    end
    return prob, weight
  end

  it("draws rows in proportion to p^alpha, with importance weights as torchrl computes them", function()
    local rb = prioritized(dir .. "/rb")
    rb:extend(rows(1, 8))
    rb:update_priority(T.arange(1, 8, "int64"), T.tensor(P, "float64"))
    local prob, weight = expected(P)
    local g = T.Generator(11)
    local c, total = {}, 0
    for _ = 1, 40 do
      local b = rb:sample(1000, g)
      assert.are.equal("float32", b:get("priority_weight"):dtype())
      local ids, idx, w = b:get("id"):totable(), b:get("index"):totable(), b:get("priority_weight"):totable()
      for j, id in ipairs(ids) do
        assert.are.equal(id, idx[j])
        assert.is_true(math.abs(w[j] - weight[id]) <= 1e-6 * weight[id], ("row %d: weight %.9g, formula %.9g")
          :format(id, w[j], weight[id]))
        c[id] = (c[id] or 0) + 1
        total = total + 1
      end
    end
    for id = 1, 8 do
      assert.is_true(math.abs(c[id] / total - prob[id]) < 0.01, ("row %d: %.4f, P %.4f"):format(id, c[id] / total,
        prob[id]))
    end
  end)

  it("gives new rows the largest priority so far, and update_priority moves the draws", function()
    local rb = prioritized(dir .. "/rb")
    rb:extend(rows(1, 4))
    -- before any update every row has priority 1: uniform, every weight 1
    assert.are.same({ 1, 1, 1, 1, 1, 1 }, rb:sample(6, T.Generator(1)):get("priority_weight"):totable())
    rb:update_priority({ 1, 2, 3, 4 }, { 1, 2, 3, 6 })
    rb:extend(rows(5, 2)) -- rows 5 and 6 get priority 6, the largest given
    local _, weight = expected({ 1, 2, 3, 6, 6, 6 })
    local b = rb:sample(400, T.Generator(2))
    local seen = {}
    for j, id in ipairs(b:get("id"):totable()) do
      seen[id] = true
      assert.is_true(math.abs(b:get("priority_weight")[j] - weight[id]) <= 1e-6 * weight[id])
    end
    assert.is_true(seen[5] and seen[6])
    rb:update_priority(2, 1000) -- one row dominates
    local c, total = counts(rb, 500, 2, T.Generator(3), "id")
    local p2 = q(1000) / (q(1) + q(1000) + q(3) + 3 * q(6))
    assert.is_true(math.abs(c[2] / total - p2) < 0.02, ("row 2: %.4f, P %.4f"):format(c[2] / total, p2))
    rb:update_priority(T.tensor({ 1, 3, 4, 5, 6 }, "int64"), 0) -- one priority for all; eps keeps them drawable
    assert.is_true(counts(rb, 1000, 1, T.Generator(4), "id")[2] > 990)
  end)

  it("repeats itself for a seed and keeps its priorities when the ring is reopened", function()
    local rb = prioritized(dir .. "/rb")
    rb:extend(rows(1, 8))
    rb:update_priority(T.arange(1, 8, "int64"), T.tensor(P))
    local a = rb:sample(32, T.Generator(7))
    assert.are.same(a:get("index"):totable(), rb:sample(32, T.Generator(7)):get("index"):totable())
    rb:sync()
    local again = prioritized(dir .. "/rb")
    assert.are.equal(8, again:len())
    local b = again:sample(32, T.Generator(7))
    assert.are.same(a:get("index"):totable(), b:get("index"):totable())
    assert.are.same(a:get("priority_weight"):totable(), b:get("priority_weight"):totable())
    again:extend(rows(9, 1)) -- the largest priority came back too: 8
    local _, weight = expected({ 1, 2, 3, 4, 5, 6, 7, 8, 8 })
    local s = again:sample(300, T.Generator(8))
    for j, id in ipairs(s:get("id"):totable()) do
      if id == 9 then assert.is_true(math.abs(s:get("priority_weight")[j] - weight[9]) <= 1e-6) end
    end
    H.raises(function() prioritized(dir .. "/rb", { alpha = 0.9 }):len() end, "ReplayBuffer: '" .. dir
      .. "/rb/%priorities' holds priorities for alpha = 0.7, not 0.9 (pass that alpha, or existsok = true for a "
      .. "new ring)")
    H.raises(function() prioritized(dir .. "/rb", { capacity = 20 }):len() end, "ReplayBuffer: '" .. dir
      .. "/rb' is a ring of 12 rows, not 20 (capacity); pass existsok = true to replace it")
    -- a ring made by another sampler: its rows start at priority 1
    local u = ReplayBuffer({ path = dir .. "/u", capacity = 4 }):extend(rows(1, 3))
    u:sync()
    local pu = prioritized(dir .. "/u", { capacity = 4 })
    assert.are.same({ 1, 1, 1, 1, 1 }, pu:sample(5, T.Generator(1)):get("priority_weight"):totable())
  end)

  it("refuses bad indices and priorities with the offending value, changing nothing", function()
    local rb = prioritized(dir .. "/rb")
    H.raises(function() rb:update_priority(1, 1) end, "ReplayBuffer: update_priority: the buffer is empty")
    rb:extend(rows(1, 5))
    local before = rb:sample(20, T.Generator(1)):get("index"):totable()
    H.raises(function() rb:update_priority(0, 1) end,
      "ReplayBuffer: update_priority: index 0 is out of range [1, 5] (the filled rows)")
    H.raises(function() rb:update_priority({ 2, 6 }, 1) end, "update_priority: index 6 is out of range [1, 5]")
    H.raises(function() rb:update_priority({ 1, 2 }, { 1, -1 }) end,
      "ReplayBuffer: update_priority: priorities must be finite and >= 0, got -1")
    H.raises(function() rb:update_priority({ 1, 2 }, { 0 / 0, 1 }) end,
      "update_priority: priorities must be finite and >= 0, got nan")
    H.raises(function() rb:update_priority(1, math.huge) end, "priorities must be finite and >= 0, got inf")
    H.raises(function() rb:update_priority({ 1, 2, 3 }, { 1, 2 }) end,
      "update_priority: 2 priorities for 3 indices (give one, or one each)")
    H.raises(function() rb:update_priority(T.tensor({ 1.5 }), 1) end,
      "update_priority: index must hold integers (a sample's \"index\"), got dtype float32")
    H.raises(function() rb:update_priority({ 1, 1.5 }, 1) end,
      "update_priority: index must hold integers (a sample's \"index\"), got 1.5")
    H.raises(function() rb:update_priority(2.5, 1) end, "update_priority: index must hold integers")
    H.raises(function() rb:update_priority("x", 1) end,
      "update_priority: index must be a tensor, a number or an array, got 'x'")
    assert.are.same(before, rb:sample(20, T.Generator(1)):get("index"):totable())
    local u = ReplayBuffer({ path = dir .. "/u", capacity = 4 }):extend(rows(1, 2))
    H.raises(function() u:update_priority(1, 1) end,
      "ReplayBuffer: update_priority: sampler \"uniform\" keeps no priorities (sampler = \"prioritized\" does)")
  end)

  it("has torchrl's importance weights for the same priorities (TD_PYTHON with torchrl)", function()
    local theirs = torchrl("weights")
    if not theirs then return end
    local rb = prioritized(dir .. "/rb")
    rb:extend(rows(1, 8))
    rb:update_priority(T.arange(1, 8, "int64"), T.tensor(P))
    local b = rb:sample(2000, T.Generator(1))
    local compared = 0
    for j, id in ipairs(b:get("index"):totable()) do
      local w = theirs[tostring(id)]
      if w then
        assert.is_true(math.abs(b:get("priority_weight")[j] - w) <= 1e-5 * w, ("row %d: ours %.7g, torchrl %.7g")
          :format(id, b:get("priority_weight")[j], w))
        compared = compared + 1
      end
    end
    assert.is_true(compared > 1000)
  end)
end)

describe("ReplayBuffer slice sampler", function()
  -- Every piece of a sample (view num_slices x len) lies in one trajectory and in
  -- consecutive steps: t counts the steps written (1, 2, ...), so a piece that crossed
  -- the write cursor would jump from the newest step back to the oldest.
  local function check_pieces(b, len, episode_of)
    local t, ep = b:get("t"):totable(), b:get("episode"):totable()
    for s = 0, #t / len - 1 do
      for j = 2, len do
        local k = s * len + j
        assert.are.equal(t[k - 1] + 1, t[k], ("piece %d: steps %d then %d"):format(s + 1, t[k - 1], t[k]))
        assert.are.equal(ep[k - 1], ep[k], ("piece %d crosses from episode %d to %d"):format(s + 1, ep[k - 1], ep[k]))
      end
      if episode_of then assert.are.equal(episode_of[t[s * len + 1]], ep[s * len + 1]) end
    end
  end
  -- Steps first .. last of episodes whose lengths are lens (in turn), with done at each
  -- episode's last step.
  local function steps(first, lens, ep0)
    local t, ep, done = {}, {}, {}
    local e = ep0 or 1
    for _, l in ipairs(lens) do
      for j = 1, l do
        t[#t + 1], ep[#ep + 1], done[#done + 1] = first + #t, e, j == l
      end
      e = e + 1
    end
    return T.TensorDict({ t = T.tensor(t, "int64"), episode = T.tensor(ep, "int64"), done = T.tensor(done, "bool") },
      { #t })
  end

  it("draws pieces inside trajectories (traj_key), never across the write cursor of a wrapped ring", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 20, sampler = "slice", traj_key = "episode",
      slice_len = 4 })
    rb:extend(steps(1, { 6, 3, 9, 5 }))        -- 23 steps: the ring wrapped, cursor at row 4
    rb:extend(steps(24, { 4 }, 5))             -- cursor at row 8; episode 5 ends the newest rows
    local g = T.Generator(3)
    local seen_wrap = false
    for _ = 1, 30 do
      local b = rb:sample(16, g)
      assert.are.same({ 16 }, b:batch_size())
      check_pieces(b, 4)
      for _, i in ipairs(b:get("index"):totable()) do seen_wrap = seen_wrap or i == 20 end
    end
    assert.is_true(seen_wrap) -- pieces do run on from the ring's last row into its first
    assert.are.same(rb:sample(16, T.Generator(5)):get("index"):totable(),
      rb:sample(16, T.Generator(5)):get("index"):totable())
  end)

  it("cuts a single long trajectory at the write cursor", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 8, sampler = "slice", traj_key = "episode",
      num_slices = 4 })
    rb:extend(steps(1, { 12 }))               -- rows hold steps 9..12, 5..8: cursor at row 4
    local b = rb:sample(16, T.Generator(1))
    check_pieces(b, 4)
    for _, t in ipairs(b:get("t"):totable()) do assert.is_true(t >= 5 and t <= 12) end
  end)

  it("reads trajectory ends from end_key, and refuses what it cannot draw", function()
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 16, sampler = "slice", end_key = "done", slice_len = 3 })
    rb:extend(steps(1, { 4, 2, 5 }))
    local g = T.Generator(2)
    for _ = 1, 20 do check_pieces(rb:sample(9, g), 3) end
    H.raises(function() rb:sample(10, g) end, "ReplayBuffer: sample: n = 10 is not a multiple of slice_len = 3")
    local long = ReplayBuffer({ path = dir .. "/long", capacity = 16, sampler = "slice", traj_key = "episode",
      slice_len = 6 })
    long:extend(steps(1, { 4, 2, 5 }))
    H.raises(function() long:sample(12, g) end,
      "ReplayBuffer: sample: no trajectory has slice_len = 6 steps (the longest of the 3 has 5)")
    local missing = ReplayBuffer({ path = dir .. "/m", capacity = 16, sampler = "slice", traj_key = "ep",
      slice_len = 2 })
    missing:extend(steps(1, { 4 }))
    H.raises(function() missing:sample(4, g) end, "ReplayBuffer: sample: traj_key 'ep' is not a tensor leaf of the "
      .. "buffer")
  end)

  it("has torchrl's sample shape (TD_PYTHON with torchrl)", function()
    local theirs, ids = torchrl("slice"), TORCHRL_IDS
    if not theirs then return end
    local rb = ReplayBuffer({ path = dir .. "/rb", capacity = 20, sampler = "slice", traj_key = "episode",
      slice_len = 4 })
    local ep = {}
    for v in ids:gmatch("%d+") do ep[#ep + 1] = tonumber(v) end
    rb:extend(T.TensorDict({ episode = T.tensor(ep, "int64") }, { #ep }))
    local b = rb:sample(16, T.Generator(1))
    assert.are.same(theirs.shape, b:batch_size())
    assert.are.same(theirs.episode, b:get("episode"):shape())
  end)
end)
