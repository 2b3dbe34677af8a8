-- T.lazy_stack (Python tensordict's LazyStackedTensorDict): batch size, keys, indexing,
-- get/set, apply, densify, printing, and the memmap and consolidated layouts both ways
-- (fixtures written by tensordict 0.15.3: tests/fixtures/make_lazy_stack_fixtures.py;
-- round trips through Python where TD_PYTHON has tensordict, skipped otherwise).
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

local FIX = "tests/fixtures/"

-- Two members of batch [] whose "obs" differ in shape; "only_a" only in the first.
local function members()
  local a = T.TensorDict({ obs = T.tensor({ 0, 1, 2 }), r = T.tensor({ 1, 2, 3 }, "int64"),
    n = { x = T.zeros(2) }, only_a = T.tensor({ true }), s = "first" }, {})
  local b = T.TensorDict({ obs = T.tensor({ 0, 10, 20, 30, 40 }), r = T.tensor({ 4, 5, 6 }, "int64"),
    n = { x = T.ones(2) }, s = "second" }, {})
  return a, b
end

local function ragged()
  local a, b = members()
  return T.lazy_stack({ a, b }), a, b
end

-- Members of batch [3] stacked along dim 2: batch [3, 2], "x" [3, 2] and [3, 4].
local function dim2()
  return T.lazy_stack({ T.TensorDict({ x = T.arange(0, 5, "float64"):view(3, 2) }, { 3 }),
    T.TensorDict({ x = -T.arange(0, 11, "float64"):view(3, 4) }, { 3 }) }, 2)
end

describe("T.lazy_stack", function()
  it("has Python's batch size, stack dim, length and keys", function()
    local s = ragged()
    assert.is_true(T.is_lazy_stack(s))
    assert.is_true(T.is_tensor_collection(s))
    assert.is_false(T.is_tensordict(s))
    assert.are.same({ 2 }, s:batch_size())
    assert.are.equal("[2]", tostring(s:batch_size()))
    assert.are.equal(1, s:stack_dim())
    assert.are.equal(2, #s)
    assert.are.equal(1, s:batch_dims())
    assert.are.same({ "n", "obs", "r", "s" }, s:keys({ sort = true })) -- only_a: not in every member
    assert.is_true(s:has("obs"))
    assert.is_false(s:has("only_a"))
    local d = dim2()
    assert.are.same({ 3, 2 }, d:batch_size())
    assert.are.equal(2, d:stack_dim())
    assert.are.equal(3, #d)
    -- members whose sizes differ read -1 there, as in Python
    local v = T.lazy_stack({ T.TensorDict({}, { 2 }), T.TensorDict({}, { 3 }) })
    assert.are.same({ 2, -1 }, v:batch_size())
  end)

  it("refuses what Python refuses, naming the inputs", function()
    H.raises(function() T.lazy_stack({}) end, "lazy_stack: expected a non-empty table of TensorDicts")
    H.raises(function() T.lazy_stack({ T.TensorDict({}, {}), 3 }) end, "lazy_stack: element 2 is 3, not a TensorDict")
    H.raises(function() T.lazy_stack({ T.TensorDict({}, { 2 }), T.TensorDict({}, { 3, 1 }) }) end,
      "lazy_stack: the batch sizes differ in their number of dims: element 1 has [2], element 2 has [3, 1]")
    H.raises(function() T.lazy_stack({ T.TensorDict({}, {}) }, 3) end, "lazy_stack: dim 3 is out of range")
    local s = ragged()
    H.raises(function() T.lazy_stack({ s }) end, "element 1 is a LazyStackedTensorDict")
    H.raises(function() T.stack({ s, s }) end, "stack: element 1 is a LazyStackedTensorDict")
  end)

  it("indexes lazily: a number gives the member, ranges, masks and index tensors a lazy stack", function()
    local s, a, b = ragged()
    assert.are.equal(a, s[1])
    assert.are.equal(b, s[-1])
    assert.are.equal(b, s[T.tensor(2, "int64")])
    local r = s[{ { 2, 2 } }]
    assert.is_true(T.is_lazy_stack(r))
    assert.are.same({ 1 }, r:batch_size())
    assert.are.equal(b, r[1])
    local m = s[T.tensor({ false, true })]
    assert.are.equal(b, m[1])
    local p = s[T.tensor({ 2, 1 }, "int64")]
    assert.are.equal(b, p[1])
    assert.are.equal(a, p[2])
    H.raises(function() local _ = s[3] end, "index: index 3 is out of range for dim 1 of size 2")
    H.raises(function() local _ = s[T.newaxis] end, "T.newaxis is not supported on a LazyStackedTensorDict")
    H.raises(function() local _ = s[{ 1, 1 }] end, "index: 2 indices for a LazyStackedTensorDict of 1 batch dims")
    H.raises(function() local _ = s[T.tensor({ true })] end, "the mask has 1 elements, the stack dim (dim 1) has 2")
  end)

  it("indexes the members' own dims: a lazy stack, or a TensorDict once the stack dim is picked", function()
    local d = dim2()
    local row = d[1] -- dim 1 is a member dim: each member's row 1, stacked along dim 1 now
    assert.is_true(T.is_lazy_stack(row))
    assert.are.same({ 2 }, row:batch_size())
    assert.are.equal(1, row:stack_dim())
    H.assert_near({ 0, 1 }, row[1].x:totable(), 0)
    H.assert_near({ 0, -1, -2, -3 }, row[2].x:totable(), 0)
    local col = d[{ {}, 2 }] -- the second member, whole
    assert.is_true(T.is_tensordict(col))
    assert.are.same({ 3 }, col:batch_size())
    assert.are.same({ 3, 4 }, col.x:shape())
    local both = d[{ { 2, 3 }, 1 }]
    assert.are.same({ 2 }, both:batch_size())
    H.assert_near({ { 2, 3 }, { 4, 5 } }, both.x:totable(), 0)
    local e = d[{ T.ellipsis, 1 }]
    assert.are.same({ 3, 2 }, e.x:shape())
    local iter = {}
    for i, td in d:iter() do iter[i] = td:batch_size()[1] end
    assert.are.same({ 2, 2, 2 }, iter)
    local pieces = d:unbind(2)
    assert.are.equal(2, #pieces)
    assert.are.same({ 3, 2 }, pieces[1].x:shape())
  end)

  it("gets stacked tensors where shapes agree, and names the key and shapes where they do not", function()
    local s = ragged()
    local r = s:get("r")
    assert.are.same({ 2, 3 }, r:shape())
    assert.are.equal("int64", r:dtype())
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, r:totable())
    assert.are.same({ 2, 3 }, s.r:shape())
    H.raises(function() s:get("obs") end,
      "get: cannot stack the tensors under the key 'obs': their shapes are [[3], [5]]", "as_list")
    local list = s:get("obs", nil, { as_list = true })
    assert.are.equal(2, #list)
    assert.are.same({ 0, 10, 20, 30, 40 }, list[2]:totable())
    local padded = s:get("obs", nil, { as_padded_tensor = true, padding_value = -1 })
    assert.are.same({ { 0, 1, 2, -1, -1 }, { 0, 10, 20, 30, 40 } }, padded:totable())
    local left = s:get("obs", nil, { as_padded_tensor = true, padding_side = "left" })
    assert.are.same({ 0, 0, 0, 1, 2 }, left[1]:totable())
    local n = s:get("n")
    assert.is_true(T.is_lazy_stack(n))
    assert.are.same({ { 0, 0 }, { 1, 1 } }, n:get("x"):totable())
    assert.are.same({ 0, 0 }, s:get({ "n", "x" })[1]:totable())
    assert.are.same({ "first", "second" }, s:get("s"))
    assert.are.equal("dflt", s:get("only_a", "dflt"))
    H.raises(function() s:get("only_a") end, "get: key 'only_a' is missing from member 2 of the LazyStackedTensorDict")
    H.raises(function() return s.nope end, "no key 'nope' in the LazyStackedTensorDict")
    H.raises(function() s:get("r", nil, { as_list = 1 }) end, "get: option as_list must be a boolean")
    local d = dim2()
    H.raises(function() d:get("x") end, "their shapes are [[3, 2], [3, 4]]")
    assert.are.same({ 3, 2, 4 }, d:get("x", nil, { as_padded_tensor = true }):shape())
  end)

  it("sets on every member: a batch-wide tensor is split along the stack dim", function()
    local s, a, b = ragged()
    s:set("new", T.tensor({ { 1, 2 }, { 3, 4 } }))
    assert.are.same({ 1, 2 }, a.new:totable())
    assert.are.same({ 3, 4 }, b.new:totable())
    s.tag = "both"
    assert.are.equal("both", a.tag)
    assert.are.equal("both", b.tag)
    H.raises(function() s:set("bad", T.zeros(3)) end,
      "set: the value's leading dims [3] do not match the batch size [2] of the LazyStackedTensorDict (key 'bad')")
    local d = dim2()
    d:set("y", T.arange(1, 6):view(3, 2))
    assert.are.same({ 1, 3, 5 }, d[{ {}, 1 }].y:totable())
    s[2] = { r = T.tensor({ 7, 8, 9 }, "int64") }
    assert.are.same({ 7, 8, 9 }, b.r:totable())
    s:del("tag")
    assert.is_nil(a:get("tag"))
  end)

  it("applies over the members and densifies where shapes agree", function()
    local s = ragged()
    local plus = s:apply(function(x) return x + 1 end)
    assert.is_true(T.is_lazy_stack(plus))
    assert.are.same({ 1, 11, 21, 31, 41 }, plus[2].obs:totable())
    H.raises(function() s:contiguous() end,
      "contiguous: cannot stack the tensors under the key 'obs': their shapes are [[3], [5]]")
    H.raises(function() s:densify({ layout = "jagged" }) end, "densify: layout 'jagged': this library has no nested")
    local same = s:apply(function(x) return x[{ { 1, 1 } }] end) -- one element each
    local d = same:contiguous()
    assert.is_true(T.is_tensordict(d))
    assert.are.same({ 2 }, d:batch_size())
    assert.are.same({ { 0 }, { 0 } }, d.obs:totable())
    assert.are.same({ { 1 }, { 4 } }, d.r:totable())
    assert.is_nil(d:get("only_a")) -- keys every member has, as Python's
    assert.are.same({ "first", "second" }, d.s)
    assert.are.same({ { 1 }, { 4 } }, same:to_tensordict().r:totable())
    assert.are.same({ { 1 }, { 4 } }, same:densify().r:totable())
    local c = s:clone()
    c[1].r:fill_(0)
    assert.are.same({ 1, 2, 3 }, s[1].r:totable())
    s:lock()
    assert.is_true(s:is_locked())
    s:unlock()
    assert.is_false(s:is_locked())
  end)

  it("T.stack of heterogeneous containers raises as Python's; maybe_dense_stack goes lazy", function()
    local a, b = members()
    a:del("only_a")
    H.raises(function() T.stack({ a, b }) end, "stack: key 'obs' has shape [5] in TensorDict 2 but [3] in the first")
    assert.is_true(T.is_lazy_stack(T.maybe_dense_stack({ a, b })))
    local dense = T.maybe_dense_stack({ b, b:clone() })
    assert.is_true(T.is_tensordict(dense))
    assert.are.same({ 2, 5 }, dense.obs:shape())
  end)

  it("prints as tensordict 0.15 does, the stack dim 1-based", function()
    local s = ragged()
    assert.are.equal("LazyStackedTensorDict(batch_size=[2], stack_dim=1, fields={\n"
      .. "    n: {x: f32[2]},\n    obs: f32[-1],\n    r: i64[3],\n    s: str})", tostring(s))
    assert.are.equal("LazyStackedTensorDict(batch_size=[3,2], stack_dim=2, fields={x: f64[-1]})", tostring(dim2()))
  end)
end)

-- Member i of a loaded ragged stack holds what members() made.
local function assert_ragged(s)
  assert.is_true(T.is_lazy_stack(s))
  assert.are.same({ 2 }, s:batch_size())
  assert.are.equal(1, s:stack_dim())
  assert.are.same({ 0, 1, 2 }, s[1].obs:totable())
  assert.are.same({ 0, 10, 20, 30, 40 }, s[2].obs:totable())
  assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, s:get("r"):totable())
  assert.are.same({ { 0, 0 }, { 1, 1 } }, s:get({ "n", "x" }):totable())
  assert.are.equal("first", s[1].s)
  assert.are.equal("second", s[2].s)
  assert.are.same({ true }, s[1].only_a:totable())
  assert.is_nil(s[2]:get("only_a"))
end

describe("lazy stacks on disk", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("loads the memmap folders and the consolidated file Python 0.15.3 wrote", function()
    local s = T.load_memmap(FIX .. "python-lazy-stack")
    assert_ragged(s)
    assert.is_true(s:is_memmap())
    assert.is_true(s:is_locked())
    assert.are.equal(FIX .. "python-lazy-stack/1", s[2]:memmap_prefix())
    assert_ragged(T.from_consolidated(FIX .. "python-lazy-stack.td"))
    local d = T.load_memmap(FIX .. "python-lazy-stack-dim1")
    assert.are.same({ 3, 2 }, d:batch_size())
    assert.are.equal(2, d:stack_dim())
    assert.are.same({ { 0, 1 }, { 2, 3 }, { 4, 5 } }, d[{ {}, 1 }].x:totable())
    assert.are.same({ -8, -9, -10, -11 }, d[{ 3, 2 }].x:totable())
  end)

  it("saves in Python's layout and loads back", function()
    local s = ragged()
    local m = s:memmap(dir .. "/ls")
    assert.is_true(m:is_memmap())
    assert.are.equal(dir .. "/ls", m:memmap_prefix())
    assert_ragged(m)
    local meta = json.decode(H.read(dir .. "/ls/meta.json"))
    assert.are.equal("<class 'tensordict._lazy.LazyStackedTensorDict'>", meta._type)
    assert.are.equal("tensordict:LazyStackedTensorDict", meta._class)
    assert.are.equal(0, meta.stack_dim)
    -- byte for byte what Python writes for the stack's own meta.json
    assert.are.equal(H.read(FIX .. "python-lazy-stack/meta.json"), H.read(dir .. "/ls/meta.json"))
    assert_ragged(T.load_memmap(dir .. "/ls"))
    s:consolidate(dir .. "/ls.td")
    assert_ragged(T.from_consolidated(dir .. "/ls.td"))
    local d = dim2()
    T.save(d, dir .. "/d2")
    local back = T.load_memmap(dir .. "/d2")
    assert.are.equal(2, back:stack_dim())
    assert.is_true(back:equal(d:clone()))
    -- memmap_ moves the stack onto the files
    local again = ragged()
    again:memmap_(dir .. "/again")
    assert.is_true(again:is_memmap())
    assert_ragged(again)
  end)

  it("refuses what a TensorDict load cannot hold, naming the file", function()
    H.raises(function() T.TensorDict({}, {}):load_memmap_(FIX .. "python-lazy-stack") end,
      "holds a LazyStackedTensorDict, not a TensorDict")
    local s = ragged()
    s:memmap(dir .. "/inner")
    local td = T.TensorDict({ a = T.zeros(1) }, {})
    td:memmap(dir .. "/outer")
    os.execute(("mv '%s/inner' '%s/outer/sub' && sed -i '%s' '%s/outer/meta.json'")
      :format(dir, dir, [[s/}$/, "sub": {"type": "LazyStackedTensorDict"}}/]], dir))
    H.raises(function() T.load_memmap(dir .. "/outer") end,
      "/outer/sub/meta.json: key 'sub' holds a LazyStackedTensorDict: a TensorDict here cannot hold a lazy stack")
    os.execute(("rm -rf '%s/outer/sub/1' && mv '%s/outer/sub/0' '%s/outer/sub/2'"):format(dir, dir, dir))
    H.raises(function() T.load_memmap(dir .. "/outer/sub") end, "the lazy stack has no member folder \"0\"")
  end)
end)

describe("lazy stacks with Python tensordict", function()
  local py = os.getenv("TD_PYTHON") or "python3"
  local has_python = H.sh(py .. " -c 'import tensordict' >/dev/null 2>&1")
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  local function python(...)
    local p = io.popen(py .. " tests/interop/lazy_stack_interop.py " .. table.concat({ ... }, " ") .. " 2>/dev/null")
    local out = p:read("*a")
    p:close()
    return out
  end

  if not has_python then
    pending("python tensordict not installed: lazy stacks are not cross-checked with it")
    return
  end

  local function check(got)
    assert.are.equal("LazyStackedTensorDict", got.type)
    assert.are.equal(0, got.stack_dim)
    assert.are.same({ 2 }, got.batch_size)
    assert.are.same({ 3 }, got.members[1].obs.shape)
    assert.are.same({ 0, 10, 20, 30, 40 }, got.members[2].obs.values)
    assert.are.same({ 1, 1 }, got.members[2]["n.x"].values)
    assert.are.equal("second", got.members[2].s.data)
    assert.is_nil(got.members[2].only_a)
  end

  it("Python loads the folders and files written here, and its re-save loads back", function()
    ragged():memmap(dir .. "/ls")
    check(json.decode(python("read", dir .. "/ls")))
    ragged():consolidate(dir .. "/ls.td")
    check(json.decode(python("read_consolidated", dir .. "/ls.td")))
    python("resave", dir .. "/ls", dir .. "/back")
    local back = T.load_memmap(dir .. "/back")
    assert_ragged(back)
    assert.are.same({ { 0 }, { 1 } }, back:get("from_python"):totable())
  end)
end)
