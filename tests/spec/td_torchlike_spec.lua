-- td_torchlike_spec.lua: the TensorDict counterparts of issue 30's torch functions, as
-- Python tensordict 0.15 has them: where, flip, roll, new_zeros / new_ones / new_full /
-- new_empty, T.zeros_like(td) and the other *_like, is_contiguous, sorted_keys,
-- filter_empty_, set_non_tensor / get_non_tensor, is_consolidated, map_iter, apply's
-- options, T.stack / T.cat into out, addcmul / addcdiv, T.from_dict and
-- auto_batch_size_, and flow.Seq{} as the identity. Exact values, shapes, dtypes, lock
-- behaviour, nested TensorDicts, non-tensor values, every error message, and a block
-- that runs the same calls through Python's tensordict.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

-- batch [2, 3]: a float32 leaf, a nested int64 leaf with a feature dim, a string
local function sample()
  return T.TensorDict({
    a = T.arange(1, 6):view(2, 3):float(),
    n = { b = T.arange(1, 12):view(2, 3, 2) },
    s = "label",
  }, { 2, 3 })
end

local function shape(t) return t:shape() end
local function batch(td) return td:batch_size() end

describe("td:where(cond, other)", function()
  it("keeps the leaves where cond is true and takes other elsewhere, cond over the leading batch dims", function()
    local td = sample()
    local r = td:where(T.tensor({ true, false }), 0)
    assert.are.same({ { 1, 2, 3 }, { 0, 0, 0 } }, r.a:totable())
    assert.are.same({ { { 1, 2 }, { 3, 4 }, { 5, 6 } }, { { 0, 0 }, { 0, 0 }, { 0, 0 } } }, r.n.b:totable())
    assert.are.equal("float32", r.a:dtype())
    assert.are.equal("int64", r.n.b:dtype())
    assert.are.equal("label", r.s)
    assert.are.same({ 2, 3 }, batch(r))
    -- a 2-d cond over both batch dims, other a TensorDict with the same keys
    local cond = T.tensor({ { true, false, true }, { false, true, false } })
    local o = td:where(cond, td * 10)
    assert.are.same({ { 1, 20, 3 }, { 40, 5, 60 } }, o.a:totable())
    assert.are.same({ { 1, 2 }, { 30, 40 }, { 5, 6 } }, o.n.b[1]:totable())
    -- a fraction promotes an integer leaf to float32, as torch.where does
    local f = td:where(cond, -1.5)
    assert.are.equal("float32", f.n.b:dtype())
    assert.are.same({ { -1.5, -1.5 }, { 9, 10 }, { -1.5, -1.5 } }, f.n.b[2]:totable())
    -- T.where(cond, td, other) is the same call
    assert.is_true(T.where(cond, td, 0):equal(td:where(cond, 0)))
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, td.a:totable()) -- td is not changed
  end)

  it("raises for a bad cond or other, naming the call", function()
    local td = sample()
    H.raises(function() td:where(T.tensor({ 1, 0 }), 0) end, "where: mask must be a bool tensor, got float32")
    H.raises(function() td:where({ true, false }, 0) end, "where: mask must be a bool tensor, got a table")
    H.raises(function() td:where(T.ones(2, 3, 2, 1):bool(), 0) end,
      "where: mask of shape [2, 3, 2, 1] has more dims than the batch size [2, 3]")
    H.raises(function() td:where(T.tensor({ true, false }), T.zeros(2)) end,
      "where: other must be a TensorDict or a number, got a tensor")
    H.raises(function() td:where(T.tensor({ true, false }), "x") end,
      "where: the other operand must be a TensorDict or a number, got 'x'")
    H.raises(function() T.TensorDict.methods.where(5, T.tensor({ true }), 0) end,
      "where: expected a TensorDict, got 5")
  end)
end)

describe("td:flip(dims) and td:roll(shifts [, dims])", function()
  it("flip reverses batch dims (1-based, negative from the end) and leaves the feature dims", function()
    local td = sample()
    assert.are.same({ { 4, 5, 6 }, { 1, 2, 3 } }, td:flip(1).a:totable())
    assert.are.same({ { 3, 2, 1 }, { 6, 5, 4 } }, td:flip(-1).a:totable())
    assert.are.same({ { 6, 5, 4 }, { 3, 2, 1 } }, td:flip({ 1, 2 }).a:totable())
    local r = td:flip(2)
    assert.are.same({ { { 5, 6 }, { 3, 4 }, { 1, 2 } }, { { 11, 12 }, { 9, 10 }, { 7, 8 } } }, r.n.b:totable())
    assert.are.equal("int64", r.n.b:dtype())
    assert.are.equal("label", r.s)
    r.a:fill_(0) -- a copy
    assert.are.same({ 1, 2, 3 }, td.a[1]:totable())
  end)

  it("roll shifts along batch dims; without dims it rolls the flattened batch", function()
    local td = sample()
    assert.are.same({ { 3, 1, 2 }, { 6, 4, 5 } }, td:roll(1, 2).a:totable())
    assert.are.same({ { 6, 4, 5 }, { 3, 1, 2 } }, td:roll({ 1, 1 }, { 1, 2 }).a:totable())
    assert.are.same({ { 2, 3, 1 }, { 5, 6, 4 } }, td:roll(-1, -1).a:totable())
    local flat = td:roll(1)
    assert.are.same({ { 6, 1, 2 }, { 3, 4, 5 } }, flat.a:totable())
    assert.are.same({ { { 11, 12 }, { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 }, { 9, 10 } } }, flat.n.b:totable())
    assert.are.same({ { 6, 1, 2 }, { 3, 4, 5 } }, td:roll(1, {}).a:totable())
    assert.are.equal("label", flat.s)
    local empty = T.TensorDict({ x = T.zeros(0, 2) }, { 0 })
    assert.are.same({ 0, 2 }, shape(empty:roll(3).x))
  end)

  it("move stacked non-tensor values with the rows and keep the dim names, as Python's", function()
    local td = T.stack({ T.TensorDict({ s = "a", x = T.zeros(1) }, {}), T.TensorDict({ s = "b", x = T.ones(1) }, {}),
      T.TensorDict({ s = "c", x = T.ones(1) * 2 }, {}) }, 1)
    assert.are.same({ "c", "b", "a" }, td:flip(1).s)
    assert.are.same({ "c", "a", "b" }, td:roll(1).s)
    assert.are.same({ "b", "c", "a" }, td:roll(-1, 1).s)
    assert.are.same({ { 1 }, { 2 }, { 0 } }, td:roll(-1, 1).x:totable())
    assert.are.same({ "a", "b", "c" }, td.s)
    local named = T.TensorDict({ x = T.arange(1, 6):view(2, 3) }, { 2, 3 }, { names = { "r", "c" } })
    assert.are.same({ "r", "c" }, named:roll(1):names())
    assert.are.same({ "r", "c" }, named:flip(2):names())
    assert.are.same({ { 5, 6, 4 }, { 2, 3, 1 } }, named:roll({ 1, -4 }, { 1, 2 }).x:totable())
    assert.are.same({ 0 }, shape(T.TensorDict({ x = T.zeros(0) }, { 0 }):flip(1).x))
    assert.are.same({ 3 }, shape(T.TensorDict({ x = T.zeros(3) }, {}):roll(1).x))
  end)

  it("raises for dims outside the batch dims and for shifts that do not match the dims", function()
    local td = sample()
    H.raises(function() td:flip(3) end, "flip: dim 3 is out of range for 2 batch dims (expected 1..2 or -2..-1)")
    H.raises(function() td:flip({ 1, -2 }) end, "flip: dim 1 appears more than once in the dims [1, -2]")
    H.raises(function() td:flip("x") end, "flip: dims must be a number or a table of numbers, got 'x'")
    H.raises(function() td:roll(1, 3) end, "roll: dim 3 is out of range for 2 batch dims")
    H.raises(function() td:roll({ 1, 2 }, 1) end, "roll: shifts and dims must align: 2 shifts for 1 dims")
    H.raises(function() td:roll(1, { 1, 2 }) end, "roll: shifts and dims must align: 1 shifts for 2 dims")
    H.raises(function() td:roll({ 1, 2 }) end, "roll: without dims, shifts must be one integer, got 2 shifts")
    H.raises(function() td:roll(0.5, 1) end, "roll: shifts must be integers, got 0.5 at position 1")
    H.raises(function() td:roll("x") end, "roll: shifts must be an integer or a table of integers, got 'x'")
    H.raises(function() T.TensorDict.methods.flip(5, 1) end, "flip: expected a TensorDict, got 5")
  end)
end)

describe("new_zeros, new_ones, new_empty, new_full", function()
  it("give batch size `size` with each leaf's dims past the batch dims kept, as Python's", function()
    local td = sample()
    local z = td:new_zeros(4)
    assert.are.same({ 4 }, batch(z))
    assert.are.same({ 4 }, shape(z.a))
    assert.are.same({ 4, 2 }, shape(z.n.b))
    assert.are.same({ 4 }, batch(z.n))
    assert.are.equal("float32", z.a:dtype())
    assert.are.equal("int64", z.n.b:dtype())
    assert.are.same({ 0, 0, 0, 0 }, z.a:totable())
    assert.are.equal("label", z.s)
    assert.are.same({ 2, 2 }, batch(td:new_zeros({ 2, 2 })))
    assert.are.same({ 2, 2, 2 }, shape(td:new_zeros(2, 2).n.b))
    assert.are.same({}, batch(td:new_zeros()))
    assert.are.same({ 2 }, shape(td:new_zeros({}).n.b))
    local o = td:new_ones(3, { dtype = "int32" })
    assert.are.same({ 1, 1, 1 }, o.a:totable())
    assert.are.equal("int32", o.a:dtype())
    assert.are.equal("int32", o.n.b:dtype())
    local e = td:new_empty({ 5, 1 }, { dtype = "float64" })
    assert.are.same({ 5, 1, 2 }, shape(e.n.b))
    assert.are.equal("float64", e.a:dtype())
    local f = td:new_full(3, 7)
    assert.are.same({ 7, 7, 7 }, f.a:totable())
    assert.are.same({ { 7, 7 }, { 7, 7 }, { 7, 7 } }, f.n.b:totable())
    assert.are.equal("int64", f.n.b:dtype())
    local fb = td:new_full({ 2 }, true, { dtype = "bool" })
    assert.are.same({ true, true }, fb.a:totable())
    assert.are.equal(2.5, td:new_full({}, 2.5).a:item())
    assert.is_false(z:is_locked())
  end)

  it("keep a nested TensorDict's extra batch dims and align dim names on the right", function()
    local td = T.TensorDict({ m = T.TensorDict({ c = T.zeros(2, 3, 5) }, { 2, 3 }) }, { 2 }, { names = { "row" } })
    local z = td:new_zeros(4, 1)
    assert.are.same({ 4, 1, 3 }, batch(z.m))
    assert.are.same({ 4, 1, 3, 5 }, shape(z.m.c))
    assert.are.same({ false, "row" }, z:names())
    local named = T.TensorDict({ x = T.zeros(2, 3) }, { 2, 3 }, { names = { "r", "c" } })
    assert.are.same({ "c" }, named:new_ones(5):names())
  end)

  it("raise for bad sizes, values and options", function()
    local td = sample()
    H.raises(function() td:new_zeros(-1) end, "new_zeros: sizes must be non-negative integers, got -1 at position 1")
    H.raises(function() td:new_ones(2, "x") end, "new_ones: sizes must be non-negative integers, got 'x' at position 2")
    H.raises(function() td:new_empty({ 2.5 }) end,
      "new_empty: sizes must be non-negative integers, got 2.5 at position 1")
    H.raises(function() td:new_zeros(2, { dtype = "nope" }) end, "new_zeros: unknown dtype 'nope'")
    H.raises(function() td:new_zeros(2, { device = "cpu" }) end, "new_zeros: unknown option 'device' (options: dtype)")
    H.raises(function() td:new_full(2) end, "new_full: the fill value must be a number or a boolean, got nil")
    H.raises(function() td:new_full("x", 1) end, "new_full: size must be an integer or a table of integers, got 'x'")
    H.raises(function() td:new_full({ -2 }, 1) end,
      "new_full: sizes must be non-negative integers, got -2 at position 1")
    H.raises(function() T.TensorDict.methods.new_zeros(5, 2) end, "new_zeros: expected a TensorDict, got 5")
    local stacked = T.stack({ T.TensorDict({ s = "a" }, {}), T.TensorDict({ s = "b" }, {}) }, 1)
    H.raises(function() stacked:new_zeros(3) end, "new_zeros: the non-tensor value 's' varies over the batch dims "
      .. "(a stack of values), so it has no value for batch size [3]")
    assert.are.same({ "a", "b" }, stacked:new_ones(2).s) -- the same batch size keeps them
  end)
end)

describe("T.zeros_like(td) and the other *_like constructors", function()
  it("accept a TensorDict: its layout and batch size, every leaf new, of its dtype or the one given", function()
    local td = sample()
    local z = T.zeros_like(td)
    assert.are.same({ 2, 3 }, batch(z))
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, z.a:totable())
    assert.are.equal("int64", z.n.b:dtype())
    assert.are.equal("label", z.s)
    assert.are.equal("float64", T.zeros_like(td, "float64").n.b:dtype())
    assert.are.same({ 1, 1 }, T.ones_like(td).n.b[2][3]:totable())
    local f = T.full_like(td, 2.5, "float32")
    assert.are.same({ 2.5, 2.5 }, f.n.b[1][1]:totable())
    assert.are.equal(2, T.full_like(td, 2.5).n.b[1][1][1]) -- cast to the leaf's int64
    assert.are.same({ 2, 3, 2 }, shape(T.empty_like(td).n.b))
    local r = T.rand_like(td, "float64")
    assert.are.equal("float64", r.n.b:dtype())
    assert.is_true(r.a:ge(0):all() and r.a:lt(1):all())
    assert.are.same({ 2, 3, 2 }, shape(T.randn_like(td, "float32").n.b))
    assert.are.equal("int32", td:ones_like("int32").a:dtype())
  end)

  it("raise for what is neither a tensor nor a TensorDict, and for a bad dtype or value", function()
    local td = sample()
    H.raises(function() T.ones_like("x") end, "ones_like: expected a tensor or a TensorDict, got 'x'")
    H.raises(function() T.zeros_like(td, "nope") end, "zeros_like: unknown dtype 'nope'")
    H.raises(function() T.full_like(td, "x") end, "full_like: the fill value must be a number or a boolean, got 'x'")
    H.raises(function() T.rand_like(td) end, "rand_like: a leaf of dtype int64 cannot hold random floats "
      .. "(pass a floating dtype: td:rand_like(\"float32\"))")
  end)
end)

describe("is_contiguous, sorted_keys, filter_empty_", function()
  it("is_contiguous: every tensor leaf, nested ones too", function()
    local td = sample()
    assert.is_true(td:is_contiguous())
    local t = T.TensorDict({ x = T.zeros(3, 2):t(), s = "v" }, { 2 })
    assert.is_false(t:is_contiguous())
    assert.is_true(t:contiguous():is_contiguous())
    assert.is_false(T.TensorDict({ n = { y = T.zeros(3, 2):t() } }, { 2 }):is_contiguous())
    assert.is_true(T.TensorDict({}, {}):is_contiguous())
  end)

  it("sorted_keys: the top-level keys, sorted", function()
    local td = T.TensorDict({ z = T.zeros(1), a = T.zeros(1), m = { b = T.zeros(1) }, c = "v" }, { 1 })
    assert.are.same({ "a", "c", "m", "z" }, td:sorted_keys())
  end)

  it("filter_empty_ removes nested TensorDicts with no leaf at any depth, in place", function()
    local td = T.TensorDict({ a = T.zeros(2), e = {}, f = { g = {} }, h = { i = T.zeros(2) }, v = { s = "kept" } },
      { 2 })
    assert.are.equal(td, td:filter_empty_())
    assert.are.same({ "a", "h", "v" }, td:sorted_keys())
    assert.are.same({ "i" }, td.h:sorted_keys())
    td:lock()
    assert.are.equal(td, td:filter_empty_()) -- nothing to remove: no change of keys
    td:unlock():set("e", T.TensorDict({}, { 2 })):lock()
    H.raises(function() td:filter_empty_() end,
      "filter_empty_: cannot remove the empty TensorDict 'e': the TensorDict is locked "
      .. "(unlock() it first, or use td:unlocked(fn))")
    td:unlocked(function(u) u:filter_empty_() end)
    assert.is_false(td:has("e"))
    assert.is_true(td:is_locked())
  end)
end)

describe("set_non_tensor and get_non_tensor", function()
  it("store any JSON value as a non-tensor value, key paths making nested TensorDicts", function()
    local td = T.TensorDict({ a = T.zeros(2) }, { 2 })
    assert.are.equal(td, td:set_non_tensor("s", "hi"))
    td:set_non_tensor({ "n", "x" }, 3)
    td:set_non_tensor("cfg", { lr = 0.5, layers = { 2, 3 } }) -- set would make a nested TensorDict
    td:set_non_tensor("list", { 1, 2 })
    td:set_non_tensor("flag", false)
    assert.are.equal("hi", td:get_non_tensor("s"))
    assert.are.equal(3, td:get_non_tensor({ "n", "x" }))
    assert.are.same({ 2 }, td.n:batch_size())
    assert.are.equal(0.5, td:get_non_tensor("cfg").lr)
    assert.are.same({ 2, 3 }, td:get_non_tensor("cfg").layers)
    assert.is_false(T.is_tensordict(td:get("cfg")))
    assert.are.same({ 1, 2 }, td:get_non_tensor("list"))
    assert.is_false(td:get_non_tensor("flag"))
    assert.are.equal(td.a, td:get_non_tensor("a")) -- a tensor leaf comes back as get gives it
    assert.are.equal("dflt", td:get_non_tensor("missing", "dflt"))
    assert.is_nil(td:get_non_tensor("missing", nil))
    -- round trip through memmap keeps them non-tensor
    local dir = H.tmpdir()
    td:memmap(dir .. "/nt")
    local back = T.load_memmap(dir .. "/nt")
    assert.are.equal(0.5, back:get_non_tensor("cfg").lr)
    H.rmtree(dir)
  end)

  it("refuse tensors, nil and a locked TensorDict, and raise for a missing key without a default", function()
    local td = T.TensorDict({ a = T.zeros(2) }, { 2 })
    H.raises(function() td:set_non_tensor("t", T.zeros(2)) end,
      "set_non_tensor: the value for 't' is a tensor; non-tensor values are strings, numbers, booleans "
      .. "and tables (set it with set)")
    H.raises(function() td:set_non_tensor("t", td) end, "set_non_tensor: the value for 't' is a TensorDict")
    H.raises(function() td:set_non_tensor("t", nil) end,
      "set_non_tensor: the value for 't' is nil (use del to remove a key)")
    H.raises(function() td:set_non_tensor("t", print) end, "set_non_tensor: cannot store a function under 't'")
    H.raises(function() td:set_non_tensor(3, "x") end, "set_non_tensor: ")
    H.raises(function() td:get_non_tensor("zz") end, "get_non_tensor: no key 'zz' in the TensorDict (keys: 'a')")
    H.raises(function() td:get_non_tensor({ "n", "zz" }) end, "get_non_tensor: no key {\"n\", \"zz\"}")
    td:set_non_tensor("s", "v"):lock()
    H.raises(function() td:set_non_tensor("s", "w") end,
      "set_non_tensor: cannot set key 's': the TensorDict is locked (unlock() it first, or use td:unlocked(fn))")
    H.raises(function() td:set_non_tensor({ "p", "q" }, 1) end,
      "set_non_tensor: cannot set key {\"p\", \"q\"}: the TensorDict is locked")
    assert.are.equal("v", td:get_non_tensor("s"))
    td:unlocked(function(u) u:set_non_tensor("s", "w") end)
    assert.are.equal("w", td:get_non_tensor("s"))
  end)
end)

describe("consolidate() and is_consolidated()", function()
  it("puts every tensor leaf in one block; a clone or an ordinary TensorDict is not consolidated", function()
    local td = sample()
    td:set("h", T.ones(2, 3, "float16"))
    assert.is_false(td:is_consolidated())
    local c = td:consolidate()
    assert.is_true(c:is_consolidated())
    assert.is_true(c:equal(td))
    assert.are.equal("label", c.s)
    assert.are.equal("float16", c.h:dtype())
    assert.is_false(c:clone():is_consolidated())
    c.a:fill_(0) -- a copy
    assert.are.equal(1, td.a[1][1])
    local dir = H.tmpdir()
    td:consolidate(dir .. "/c.td")
    assert.is_true(T.from_consolidated(dir .. "/c.td"):is_consolidated())
    H.rmtree(dir)
    assert.is_false(T.TensorDict({}, {}):consolidate():is_consolidated())
    H.raises(function() T.TensorDict.methods.is_consolidated(5) end, "is_consolidated: expected a TensorDict, got 5")
  end)
end)

describe("td:map_iter(fn, opts)", function()
  local function data() return T.TensorDict({ a = T.arange(1, 10):float() }, { 10 }) end
  local function double(x) return x * 2 end

  it("hands out each chunk's result in order, inline or from worker processes, the same for any count", function()
    for _, w in ipairs({ 0, 2 }) do
      local got = {}
      for r in data():map_iter(double, { workers = w, chunk = 3 }) do got[#got + 1] = r.a:totable() end
      assert.are.same({ { 2, 4, 6 }, { 8, 10, 12 }, { 14, 16, 18 }, { 20 } }, got)
    end
    local seeded = {}
    for _, w in ipairs({ 0, 3 }) do
      local parts = {}
      for r in data():map_iter(function(x) return x:apply(function(l) return T.rand(l:shape()) end) end,
        { workers = w, chunk = 4, seed = 9 }) do
        parts[#parts + 1] = r
      end
      seeded[w] = T.cat(parts, 1).a:totable()
    end
    assert.are.same(seeded[0], seeded[3])
    local rows = 0
    for r in data():map_iter(double, { workers = 2, chunk = 2, ordered = false }) do rows = rows + r:batch_size()[1] end
    assert.are.equal(10, rows)
    for _ in T.TensorDict({ a = T.zeros(0) }, { 0 }):map_iter(double, { workers = 0 }) do error("no chunk") end
  end)

  it("raises a chunk's error at the iterator's call, then ends", function()
    local function fail_late(x)
      if x.a[1] > 3 then error("too big") end
      return x
    end
    for _, w in ipairs({ 0, 2 }) do
      local it = data():map_iter(fail_late, { workers = w, chunk = 3 })
      assert.are.same({ 1, 2, 3 }, it().a:totable())
      local err = H.raises(function() it() end, "too big")
      -- chunks 2 and 3 both fail; ordered, chunk 2's error is the one raised
      local want = w == 0 and "map_iter: chunk 2 failed: " or "map_iter: chunk 2 failed in worker %d"
      assert.truthy(err:find(want), err)
      assert.is_nil(it())
    end
  end)

  it("hands out an ordered chunk's result before a later chunk's error, whichever came first", function()
    local function slow_first(x)
      if x.a[1] == 1 then -- chunk 1 comes in after chunk 2's error
        local ffi = require("ffi")
        pcall(ffi.cdef, "int usleep(unsigned int usec);")
        ffi.C.usleep(300000)
      end
      if x.a[1] > 3 then error("too big") end
      return x
    end
    local it = data():map_iter(slow_first, { workers = 2, chunk = 3 })
    assert.are.same({ 1, 2, 3 }, it().a:totable())
    local err = H.raises(function() it() end, "too big")
    assert.truthy(err:find("map_iter: chunk 2 failed in worker %d"), err)
    assert.is_nil(it())
  end)

  it("raises for bad arguments before forking", function()
    local td = data()
    H.raises(function() td:map_iter(3) end, "map_iter: expected a function, got 3")
    H.raises(function() td:map_iter(double, { out = td }) end,
      "map_iter: unknown option 'out' (options: chunk, ordered, seed, timeout, workers)")
    H.raises(function() td:map_iter(double, { workers = -1 }) end,
      "map_iter: workers must be a non-negative integer, got -1")
    H.raises(function() td:map_iter(double, { chunk = 0 }) end, "map_iter: chunk must be a positive integer, got 0")
    H.raises(function() T.TensorDict({}, {}):map_iter(double) end,
      "map_iter: the TensorDict needs at least one batch dim (it has batch size [])")
    H.raises(function() td:map_iter(function() return 5 end, { workers = 0 })() end,
      "map_iter: chunk 1 failed: fn returned 5 for rows 1..1, expected a TensorDict")
    H.raises(function() T.TensorDict.methods.map_iter(5, double) end, "map_iter: expected a TensorDict, got 5")
  end)
end)

describe("td:apply(fn, ...others, {default =, call_on_nested =, out =})", function()
  it("takes Python's options", function()
    local td = sample()
    local other = T.TensorDict({ a = T.ones(2, 3) }, { 2, 3 })
    local r = td:apply(function(x, y) return x + y end, other, { default = 100 })
    assert.are.same({ 2, 3, 4 }, r.a[1]:totable())
    assert.are.same({ 101, 102 }, r.n.b[1][1]:totable())
    H.raises(function() td:apply(function(x, y) return x + y end, other) end,
      "apply: TensorDict argument 2 has no key 'n'")
    local seen = {}
    td:apply(function(x)
      seen[#seen + 1] = T.is_tensordict(x) and "td" or "tensor"
      return x
    end, { call_on_nested = true })
    table.sort(seen)
    assert.are.same({ "td", "tensor" }, seen)
    local out = T.TensorDict({ keep = T.zeros(2, 3) }, { 2, 3 })
    assert.are.equal(out, td:apply(function(x) return x * 2 end, { out = out }))
    assert.are.same({ 2, 4, 6 }, out.a[1]:totable())
    assert.is_true(out:has("keep"))
    out:lock()
    H.raises(function() td:apply(function(x) return x end, { out = out }) end,
      "apply: out is locked (the results are set into it): unlock() it first")
  end)
end)

describe("T.stack / T.cat with {out = td}", function()
  it("write the joined result into out's leaves and return out", function()
    local a = T.TensorDict({ x = T.tensor({ 1, 2, 3 }), n = { y = T.tensor({ 1, 2, 3 }, "int64") } }, { 3 })
    local b = a * 2
    local out = T.TensorDict({ x = T.zeros(2, 3), n = { y = T.zeros(2, 3, "int64") }, extra = T.zeros(2, 3) }, { 2, 3 })
    local x_before = out.x
    assert.are.equal(out, T.stack({ a, b }, 1, { out = out }))
    assert.are.same({ { 1, 2, 3 }, { 2, 4, 6 } }, out.x:totable())
    assert.are.same({ { 1, 2, 3 }, { 2, 4, 6 } }, x_before:totable()) -- in place
    assert.are.same({ { 1, 2 }, { 2, 4 }, { 3, 6 } }, T.stack({ a, b }, 2, { out = out:new_zeros(3, 2) }).x:totable())
    out:lock() -- values written in place: a locked out takes them, as Python's
    T.stack({ b, a }, 1, { out = out })
    assert.are.same({ 2, 4, 6 }, out.x[1]:totable())
    local flat = T.TensorDict({ x = T.zeros(6, "float64"), n = { y = T.zeros(6, "int64") } }, { 6 })
    assert.are.equal(flat, T.cat({ a, b }, 1, { out = flat }))
    assert.are.same({ 1, 2, 3, 2, 4, 6 }, flat.x:totable())
    assert.are.equal("float64", flat.x:dtype())
  end)

  it("raise for an out of another batch size, without a leaf, or of a dtype torch would not cast to", function()
    local a = T.TensorDict({ x = T.tensor({ 1, 2, 3 }) }, { 3 })
    H.raises(function() T.stack({ a, a }, 1, { out = T.TensorDict({ x = T.zeros(3, 2) }, { 3, 2 }) }) end,
      "stack: out has batch size [3, 2]; the stacked batch size is [2, 3]")
    H.raises(function() T.cat({ a, a }, 1, { out = T.TensorDict({ x = T.zeros(5) }, { 5 }) }) end,
      "cat: out has batch size [5]; the joined batch size is [6]")
    H.raises(function() T.stack({ a, a }, 1, { out = T.TensorDict({ z = T.zeros(2, 3) }, { 2, 3 }) }) end,
      "stack: out has no key 'x' (it must hold every leaf of the result)")
    H.raises(function() T.stack({ a, a }, 1, { out = T.TensorDict({ x = T.zeros(2, 3, "int32") }, { 2, 3 }) }) end,
      "stack: the result's float32 leaf 'x' cannot be cast to out's int32 leaf")
    H.raises(function() T.stack({ a, a }, 1, { out = 3 }) end, "stack: out must be a TensorDict, got 3")
    H.raises(function() T.cat({ a, a }, 1, { into = a }) end, "cat: unknown option 'into' (options: out)")
  end)
end)

describe("td:addcmul / addcdiv (and the _ forms)", function()
  it("compute td + value * t1 * t2 (or / t2) leaf by leaf", function()
    local td = T.TensorDict({ x = T.tensor({ 1, 2 }), n = { y = T.tensor({ 4, 6 }) } }, { 2 })
    local two = T.TensorDict({ x = T.tensor({ 2, 2 }), n = { y = T.tensor({ 2, 4 }) } }, { 2 })
    assert.are.same({ 5, 6 }, td:addcmul(two, two).x:totable())
    assert.are.same({ 6, 14 }, td:addcmul(two, two, 0.5).n.y:totable())
    assert.are.same({ 2, 3 }, td:addcdiv(two, two).x:totable())
    assert.are.same({ 6, 10 }, td:addcdiv(two, T.TensorDict({ x = T.ones(2), n = { y = T.ones(2) } }, { 2 }), 1).n.y
      :totable())
    td:lock() -- in place on values, as td:add_: allowed on a locked TensorDict, as in Python
    assert.are.equal(td, td:addcmul_(two, two, 2))
    assert.are.same({ 9, 10 }, td.x:totable())
    td:addcdiv_(two, two)
    assert.are.same({ 10, 11 }, td.x:totable())
    H.raises(function() td:addcmul(1, two) end, "addcmul: tensor1 must be a TensorDict, got 1")
    H.raises(function() td:addcdiv_(two, "x") end, "addcdiv_: tensor2 must be a TensorDict, got 'x'")
    H.raises(function() td:addcmul(two, two, "x") end, "addcmul: value must be a number, got 'x'")
    H.raises(function() T.TensorDict.methods.addcmul(5, two, two) end, "addcmul: expected a TensorDict, got 5")
  end)
end)

describe("td:nansum / nanmean", function()
  local nan = 0 / 0
  local function nans()
    return T.TensorDict({ a = T.tensor({ { 1, nan, 3 }, { nan, nan, 6 } }),
      n = { b = T.tensor({ { 1, 2, 3 }, { 4, 5, nan } }, "float64") }, s = "v" }, { 2, 3 })
  end

  it("reduce each leaf over batch dims skipping NaNs, over all its elements, or all leaves as one", function()
    local td = nans()
    local r = td:nansum(2)
    assert.are.same({ 4, 6 }, r.a:totable())
    assert.are.same({ 6, 9 }, r.n.b:totable())
    assert.are.same({ 2 }, r:batch_size())
    assert.are.equal("v", r.s)
    assert.are.same({ 2, 1 }, td:nansum(-1, { keepdim = true }):batch_size())
    assert.are.equal(10, td:nansum({ 1, 2 }).a:item())
    local m = td:nanmean(1)
    local means = m.a:totable()
    assert.are.equal(1, means[1])
    assert.is_true(means[2] ~= means[2]) -- every value NaN: NaN, as torch
    assert.are.equal(4.5, means[3])
    local all = td:nansum()
    assert.are.same({}, all:batch_size())
    assert.are.equal(10, all.a:item())
    assert.are.equal(15, all.n.b:item())
    local one = td:nansum({ reduce = true })
    assert.are.equal("float64", one:dtype())
    assert.are.equal(25, one:item())
    assert.are.equal(3.125, td:nanmean({ reduce = true }):item())
    local ints = T.TensorDict({ b = T.tensor({ 1, 2, 3 }, "int64") }, { 3 })
    assert.are.equal("int64", ints:nansum({ reduce = true }):dtype())
    assert.are.equal(6, ints:nansum({ reduce = true }):item())
    H.raises(function() ints:nanmean(1) end, "nanmean: not supported for int64 tensors")
    H.raises(function() td:nansum(3) end, "nansum: dim 3 is out of range for 2 batch dims")
    H.raises(function() td:nansum(1, { reduce = true }) end, "nansum: reduce = true takes no dim")
    H.raises(function() td:nanmean(1, { dtype = "float32" }) end, "nanmean: unknown option 'dtype'")
    H.raises(function() T.TensorDict.methods.nansum(5) end, "nansum: expected a TensorDict, got 5")
  end)
end)

describe("T.from_dict and td:auto_batch_size_", function()
  local function source() return { a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 4) }, s = "x" } end

  it("size as Python 0.15: batch [] by default, auto_batch_size or batch_dims to find one", function()
    assert.are.equal(T.TensorDict.from_dict, T.from_dict)
    local cases = {
      { nil, {}, {} }, { { auto_batch_size = true }, { 3, 4 }, { 3, 4 } }, { { auto_batch_size = false }, {}, {} },
      { { batch_dims = 1 }, { 3 }, { 3 } }, { { batch_size = { 3 } }, { 3 }, { 3 } },
      { { auto_batch_size = true, batch_dims = 1 }, { 3 }, { 3 } },
      { { auto_batch_size = false, batch_dims = 1 }, {}, {} },
    }
    for _, case in ipairs(cases) do
      local td = T.from_dict(source(), case[1])
      assert.are.same(case[2], td:batch_size())
      assert.are.same(case[3], td.b:batch_size())
      assert.are.equal("x", td.s)
    end
    H.raises(function() T.from_dict(source(), { batch_size = { 3 }, batch_dims = 1 }) end,
      "from_dict: give batch_size or batch_dims, not both")
    H.raises(function() T.from_dict(source(), { auto_batch_size = 1 }) end,
      "from_dict: option auto_batch_size must be a boolean, got 1")
    H.raises(function() T.from_dict(5) end,
      "from_dict: expected a table of tensors and values (or a TensorDict), got 5")
  end)

  it("auto_batch_size_ sizes nested TensorDicts by their own leaves first, at most batch_dims dims", function()
    local function td(bs, extra)
      local t = T.TensorDict({ a = T.zeros(3, 4, 5), b = { c = T.zeros(3, extra or 4) } }, bs)
      return t
    end
    local t = td({}):auto_batch_size_()
    assert.are.same({ 3, 4 }, t:batch_size())
    assert.are.same({ 3, 4 }, t.b:batch_size())
    t = td({}):auto_batch_size_(1)
    assert.are.same({ 3 }, t:batch_size())
    assert.are.same({ 3 }, t.b:batch_size())
    t = td({ 3 }):auto_batch_size_(0)
    assert.are.same({}, t.b:batch_size())
    t = td({}, 2):auto_batch_size_()
    assert.are.same({ 3 }, t:batch_size())
    assert.are.same({ 3, 2 }, t.b:batch_size())
    H.raises(function() td({}):auto_batch_size_(-1) end,
      "auto_batch_size_: batch_dims must be a non-negative integer, got -1")
  end)
end)

describe("flow.Seq with no steps", function()
  local flow = T.flow
  it("is the identity, as torch's nn.Sequential(): made in Lua or from a spec", function()
    local td = T.TensorDict({ x = T.ones(2) }, { 2 })
    local seq = flow.Seq {}
    assert.are.equal(td, seq(td))
    assert.are.same({}, seq.in_keys)
    assert.are.same({}, seq.out_keys)
    assert.are.same({ type = "Seq" }, seq:spec())
    local built = flow.build(json.decode('{"type": "Seq", "steps": []}'))
    assert.are.equal(td, built(td))
    assert.are.equal(td, flow.build(seq:spec())(td))
    assert.are.same({}, seq:check_keys(flow.KeySet.new({ "x" })))
    local got = flow.run(flow.TensorSource { td = T.TensorDict({ x = T.arange(1, 5):float() }, { 5 }), batch_size = 2 },
      flow.Seq { flow.Seq {} }, flow.Collect { cat = true })
    assert.are.same({ 1, 2, 3, 4, 5 }, got.x:totable())
  end)

  it("passes tdflow check and run in a recipe", function()
    local dir = H.tmpdir()
    local tdflow, expect = H.tdflow_runner(dir)
    H.write(dir .. "/r.json", ([[{"seed": 1, "batch_size": 4, "workers": 0,
      "source": {"use": "ParticleSource", "n": 8, "steps": 1},
      "steps": [{"use": "Seq", "steps": []}, {"use": "Seq", "steps": [{"use": "Seq"}]}],
      "sink": {"use": "MemmapSink", "path": "%s/out", "existsok": true}}]]):format(dir))
    expect("check " .. dir .. "/r.json", 0, "ok")
    expect("run " .. dir .. "/r.json", 0)
    assert.are.same({ 8 }, T.load_memmap(dir .. "/out"):batch_size())
    local _ = tdflow
    H.rmtree(dir)
  end)
end)

describe("against Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or os.getenv("TD_TORCH_PYTHON") or "python3"
  it("gives Python's results for the same calls (0-based dims on Python's side)", function()
    if not H.sh(py .. " -c 'import tensordict' >/dev/null 2>&1") then
      pending("tensordict not installed (TD_PYTHON): these methods are not cross-checked")
      return
    end
    local td = T.TensorDict({ a = T.arange(1, 24):view(2, 3, 4):float() * 0.5,
      n = { b = T.arange(1, 12):view(2, 3, 2) } }, { 2, 3 })
    local fl = T.TensorDict({ a = T.arange(1, 6):view(2, 3):float(), n = { b = T.arange(1, 6):view(2, 3):double() } },
      { 2, 3 })
    local cond = T.tensor({ { true, false, true }, { false, false, true } })
    local nan = 0 / 0
    local nans = T.TensorDict({ a = T.tensor({ { 1, nan, 3 }, { nan, nan, 6 } }),
      n = { b = T.tensor({ { 1, 2, 3 }, { 4, 5, nan } }, "float64") } }, { 2, 3 })
    local results = {
      where0 = td:where(cond, 0), where_frac = td:where(cond, -1.5), where_row = td:where(T.tensor({ false, true }), 7),
      where_td = td:where(cond, td * 3),
      flip = td:flip({ 1, 2 }), flip_neg = td:flip(-1),
      roll = td:roll({ 1, -2 }, { 1, 2 }), roll_flat = td:roll(2), roll_one = td:roll(1, 2),
      new_zeros = td:new_zeros(4), new_ones = td:new_ones({ 2, 2 }, { dtype = "float64" }),
      new_full = td:new_full({ 3 }, 7), new_full_int = td:new_full({ 1, 2 }, 2.5, { dtype = "int32" }),
      zeros_like = T.zeros_like(td), ones_like = T.ones_like(td), full_like = T.full_like(td, 2.5),
      addcmul = td:addcmul(td, td, 2), addcdiv = fl:addcdiv(fl, fl + 1, 0.5),
      stack_out = T.stack({ td, td * 2 }, 2, { out = td:new_zeros(2, 2, 3) }),
      cat_out = T.cat({ td, td + 1 }, 2, { out = td:new_zeros(2, 6) }),
      nansum = nans:nansum(2), nansum_all = nans:nansum(), nanmean = nans:nanmean({ 1, 2 }, { keepdim = true }),
      apply_default = td:apply(function(x, y) return x + y end, T.TensorDict({ a = T.ones(2, 3, 4) }, { 2, 3 }),
        { default = 10 }),
    }
    local ours = {}
    for name, r in pairs(results) do
      for _, key in ipairs(r:keys({ include_nested = true, leaves_only = true })) do
        local k = type(key) == "table" and table.concat(key, "__") or key
        ours[name .. "__" .. k] = r:get(key)
      end
      ours[name .. "__batch"] = T.tensor(#r:batch_size() > 0 and r:batch_size() or { -1 }, "int64")
    end
    local sparse = T.TensorDict({ a = T.zeros(2), e = {}, f = { g = {} }, h = { i = T.zeros(2) } }, { 2 })
    local facts = {
      filter_empty = sparse:filter_empty_():sorted_keys(),
      sorted_keys = T.TensorDict({ z = 1, a = 2, m = { b = T.zeros(1) } }, {}):sorted_keys(),
      is_contiguous = { td:is_contiguous(), T.TensorDict({ x = T.zeros(3, 2):t() }, { 2 }):is_contiguous() },
      is_consolidated = { td:is_consolidated(), td:consolidate():is_consolidated() },
      from_dict = T.from_dict({ a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 4) } }, { batch_dims = 1 }):batch_size(),
      from_dict_off = #T.from_dict({ a = T.zeros(3, 4, 5) }, { auto_batch_size = false, batch_dims = 1 }):batch_size(),
      auto_nested = T.TensorDict({ a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 2) } }, {}):auto_batch_size_().b
        :batch_size(),
      map_iter = {},
    }
    for r in T.TensorDict({ a = T.arange(1, 10):float() }, { 10 }):map_iter(function(x) return x * 2 end,
      { workers = 0, chunk = 4 }) do
      facts.map_iter[#facts.map_iter + 1] = r.a:totable()
    end
    facts.nansum_reduce = { nans:nansum({ reduce = true }):item(), nans:nanmean({ reduce = true }):item() }
    local dir = H.tmpdir()
    T.TensorDict(ours, {}):memmap(dir .. "/ours")
    H.write(dir .. "/facts.json", json.encode(facts))
    H.write(dir .. "/check.py", [==[
import json, sys, warnings, numpy as np, torch
from tensordict import TensorDict
warnings.simplefilter("ignore")


def double(x):
    return x * 2


d = sys.argv[1]
meta = {k: v for k, v in json.load(open(d + "/ours/meta.json")).items() if isinstance(v, dict) and "dtype" in v}
td = TensorDict({"a": torch.arange(1, 25).view(2, 3, 4).float() * 0.5,
                 "n": {"b": torch.arange(1, 13).view(2, 3, 2)}}, [2, 3])
fl = TensorDict({"a": torch.arange(1, 7).view(2, 3).float(), "n": {"b": torch.arange(1, 7).view(2, 3).double()}},
                [2, 3])
cond = torch.tensor([[True, False, True], [False, False, True]])
nan = float("nan")
nans = TensorDict({"a": torch.tensor([[1, nan, 3], [nan, nan, 6]]),
                   "n": {"b": torch.tensor([[1, 2, 3], [4, 5, nan]], dtype=torch.float64)}}, [2, 3])
results = {
    "where0": td.where(cond, 0), "where_frac": td.where(cond, -1.5),
    "where_row": td.where(torch.tensor([False, True]), 7),
    "where_td": td.where(cond, td * 3),
    "flip": td.flip((0, 1)), "flip_neg": td.flip(-1),
    "roll": td.roll((1, -2), (0, 1)), "roll_flat": td.roll(2), "roll_one": td.roll(1, 1),
    "new_zeros": td.new_zeros(4), "new_ones": td.new_ones((2, 2), dtype=torch.float64),
    "new_full": td.new_full((3,), 7), "new_full_int": td.new_full((1, 2), 2.5, dtype=torch.int32),
    "zeros_like": torch.zeros_like(td), "ones_like": torch.ones_like(td), "full_like": torch.full_like(td, 2.5),
    "addcmul": td.addcmul(td, td, value=2), "addcdiv": fl.addcdiv(fl, fl + 1, value=0.5),
    "stack_out": torch.stack([td, td * 2], 1, out=td.new_zeros(2, 2, 3)),
    "cat_out": torch.cat([td, td + 1], 1, out=td.new_zeros(2, 6)),
    "nansum": nans.nansum(1), "nansum_all": nans.nansum(), "nanmean": nans.nanmean((0, 1), keepdim=True),
    "apply_default": td.apply(lambda x, y: x + y, TensorDict({"a": torch.ones(2, 3, 4)}, [2, 3]), default=10),
}
theirs = {}
for name, r in results.items():
    for key, v in r.flatten_keys("__").items():
        theirs[name + "__" + key] = v
    theirs[name + "__batch"] = torch.tensor(list(r.batch_size) or [-1])
bad = []
if sorted(theirs) != sorted(meta):
    bad.append(f"keys: ours {sorted(set(meta) - set(theirs))}, theirs {sorted(set(theirs) - set(meta))}")
for k, t in theirs.items():
    m = meta.get(k)
    if m is None:
        continue
    if m["dtype"] != str(t.dtype) or m["shape"] != list(t.shape):
        bad.append(f"{k}: ours {m['dtype']} {m['shape']}, tensordict's {t.dtype} {list(t.shape)}")
        continue
    raw = np.fromfile(f"{d}/ours/{k}.memmap", dtype=np.uint8)
    o = torch.from_numpy(raw.copy()).view(t.dtype).view(t.shape)
    same = torch.allclose(o, t, rtol=1e-6, atol=0, equal_nan=True) if t.dtype.is_floating_point else torch.equal(o, t)
    if not same:
        bad.append(f"{k}: ours {o.tolist()}, tensordict's {t.tolist()}")
facts = json.load(open(d + "/facts.json"))
sparse = TensorDict({"a": torch.zeros(2), "e": {}, "f": {"g": {}}, "h": {"i": torch.zeros(2)}}, [2])
src = {"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 4)}}
want = {
    "filter_empty": sparse.filter_empty_().sorted_keys,
    "sorted_keys": TensorDict({"z": 1, "a": 2, "m": {"b": torch.zeros(1)}}, []).sorted_keys,
    "is_contiguous": [td.is_contiguous(), TensorDict({"x": torch.zeros(3, 2).t()}, [2]).is_contiguous()],
    "is_consolidated": [td.is_consolidated(), td.consolidate().is_consolidated()],
    "from_dict": list(TensorDict.from_dict(src, batch_dims=1).batch_size),
    "from_dict_off": len(TensorDict.from_dict({"a": torch.zeros(3, 4, 5)}, auto_batch_size=False,
                                              batch_dims=1).batch_size),
    "auto_nested": list(TensorDict({"a": torch.zeros(3, 4, 5), "b": {"c": torch.zeros(3, 2)}}, [])
                        .auto_batch_size_()["b"].batch_size),
    "map_iter": [r["a"].tolist() for r in TensorDict({"a": torch.arange(1., 11)}, [10]).map_iter(
        double, num_workers=1, chunksize=4)],
    "nansum_reduce": [nans.nansum(reduce=True).item(), nans.nanmean(reduce=True).item()],
}
for k, v in want.items():
    if facts.get(k) != v:
        bad.append(f"{k}: ours {facts.get(k)}, tensordict's {v}")
print(json.dumps(bad))
]==])
    local out = H.output_lines(("%s %s/check.py %s 2>&1"):format(py, dir, dir))
    assert.are.equal(1, #out, table.concat(out, "\n"))
    assert.are.same({}, json.decode(out[#out]))
    H.rmtree(dir)
  end)
end)
