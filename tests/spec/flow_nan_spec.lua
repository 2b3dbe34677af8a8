-- flow.DropNaN and flow.FillNaN (lua/tensordict/flow/nan.lua, issue 31): rows dropped
-- and values filled, nested keys, the default of every float leaf, infinities, the
-- counts, errors, and both nodes in a JSON recipe through tdflow.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")
local flow = require("tensordict.flow")

local nan, inf = 0 / 0, math.huge

-- A tensor's values with NaN as "nan" (NaN ~= NaN in comparisons).
local function values(t)
  local function walk(v)
    if type(v) == "table" then
      local out = {}
      for i, x in ipairs(v) do out[i] = walk(x) end
      return out
    end
    return v ~= v and "nan" or v
  end
  return walk(t:totable())
end

local function batch()
  return T.TensorDict({
    x = T.tensor({ { 1, nan }, { 3, 4 }, { 5, inf }, { 7, 8 }, { 9, 10 } }, "float32"),
    obs = { v = T.tensor({ 1, 2, 3, nan, 5 }, "float64") },
    id = T.tensor({ 1, 2, 3, 4, 5 }, "int64"),
  }, { 5 })
end

describe("flow.DropNaN", function()
  it("drops the rows where any float leaf holds a NaN in any element, nested leaves included", function()
    local node = flow.DropNaN{}
    local out = node(batch())
    assert.are.same({ 3 }, out:batch_size())
    assert.are.same({ 2, 3, 5 }, out.id:totable())
    assert.are.same({ { 3, 4 }, { 5, inf }, { 9, 10 } }, out.x:totable())
    assert.are.equal("float64", out:get({ "obs", "v" }):dtype())
    assert.are.same({ dropped_rows = 2 }, node:counts())
    node(batch())
    assert.are.same({ dropped_rows = 4 }, node:counts())
    node:open({})
    assert.are.same({ dropped_rows = 0 }, node:counts())
  end)

  it("looks at the keys given only, and at infinities with inf = true", function()
    local nested = flow.DropNaN{ keys = { { "obs", "v" } } }
    assert.are.same({ 1, 2, 3, 5 }, nested(batch()).id:totable())
    local with_inf = flow.DropNaN{ keys = { "x" }, inf = true }
    assert.are.same({ 2, 4, 5 }, with_inf(batch()).id:totable())
    assert.are.same({ dropped_rows = 2 }, with_inf:counts())
  end)

  it("passes a clean batch through untouched and drops a batch left without rows", function()
    local node = flow.DropNaN{ keys = { "x" } }
    local clean = T.TensorDict({ x = T.ones(3, 2) }, { 3 })
    assert.are.equal(clean, node(clean))
    assert.is_nil(node(T.TensorDict({ x = T.full({ 2 }, nan) }, { 2 })))
    assert.are.same({ dropped_rows = 2 }, node:counts())
    local empty = T.TensorDict({ x = T.zeros(0, 3), y = T.zeros(0) }, { 0 })
    assert.are.equal(empty, flow.DropNaN{}(empty))
    H.raises(function() flow.DropNaN{}(T.TensorDict({ x = T.ones(2) }, {})) end,
      "DropNaN: needs a batch with a batch dim to drop rows from (batch size [])")
  end)

  it("refuses keys that are not float tensors", function()
    H.raises(function() flow.DropNaN{ keys = { "id" } }(batch()) end,
      "DropNaN: 'id' has dtype int64; DropNaN works on float leaves (only they hold NaN)")
    H.raises(function() flow.DropNaN{ keys = { "nope" } }(batch()) end, "DropNaN")
    H.raises(function() flow.DropNaN{ inf = 1 } end, "DropNaN: inf: expected a boolean, got 1")
  end)
end)

describe("flow.FillNaN", function()
  it("replaces NaN by value in every float leaf, keeping infinities as pandas does", function()
    local node = flow.FillNaN{ value = -1 }
    local input = batch()
    local x_before = input.x
    local out = node(input)
    assert.are.same({ { 1, -1 }, { 3, 4 }, { 5, inf }, { 7, 8 }, { 9, 10 } }, out.x:totable())
    assert.are.same({ 1, 2, 3, -1, 5 }, out:get({ "obs", "v" }):totable())
    assert.are.equal("float32", out.x:dtype())
    assert.are.equal("float64", out:get({ "obs", "v" }):dtype())
    assert.are.same({ 1, 2, 3, 4, 5 }, out.id:totable())
    assert.are.same({ filled_nans = 2, filled_infs = 0 }, node:counts())
    -- the tensor it was given is not written: a source may share it
    assert.are.same({ 1, "nan" }, values(x_before)[1])
  end)

  it("replaces infinities with posinf and neginf, as torch's nan_to_num", function()
    local td = T.TensorDict({ a = T.tensor({ nan, inf, -inf, 2 }, "float32") }, { 4 })
    local node = flow.FillNaN{ keys = { "a" }, value = 0, posinf = 100, neginf = -100 }
    assert.are.same({ 0, 100, -100, 2 }, node(td).a:totable())
    assert.are.same({ filled_nans = 1, filled_infs = 2 }, node:counts())
    local only = flow.FillNaN{ keys = { { "obs", "v" } }, value = 7 }
    local out = only(batch())
    assert.are.same({ 1, 2, 3, 7, 5 }, out:get({ "obs", "v" }):totable())
    assert.are.same({ 1, "nan" }, values(out.x)[1])
    H.raises(function() flow.FillNaN{ keys = { "id" } }(batch()) end,
      "FillNaN: 'id' has dtype int64; FillNaN works on float leaves (only they hold NaN)")
    H.raises(function() flow.FillNaN{ value = "zero" } end, "FillNaN: value: expected a number, got \"zero\"")
  end)
end)

describe("DropNaN and FillNaN in a JSON recipe", function()
  local dir
  setup(function() dir = H.tmpdir() end)
  teardown(function() H.rmtree(dir) end)

  it("run through tdflow, their counts in the report, the output as computed here", function()
    local csv = H.write(dir .. "/m.csv", "a,b,c\n1,NA,1\n2,2,\n3,,3\n4,4,4\n5,5,5\n")
    local out = dir .. "/out"
    local recipe = H.write(dir .. "/nan.json", json.encode({
      source = { use = "CsvSource", path = csv, batch_size = 2 },
      steps = { { use = "FillNaN", keys = { "c" }, value = -1 }, { use = "DropNaN", keys = { "b" } } },
      sink = { use = "MemmapSink", path = out } }))
    local report = dir .. "/report.json"
    local _, expect = H.tdflow_runner(dir)
    expect("run " .. recipe .. " --report " .. report, 0, "\nsteps[1] FillNaN: filled nans: 1\n",
      "\nsteps[2] DropNaN: dropped rows: 2\n", "\nsource CsvSource: missing cells: 3\n")
    local td = T.load_memmap(out)
    assert.are.same({ 2, 4, 5 }, td.a:totable())
    assert.are.same({ -1, 4, 5 }, td.c:totable())
    local rep = json.decode(assert(H.read(report)))
    assert.are.same({ filled_nans = 1, filled_infs = 0 }, rep.nodes[2].counts)
    assert.are.same({ dropped_rows = 2 }, rep.nodes[3].counts)
  end)
end)
