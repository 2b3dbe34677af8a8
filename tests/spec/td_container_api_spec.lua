-- Container methods of TensorDicts that Python tensordict 0.15 has (issue 12, "Missing
-- API"): from_dict / auto_batch_size_, setdefault, popitem, zero_, fill_, copy_,
-- update_at_, gather, apply's default / call_on_nested / out, filter_non_tensor_data,
-- split_keys, share_memory_ / is_shared, load_memmap_, memmap_refresh_, memmap_tensor and
-- the scoped unlock. Expected values are what Python gives for the same calls.
local T = require("tensordict")
local H = require("helpers")

local function keys(td) -- every key, nested ones as "a.b", in order
  local out = {}
  for i, k in ipairs(td:keys({ include_nested = true })) do
    out[i] = type(k) == "table" and table.concat(k, ".") or k
  end
  return out
end

local function tmpdir()
  local p = os.tmpname()
  os.remove(p)
  return p
end

local function sample()
  return { a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 4, 2), s = "hi" }, e = T.zeros(3, 4) }
end

describe("T.TensorDict.from_dict", function()
  it("gives batch size [] unless asked to size it (Python's default)", function()
    local td = T.TensorDict.from_dict(sample())
    assert.are.same({}, td:batch_size())
    assert.are.same({}, td.b:batch_size())
    assert.are.same({ "a", "b.c", "b.s", "b", "e" }, keys(td))
  end)

  it("auto_batch_size = true: the common leading shape, nested dicts sized by their own leaves", function()
    local td = T.TensorDict.from_dict(sample(), { auto_batch_size = true })
    assert.are.same({ 3, 4 }, td:batch_size())
    assert.are.same({ 3, 4, 2 }, td.b:batch_size())
    td = T.TensorDict.from_dict({ a = T.zeros(3, 4), b = { c = T.zeros(3, 5) } }, { auto_batch_size = true })
    assert.are.same({ 3 }, td:batch_size())
    assert.are.same({ 3, 5 }, td.b:batch_size())
    td = T.TensorDict.from_dict({ b = { c = T.zeros(3, 5) } }, { auto_batch_size = true })
    assert.are.same({ 3, 5 }, td:batch_size())
    -- a nested dict without tensors takes its parent's size; non-tensor values are ignored
    td = T.TensorDict.from_dict({ a = T.zeros(3, 4), b = {}, n = { m = { s = "x" } }, s = "y" },
      { auto_batch_size = true })
    assert.are.same({ 3, 4 }, td:batch_size())
    assert.are.same({ 3, 4 }, td.b:batch_size())
    assert.are.same({ 3, 4 }, td.n.m:batch_size())
    assert.are.same({}, T.TensorDict.from_dict({}, { auto_batch_size = true }):batch_size())
  end)

  it("batch_dims caps the size (it implies auto sizing); batch_size sets it", function()
    local td = T.TensorDict.from_dict(sample(), { batch_dims = 1 })
    assert.are.same({ 3 }, td:batch_size())
    assert.are.same({ 3 }, td.b:batch_size())
    assert.are.same({}, T.TensorDict.from_dict({ a = T.zeros(3, 4) }, { batch_dims = 0 }):batch_size())
    td = T.TensorDict.from_dict(sample(), { batch_size = { 3 } })
    assert.are.same({ 3 }, td.b:batch_size())
    td = T.TensorDict.from_dict({ a = T.zeros(3, 4) }, { batch_size = { 3 }, auto_batch_size = true })
    assert.are.same({ 3 }, td:batch_size())
  end)

  it("names the dims found (Python drops names when it sizes automatically)", function()
    local td = T.TensorDict.from_dict(sample(), { auto_batch_size = true, names = { "x", "y" } })
    assert.are.same({ "x", "y" }, td:names())
    assert.are.same({ "x", "y", false }, td.b:names())
  end)

  it("from a TensorDict: a new one sharing its leaves; the source keeps its sizes", function()
    local src = T.TensorDict({ a = T.zeros(3, 4), b = { c = T.zeros(3, 4, 5) } }, {})
    local td = T.TensorDict.from_dict(src, { auto_batch_size = true })
    assert.are.same({ 3, 4 }, td:batch_size())
    assert.are.same({ 3, 4, 5 }, td.b:batch_size())
    assert.are.same({}, src.b:batch_size())
    td.a:fill_(7)
    assert.are.equal(7, src.a:totable()[1][1])
  end)

  it("refuses bad options, naming them", function()
    H.raises(function() T.TensorDict.from_dict(sample(), { batch_size = { 3 }, batch_dims = 1 }) end,
      "from_dict: give batch_size or batch_dims, not both")
    H.raises(function() T.TensorDict.from_dict({}, { batch_dims = -1 }) end,
      "from_dict: batch_dims must be a non-negative integer, got -1")
    H.raises(function() T.TensorDict.from_dict({}, { auto = true }) end,
      "from_dict: unknown option 'auto' (options: auto_batch_size, batch_dims, batch_size, device, names)")
    H.raises(function() T.TensorDict.from_dict(3) end, "from_dict: expected a table of tensors")
    H.raises(function() T.TensorDict.from_dict(sample(), { batch_size = { 4 } }) end,
      "batch size [4] does not match")
  end)
end)

describe("td:auto_batch_size_", function()
  it("recomputes the size from scratch, in place (it may shrink)", function()
    local td = T.TensorDict({ a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 4, 5, 6), d = T.zeros(3, 4, 5, 7) },
      e = {} }, {})
    assert.are.equal(td, td:auto_batch_size_())
    assert.are.same({ 3, 4, 5 }, td:batch_size())
    assert.are.same({ 3, 4, 5 }, td.b:batch_size())
    assert.are.same({ 3, 4, 5 }, td.e:batch_size())
    td:auto_batch_size_(1)
    assert.are.same({ 3 }, td:batch_size())
    assert.are.same({ 3 }, td.b:batch_size())
    local t2 = T.TensorDict({ a = T.zeros(3, 4, 5), b = { c = T.zeros(3, 4, 2) } }, {})
    t2:auto_batch_size_()
    assert.are.same({ 3, 4 }, t2:batch_size())
    assert.are.same({ 3, 4, 2 }, t2.b:batch_size())
  end)

  it("keeps the names of the dims kept, and sizes around stacked values", function()
    local td = T.TensorDict({ a = T.zeros(3, 4, 5) }, { 3 }, { names = { "x" } })
    td:auto_batch_size_()
    assert.are.same({ 3, 4, 5 }, td:batch_size())
    assert.are.same({ "x", false, false }, td:names())
    local st = T.stack({ T.TensorDict({ s = "p", x = T.zeros(2) }, {}), T.TensorDict({ s = "q", x = T.zeros(2) }, {}) })
    st:auto_batch_size_()
    assert.are.same({ 2 }, st:batch_size())
    assert.are.same({ "p", "q" }, st.s)
    H.raises(function() td:auto_batch_size_(1.5) end,
      "auto_batch_size_: batch_dims must be a non-negative integer, got 1.5")
  end)
end)

describe("setdefault and popitem", function()
  it("setdefault returns what is there, else sets the default and returns it", function()
    local td = T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3) } }, { 3 })
    assert.are.same({ 0, 0, 0 }, td:setdefault("a", T.ones(3)):totable())
    assert.are.same({ 1, 1, 1 }, td:setdefault("z", T.ones(3)):totable())
    assert.are.same({ 1, 1, 1 }, td:setdefault({ "b", "d" }, T.ones(3)):totable())
    assert.are.equal("str", td:setdefault("s", "str"))
    assert.are.equal("str", td:setdefault("s", "other"))
    assert.is_true(T.is_tensordict(td:setdefault("n", { x = T.ones(3) })))
    assert.are.same({ "a", "b.c", "b.d", "b", "z", "s", "n.x", "n" }, keys(td))
    H.raises(function() td:setdefault("q", T.ones(4)) end, "batch size [3] does not match the leading dims of 'q'")
    td:lock()
    assert.are.same({ 0, 0, 0 }, td:setdefault("a", T.ones(3)):totable())
    H.raises(function() td:setdefault("new", T.ones(3)) end,
      "setdefault: cannot set key 'new': the TensorDict is locked")
  end)

  it("popitem removes and returns the last entry, nested TensorDicts whole", function()
    local td = T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3) } }, { 3 })
    local k, v = td:popitem()
    assert.are.equal("b", k)
    assert.are.same({ 1, 1, 1 }, v.c:totable())
    k, v = td:popitem()
    assert.are.equal("a", k)
    assert.are.same({ 0, 0, 0 }, v:totable())
    H.raises(function() td:popitem() end, "popitem: the TensorDict is empty")
    local s = T.TensorDict({ a = T.zeros(3), s = "x" }, { 3 })
    assert.are.same({ "s", "x" }, { s:popitem() })
    H.raises(function() T.TensorDict({ a = T.zeros(3) }, { 3 }):lock():popitem() end,
      "popitem: cannot remove 'a': the TensorDict is locked")
  end)
end)

describe("zero_, fill_, copy_, update_at_", function()
  it("zero_ zeroes every tensor leaf and leaves values alone", function()
    local td = T.TensorDict({ a = T.ones(3), b = { c = T.ones(3, "int64") }, s = "x" }, { 3 }):lock()
    assert.are.equal(td, td:zero_())
    assert.are.same({ 0, 0, 0 }, td.a:totable())
    assert.are.same({ 0, 0, 0 }, td.b.c:totable())
    assert.are.equal("x", td.s)
  end)

  it("fill_ takes a key, as Python's: a leaf, a key path, or every leaf of a nested TensorDict", function()
    local td = T.TensorDict({ a = T.ones(3), b = { c = T.ones(3, "int64") }, s = "x" }, { 3 })
    assert.are.same({ 2.5, 2.5, 2.5 }, td:fill_("a", 2.5).a:totable())
    assert.are.same({ 2, 2, 2 }, td:fill_({ "b", "c" }, 2.5).b.c:totable())
    assert.are.same({ 7, 7, 7 }, td:fill_("b", 7).b.c:totable())
    assert.are.same({ 1, 1, 1 }, td:fill_("a", true).a:totable())
    assert.are.same({ 4, 4, 4 }, td:fill_("a", T.tensor(4)).a:totable())
    H.raises(function() td:fill_("zz", 7) end, "fill_: no key 'zz' in the TensorDict (keys: 'a', 'b', 's')")
    H.raises(function() td:fill_("s", 7) end, "fill_: 's' is a non-tensor value; fill_ writes tensors")
    H.raises(function() td:fill_("a", "x") end, "fill_: the value must be a number, a boolean or a tensor, got")
    td:lock()
    assert.are.same({ 3, 3, 3 }, td:fill_("a", 3).a:totable())
  end)

  it("zero_ and fill_ name a read-only leaf and say how to write it", function()
    local p = tmpdir()
    T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3) } }, { 3 }):memmap(p)
    local r = T.load_memmap(p)
    H.raises(function() r:zero_() end,
      [[zero_: 'a' is read-only (its file is mapped with mode "r"; load it with {mode = "r+"} to write it)]])
    H.raises(function() r:fill_("b", 1) end, [[fill_: {"b", "c"} is read-only]])
    local rw = T.load_memmap(p, { mode = "r+" })
    assert.are.same({ 5, 5, 5 }, rw:fill_("b", 5).b.c:totable())
  end)

  it("copy_ copies into every leaf of the same key, broadcasting and casting", function()
    local td = T.TensorDict({ a = T.zeros(3, 2), b = { c = T.zeros(3, "int64") }, s = "x" }, { 3 }):lock()
    local o = T.TensorDict({ a = T.ones(2), b = { c = T.full({}, 2.7) }, s = "y" }, {})
    assert.are.equal(td, td:copy_(o))
    assert.are.same({ { 1, 1 }, { 1, 1 }, { 1, 1 } }, td.a:totable())
    assert.are.same({ 2, 2, 2 }, td.b.c:totable())
    assert.are.equal("y", td.s)
    -- keys only the source has are ignored; keys it lacks are left alone
    td:copy_(T.TensorDict({ a = T.full({ 3, 2 }, 5), extra = T.ones(3) }, { 3 }))
    assert.are.same({ 5, 5 }, td.a[1]:totable())
    assert.are.same({ "a", "b.c", "b", "s" }, keys(td))
    H.raises(function() td:copy_(T.TensorDict({ a = T.ones(4, 2) }, { 4 })) end,
      "copy_: key 'a': a value of shape [4, 2] does not broadcast to shape [3, 2]")
    H.raises(function() td:copy_(T.TensorDict({ b = T.ones(3) }, { 3 })) end, "copy_: key 'b'")
    H.raises(function() td:copy_(3) end, "copy_: expected a TensorDict or a table, got")
  end)

  it("update_at_ writes other's keys at an index; every key must be there", function()
    local td = T.TensorDict({ a = T.zeros(4, 2), b = { c = T.zeros(4) }, s = "x" }, { 4 })
    td:update_at_(T.TensorDict({ a = T.ones(2) }, {}), 2)
    assert.are.same({ { 0, 0 }, { 1, 1 }, { 0, 0 }, { 0, 0 } }, td.a:totable())
    td:update_at_({ a = T.full({ 2 }, 3), b = { c = T.tensor(9) } }, { { 3, 4 } })
    assert.are.same({ { 0, 0 }, { 1, 1 }, { 3, 3 }, { 3, 3 } }, td.a:totable())
    assert.are.same({ 0, 0, 9, 9 }, td.b.c:totable())
    H.raises(function() td:update_at_({ zz = T.ones(2) }, 1) end, "update_at_: no key 'zz' in the TensorDict")
    H.raises(function() td:update_at_({ a = T.ones(2) }, 9) end, "index 9 is out of range for dim 1 of size 4")
    td:lock()
    td:update_at_({ a = T.full({ 2 }, 4) }, 1)
    assert.are.same({ 4, 4 }, td.a[1]:totable())
  end)
end)

describe("td:gather", function()
  local function sample_td()
    return T.TensorDict({ a = T.arange(0, 11):view(3, 4):to("float32"),
      b = { c = T.arange(0, 23):view(3, 4, 2) }, s = "x" }, { 3, 4 })
  end

  it("gathers every leaf along a batch dim, the index expanded to trailing dims", function()
    local g = sample_td():gather(2, T.tensor({ { 1, 4 }, { 2, 2 }, { 3, 1 } }, "int64"))
    assert.are.same({ 3, 2 }, g:batch_size())
    assert.are.same({ { 0, 3 }, { 5, 5 }, { 10, 8 } }, g.a:totable())
    assert.are.same({ { { 0, 1 }, { 6, 7 } }, { { 10, 11 }, { 10, 11 } }, { { 20, 21 }, { 16, 17 } } },
      g.b.c:totable())
    assert.are.equal("x", g.s)
    local r = sample_td():gather(1, { { 3, 2, 1, 1 } })
    assert.are.same({ { 8, 5, 2, 3 } }, r.a:totable())
    assert.are.same({ { 16, 10, 4, 6 } }, r.b.c[{ {}, {}, 1 }]:totable())
    assert.are.same({ 3, 2 }, sample_td():gather(-1, { { 1, 2 }, { 1, 1 }, { 1, 1 } }):batch_size())
    assert.are.same({ 2, 2 }, sample_td():gather(2, { { 1, 2 }, { 1, 1 } }):batch_size())
  end)

  it("keeps names and gathers stacked values", function()
    local td = sample_td()
    td:refine_names("x", "y")
    assert.are.same({ "x", "y" }, td:gather(2, { { 1 }, { 2 }, { 3 } }):names())
    local st = T.stack({ T.TensorDict({ s = "p", x = T.zeros(2) }, { 2 }),
      T.TensorDict({ s = "q", x = T.zeros(2) }, { 2 }) })
    assert.are.same({ { "q", "p" }, { "p", "p" } }, st:gather(1, { { 2, 1 }, { 1, 1 } }).s)
    assert.are.same({ "q", "p" }, st:gather(1, { { 2, 2 }, { 1, 1 } }).s) -- rows of equal values collapse
  end)

  it("names the dim and the index in errors", function()
    local td = sample_td()
    H.raises(function() td:gather(3, { { 1 } }) end, "gather: dim 3 is out of range for 2 batch dims")
    H.raises(function() td:gather(2, { 1, 2 }) end,
      "gather: the index has 1 dims (shape [2]); it needs one per batch dim (batch size [3, 4])")
    H.raises(function() td:gather(2, { { 1, 5 }, { 1, 1 }, { 1, 1 } }) end,
      "gather: index 5 is out of range for dim 2 of size 4")
    H.raises(function() td:gather(2, { { 1, 2 }, { 1, 1 }, { 1, 1 }, { 1, 1 } }) end,
      "gather: index shape [4, 2] is larger than the batch size [3, 4] in dim 1 (only dim 2 may be larger)")
    H.raises(function() td:gather(2, T.tensor({ { 1.5 } })) end, "gather: index must have an integer dtype")
    H.raises(function() T.TensorDict({}, {}):gather(1, { 1 }) end, "gather: the TensorDict has no batch dims")
  end)
end)

describe("apply's default, call_on_nested and out", function()
  local function pair()
    return T.TensorDict({ a = T.ones(3), b = { c = T.ones(3), d = T.ones(3) }, s = "x" }, { 3 }),
      T.TensorDict({ a = T.full({ 3 }, 2), b = { c = T.full({ 3 }, 3) }, q = T.ones(3) }, { 3 })
  end

  it("default stands for keys another TensorDict lacks", function()
    local td, o = pair()
    H.raises(function() td:apply(function(x, y) return x + y end, o) end,
      "apply: TensorDict argument 2 has no key 'b.d'")
    local r = td:apply(function(x, y) return x + y end, o, { default = T.full({ 3 }, 10) })
    assert.are.same({ 11, 11, 11 }, r.b.d:totable())
    assert.are.same({ 4, 4, 4 }, r.b.c:totable())
    assert.are.same({ "a", "b.c", "b.d", "b", "s" }, keys(r))
    r = td:apply(function(x, y) return x + y end, T.TensorDict({ a = T.ones(3) }, { 3 }), { default = 5 })
    assert.are.same({ 6, 6, 6 }, r.b.d:totable())
    r = td:apply(function(x, y) if y == false then return x end return x + y end, o, { default = false })
    assert.are.same({ 1, 1, 1 }, r.b.d:totable())
    td:apply_(function(x, y) return x + y end, o, { default = 0 })
    assert.are.same({ 4, 4, 4 }, td.b.c:totable())
  end)

  it("call_on_nested hands nested TensorDicts to fn whole", function()
    local td = pair()
    local seen = {}
    td:apply(function(x)
      seen[#seen + 1] = T.is_tensordict(x) and "TensorDict" or "tensor"
      return x
    end, { call_on_nested = true })
    assert.are.same({ "tensor", "TensorDict" }, seen)
    local r = td:apply(function(x)
      if T.is_tensordict(x) then return x:select("c") end
      return x * 2
    end, { call_on_nested = true })
    assert.are.same({ "a", "b.c", "b", "s" }, keys(r))
    assert.are.same({ 2, 2, 2 }, r.a:totable())
    H.raises(function() td:apply(function(x) return T.is_tensordict(x) and 1 or x end, { call_on_nested = true }) end,
      "apply: the function returned 1 for the TensorDict 'b'; expected a TensorDict or nil")
  end)

  it("out receives the results (set, not copied) and is returned", function()
    local td = pair()
    local out = td:clone()
    assert.are.equal(out, td:apply(function(x) return x * 5 end, { out = out }))
    assert.are.same({ 5, 5, 5 }, out.b.c:totable())
    out = T.TensorDict({ a = T.zeros(3, "int64"), keep = T.zeros(3) }, { 3 })
    td:apply(function(x) return x * 5.5 end, { out = out })
    assert.are.same({ "a", "keep", "b.c", "b.d", "b", "s" }, keys(out))
    assert.are.equal("float32", out.a:dtype())
    H.raises(function() td:apply(function(x) return x end, { out = T.TensorDict({}, { 4 }) }) end,
      "apply: out has batch size [4]; the results have [3]")
    H.raises(function() td:apply(function(x) return x end, { out = td:clone():lock() }) end,
      "apply: out is locked")
    H.raises(function() td:apply(function(x) return x end, { out = 3 }) end, "apply: out must be a TensorDict")
    H.raises(function() td:apply(function(x) return x end, { outt = 1 }) end,
      "apply: unknown option 'outt' (options: batch_size, call_on_nested, default, filter_empty, named, out)")
  end)
end)

describe("filter_non_tensor_data and split_keys", function()
  it("filter_non_tensor_data drops values at every level; emptied nested ones stay", function()
    local td = T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3), t = "y" }, s = "x", e = { u = "z" } }, { 3 })
    local r = td:filter_non_tensor_data()
    assert.are.same({ "a", "b.c", "b", "e" }, keys(r))
    assert.are.same({ "a", "b.c", "b.t", "b", "e.u", "e", "s" }, keys(td))
  end)

  it("split_keys returns one TensorDict per key set, then the rest", function()
    local td = T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3), d = T.ones(3) }, s = "x", z = T.ones(3) }, { 3 })
    local x, y, rest = td:split_keys({ "z", "a" }, { { "b", "d" }, "s" })
    assert.are.same({ "z", "a" }, keys(x))
    assert.are.same({ "b.d", "b", "s" }, keys(y))
    assert.are.same({ "b.c", "b" }, keys(rest))
    assert.are.same({ "a", "b.c", "b.d", "b", "s", "z" }, keys(td)) -- td untouched
    H.raises(function() td:split_keys({ "a" }, { "a" }) end, "split_keys: no key 'a' in the TensorDict")
    H.raises(function() td:split_keys({ "q" }) end, "split_keys: no key 'q' in the TensorDict")
    x, rest = td:split_keys({ "q", "a" }, { strict = false })
    assert.are.same({ "a" }, keys(x))
    assert.are.same({ "b.c", "b.d", "b", "s", "z" }, keys(rest))
    rest = td:split_keys()
    assert.are.same(keys(td), keys(rest))
    assert.are_not.equal(td, rest)
  end)

  it("split_keys with inplace = true takes the keys out of td, which is the rest", function()
    local td = T.TensorDict({ a = T.zeros(3), z = T.ones(3) }, { 3 })
    local x, rest = td:split_keys({ "a" }, { inplace = true })
    assert.are.equal(td, rest)
    assert.are.same({ "a" }, keys(x))
    assert.are.same({ "z" }, keys(td))
    H.raises(function() td:lock():split_keys({ "z" }, { inplace = true }) end,
      "split_keys: cannot take keys out of it (inplace = true): the TensorDict is locked")
    H.raises(function() td:split_keys("z") end, "split_keys: argument 1 must be a table of keys, got")
    H.raises(function() td:split_keys({ "z" }, { inplce = true }) end, "split_keys: unknown option 'inplce'")
  end)
end)

describe("share_memory_ and is_shared", function()
  it("moves the leaves into shared memory and locks, as Python's", function()
    local td = T.TensorDict({ a = T.arange(1, 3), b = { c = T.ones(3) }, s = "x" }, { 3 })
    assert.is_false(td:is_shared())
    assert.are.equal(td, td:share_memory_())
    assert.is_true(td:is_shared())
    assert.is_true(td.b:is_shared())
    assert.is_true(td:is_locked())
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    assert.is_false(T.TensorDict({}, { 3 }):is_shared())
    H.raises(function() td:set("new", T.zeros(3)) end, "locked")
  end)

  it("is what forked workers write into (td:map's out)", function()
    local out = T.TensorDict({ y = T.zeros(8) }, { 8 }):share_memory_()
    local src = T.TensorDict({ x = T.arange(1, 8) }, { 8 })
    src:map(function(b) return T.TensorDict({ y = b.x * 2 }, b:batch_size()) end, { workers = 2, out = out })
    assert.are.same({ 2, 4, 6, 8, 10, 12, 14, 16 }, out.y:totable())
  end)

  it("refuses memory-mapped leaves (memmap and shared memory exclude each other)", function()
    local m = T.TensorDict({ a = T.zeros(3) }, { 3 }):memmap(tmpdir())
    assert.is_false(m:is_shared())
    H.raises(function() m:share_memory_() end,
      "share_memory_: 'a' is memory-mapped from a file; memmap and shared memory exclude each other")
  end)
end)

describe("load_memmap_, memmap_refresh_, memmap_tensor", function()
  it("memmap_refresh_ maps again what is in the folder now, keeping lock and mode", function()
    local p = tmpdir()
    local m = T.TensorDict({ a = T.zeros(3), b = { c = T.ones(3) } }, { 3 }):memmap(p)
    local old = m.a
    T.TensorDict({ a = T.tensor({ 0, 1, 2 }), q = T.ones(3, 2) }, { 3 }):memmap(p)
    assert.are.equal(m, m:memmap_refresh_())
    assert.are.same({ "a", "q" }, keys(m))
    assert.are.same({ 0, 1, 2 }, m.a:totable())
    assert.are.same({ 0, 0, 0 }, old:totable()) -- saves are atomic: the old mapping stays
    assert.is_true(m:is_locked())
    assert.are.equal(p, m:memmap_prefix())
    local r = T.load_memmap(p):memmap_refresh_()
    H.raises(function() r.a:fill_(1) end, "read-only")
    local rw = T.load_memmap(p, { mode = "r+" }):memmap_refresh_()
    rw.a:fill_(1)
    H.raises(function() T.TensorDict({}, {}):memmap_refresh_() end,
      "memmap_refresh_: the TensorDict is not memory-mapped (no folder to refresh from)")
  end)

  it("load_memmap_ replaces td's keys by the folder's, keeping its batch size", function()
    local p = tmpdir()
    T.TensorDict({ a = T.zeros(3), q = T.ones(3, 2) }, { 3 }):memmap(p)
    local e = T.TensorDict({ z = T.zeros(3) }, { 3 })
    assert.are.equal(e, e:load_memmap_(p))
    assert.are.same({ "a", "q" }, keys(e))
    assert.is_false(e:is_locked())
    assert.is_true(e:is_memmap())
    e = T.TensorDict({}, {}):load_memmap_(p)
    assert.are.same({}, e:batch_size())
    assert.are.same({ 3, 2 }, e.q:shape())
    H.raises(function() T.TensorDict({}, { 4 }):load_memmap_(p) end,
      "load_memmap_: the folder's leaves do not start with the TensorDict's batch size [4] (the folder's is [3])")
    H.raises(function() T.TensorDict({}, { 3 }):lock():load_memmap_(p) end, "load_memmap_: the TensorDict is locked")
  end)

  it("T.memmap_tensor copies a tensor into a file (or shared memory)", function()
    local f = tmpdir()
    local t = T.memmap_tensor(T.arange(1, 4), f)
    assert.are.same({ 1, 2, 3, 4 }, T.from_file(f, { 4 }, "int64"):totable())
    t:fill_(9)
    assert.are.same({ 9, 9, 9, 9 }, T.from_file(f, { 4 }, "int64"):totable())
    H.raises(function() T.memmap_tensor(T.arange(1, 4), f) end, "memmap_tensor: " .. f .. " exists")
    assert.are.same({ 1, 2 }, T.memmap_tensor(T.arange(1, 2), f, { existsok = true }):totable())
    assert.is_true(T.TensorDict({ s = T.memmap_tensor(T.ones(2)) }, { 2 }):is_shared())
    H.raises(function() T.memmap_tensor(3) end, "memmap_tensor: expected a tensor, got")
    os.remove(f)
  end)
end)

describe("td:unlocked(fn)", function()
  it("runs fn unlocked, locks again, and returns fn's results", function()
    local td = T.TensorDict({ a = T.zeros(3) }, { 3 }):lock()
    local a, b, c = td:unlocked(function(t)
      t.z = T.ones(3)
      return 1, nil, 3
    end)
    assert.are.same({ 1, nil, 3 }, { a, b, c })
    assert.is_true(td:is_locked())
    assert.are.same({ "a", "z" }, keys(td))
  end)

  it("locks again when fn raises, and raises fn's error", function()
    local td = T.TensorDict({ a = T.zeros(3) }, { 3 }):lock()
    local ok, err = pcall(td.unlocked, td, function() error("boom") end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("boom", 1, true))
    assert.is_true(td:is_locked())
    local open = T.TensorDict({}, {})
    open:unlocked(function() end)
    assert.is_false(open:is_locked())
    H.raises(function() td:unlocked(3) end, "unlocked: expected a function, got")
  end)
end)

describe("a stacked value whose positions name no text", function()
  it("raises on get instead of reading a NULL text", function()
    local ffi = require("ffi")
    local C = require("tensordict.lib").C
    local D = require("tensordict.dict").cdict
    local td = T.TensorDict({}, { 2 })
    local texts = ffi.new("const char *[2]", '"a"', '"b"')
    local positions = T.tensor({ 0, 5 }, "int64") -- 5: there are 2 texts (C API misuse)
    assert.are.equal(0, C.td_dict_set_values(D(td), "tag", 3, 2, texts, positions.h))
    H.raises(function() local _ = td:get("tag") end,
      "get: the non-tensor value 'tag' has no text at position 5 (of 2)")
  end)
end)
