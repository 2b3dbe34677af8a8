-- The core TensorDict ops over every kind of container, as tensordict's own tests run
-- them: a fresh container, an indexed (strided) view of a larger one, one memmapped to
-- a folder and loaded back, one loaded from a consolidated file, one nested in a parent
-- and one stacked from its rows. Each kind holds the same values, so every op must give
-- the same result on each as on the fresh one: file-backed and strided leaves meet
-- every op.
local T = require("tensordict")
local H = require("helpers")

local BATCH = { 4, 3 }

-- The values of every kind: leaves of four dtypes, a nested container and a non-tensor.
local function source()
  return {
    a = T.arange(1, 12, "float32"):view(4, 3),
    b = T.arange(1, 24, "int64"):view(4, 3, 2),
    m = (T.arange(1, 12):view(4, 3) % 3):eq(0),
    n = { c = T.arange(1, 12, "float64"):view(4, 3, 1) * 0.5 },
    s = "tag",
  }
end

local function fresh() return T.TensorDict(source(), BATCH) end

local scratch = H.tmpdir() -- the files of the file-backed kinds and of ops that save
local files = 0
local function scratch_path(what)
  files = files + 1
  return ("%s/%s%d"):format(scratch, what, files)
end

-- Each kind: a function making a TensorDict with the values of source(). The locked
-- kinds (memmap, as Python's) are unlocked so that ops adding keys run on all kinds.
local KINDS = {
  { "fresh", fresh },
  { "indexed view", function()
    -- Rows 2..5 and every other column of a [5, 6] container: every leaf is strided.
    local src = source()
    local big = T.TensorDict({
      a = T.zeros(5, 6, "float32"), b = T.zeros(5, 6, 2, "int64"), m = T.zeros(5, 6, "bool"),
      n = { c = T.zeros(5, 6, 1, "float64") }, s = "tag",
    }, { 5, 6 })
    local region = { { 2, 5 }, { 1, 6, 2 } }
    big.a[region], big.b[region], big.m[region] = src.a, src.b, src.m
    big.n.c[region] = src.n.c
    return big[region]
  end },
  { "memmapped", function()
    local dir = scratch_path("memmap")
    fresh():memmap(dir)
    return T.load_memmap(dir, { mode = "r+" }):unlock()
  end },
  { "consolidated", function()
    local file = scratch_path("consolidated")
    fresh():consolidate(file)
    return T.from_consolidated(file, { mode = "r+" })
  end },
  { "nested", function()
    return T.TensorDict({ inner = source(), other = T.zeros(4, 3) }, BATCH).inner
  end },
  { "stacked", function() return T.stack(fresh():unbind(1), 1) end },
}

-- A plain Lua value with everything an op's result shows: dtypes, shapes, values,
-- batch sizes, entries by key, non-tensor data. Entries are compared by key, not in
-- order: a consolidated file lists non-tensor values first, as Python's does.
local function snapshot(x)
  if T.is_tensor(x) then return { dtype = x:dtype(), shape = x:shape(), values = x:totable() } end
  if T.is_tensordict(x) then
    local entries = {}
    for _, k in ipairs(x:keys()) do entries[k] = snapshot(x:get(k)) end
    return { batch_size = x:batch_size(), entries = entries }
  end
  if type(x) == "table" then
    local out = {}
    for k, v in pairs(x) do out[k] = snapshot(v) end
    return out
  end
  return x
end

-- The first place where two snapshots differ, as "path: got vs expected", or nil.
local function difference(got, expected, path)
  if type(got) ~= "table" or type(expected) ~= "table" then
    if got == expected or (got ~= got and expected ~= expected) then return nil end
    return ("%s: %s vs %s"):format(path, tostring(got), tostring(expected))
  end
  for k, v in pairs(expected) do
    local why = difference(got[k], v, path .. "." .. tostring(k))
    if why then return why end
  end
  for k, v in pairs(got) do
    if expected[k] == nil then return ("%s.%s: %s, not expected"):format(path, tostring(k), tostring(v)) end
  end
  return nil
end

-- The ops: op(td) -> anything snapshot reads. In-place ops return td.
local OPS = {
  -- reads
  { "get, fields and key paths", function(td) return { td:get("a"), td.b, td:get({ "n", "c" }), td.n.c, td.s } end },
  { "keys, batch size, numel, #", function(td)
    return { td:keys({ include_nested = true, leaves_only = true, sort = true }), td:batch_size(), td:numel(), #td }
  end },
  { "td[i], td[-1]", function(td) return { td[2], td[-1] } end },
  { "ranges, steps and a later dim", function(td) return { td[{ { 2, 3 } }], td[{ { 1, 4, 2 } }], td[{ {}, 2 }] } end },
  { "td[index tensor]", function(td) return td[T.tensor({ 3, 1, 3 }, "int64")] end },
  { "td[mask]", function(td) return td[td.m] end },
  { "masked_select, masked_fill", function(td)
    local x = td:exclude("s")
    return { x:masked_select(td.m), x:masked_fill(td.m, -1) }
  end },
  { "apply", function(td) return td:apply(function(x) return x:to("float64") * 2 end) end },
  { "clone, contiguous, to_table", function(td)
    local t = td:to_table()
    return { td:clone(), td:contiguous(), t.a, t.n.c }
  end },
  { "to(dtype)", function(td) return td:to("float64") end },
  { "stack and cat", function(td)
    return { T.stack({ td, td }, 2), T.cat({ td, td }, 1), T.cat({ td, td }, 2) }
  end },
  { "equal and allclose with a fresh container", function(td)
    local x, f = td:exclude("s"), fresh():exclude("s")
    return { x:equal(f), x:allclose(f) }
  end },
  { "select and exclude", function(td) return { td:select("b", "a"), td:exclude("a", "n") } end },
  { "unbind, split, chunk", function(td)
    return { td:unbind(2), td:split({ 1, 3 }), td:split(2, 2), td:chunk(3, -1) }
  end },
  { "view, reshape, flatten, unflatten", function(td)
    return { td:view(12), td:reshape(2, 6), td:flatten(1, 2), td:flatten(1, 2):unflatten(1, { 2, 6 }) }
  end },
  { "permute, transpose, unsqueeze, squeeze, expand", function(td)
    return { td:permute(2, 1), td:transpose(1, 2), td:unsqueeze(2), td:unsqueeze(1):squeeze(1),
      td[{ { 1, 1 } }]:expand(3, 1, 3) }
  end },
  { "arithmetic and reductions", function(td)
    local x = td:select("a", "b", "n")
    return { x + 1, x * x, -x, x:sum(), x:max(2), td:select("a", "n"):mean(1) }
  end },
  { "memmap and load", function(td)
    local dir = scratch_path("again")
    td:memmap(dir)
    return T.load_memmap(dir)
  end },
  { "consolidate and load", function(td)
    local file = scratch_path("again")
    td:consolidate(file)
    return T.from_consolidated(file)
  end },
  -- select fixes the key order (a consolidated file's differs); a memmapped container
  -- is on the CPU (device=cpu, as Python's). The rest prints the same.
  { "map over worker processes", function(td)
    return td:map(function(c) return c:select("a", "n"):apply(function(x) return x * 2 end) end,
      { workers = 2, chunk = 3 })
  end },
  { "zeros_like, empty_like, memmap_like", function(td)
    return { td:zeros_like(), td:empty_like():batch_size(), td:memmap_like(scratch_path("like")) }
  end },
  { "where, pad, clamp", function(td)
    local x = td:select("a", "b", "n")
    return { T.where(td.m, x, x * 2), T.pad(x, { 1, 0, 0, 2 }, -1), x:clamp(3, 8) }
  end },
  -- a memmapped container has device cpu; the others have none
  { "tostring", function(td)
    return (tostring(td:select("a", "b", "m", "n", "s")):gsub("device=cpu, ", ""))
  end },
  -- writes
  { "set a new key, replace one, set_ into one", function(td)
    td:set("z", T.ones(4, 3, 5))
    td.b = td.b * 10
    td:set_("a", T.full({ 4, 3 }, 7, "float64"))
    td:set({ "n", "d" }, T.zeros(4, 3))
    return td
  end },
  { "td[i] = number, td[range] = TensorDict", function(td)
    td[2] = 0
    td[{ { 3, 4 } }] = td[{ { 1, 2 } }]:clone()
    return td
  end },
  { "td[index tensor] = x, td[mask] = x", function(td)
    local x = td:select("a", "b", "n")
    x[T.tensor({ 4, 1 }, "int64")] = -3
    x[td.m] = 9
    return td
  end },
  { "masked_fill_, add_, apply_", function(td)
    local x = td:select("a", "b", "n")
    x:masked_fill_(td.m, -1)
    x:add_(2)
    x:apply_(function(t) return t * 3 end)
    return td
  end },
  { "update and update_", function(td)
    td:update({ z = T.ones(4, 3), n = { e = T.zeros(4, 3) } })
    td:update_({ a = T.full({ 4, 3 }, 5) })
    return td
  end },
  { "del, pop, rename_key", function(td)
    td:del("m")
    local popped = td:pop({ "n", "c" })
    td:rename_key("a", "q")
    return { td, popped }
  end },
  { "set_at_ and get_at", function(td)
    td:set_at_("a", 42, { 2, 3 })
    return { td:get_at("a", 2), td:get_at({ "n", "c" }, { {}, 1 }) }
  end },
}

describe("TensorDict ops on every kind of container", function()
  lazy_teardown(function() H.rmtree(scratch) end)

  it("the kinds are what they say: strided, file-backed", function()
    local view = KINDS[2][2]()
    assert.is_false(view.a:is_contiguous())
    assert.is_false(view.n.c:is_contiguous())
    assert.is_true(KINDS[3][2]():is_memmap())
    assert.is_false(KINDS[1][2]():is_memmap())
  end)

  for _, op in ipairs(OPS) do
    local op_name, run = op[1], op[2]
    it(op_name, function()
      local expected = snapshot(run(fresh()))
      for _, kind in ipairs(KINDS) do
        local kind_name, make = kind[1], kind[2]
        local td = make()
        local why = difference(snapshot(td:to_table()), snapshot(source()), kind_name .. " values")
        assert(why == nil, why)
        local ok, got = pcall(run, td)
        assert(ok, ("%s on %s: %s"):format(op_name, kind_name, tostring(got)))
        why = difference(snapshot(got), expected, kind_name)
        assert(why == nil, why)
      end
    end)
  end
end)
