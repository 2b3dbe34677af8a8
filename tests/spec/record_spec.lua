-- T.record (Python's @tensorclass): fields, methods, indexing, joins, errors, and the
-- tensorclass layout on disk (fixtures from tensordict 0.15.3; the round trip through
-- Python runs where TD_PYTHON has tensordict, skipped otherwise).
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

local FIX = "tests/fixtures/"

local Step = T.record { "obs", "reward", "label", name = "Step" }
function Step:total() return self.reward:sum() end
function Step:scaled(k) return Step { obs = self.obs * k, reward = self.reward * k, label = self.label,
  batch_size = self:batch_size() } end

local function step()
  return Step { obs = T.arange(1, 6):float():view(2, 3), reward = T.tensor({ 0.5, -1.5 }), label = "walk",
    batch_size = { 2 } }
end

describe("T.record", function()
  it("declares a class whose instances have fields, methods and a batch size", function()
    local r = step()
    assert.is_true(T.is_record(r))
    assert.is_true(T.is_record(r, Step))
    assert.is_false(T.is_record(r, T.record { "x" }))
    assert.is_false(T.is_tensordict(r))
    assert.are.same({ "obs", "reward", "label" }, Step.fields)
    assert.are.equal("Step", Step.name)
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, r.obs:totable())
    assert.are.equal("walk", r.label)
    assert.are.same({ 2 }, r:batch_size())
    assert.are.equal(2, #r)
    assert.are.equal(-1, r:total())
    assert.are.same({ 1, -3 }, r:scaled(2).reward:totable())
    r.reward = T.tensor({ 1, 2 })
    assert.are.equal(3, r:total())
    assert.are.equal("Step(batch_size=[2], fields={label: str, obs: f32[3], reward: f32[]})", tostring(r))
    assert.are.equal("record Step{obs, reward, label}", tostring(Step))
  end)

  it("names the field and the class in its errors, as Python's", function()
    local r = step()
    H.raises(function() return r.nope end,
      "'nope' is not a field or method of record Step (fields: obs, reward, label)")
    H.raises(function() r.nope = 1 end,
      "cannot set 'nope': record Step has no such field (fields: obs, reward, label)")
    H.raises(function() Step { obs = T.zeros(2), bad = 1 } end,
      "Step: unknown field 'bad' (fields: obs, reward, label)")
    H.raises(function() Step { obs = T.zeros(2) } end, "Step: missing fields 'reward', 'label'")
    H.raises(function() r.obs = T.zeros(3, 3) end, "obs")
    H.raises(function() T.record { "a", "a" } end, "record: field 'a' is declared twice")
    H.raises(function() T.record { "batch_size" } end, "record: 'batch_size' cannot be a field")
    H.raises(function() T.record { "a", name = "no spaces" } end, "record: name must be an identifier")
    H.raises(function() T.record { "a", nmae = "Step" } end,
      "record: unknown option 'nmae' (options: module, name, optional)")
    H.raises(function() T.record { "a", optional = { "b" } } end, "record: optional field 'b' is not declared")
    H.raises(function() T.record {} end, "record: declare at least one field")
    H.raises(function() T.stack({ r, T.TensorDict({}, { 2 }) }) end,
      "stack: element 2 is a TensorDict, not a Step record")
    local Opt = T.record { "a", "b", optional = { "b" } }
    local o = Opt { a = T.zeros(1), batch_size = { 1 } }
    assert.is_nil(o.b)
  end)

  it("indexes, joins and runs TensorDict methods into instances of the class", function()
    local r = step()
    local row = r[2]
    assert.is_true(T.is_record(row, Step))
    assert.are.same({}, row:batch_size())
    assert.are.same({ 4, 5, 6 }, row.obs:totable())
    assert.are.equal(-1.5, row:total())
    local s = T.stack({ r, r })
    assert.is_true(T.is_record(s, Step))
    assert.are.same({ 2, 2 }, s:batch_size())
    local c = T.cat({ r, r })
    assert.are.same({ 4 }, c:batch_size())
    assert.are.same({ 0.5, -1.5, 0.5, -1.5 }, c.reward:totable())
    local cl = r:clone()
    assert.is_true(T.is_record(cl, Step))
    cl.obs:fill_(0)
    assert.are.same({ 1, 2, 3 }, r.obs[1]:totable())
    assert.is_true(r:apply(function(x) return x * 2 end) ~= nil)
    assert.is_true(T.is_record(r:apply(function(x) return x * 2 end), Step))
    local parts = r:unbind(1)
    assert.is_true(T.is_record(parts[2], Step))
    assert.is_true(T.is_tensordict(r:to_tensordict()))
    assert.are.equal(r:tensordict(), r:tensordict())
    r[1] = Step { obs = T.zeros(3), reward = T.tensor(9), label = "walk" }
    assert.are.same({ 9, -1.5 }, r.reward:totable())
  end)

  it("saves in tensorclass's layout and loads the folders tensordict 0.15.3 wrote", function()
    local dir = H.tmpdir()
    local r = step()
    local m = r:memmap(dir .. "/step")
    assert.is_true(T.is_record(m, Step))
    assert.is_true(m:is_memmap())
    assert.are.equal(dir .. "/step", m:memmap_prefix())
    assert.are.equal('{"_type": "<class \'__main__.Step\'>"}', H.read(dir .. "/step/meta.json"))
    local fields_meta = json.decode(H.read(dir .. "/step/_tensordict/meta.json"))
    assert.are.equal("<class 'tensordict._td.TensorDict'>", fields_meta._type)
    local back = Step.load_memmap(dir .. "/step")
    assert.is_true(T.is_record(back, Step))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, back.obs:totable())
    assert.are.equal("walk", back.label)
    assert.is_true(T.is_tensordict(T.load_memmap(dir .. "/step"))) -- without the class: its fields
    r:consolidate(dir .. "/step.td") -- Python consolidates a tensorclass as a TensorDict too
    assert.are.equal(-1, Step.from_consolidated(dir .. "/step.td"):total())
    assert.are.equal(-1, Step.load_memmap(T.save(r, dir .. "/saved"):memmap_prefix()):total())
    r:memmap_(dir .. "/inplace")
    assert.is_true(r:is_memmap())
    H.rmtree(dir)

    local Sample = T.record { "obs", "reward", "label", "steps", "config", "inner", "missing",
      name = "Sample", optional = { "missing" } }
    local py = Sample.load_memmap(FIX .. "python-tensorclass")
    assert.is_true(T.is_record(py, Sample))
    assert.are.same({ 0.5, -1.5 }, py.reward:totable())
    assert.are.equal("walker", py.label)
    assert.are.equal(7, py.steps)
    assert.are.same({ 8, 8 }, py.config.layers)
    assert.are.same({ { 1, 2 }, { 3, 4 } }, py.inner.pos:totable())
    assert.is_nil(py.missing)
    H.raises(function() Step.load_memmap(FIX .. "python-tensorclass") end,
      "from_tensordict: 'steps' is not a field of record Step")
  end)

  it("refuses pickled fields, naming the file, the key and why", function()
    H.raises(function() T.load_memmap(FIX .. "python-tensorclass-pickled") end,
      "load_memmap: " .. FIX .. "python-tensorclass-pickled/_tensordict/extra/other.pickle: key 'extra' "
      .. "holds a value Python pickled (it is not JSON: a set, a custom object, ...); a pickle is "
      .. "Python code to run, which this reader does not do")
  end)
end)

describe("records with Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or "python3"
  local has_python = H.sh(py .. " -c 'import tensordict' >/dev/null 2>&1")
  if not has_python then
    pending("python tensordict not installed: records are not cross-checked with it")
    return
  end

  local function python(...)
    local p = io.popen(py .. " tests/interop/record_interop.py " .. table.concat({ ... }, " ") .. " 2>/dev/null")
    local out = p:read("*a")
    p:close()
    return out
  end

  it("Python loads a record saved here as its @tensorclass of that name", function()
    local dir = H.tmpdir()
    step():memmap(dir .. "/step")
    local got = json.decode(python("read", dir .. "/step"))
    assert.are.equal("Step", got.type)
    assert.are.same({ 2 }, got.batch_size)
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, got.obs)
    assert.are.same({ 0.5, -1.5 }, got.reward)
    assert.are.equal("walk", got.label)
    assert.are.equal("TensorDict", got.fields)
    -- a class Python cannot import: it refuses the folder (its _tensordict still loads)
    local err = python("unknown", dir .. "/step")
    assert.is_truthy(err:find("Could not find the class elsewhere.Step", 1, true), err)
    H.rmtree(dir)
  end)
end)
