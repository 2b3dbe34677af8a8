-- td:make_memmap_from_tensor (Python's): one new leaf in a memory-mapped folder, its file
-- and meta.json replaced atomically, without saving the folder again.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

describe("td:make_memmap_from_tensor", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function saved()
    return T.TensorDict({ a = T.zeros(2), n = { x = T.zeros(2) } }, { 2 }):memmap(dir .. "/td")
  end

  it("writes the leaf's file and meta.json entry, and the container maps it", function()
    local td = saved()
    assert.is_true(td:is_locked()) -- a memmap's result: Python adds the key all the same
    local b = td:make_memmap_from_tensor("b", T.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, "int32"))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, b:totable())
    assert.are.equal("int32", b:dtype())
    assert.are.equal(b, td.b)
    assert.is_true(td:is_locked())
    local meta = json.decode(H.read(dir .. "/td/meta.json"))
    assert.are.same({ device = "cpu", shape = { 2, 3 }, dtype = "torch.int32", is_nested = false }, meta.b)
    assert.are.equal(24, #H.read(dir .. "/td/b.memmap"))
    b[1][1] = 70 -- the leaf maps the file
    td:sync()
    assert.are.same({ 70, 2, 3 }, T.load_memmap(dir .. "/td").b[1]:totable())
    -- a key path reaches a nested folder; copy_data = false leaves zeros
    local y = td:make_memmap_from_tensor({ "n", "y" }, T.ones(2, 2), { copy_data = false })
    assert.are.same({ { 0, 0 }, { 0, 0 } }, y:totable())
    assert.is_not_nil(json.decode(H.read(dir .. "/td/n/meta.json")).y)
    -- an empty leaf gets no file, as Python writes it
    td:make_memmap_from_tensor("e", T.zeros(2, 0))
    assert.are.same({ 2, 0 }, T.load_memmap(dir .. "/td").e:shape())
    -- no temporaries are left beside the files
    assert.is_nil(H.ls_a(dir .. "/td"):find(".tmp-", 1, true))
  end)

  it("refuses what Python refuses, and a read-only load, writing nothing", function()
    local td = saved()
    td:make_memmap_from_tensor("b", T.ones(2))
    H.raises(function() td:make_memmap_from_tensor("b", T.ones(2)) end,
      "make_memmap_from_tensor: key 'b' exists; delete it first (as Python requires)")
    H.raises(function() td:make_memmap_from_tensor("c", T.ones(3)) end,
      "make_memmap_from_tensor: key 'c': the tensor's shape [3] does not start with the batch size [2]")
    assert.is_nil(json.decode(H.read(dir .. "/td/meta.json")).c)
    assert.is_nil(io.open(dir .. "/td/c.memmap"))
    H.raises(function() T.TensorDict({}, {}):make_memmap_from_tensor("c", T.ones(1)) end,
      "make_memmap_from_tensor: the TensorDict is not memory-mapped")
    H.raises(function() T.load_memmap(dir .. "/td"):make_memmap_from_tensor("c", T.ones(2)) end,
      "make_memmap_from_tensor: the TensorDict was loaded read-only: load it with {mode = 'r+'}")
    H.raises(function() td:make_memmap_from_tensor("c", 3) end, "make_memmap_from_tensor: expected a tensor, got 3")
    H.raises(function() td:make_memmap_from_tensor("c", T.ones(2), { copy = true }) end,
      "make_memmap_from_tensor: unknown option 'copy'")
    local rw = T.load_memmap(dir .. "/td", { mode = "r+" })
    assert.are.same({ 5, 6 }, rw:make_memmap_from_tensor("c", T.tensor({ 5, 6 })):totable())
    assert.are.same({ 5, 6 }, T.load_memmap(dir .. "/td").c:totable())
  end)

  it("names what is wrong with a key that is not a string or a key path of strings (issue 28)", function()
    local td = saved()
    local before = H.read(dir .. "/td/meta.json")
    H.raises(function() td:make_memmap_from_tensor({ 4, 3 }, T.ones(2)) end,
      "make_memmap_from_tensor: key path entry 1 is 4; key paths are arrays of strings")
    H.raises(function() td:make_memmap_from_tensor({ {}, 5 }, T.ones(2)) end,
      "make_memmap_from_tensor: key path entry 1 is a table; key paths are arrays of strings")
    H.raises(function() td:make_memmap_from_tensor({ "n", 5 }, T.ones(2)) end,
      "make_memmap_from_tensor: key path entry 2 is 5; key paths are arrays of strings")
    H.raises(function() td:make_memmap_from_tensor({}, T.ones(2)) end,
      "make_memmap_from_tensor: keys are strings or arrays of strings (key paths), got a table")
    H.raises(function() td:make_memmap_from_tensor(7, T.ones(2)) end,
      "make_memmap_from_tensor: keys are strings or arrays of strings (key paths), got 7")
    H.raises(function() td:make_memmap_from_tensor({ "a", "x" }, T.ones(2)) end,
      "make_memmap_from_tensor: key path {\"a\", \"x\"} goes through 'a', which is a tensor, not a TensorDict")
    H.raises(function() td:make_memmap_from_tensor({ "m", "x" }, T.ones(2)) end,
      "make_memmap_from_tensor: no key {\"m\", \"x\"} in the TensorDict")
    assert.are.equal(before, H.read(dir .. "/td/meta.json"))
    -- odd but valid keys are encoded in file names and kept raw in meta.json
    assert.are.same({ 1, 1 }, td:make_memmap_from_tensor("a/b c", T.ones(2)):totable())
    assert.are.same({ 2, 2 }, td:make_memmap_from_tensor("", T.full({ 2 }, 2)):totable())
    local back = T.load_memmap(dir .. "/td")
    assert.are.same({ 1, 1 }, back["a/b c"]:totable())
    assert.are.same({ 2, 2 }, back[""]:totable())
    assert.is_not_nil(io.open(dir .. "/td/a%2Fb%20c.memmap"))
  end)

  it("adds to a record's fields in tensorclass's folder", function()
    local Step = T.record { "obs", "extra", optional = { "extra" } }
    local r = Step { obs = T.zeros(2), batch_size = { 2 } }:memmap(dir .. "/step")
    r:make_memmap_from_tensor("extra", T.ones(2))
    assert.is_not_nil(json.decode(H.read(dir .. "/step/_tensordict/meta.json")).extra)
    assert.are.same({ 1, 1 }, Step.load_memmap(dir .. "/step").extra:totable())
  end)
end)
