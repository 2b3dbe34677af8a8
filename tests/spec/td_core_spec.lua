-- td_core_spec.lua: the TensorDict type: construction, entry access, iteration and
-- properties, locking, structure ops (td_struct.lua), apply (td_apply.lua), printing
-- (td_print.lua) and misuse. Python tensordict is the reference for the semantics.
local T = require("tensordict")
local H = require("helpers")
local json = require("tensordict.json")

-- A TensorDict of batch size [3] used by many tests: keys a (int64), b (float32),
-- n = {x, m = {z}} and a non-tensor s. Keys of a Lua table come in sorted order.
local function sample()
  return T.TensorDict({
    a = T.arange(3),
    b = T.ones(3, 2),
    n = { x = T.zeros(3, 2), m = { z = T.full({ 3 }, 7) } },
    s = "text",
  }, 3)
end

-- Nested keys as strings joined by "." (for compact comparisons of key lists).
local function dotted(keys)
  local out = {}
  for i, k in ipairs(keys) do out[i] = type(k) == "table" and table.concat(k, ".") or k end
  return out
end

local function all_keys(td) return dotted(td:keys({ include_nested = true })) end

describe("TensorDict construction", function()
  it("takes tensors with sorted keys and a batch size given as a number, a table or nil", function()
    local td = T.TensorDict({ z = T.zeros(4, 3), b = T.arange(4), a = T.ones(4, 2, "float64") }, 4)
    assert.is_true(T.is_tensordict(td))
    assert.are.same({ "a", "b", "z" }, td:keys())
    assert.are.same({ 4 }, td:batch_size())
    assert.are.same({ 4, 2 }, td.a:shape())
    assert.are.equal("float64", td.a:dtype())
    assert.are.same({ 1, 2, 3, 4 }, td.b:totable())
    assert.are.equal("int64", td.b:dtype())

    local t2 = T.TensorDict({ x = T.zeros(2, 3, 5) }, { 2, 3 })
    assert.are.same({ 2, 3 }, t2:batch_size())
    assert.are.equal(2, t2:batch_dims())

    local t0 = T.TensorDict({ x = T.zeros(2, 3) })
    assert.are.same({}, t0:batch_size())
    assert.are.equal(0, t0:batch_dims())
    local e = T.TensorDict()
    assert.are.same({}, e:keys())
    assert.are.same({}, e:batch_size())
    assert.are.same({ 5 }, T.TensorDict({}, 5):batch_size())
    assert.are.same({ 0 }, T.TensorDict({ x = T.zeros(0, 2) }, { 0 }):batch_size())
  end)

  it("makes nested Lua tables nested TensorDicts with the parent's batch size", function()
    local td = T.TensorDict({ obs = T.zeros(4, 3), next = { obs = T.ones(4, 3), info = { r = T.arange(4) } } }, 4)
    assert.are.same({ "next", "obs" }, td:keys())
    assert.is_true(T.is_tensordict(td.next))
    assert.are.same({ 4 }, td.next:batch_size())
    assert.are.same({ "info", "obs" }, td.next:keys())
    assert.are.same({ 4 }, td.next.info:batch_size())
    assert.are.same({ 1, 2, 3, 4 }, td.next.info.r:totable())
    -- an empty table is an empty nested TensorDict, not a list
    local e = T.TensorDict({ child = {} }, { 2 })
    assert.is_true(T.is_tensordict(e.child))
    assert.are.same({ 2 }, e.child:batch_size())
    assert.are.same({}, e.child:keys())
    -- leaves of a nested table are checked against the parent's batch size
    H.raises(function() T.TensorDict({ n = { x = T.zeros(4) } }, 3) end,
      "batch size [3] does not match the leading dims of 'x' (shape [4])")
  end)

  it("stores strings, numbers, booleans and JSON lists as non-tensor values", function()
    local obj = setmetatable({ k = "v" }, json.object_mt)
    local td = T.TensorDict({
      s = "hello", e = "", n = 3, f = 2.5, minus = -7, yes = true, no = false,
      l = { 1, "two", true, { 3, 4 }, { a = 1 } }, o = obj,
    }, { 2 })
    assert.are.same({ "e", "f", "l", "minus", "n", "no", "o", "s", "yes" }, td:keys())
    assert.are.equal("hello", td.s)
    assert.are.equal("", td.e)
    assert.are.equal(3, td.n)
    assert.are.equal(2.5, td.f)
    assert.are.equal(-7, td.minus)
    assert.are.equal(true, td.yes)
    assert.are.equal(false, td.no)
    assert.are.equal(false, td:get("no", 5)) -- false is a value, not a missing key
    local l = td.l
    assert.are.equal(5, #l)
    assert.are.equal(1, l[1])
    assert.are.equal("two", l[2])
    assert.are.equal(true, l[3])
    assert.are.same({ 3, 4 }, l[4])
    assert.are.equal(1, l[5].a)
    assert.are.equal("v", td.o.k)
    assert.is_false(T.is_tensor(td.s))
    assert.is_false(td:is_empty())
  end)

  it("applies the names, device and lock options and rejects unknown ones", function()
    local td = T.TensorDict({ a = T.zeros(2, 3) }, { 2, 3 }, { names = { "x", "y" }, device = "cpu", lock = true })
    assert.are.same({ "x", "y" }, td:names())
    assert.are.equal("cpu", td:device())
    assert.is_true(td:is_locked())
    local plain = T.TensorDict({ a = T.zeros(2, 3) }, { 2, 3 })
    assert.are.same({ false, false }, plain:names()) -- Python's [None, None]
    assert.is_nil(plain:device())
    assert.is_false(plain:is_locked())

    H.raises(function() T.TensorDict({ a = T.zeros(2) }, 2, { foo = 1 }) end,
      "TensorDict: unknown option 'foo' (options: device, lock, names)")
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, 2, "x") end,
      "TensorDict: options must be a table {device =, lock =, names =}, got 'x'")
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, 2, { device = "tpu" }) end,
      "TensorDict: unknown device 'tpu' (expected 'cpu', 'cuda' or 'cuda:N')")
    H.raises(function() T.TensorDict({}, 2, { device = 5 }) end,
      "TensorDict: device must be a string like 'cpu' or 'cuda:0', got 5")
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, 2, { names = { "x", "y" } }) end,
      "refine_names: expected a table of at most 1 names")
  end)

  it("rejects bad batch sizes, sources and keys", function()
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, "2") end,
      "TensorDict: batch_size must be a table of sizes, got '2'")
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, { -1 }) end,
      "TensorDict: size -1 in shape [-1] is not a non-negative integer")
    H.raises(function() T.TensorDict({ a = T.zeros(2) }, { 1.5 }) end,
      "TensorDict: size 1.5 in shape [1.5] is not a non-negative integer")
    H.raises(function() T.TensorDict(5) end,
      "TensorDict: source must be a table of tensors and values or a TensorDict, got 5")
    H.raises(function() T.TensorDict(T.zeros(2)) end,
      "TensorDict: source must be a table of tensors and values or a TensorDict")
    H.raises(function() T.TensorDict({ T.zeros(2) }) end, "TensorDict: keys must be strings, got 1")
    H.raises(function() T.TensorDict({ a = "x", [2] = 3 }) end, "TensorDict: keys must be strings, got 2")
    H.raises(function() T.TensorDict({ a = T.zeros(3) }, 4) end,
      "batch size [4] does not match the leading dims of 'a' (shape [3])")
  end)

  it("takes a TensorDict as source: same key order, shared leaves and nested containers", function()
    local src = T.TensorDict({}, { 2 })
    src.z = T.zeros(2, 3)
    src.a = T.arange(2)
    src.n = { x = T.ones(2) }
    src.s = "v"
    local td = T.TensorDict(src, { 2 })
    assert.are.same({ "z", "a", "n", "s" }, td:keys())
    assert.are.same({ 2 }, td:batch_size())
    td.a[1] = 50
    assert.are.equal(50, src.a[1])
    assert.is_true(td.n == src.n) -- the same container
    td.n.y = T.zeros(2)
    assert.are.same({ "x", "y" }, src.n:keys())
    td.extra = T.zeros(2)
    assert.is_false(src:has("extra"))
    assert.are.equal("v", td.s)
    -- the batch size is the one given, defaulting to [] as in Python
    assert.are.same({}, T.TensorDict(src):batch_size())
    local wide = T.TensorDict(src:select("z"), { 2, 3 })
    assert.are.same({ 2, 3 }, wide:batch_size())
    H.raises(function() T.TensorDict(src, { 2, 3 }) end,
      "batch size [2, 3] does not match the leading dims of 'a' (shape [2])")
  end)

  it("T.TensorDict.fromkeys sets every key to a value", function()
    local td = T.TensorDict.fromkeys({ "y", "x", { "n", "b" } }, 2)
    assert.are.same({ "y", "x", "n" }, td:keys())
    assert.are.same({}, td:batch_size())
    assert.are.same({}, td.x:shape())
    assert.are.equal(2, td.x:item())
    assert.are.equal("float32", td.x:dtype()) -- numbers are float32 in this library
    assert.are.equal(2, td:get({ "n", "b" }):item())
    td.x:fill_(5)
    assert.are.equal(2, td.y:item()) -- one tensor per key
    assert.are.equal(0, T.TensorDict.fromkeys({ "a" }).a:item())
    local b = T.TensorDict.fromkeys({ "a" }, true)
    assert.are.equal("bool", b.a:dtype())
    assert.are.equal(true, b.a:item())
    local t = T.arange(3)
    local shared = T.TensorDict.fromkeys({ "p", "q" }, t)
    t[1] = 9
    assert.are.same({ 9, 2, 3 }, shared.p:totable())
    assert.are.same({ 9, 2, 3 }, shared.q:totable())
    H.raises(function() T.TensorDict.fromkeys("a") end, "fromkeys: keys must be a table of strings, got 'a'")
    H.raises(function() T.TensorDict.fromkeys({ 5 }) end,
      "set: keys are strings or arrays of strings (key paths), got 5")
  end)
end)

describe("TensorDict access", function()
  it("reads entries by field, by index, with get and a default", function()
    local td = sample()
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    assert.is_true(rawequal(td.a, td["a"]))
    assert.is_true(rawequal(td.a, td:get("a")))
    assert.are.equal("text", td.s)
    assert.is_nil(td:get("missing"))
    assert.are.equal(5, td:get("missing", 5))
    assert.is_nil(td:get({ "n", "missing" }))
    assert.are.equal(6, td:get({ "n", "missing" }, 6))
    assert.are.equal(7, td:get({ "nope", "x" }, 7))
    H.raises(function() return td.missing end,
      "index: no key 'missing' in the TensorDict (keys: 'a', 'b', 'n', 's')")
    H.raises(function() return td["missing"] end, "index: no key 'missing'")
    H.raises(function() return td[{ "n", "zz" }] end,
      "index: no key {\"n\", \"zz\"} in the TensorDict (keys: 'a', 'b', 'n', 's')")
    -- a long key list is cut after 10 keys
    local many = T.TensorDict()
    for i = 1, 12 do many:set(("k%02d"):format(i), i) end
    H.raises(function() return many.zz end,
      "(keys: 'k01', 'k02', 'k03', 'k04', 'k05', 'k06', 'k07', 'k08', 'k09', 'k10', ...)")
    H.raises(function() return T.TensorDict().zz end, "index: no key 'zz' in the TensorDict (keys: none)")
  end)

  it("reads key paths", function()
    local td = sample()
    assert.are.same({ 7, 7, 7 }, td:get({ "n", "m", "z" }):totable())
    assert.are.same({ 7, 7, 7 }, td[{ "n", "m", "z" }]:totable())
    assert.is_true(rawequal(td:get({ "n", "x" }), td.n.x))
    assert.is_true(rawequal(td:get({ "a" }), td.a)) -- a one-element path is the key
    assert.are.equal("float32", td[{ "n", "x" }]:dtype())
  end)

  it("methods win over keys of the same name; get always works", function()
    local td = T.TensorDict({ keys = T.zeros(2), numel = "v" }, 2)
    assert.are.equal("function", type(td.keys))
    assert.are.same({ "keys", "numel" }, td:keys())
    assert.are.same({ 2 }, td:get("keys"):shape())
    assert.are.equal("v", td:get("numel"))
    assert.are.equal(2, td:numel())
  end)

  it("get returns the same object until the key changes", function()
    local td = sample()
    local a, n, s = td.a, td.n, td:get({ "n", "m" })
    local l = T.TensorDict({ l = { 1, 2 } }).l
    assert.is_true(rawequal(a, td.a))
    assert.is_true(rawequal(n, td.n))
    assert.is_true(rawequal(s, td.n.m))
    assert.is_true(rawequal(td.b, td.b))
    assert.is_true(rawequal(td.s, td.s))
    -- A list value decodes afresh on each read: changing one never looks stored.
    local ltd = T.TensorDict({ l = { 1, 2 } })
    assert.is_false(rawequal(ltd.l, ltd.l))
    assert.are.same(ltd.l, ltd.l)
    assert.are.same({ 1, 2 }, l)
    td.c = T.zeros(3) -- another key added
    td.b = T.zeros(3) -- another key replaced
    assert.is_true(rawequal(a, td.a))
    assert.is_true(rawequal(n, td.n))
    td.a = T.arange(3)
    assert.is_false(rawequal(a, td.a))
    assert.is_true(rawequal(td.a, td.a))
    -- handles of the same container compare equal with ==
    assert.is_true(td.n == n)
    assert.is_false(td.n == td.n.m)
  end)

  it("set validates the leading dims and returns self", function()
    local td = T.TensorDict({}, 4)
    assert.is_true(rawequal(td, td:set("a", T.zeros(4, 2))))
    td:set("b", T.arange(4)):set("c", "x")
    assert.are.same({ "a", "b", "c" }, td:keys()) -- insertion order
    H.raises(function() td:set("z", T.zeros(3)) end,
      "set: batch size [4] does not match the leading dims of 'z' (shape [3])")
    H.raises(function() td.z = T.zeros(3, 4) end,
      "set: batch size [4] does not match the leading dims of 'z' (shape [3, 4])")
    H.raises(function() td.z = T.tensor(1) end,
      "set: batch size [4] does not match the leading dims of 'z' (shape [])")
    H.raises(function() td.z = T.TensorDict({}, 3) end,
      "set: batch size [4] does not match the leading dims of 'z' (a TensorDict with batch size [3])")
    H.raises(function() td.z = { q = T.zeros(5) } end,
      "batch size [4] does not match the leading dims of 'q' (shape [5])")
    assert.are.same({ "a", "b", "c" }, td:keys())
    td.wide = T.TensorDict({}, { 4, 2 }) -- a nested batch size starts with the parent's
    assert.are.same({ 4, 2 }, td.wide:batch_size())
    td.d = T.zeros(4)
    td.d = T.ones(4, 3, "int32") -- replacing keeps the position
    assert.are.same({ "a", "b", "c", "wide", "d" }, td:keys())
    assert.are.equal("int32", td.d:dtype())
    assert.are.same({ 4, 3 }, td.d:shape())
  end)

  it("set with a key path creates the containers on the way", function()
    local td = T.TensorDict({ a = T.arange(3) }, 3)
    td:set({ "p", "q", "r" }, T.zeros(3, 4))
    assert.are.same({ "a", "p" }, td:keys())
    assert.are.same({ 3 }, td.p:batch_size())
    assert.are.same({ 3 }, td.p.q:batch_size())
    assert.are.same({ 3, 4 }, td.p.q.r:shape())
    td[{ "p", "w" }] = T.ones(3)
    assert.are.same({ "q", "w" }, td.p:keys())
    assert.are.same({ 1, 1, 1 }, td.p.w:totable())
    td[{ "p", "q", "v" }] = "leaf"
    assert.are.equal("leaf", td.p.q.v)
    H.raises(function() td:set({ "p", "w", "x" }, T.zeros(3)) end,
      "set: key path {\"p\", \"w\", \"x\"} goes through 'w', which is a tensor, not a TensorDict")
  end)

  it("set_ copies into the existing leaf, casting and broadcasting", function()
    local td = sample()
    local a = td.a
    assert.is_true(rawequal(td, td:set_("a", T.tensor({ 1.7, -2.5, 3.5 }))))
    assert.is_true(rawequal(a, td.a))
    assert.are.equal("int64", td.a:dtype())
    assert.are.same({ 1, -2, 3 }, a:totable()) -- cast like copy_ (toward zero)
    td:set_("a", 7)
    assert.are.same({ 7, 7, 7 }, a:totable())
    local x = td.n.x
    td:set_({ "n", "x" }, T.tensor({ 1, 2 }))
    assert.are.same({ { 1, 2 }, { 1, 2 }, { 1, 2 } }, x:totable())
    td:set_("s", "other")
    assert.are.equal("other", td.s)
    local m = td.n.m
    td:set_({ "n", "m" }, T.TensorDict({ z = T.full({ 3 }, 9) }, 3))
    assert.are.same({ 9, 9, 9 }, m.z:totable())
    H.raises(function() td:set_("nope", T.zeros(3)) end,
      "set_: no key 'nope' in the TensorDict (keys: 'a', 'b', 'n', 's')")
    H.raises(function() td:set_({ "n", "nope" }, T.zeros(3)) end,
      "set_: no key {\"n\", \"nope\"} in the TensorDict (keys: 'm', 'x')")
    H.raises(function() td:set_("a", "x") end,
      "set_: the value for the tensor 'a' must be a tensor or a number, got 'x'")
    H.raises(function() td:set_("a", T.zeros(4)) end, "source shape [4] does not broadcast to destination shape [3]")
    H.raises(function() td:set_("n", 1) end, "set_: 'n' is a TensorDict; the value must be one too, got 1")
    assert.are.same({ "a", "b", "n", "s" }, td:keys())
  end)

  it("del, pop, rename_key, has and is_empty", function()
    local td = sample()
    assert.is_true(rawequal(td, td:del("s")))
    assert.are.same({ "a", "b", "n" }, td:keys())
    H.raises(function() td:del("s") end, "del: no key 's' in the TensorDict (keys: 'a', 'b', 'n')")
    td:del({ "n", "m", "z" })
    assert.are.same({}, td.n.m:keys())
    local b = td:pop("b")
    assert.are.same({ { 1, 1 }, { 1, 1 }, { 1, 1 } }, b:totable())
    assert.is_false(td:has("b"))
    assert.are.equal(42, td:pop("zz", 42))
    assert.is_nil(td:pop("zz", nil))
    assert.are.equal(3, td:pop({ "n", "zz" }, 3))
    assert.are.same({ 1, 2, 3 }, td:pop("a", 0):totable()) -- a present key ignores the default
    H.raises(function() td:pop("zz") end, "pop: no key 'zz' in the TensorDict (keys: 'n')")
    local x = td:pop({ "n", "x" })
    assert.are.same({ 3, 2 }, x:shape())
    assert.are.same({ "m" }, td.n:keys())

    local r = T.TensorDict({ a = T.arange(3), b = T.ones(3), n = { y = T.zeros(3) } }, 3)
    assert.is_true(rawequal(r, r:rename_key("b", "c")))
    assert.are.same({ "a", "n", "c" }, r:keys()) -- the renamed key moves to the end, as in Python
    assert.are.same({ 1, 1, 1 }, r.c:totable())
    assert.is_false(r:has("b"))
    r:rename_key({ "n", "y" }, { "n", "w" })
    assert.are.same({ "w" }, r.n:keys())
    r:rename_key("a", { "n", "a2" })
    assert.are.same({ "n", "c" }, r:keys())
    assert.are.same({ 1, 2, 3 }, r:get({ "n", "a2" }):totable())
    H.raises(function() r:rename_key("zz", "q") end, "rename_key: no key 'zz' in the TensorDict (keys: 'n', 'c')")
    H.raises(function() r:rename_key("c", 5) end,
      "rename_key: keys are strings or arrays of strings (key paths), got 5")

    local h = sample()
    assert.is_true(h:has("a"))
    assert.is_true(h:has("s"))
    assert.is_true(h:has({ "n", "m", "z" }))
    assert.is_true(h:has({ "n", "m" }))
    assert.is_false(h:has("zz"))
    assert.is_false(h:has({ "n", "zz" }))
    assert.is_false(h:has({ "zz", "zz" }))
    assert.is_false(h:is_empty())
    assert.is_true(T.TensorDict():is_empty())
    assert.is_true(T.TensorDict({ e = {} }):is_empty())
    assert.is_true(T.TensorDict({ e = { f = {} } }):is_empty())
    assert.is_false(T.TensorDict({ e = { f = "x" } }):is_empty())
    -- containers alone at a level: the answer is deep down (a leaf after empty ones)
    assert.is_false(T.TensorDict({ a = {}, b = { c = {}, d = { e = T.zeros(1) } } }):is_empty())
    assert.is_true(T.TensorDict({ a = {}, b = { c = {}, d = { e = {} } } }):is_empty())
    assert.is_false(T.TensorDict({ a = { b = {} }, z = 1 }):is_empty())
  end)

  it("rename_key moves a nested key to the top level when the new key is top-level", function()
    -- Python: td.rename_key_(("n", "y"), "top") gives keys ['n', 'top']
    local td = T.TensorDict({ n = { y = T.ones(3) } }, 3)
    td:rename_key({ "n", "y" }, "top")
    assert.are.same({ "n", "top" }, all_keys(td))
    local td2 = T.TensorDict({ n = { y = T.ones(3) } }, 3)
    td2:rename_key({ "n", "y" }, { "top" })
    assert.are.same({ "n", "top" }, all_keys(td2))
  end)

  it("td.a = td.a keeps the leaf intact", function()
    local td = sample()
    local a = td.a
    td.a = td.a
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    td.a[1] = 100
    assert.are.equal(100, a[1])
    td.n = td.n
    assert.are.same({ "m", "x" }, td.n:keys())
    assert.are.same({ 7, 7, 7 }, td.n.m.z:totable())
    td.s = td.s
    assert.are.equal("text", td.s)
  end)

  it("a leaf outlives its TensorDict and the replacement of its key", function()
    collectgarbage()
    collectgarbage()
    local base = T.live_bytes()
    local leaf
    do
      local td = T.TensorDict({ v = T.arange(5), w = T.zeros(5, 100) }, 5)
      leaf = td.v
    end
    collectgarbage()
    collectgarbage()
    assert.are.same({ 1, 2, 3, 4, 5 }, leaf:totable())
    leaf:add_(1)
    assert.are.same({ 2, 3, 4, 5, 6 }, leaf:totable())

    local td = T.TensorDict({ v = T.arange(5) }, 5)
    local old = td.v
    td.v = T.zeros(5)
    td:del("v")
    td = nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    assert.are.same({ 1, 2, 3, 4, 5 }, old:totable())
    old:mul_(2)
    assert.are.same({ 2, 4, 6, 8, 10 }, old:totable())

    local nested
    do nested = T.TensorDict({ n = { x = T.arange(2) } }, 2).n end
    collectgarbage()
    collectgarbage()
    assert.are.same({ 1, 2 }, nested.x:totable())

    leaf, old, nested = nil, nil, nil -- luacheck: ignore 311
    collectgarbage()
    collectgarbage()
    assert.are.equal(base, T.live_bytes())
  end)

  it("a tensor stored with set stays readable after the caller frees its own handle", function()
    local td = T.TensorDict({ b = T.arange(3) }, 3)
    local _ = td.b -- the cache is current
    local t = T.arange(3)
    td.a = t
    t:free() -- the caller's tensor; the container keeps its own reference
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    local c = T.TensorDict({ x = T.zeros(3) }, 3)
    td.c = c
    c:free()
    assert.are.same({ 0, 0, 0 }, td.c.x:totable())
  end)

  it("a non-tensor value reads the same whatever the cache holds", function()
    local td = T.TensorDict({ l = { 1, 2 } })
    local l = td.l
    l[1] = 99 -- mutating the Lua table got from get
    local seen = td.l[1]
    assert.are.equal(seen, td:clone().l[1])
    td:update({ z = T.zeros(1) }) -- an unrelated change drops the cache
    assert.are.equal(seen, td.l[1])
  end)
end)

describe("TensorDict iteration and properties", function()
  local function tree()
    local td = T.TensorDict({}, { 2 })
    td.z = T.zeros(2)
    td.b = { y = T.ones(2), a = { q = T.ones(2) } }
    td.a = "s"
    return td
  end

  it("keys() follows every change of the container, and each call gives a new list", function()
    -- the names are cached per handle until the container changes
    local td = tree()
    local first = td:keys()
    assert.are.same({ "z", "b", "a" }, first)
    first[1] = "changed by the caller"
    assert.are.same({ "z", "b", "a" }, td:keys())
    assert.are_not.equal(td:keys(), td:keys())
    td.c = T.zeros(2)
    assert.are.same({ "z", "b", "a", "c" }, td:keys())
    td:del("z")
    assert.are.same({ "b", "a", "c" }, td:keys())
    td:rename_key("b", "w")
    assert.are.same({ "a", "c", "w" }, td:keys())
    local w = td.w
    w.new = T.ones(2) -- through the child's handle
    assert.are.same({ "a", "y", "new" }, w:keys()) -- a Lua table's keys come sorted
    assert.are.same({ "a", "c", { "w", "a", "q" }, { "w", "y" }, { "w", "new" } },
      td:keys({ include_nested = true, leaves_only = true }))
    local seen = {}
    for k in td:pairs() do seen[#seen + 1] = k end
    assert.are.same({ "a", "c", "w" }, seen)
  end)

  it("keys with include_nested, leaves_only and sort", function()
    local td = tree()
    assert.are.same({ "z", "b", "a" }, td:keys())
    -- A nested container follows its own keys, as in Python.
    assert.are.same({ "z", { "b", "a", "q" }, { "b", "a" }, { "b", "y" }, "b", "a" },
      td:keys({ include_nested = true }))
    assert.are.same({ "z", { "b", "a", "q" }, { "b", "y" }, "a" },
      td:keys({ include_nested = true, leaves_only = true }))
    assert.are.same({ "z", "a" }, td:keys({ leaves_only = true }))
    assert.are.same({ "a", "b", { "b", "a" }, { "b", "a", "q" }, { "b", "y" }, "z" },
      td:keys({ include_nested = true, sort = true }))
    assert.are.same({ "a", "b", "z" }, td:keys({ sort = true }))
    assert.are.same({}, T.TensorDict():keys({ include_nested = true }))
  end)

  it("pairs, values and items follow the key order", function()
    local td = tree()
    local ks, kinds = {}, {}
    for k, v in td:pairs() do
      ks[#ks + 1] = k
      kinds[#kinds + 1] = T.is_tensor(v) and "tensor" or T.is_tensordict(v) and "td" or v
    end
    assert.are.same({ "z", "b", "a" }, ks)
    assert.are.same({ "tensor", "td", "s" }, kinds)
    local leaves = {}
    for k, v in td:pairs({ include_nested = true, leaves_only = true }) do
      leaves[#leaves + 1] = type(k) == "table" and table.concat(k, ".") or k
      if k == "a" then assert.are.equal("s", v) end
    end
    assert.are.same({ "z", "b.a.q", "b.y", "a" }, leaves)
    -- values() and items() are iterators, as in Python (for v in td:values() do).
    local vals = {}
    for v in td:values() do vals[#vals + 1] = v end
    assert.are.equal(3, #vals)
    assert.is_true(rawequal(vals[1], td.z))
    assert.is_true(rawequal(vals[2], td.b))
    assert.are.equal("s", vals[3])
    local n = 0
    for _ in td:values({ include_nested = true, leaves_only = true }) do n = n + 1 end
    assert.are.equal(4, n)
    local items = {}
    for k, v in td:items() do items[#items + 1] = { k, v } end
    assert.are.equal(3, #items)
    assert.are.equal("z", items[1][1])
    assert.is_true(rawequal(td.z, items[1][2]))
    assert.are.equal("a", items[3][1])
    assert.are.equal("s", items[3][2])
    -- an iterator is also called as a function, as a closure would be
    local it = td:values()
    assert.is_true(rawequal(td.z, it()))
    assert.is_true(rawequal(td.b, it()))
    assert.are.equal("s", it())
    assert.is_nil(it())
    local next_item = td:items()
    local k1, v1 = next_item()
    assert.are.equal("z", k1)
    assert.is_true(rawequal(td.z, v1))
    -- a key set while the loop runs is not visited; the loop sees the keys it started with
    local seen = {}
    for k in td:pairs() do
      seen[#seen + 1] = k
      if k == "z" then td.late = T.zeros(2) end
    end
    assert.are.same({ "z", "b", "a" }, seen)
    td:del("late")
    local nested = {}
    for k, v in td:items({ include_nested = true }) do nested[#nested + 1] = { k, v } end
    assert.are.same({ "b", "a", "q" }, nested[2][1])
    assert.is_true(rawequal(td.b.a.q, nested[2][2]))
  end)

  it("#td, batch_size, batch_dims, numel, device", function()
    local td = T.TensorDict({ a = T.zeros(2, 3, 4) }, { 2, 3 })
    assert.are.equal(2, #td)
    assert.are.same({ 2, 3 }, td:batch_size())
    assert.are.equal(2, td:batch_dims())
    assert.are.equal(6, td:numel())
    assert.is_nil(td:device())
    local bs = td:batch_size()
    bs[1] = 99 -- a fresh table each call
    assert.are.same({ 2, 3 }, td:batch_size())
    local scalar = T.TensorDict({ a = T.zeros(2) })
    assert.are.equal(1, scalar:numel())
    assert.are.equal(0, T.TensorDict({}, { 3, 0 }):numel())
    assert.are.equal(3, #T.TensorDict({}, { 3, 0 }))
    local cpu = T.TensorDict({ a = T.zeros(2) }, 2, { device = "cpu" })
    assert.are.equal("cpu", cpu:device())
    assert.are.equal("cpu", cpu:clone():device())
    assert.are.equal("cpu", cpu:select("a"):device())
    assert.are.equal("cpu", T.TensorDict({ n = T.TensorDict({}, 2) }, 2, { device = "cpu" }).n:device())
  end)

  it("#td is 0 for a batch size of [] (Python: len(td) == 0)", function()
    assert.are.equal(0, #T.TensorDict({ a = T.zeros(3) }))
  end)

  it("a nested table set into a TensorDict with a device gets that device", function()
    local td = T.TensorDict({ a = T.zeros(2) }, 2, { device = "cpu" })
    td.n = { x = T.zeros(2) }
    assert.are.equal("cpu", td.n:device())
  end)

  it("names, refine_names and rename", function()
    local td = T.TensorDict({ a = T.zeros(2, 3, 4) }, { 2, 3 })
    assert.are.same({ false, false }, td:names())
    assert.is_true(rawequal(td, td:refine_names("x", false)))
    assert.are.same({ "x", false }, td:names())
    td:refine_names({ false, "y" }) -- false keeps a name set already
    assert.are.same({ "x", "y" }, td:names())
    H.raises(function() td:refine_names("w", "y") end,
      "refine_names: dim 1 is named 'x' already, cannot refine it to 'w'")
    assert.is_true(rawequal(td, td:rename({ x = "xx" })))
    assert.are.same({ "xx", "y" }, td:names())
    td:rename({ "p", "q" })
    assert.are.same({ "p", "q" }, td:names())
    H.raises(function() td:rename({ zz = "a" }) end, "rename: no dim is named 'zz'")
    td:rename(nil)
    assert.are.same({ false, false }, td:names())
    H.raises(function() td:refine_names("a", "b", "c") end, "refine_names: expected a table of at most 2 names")
    H.raises(function() td:refine_names(5) end, "refine_names: name 1 must be a string or false, got 5")
    H.raises(function() T.TensorDict({}, { 2, 3 }, { names = { "x", "x" } }) end, "'x' names dims 1 and 2")
    local named = T.TensorDict({ a = T.zeros(2, 3) }, { 2, 3 }, { names = { "x", "y" } })
    assert.are.same({ "x", "y" }, named:clone():names())
    assert.are.same({ "x", "y" }, named:select("a"):names())
  end)

  it("nested containers carry the names of the parent's batch dims", function()
    -- Python: TensorDict({'m': {...}}, [2, 3], names=['x', 'y'])['m'].names == ['x', 'y']
    local td = T.TensorDict({ a = T.zeros(2, 3), m = { b = T.zeros(2, 3) } }, { 2, 3 }, { names = { "x", "y" } })
    assert.are.same({ "x", "y" }, td.m:names())
    local later = T.TensorDict({ m = { b = T.zeros(2, 3) } }, { 2, 3 })
    later:refine_names("x", "y")
    assert.are.same({ "x", "y" }, later.m:names())
  end)
end)

describe("TensorDict lock", function()
  it("refuses new keys, deletion and renaming, and propagates to nested containers", function()
    local td = sample()
    local n = td.n
    assert.is_true(rawequal(td, td:lock()))
    assert.is_true(td:is_locked())
    assert.is_true(n:is_locked())
    assert.is_true(td.n.m:is_locked())
    H.raises(function() td.c = T.zeros(3) end,
      "set: cannot set key 'c': the TensorDict is locked (write in place with set_(), or unlock() it first)")
    H.raises(function() td:set("c", T.zeros(3)) end, "cannot set key 'c'", "locked")
    H.raises(function() td:set({ "n", "c" }, T.zeros(3)) end, "cannot set key 'c'", "locked")
    H.raises(function() td:set({ "q", "c" }, T.zeros(3)) end, "cannot set key 'q'", "locked")
    H.raises(function() n.c = T.zeros(3) end, "cannot set key 'c'", "locked")
    H.raises(function() td:del("a") end, "del: cannot delete 'a': the TensorDict is locked")
    H.raises(function() td:del({ "n", "x" }) end, "cannot delete 'x'", "locked")
    H.raises(function() td:pop("a") end, "cannot delete 'a'", "locked")
    H.raises(function() td:rename_key("a", "c") end, "rename_key: cannot rename 'a': the TensorDict is locked")
    H.raises(function() td:rename_key({ "n", "x" }, { "n", "y" }) end, "locked")
    assert.are.same({ "a", "b", "n", "s" }, td:keys())
    assert.are.same({ "m", "x" }, td.n:keys())

    td:unlock()
    assert.is_false(td:is_locked())
    assert.is_false(n:is_locked())
    td.c = T.zeros(3)
    assert.is_true(td:has("c"))
  end)

  it("allows in-place writes", function()
    local td = sample():lock()
    local a = td.a
    td:set_("a", 5)
    assert.are.same({ 5, 5, 5 }, a:totable())
    td.a:add_(1)
    assert.are.same({ 6, 6, 6 }, a:totable())
    td[1] = 0
    assert.are.same({ 0, 6, 6 }, a:totable())
    assert.are.same({ 0, 0 }, td.n.x[1]:totable())
    td:update_({ a = T.tensor({ 9, 9, 9 }) })
    assert.are.same({ 9, 9, 9 }, a:totable())
    td:apply_(function(x) return x * 2 end)
    assert.are.same({ 18, 18, 18 }, a:totable())
    td:set_("s", "w")
    assert.are.equal("w", td.s)
    assert.is_true(td:is_locked())
  end)

  it("refuses replacing an entry (Python: Cannot modify locked TensorDict)", function()
    local td = sample():lock()
    local a = td.a
    H.raises(function() td.a = T.tensor({ 7, 8, 9 }) end, "locked")
    assert.is_true(rawequal(a, td.a))
    H.raises(function() td.n = T.TensorDict({}, 3) end, "locked")
    assert.are.same({ "m", "x" }, td.n:keys())
  end)

  it("the lock option locks nested containers; a container stored in a locked one is locked", function()
    local child = T.TensorDict({ y = T.zeros(2) }, 2)
    local td = T.TensorDict({ c = child, n = { x = T.zeros(2) } }, 2, { lock = true })
    assert.is_true(td.n:is_locked())
    assert.is_true(child:is_locked())
    H.raises(function() child.z = T.zeros(2) end, "cannot set key 'z'", "locked")
    td:unlock()
    assert.is_false(child:is_locked())
    -- copies are unlocked, as in Python
    td:lock()
    assert.is_false(td:clone():is_locked())
    assert.is_false(td:clone().n:is_locked())
    assert.is_false(td:select("n"):is_locked())
    assert.is_false(td:exclude("n"):is_locked())
    assert.is_false(td:apply(function(x) return x end):is_locked())
  end)
end)

describe("TensorDict structure ops", function()
  it("select keeps the given keys in the given order, sharing leaves", function()
    local td = T.TensorDict({ a = T.arange(3), b = T.ones(3), n = { x = T.ones(3, 2), y = T.zeros(3) }, s = "v" }, 3,
      { names = { "t" } })
    local s = td:select("b", { "n", "x" }, "a")
    assert.are.same({ "b", { "n", "x" }, "n", "a" }, s:keys({ include_nested = true }))
    assert.are.same({ 3 }, s:batch_size())
    assert.are.same({ "t" }, s:names())
    s.a[1] = 50
    assert.are.equal(50, td.a[1])
    s.extra = T.zeros(3)
    assert.is_false(td:has("extra"))
    assert.are.same({}, td:select():keys())
    H.raises(function() td:select("zz") end, "select: no key 'zz' in the TensorDict (keys: 'a', 'b', 'n', 's')")
    H.raises(function() td:select({ "n", "zz" }) end, "select: no key 'zz' in the TensorDict (keys: 'x', 'y')")
    H.raises(function() td:select({ "a", "zz" }) end, "select: 'a' is not a TensorDict, so it has no nested keys")
    assert.are.same({ "a" }, td:select("zz", "a", { strict = false }):keys())
    assert.are.same({ "n", "b" }, td:select({ "n", "zz" }, "b", { strict = false }):keys({ include_nested = true }))
  end)

  it("exclude drops keys, ignoring missing ones unless strict", function()
    local td = sample()
    assert.are.same({ "b", "n.x", "n", "s" }, all_keys(td:exclude("a", { "n", "m" })))
    assert.are.same({ "a", "b", "n.m.z", "n.m", "n.x", "n", "s" }, all_keys(td:exclude("zz", { "n", "zz" })))
    H.raises(function() td:exclude("zz", { strict = true }) end,
      "exclude: no key 'zz' in the TensorDict (keys: 'a', 'b', 'n', 's')")
    H.raises(function() td:exclude({ "a", "q" }, { strict = true }) end,
      "exclude: 'a' is not a TensorDict, so it has no nested keys")
    local e = td:exclude("b")
    e.a[2] = 40
    assert.are.equal(40, td.a[2])
    assert.are.same({ "a", "b", "n", "s" }, td:keys())
  end)

  it("update merges nested containers and replaces leaves", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3, 2), y = T.zeros(3) } }, 3)
    local n = td.n
    assert.is_true(rawequal(td, td:update(T.TensorDict({
      c = T.zeros(3), n = { y = T.full({ 3 }, 5), w = T.ones(3) }, a = T.zeros(3) }, 3))))
    assert.are.same({ "a", "n.x", "n.y", "n.w", "n", "c" }, all_keys(td))
    assert.are.equal("float32", td.a:dtype())
    assert.are.same({ 5, 5, 5 }, td.n.y:totable())
    assert.are.same({ 1, 1 }, td.n.x[1]:totable())
    assert.is_true(td.n == n) -- merged into the same container
    assert.are.same({ "x", "y", "w" }, n:keys())
    td:update({ d = "str", n = { v = T.ones(3) } })
    assert.are.same({ "a", "n.x", "n.y", "n.w", "n.v", "n", "c", "d" }, all_keys(td))
    assert.are.equal("str", td.d)
    H.raises(function() td:update(5) end, "update: expected a TensorDict or a table, got 5")
    H.raises(function() td:update(T.TensorDict({ e = T.zeros(4) }, 4)) end,
      "batch size [3] does not match the leading dims of 'e' (shape [4])")
  end)

  it("update_ copies into existing leaves", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3, 2) } }, 3)
    local a, x = td.a, td.n.x
    local src = T.TensorDict({ a = T.tensor({ 4.7, 5, 6 }), n = { x = T.zeros(3, 2) } }, 3)
    assert.is_true(rawequal(td, td:update_(src)))
    assert.is_true(rawequal(a, td.a))
    assert.are.equal("int64", td.a:dtype())
    assert.are.same({ 4, 5, 6 }, a:totable())
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, x:totable())
    td:update_({ a = T.tensor({ 1, 1, 1 }) })
    assert.are.same({ 1, 1, 1 }, a:totable())
    H.raises(function() td:update_(T.TensorDict({ zz = T.zeros(3) }, 3)) end,
      "update_: key 'zz' is not in the TensorDict")
    H.raises(function() td:update_({ n = { q = T.zeros(3) } }) end, "update_: key 'n.q' is not in the TensorDict")
    H.raises(function() td:update_("x") end, "update_: expected a TensorDict or a table, got 'x'")
    assert.are.same({ "a", "n" }, td:keys())
  end)

  it("flatten_keys and unflatten_keys round trip", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3, 2), m = { z = T.zeros(3) } }, s = "v" }, 3)
    local f = td:flatten_keys()
    assert.are.same({ "a", "n.m.z", "n.x", "s" }, f:keys())
    assert.are.same({ 3 }, f:batch_size())
    assert.are.equal("v", f.s)
    f["n.x"][1][1] = 9 -- leaves shared
    assert.are.equal(9, td.n.x[1][1])
    assert.are.same({ "a", "n/m/z", "n/x", "s" }, td:flatten_keys("/"):keys())
    local u = f:unflatten_keys()
    assert.are.same({ "a", "n.m.z", "n.m", "n.x", "n", "s" }, all_keys(u))
    assert.are.same({ 3 }, u.n:batch_size())
    assert.are.same({ 3 }, u.n.m:batch_size())
    assert.are.same({ 9, 1 }, u.n.x[1]:totable())
    local u2 = td:flatten_keys("__"):unflatten_keys("__")
    assert.are.same(all_keys(td), all_keys(u2))
    H.raises(function() td:flatten_keys("") end, "flatten_keys: the separator must be a non-empty string, got ''")
    H.raises(function() td:unflatten_keys(5) end, "unflatten_keys: the separator must be a non-empty string, got 5")
  end)

  it("flatten_keys and unflatten_keys raise on collisions", function()
    local c = T.TensorDict({ ["a.b"] = T.zeros(3), a = { b = T.ones(3) } }, 3)
    H.raises(function() c:flatten_keys() end, "flatten_keys: flattening with '.' makes the key 'a.b' twice")
    assert.are.same({ "a_b", "a.b" }, c:flatten_keys("_"):keys())
    local c2 = T.TensorDict({ ["a.b"] = T.zeros(3), a = T.ones(3) }, 3)
    H.raises(function() c2:unflatten_keys() end, "unflatten_keys: 'a' is a leaf and also a prefix of 'a.b'")
    local c3 = T.TensorDict({}, 3)
    c3["a.b"] = T.zeros(3)
    c3.a = T.ones(3)
    H.raises(function() c3:unflatten_keys() end, "unflatten_keys: the key 'a' appears twice after unflattening")
  end)

  it("clone is a deep copy", function()
    local td = T.TensorDict({ a = T.arange(6):view(2, 3), s = "v", l = { 1, 2 }, n = { x = T.zeros(2) } }, 2,
      { names = { "b" } })
    local c = td:clone()
    assert.are.same(all_keys(td), all_keys(c))
    assert.are.same({ "b" }, c:names())
    assert.are.same({ 2 }, c:batch_size())
    assert.are.equal("int64", c.a:dtype())
    assert.are.equal("v", c.s)
    assert.are.same({ 1, 2 }, c.l)
    c.a[1][1] = 100
    c.n.x[2] = 5
    c.n.q = T.zeros(2)
    c.s = "w"
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 } }, td.a:totable())
    assert.are.same({ 0, 0 }, td.n.x:totable())
    assert.are.same({ "x" }, td.n:keys())
    assert.are.equal("v", td.s)
  end)

  it("contiguous, zeros_like and to_table", function()
    local p = T.TensorDict({ a = T.arange(6):view(2, 3):t() }, 3)
    assert.is_false(p.a:is_contiguous())
    local c = p:contiguous()
    assert.is_true(c.a:is_contiguous())
    assert.are.same({ { 1, 4 }, { 2, 5 }, { 3, 6 } }, c.a:totable())
    c.a[1][1] = -1
    assert.are.equal(1, p.a[1][1])

    local z = T.TensorDict({ i = T.arange(2), b = T.full({ 2 }, true), f = T.ones(2, 3), s = "v",
      n = { g = T.ones(2) } }, 2):zeros_like()
    assert.are.same({ "b", "f", "i", "n", "s" }, z:keys())
    assert.are.equal("int64", z.i:dtype())
    assert.are.equal("bool", z.b:dtype())
    assert.are.same({ 0, 0 }, z.i:totable())
    assert.are.same({ false, false }, z.b:totable())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, z.f:totable())
    assert.are.same({ 0, 0 }, z.n.g:totable())
    assert.are.equal("v", z.s)

    local td = sample()
    local t = td:to_table()
    assert.is_true(rawequal(td.a, t.a))
    assert.are.equal("text", t.s)
    assert.is_false(T.is_tensordict(t.n))
    assert.are.equal("table", type(t.n.m))
    assert.are.same({ 7, 7, 7 }, t.n.m.z:totable())
    local keys = {}
    for k in pairs(t) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ "a", "b", "n", "s" }, keys)
  end)

  it("empty gives a TensorDict with the same batch size and no keys (Python: td.empty())", function()
    local td = T.TensorDict({ a = T.arange(3), s = "v", n = { x = T.zeros(3) } }, 3)
    local e = td:empty()
    assert.are.same({ 3 }, e:batch_size())
    assert.are.same({}, e:keys())
  end)

  it("to(dtype) casts the floating leaves only; to(device) and to{...}", function()
    local mix = T.TensorDict({ f = T.ones(3), i = T.arange(3), b = T.full({ 3 }, true), h = T.ones(3, "float16"),
      n = { g = T.zeros(3) }, s = "v" }, 3)
    local m = mix:to("float64")
    assert.are.equal("float64", m.f:dtype())
    assert.are.equal("float64", m.h:dtype())
    assert.are.equal("float64", m.n.g:dtype())
    assert.are.equal("int64", m.i:dtype())
    assert.are.equal("bool", m.b:dtype())
    assert.are.equal("v", m.s)
    assert.are.same({ 1, 1, 1 }, m.f:totable())
    assert.are.equal("float32", mix.f:dtype()) -- the source is unchanged
    assert.are.equal("float16", mix:to("torch.float16").f:dtype())
    local cpu = mix:to("cpu")
    assert.are.equal("cpu", cpu:device())
    assert.is_nil(mix:device())
    local both = mix:to({ dtype = "float64", device = "cpu" })
    assert.are.equal("float64", both.f:dtype())
    assert.are.equal("cpu", both:device())
    H.raises(function() mix:to("int99") end, "to: unknown dtype 'int99'")
  end)
end)

describe("TensorDict apply", function()
  it("returns a new TensorDict; a nil result drops the key", function()
    local td = T.TensorDict({ a = T.arange(3), b = T.ones(3, 2), n = { x = T.ones(3, 2), m = { z = T.zeros(3) } },
      s = "v" }, 3, { names = { "t" } })
    local r = td:apply(function(x) return x * 2 end)
    assert.are.same(all_keys(td), all_keys(r))
    assert.are.same({ 2, 4, 6 }, r.a:totable())
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    assert.are.same({ 2, 2 }, r.n.x[1]:totable())
    assert.are.equal("v", r.s)
    assert.are.same({ "t" }, r:names())
    assert.are.same({ 3 }, r:batch_size())
    -- nil drops the key; containers emptied by it go too, unless filter_empty = false
    local keep2d = function(x) if x:dim() == 2 then return x end end
    assert.are.same({ "b", "n.x", "n", "s" }, all_keys(td:apply(keep2d)))
    local ints = function(x) if x:dtype() == "int64" then return x end end
    assert.are.same({ "a", "s" }, all_keys(td:apply(ints)))
    assert.are.same({ "a", "n.m", "n", "s" }, all_keys(td:apply(ints, { filter_empty = false })))
    -- containers that were empty already stay
    local e = T.TensorDict({ a = T.zeros(2), e = {} }, 2)
    assert.are.same({ "a", "e" }, e:apply(function(x) return x end):keys())
    -- deeper: a level goes when every level under it lost its leaves, and only then
    local deep = T.TensorDict({ p = { q = { r = T.zeros(2) }, w = { v = T.zeros(2, 2), u = {} } } }, 2)
    assert.are.same({ "p.w.u", "p.w.v", "p.w", "p" }, all_keys(deep:apply(keep2d)))
    assert.are.same({}, all_keys(deep:apply(function() end)))
    assert.are.same({ "p.q", "p.w.u", "p.w", "p" }, all_keys(deep:apply(function() end, { filter_empty = false })))
  end)

  it("aligns other TensorDicts by key and passes key paths with named = true", function()
    local td = T.TensorDict({ b = T.ones(2), a = T.arange(2), n = { x = T.ones(2) } }, 2)
    local other = T.TensorDict({}, 2)
    other.n = { x = T.full({ 2 }, 10) }
    other.a = T.full({ 2 }, 100, "int64")
    other.b = T.zeros(2)
    local sum = td:apply(function(x, y) return x + y end, other)
    assert.are.same({ "a", "b", "n" }, sum:keys())
    assert.are.same({ 101, 102 }, sum.a:totable())
    assert.are.same({ 11, 11 }, sum.n.x:totable())
    local three = td:apply(function(x, y, z) return x + y + z end, other, other)
    assert.are.same({ 201, 202 }, three.a:totable())
    H.raises(function() td:apply(function(x) return x end, T.TensorDict({ a = T.arange(2) }, 2)) end,
      "apply: TensorDict argument 2 has no key 'b'")
    local no_x = T.TensorDict({ a = T.arange(2), b = T.ones(2), n = {} }, 2)
    H.raises(function() td:apply(function(x) return x end, no_x) end, "apply: TensorDict argument 2 has no key 'n.x'")
    local seen = {}
    local r = td:apply(function(k, x, y)
      seen[#seen + 1] = type(k) == "table" and table.concat(k, ".") or k
      return x - y
    end, other, { named = true })
    assert.are.same({ "a", "b", "n.x" }, seen)
    assert.are.same({ -9, -9 }, r.n.x:totable())
  end)

  it("takes a batch_size for results of another shape", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3, 2) }, s = "v" }, 3)
    local r = td:apply(function(x) return x:sum(1) end, { batch_size = {} })
    assert.are.same({}, r:batch_size())
    assert.are.same({}, r.n:batch_size())
    assert.are.equal(6, r.a:item())
    assert.are.same({ 3, 3 }, r.n.x:totable())
    assert.are.equal("v", r.s)
    H.raises(function() td:apply(function(x) return x:sum(1) end) end,
      "batch size [3] does not match the leading dims of 'a' (shape [])")
  end)

  it("apply_ writes in place and returns self", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3, 2) } }, 3)
    local a, x = td.a, td.n.x
    assert.is_true(rawequal(td, td:apply_(function(t) return t * 3 end)))
    assert.is_true(rawequal(a, td.a))
    assert.are.same({ 3, 6, 9 }, a:totable())
    assert.are.same({ 3, 3 }, x[1]:totable())
    td:apply_(function(t) return t * 0.5 end) -- cast back to int64
    assert.are.equal("int64", a:dtype())
    assert.are.same({ 1, 3, 4 }, a:totable())
    td:apply_(function(_, o) return o end, td:zeros_like())
    assert.are.same({ 0, 0, 0 }, a:totable())
    assert.are.same({ 0, 0 }, x[3]:totable())
    td:apply_(function(t) t:add_(1) end) -- nil: the function wrote itself
    assert.are.same({ 1, 1, 1 }, a:totable())
    local seen = {}
    td:apply_(function(k) seen[#seen + 1] = type(k) == "table" and table.concat(k, ".") or k end, { named = true })
    assert.are.same({ "a", "n.x" }, seen)
    H.raises(function() td:apply_(function() return T.zeros(4) end) end,
      "source shape [4] does not broadcast to destination shape [3]")
  end)

  it("raises for non-tensor results and bad arguments", function()
    local td = T.TensorDict({ a = T.arange(3), n = { x = T.ones(3) } }, 3)
    H.raises(function() td:apply(function() return 5 end) end,
      "apply: the function returned 5 for 'a'; expected a tensor or nil")
    H.raises(function() td:apply(function(x) if x:dtype() == "float32" then return "x" end end) end,
      "apply: the function returned 'x' for 'n.x'; expected a tensor or nil")
    H.raises(function() td:apply_(function() return 5 end) end,
      "apply_: the function returned 5 for 'a'; expected a tensor or nil")
    H.raises(function() td:apply(5) end, "apply: expected a function, got 5")
    H.raises(function() td:apply_("f") end, "apply_: expected a function, got 'f'")
    H.raises(function() td:apply(function(x) return x end, 5) end,
      "apply: argument 2 must be a TensorDict (or a table of options last), got 5")
    assert.are.same({ 1, 2, 3 }, td.a:totable())
  end)
end)

describe("tostring(TensorDict)", function()
  -- Expected texts are what tensordict 0.15.3 prints for the same containers.
  it("prints Python 0.15's compact layout: sorted fields, dtype and feature dims", function()
    local td = T.TensorDict({ obs = T.zeros(2, 3), info = { done = T.zeros(2, "bool") }, tag = "run1" }, 2)
    assert.are.equal("TensorDict(batch_size=[2], fields={info: {done: bool[]}, obs: f32[3], tag: str})",
      tostring(td))
    local n = T.TensorDict({ a = T.zeros(2, 3, "int64"), n = T.TensorDict({ x = T.zeros(2, 4, 5) }, { 2, 4 }),
      e = T.TensorDict({}, { 2 }) }, { 2 }, { device = "cpu", names = { "b" } })
    assert.are.equal(table.concat({
      "TensorDict(batch_size=[2], device=cpu, fields={",
      "    a: i64[3],",
      "    e: {},",
      "    n: [4]{x: f32[5]}})",
    }, "\n"), tostring(n)) -- 81 columns on one line: one field per line
    local kinds = T.TensorDict({ a = T.zeros(3, "bool"), b = T.zeros(3, "float64"), c = T.zeros(3, "uint8"),
      d = T.zeros(3, "bfloat16"), e = T.zeros(3, "float16"), f = T.zeros(3, "int32"), g = T.zeros(3, "int8"),
      h = T.zeros(3, "int16") })
    assert.are.equal(table.concat({
      "TensorDict(batch_size=[], fields={",
      "    a: bool[3],", "    b: f64[3],", "    c: u8[3],", "    d: bf16[3],", "    e: f16[3],",
      "    f: i32[3],", "    g: i8[3],", "    h: i16[3]})",
    }, "\n"), tostring(kinds))
    assert.are.equal("TensorDict(batch_size=[], fields={})", tostring(T.TensorDict()))
    local values = T.TensorDict({ i = 3, f = 2.5, b = true, l = { 1, 2 } }, {})
    assert.are.equal("TensorDict(batch_size=[], fields={b: bool, f: float, i: int, l: list})",
      tostring(values))
    local st = T.stack({ T.TensorDict({ s = "p" }), T.TensorDict({ s = "q" }) })
    assert.are.equal("TensorDict(batch_size=[2], fields={s: NonTensorStack})", tostring(st))
  end)

  it("set_printoptions{compact = false} gives the detailed layout", function()
    local before = T.set_printoptions({ compact = false })
    finally(function() T.set_printoptions(before) end)
    assert.are.same({ compact = true }, before)
    assert.are.same({ compact = false }, T.get_printoptions())
    H.raises(function() T.set_printoptions({ width = 3 }) end,
      "set_printoptions: unknown option 'width' (options: compact)")
    H.raises(function() T.set_printoptions({ compact = 1 }) end,
      "set_printoptions: compact must be a boolean, got 1")
    local td = T.TensorDict({ obs = T.zeros(2, 3), info = { done = T.zeros(2, "bool") }, tag = "run1" }, 2)
    assert.are.equal(table.concat({
      "TensorDict(",
      "    fields={",
      "        info: TensorDict(",
      "            fields={",
      "                done: Tensor(shape=[2], device=cpu, dtype=bool)},",
      "            batch_size=[2],",
      "            device=None,",
      "            locked=false),",
      "        obs: Tensor(shape=[2, 3], device=cpu, dtype=float32),",
      "        tag: NonTensorData(data=\"run1\", batch_size=[2])},",
      "    batch_size=[2],",
      "    device=None,",
      "    locked=false)",
    }, "\n"), tostring(td))
  end)

  it("prints names, device, lock and an empty container in the detailed layout", function()
    local before = T.set_printoptions({ compact = false })
    finally(function() T.set_printoptions(before) end)
    local td = T.TensorDict({ a = T.arange(2) }, 2, { names = { "env" }, device = "cpu", lock = true })
    assert.are.equal(table.concat({
      "TensorDict(",
      "    fields={",
      "        a: Tensor(shape=[2], device=cpu, dtype=int64)},",
      "    names=[env],",
      "    batch_size=[2],",
      "    device=cpu,",
      "    locked=true)",
    }, "\n"), tostring(td))
    assert.are.equal("TensorDict(\n    fields={},\n    batch_size=[],\n    device=None,\n    locked=false)",
      tostring(T.TensorDict()))
  end)
end)

describe("TensorDict misuse", function()
  it("rejects keys that are not strings or key paths", function()
    local td = T.TensorDict({ a = T.arange(3) }, 3)
    H.raises(function() td:get(5) end, "get: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:get({}) end, "get: keys are strings or arrays of strings (key paths), got a table")
    H.raises(function() td:set(5, T.zeros(3)) end, "set: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:set({ "a", 5 }, T.zeros(3)) end,
      "set: key path entry 2 is 5; key paths are arrays of strings")
    H.raises(function() td:del(5) end, "del: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:has(true) end, "has: keys are strings or arrays of strings (key paths), got true")
    H.raises(function() td:pop(5) end, "pop: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:set_(5, 1) end, "set_: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:select(5) end, "select: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() td:exclude(5) end, "exclude: keys are strings or arrays of strings (key paths), got 5")
    H.raises(function() T.TensorDict({ a = T.zeros(3), [1] = 3 }, 3) end, "TensorDict: keys must be strings, got 1")
    H.raises(function() td.c = { [1] = 1, [3] = 3 } end, "set: keys must be strings, got")
    assert.are.same({ "a" }, td:keys())
  end)

  it("rejects nil and values that are neither tensors, containers nor JSON", function()
    local td = T.TensorDict({ a = T.arange(3) }, 3)
    H.raises(function() td.b = nil end, "set: the value for 'b' is nil (use del to remove a key)")
    H.raises(function() td:set("b", nil) end, "set: the value for 'b' is nil (use del to remove a key)")
    H.raises(function() td.b = function() end end, "set: cannot store a function under 'b'")
    H.raises(function() td.b = coroutine.create(function() end) end, "set: cannot store a thread under 'b'")
    H.raises(function() td.b = { 1, function() end } end,
      "set: the value for 'b' is not a tensor, TensorDict or JSON value")
    H.raises(function() td.b = 0 / 0 end, "set: the value for 'b' is not a tensor, TensorDict or JSON value")
    H.raises(function() td.b = math.huge end, "set: the value for 'b' is not a tensor, TensorDict or JSON value")
    assert.are.same({ "a" }, td:keys())
  end)

  it("raises for a key path through a tensor or a non-tensor value", function()
    local td = T.TensorDict({ a = T.arange(3), s = "v" }, 3)
    H.raises(function() td:get({ "a", "b" }) end,
      "get: key path {\"a\", \"b\"} goes through 'a', which is a tensor, not a TensorDict")
    H.raises(function() return td[{ "a", "b" }] end, "goes through 'a', which is a tensor, not a TensorDict")
    H.raises(function() td:get({ "s", "b" }) end,
      "get: key path {\"s\", \"b\"} goes through 's', which is a non-tensor value, not a TensorDict")
    H.raises(function() td:set({ "a", "b" }, T.zeros(3)) end,
      "set: key path {\"a\", \"b\"} goes through 'a', which is a tensor, not a TensorDict")
    H.raises(function() td[{ "s", "b" }] = 1 end, "goes through 's', which is a non-tensor value")
    H.raises(function() td:has({ "a", "b" }) end, "has: key path {\"a\", \"b\"} goes through 'a'")
    H.raises(function() td:del({ "a", "b" }) end, "del: key path {\"a\", \"b\"} goes through 'a'")
    assert.are.same({ 1, 2, 3 }, td.a:totable())
  end)

  it("raises for bad options tables", function()
    local td = T.TensorDict({ a = T.arange(3) }, 3)
    H.raises(function() td:keys(5) end, "keys:")
  end)

  it("raises when a TensorDict is used after free()", function()
    local td = sample()
    local n = td.n
    local _ = td.a -- cached before free
    td:free()
    H.raises(function() td:keys() end, "TensorDict used after free()")
    H.raises(function() td:batch_size() end, "TensorDict used after free()")
    H.raises(function() return #td end, "TensorDict used after free()")
    H.raises(function() td.b = T.zeros(3) end, "TensorDict used after free()")
    H.raises(function() td:has("a") end, "TensorDict used after free()")
    H.raises(function() td:lock() end, "TensorDict used after free()")
    H.raises(function() td:clone() end, "TensorDict used after free()")
    H.raises(function() T.TensorDict(td) end, "TensorDict used after free()")
    assert.are.equal("TensorDict(<freed>)", tostring(td))
    td:free() -- a second free is harmless
    -- the nested handle holds its own reference
    assert.are.same({ 3, 2 }, n.x:shape())
  end)

  it("entries cached before free() do not come back", function()
    local td = sample()
    local _ = td.a
    local _ = td:get({ "n", "x" })
    td:free()
    H.raises(function() return td.a end, "TensorDict used after free()")
    -- (not tail calls: a tail call leaves no frame of this function to blame)
    H.raises(function() local v = td:get("a") return v end, "TensorDict used after free()")
    H.raises(function() local v = td:get({ "n", "x" }) return v end, "TensorDict used after free()")
  end)

  it("ops that build a result check the handle before reading its batch size", function()
    local td = sample()
    td:free()
    H.raises(function() td:select("a") end, "TensorDict used after free()")
    H.raises(function() td:exclude("a") end, "TensorDict used after free()")
    H.raises(function() td:apply(function(x) return x end) end, "TensorDict used after free()")
    H.raises(function() td:flatten_keys() end, "TensorDict used after free()")
  end)

  it("free() on a leaf says to free the TensorDict", function()
    local td = T.TensorDict({ a = T.arange(3) }, 3)
    local a = td.a
    H.raises(function() a:free() end,
      "free: this tensor is a leaf of a TensorDict, which owns its storage; free() the TensorDict instead")
    assert.are.same({ 1, 2, 3 }, a:totable())
    assert.are.same({ 1, 2, 3 }, td.a:totable())
    td:free()
    H.raises(function() return a[1] end, "tensor used after free()")
  end)
end)

describe("Python spellings", function()
  it("lock_, unlock_, del_, rename_key_, shape, dim and ndim are the same methods", function()
    local td = T.TensorDict({ a = T.zeros(2, 3), b = T.ones(2) }, { 2 })
    assert.are.same({ 2 }, td:shape())
    assert.are.equal(1, td:dim())
    assert.are.equal(1, td:ndim())
    assert.is_true(rawequal(td, td:lock_()))
    assert.is_true(td:is_locked())
    td:unlock_()
    assert.is_false(td:is_locked())
    td:rename_key_("a", "c")
    assert.are.same({ "b", "c" }, td:keys())
    td:del_("b")
    assert.are.same({ "c" }, td:keys())
  end)

  it("a misspelt method says it is neither a key nor a method, and suggests one", function()
    local td = T.TensorDict({ a = T.zeros(2) }, { 2 })
    H.raises(function() return td.lock__ end,
      "index: no key 'lock__' in the TensorDict (keys: 'a'); no method 'lock__' either: did you mean td:lock_()?")
    H.raises(function() return td.zzzzzz end, "index: no key 'zzzzzz' in the TensorDict (keys: 'a')")
  end)

  it("shapes and batch sizes print as [3, 4] and compare by value", function()
    local t = T.zeros(3, 4)
    assert.are.equal("[3, 4]", tostring(t:shape()))
    assert.are.equal("[4, 1]", tostring(t:stride()))
    assert.are.equal("[3]", tostring(T.TensorDict({ x = t }, { 3 }):batch_size()))
    assert.are.equal("[]", tostring(T.tensor(1):shape()))
    assert.is_true(t:shape() == T.ones(3, 4):size())
    assert.is_false(t:shape() == T.ones(4, 3):size())
    assert.is_false(t:shape() == T.ones(3, 4, 1):size())
    assert.are.same({ 3, 4 }, t:shape()) -- still a plain array to compare and index
    assert.are.equal(4, t:shape()[2])
  end)
end)
