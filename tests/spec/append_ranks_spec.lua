-- append_ranks_spec.lua: the appends that the ranks of a data-parallel run write one
-- folder with (dict/append.lua's share, join, copy_rows, set_total; core/store/
-- append_ranks.c), driven from one process: the owner and its joiners are appends of
-- this process, written in any order.
local helpers = require("helpers")
local T = require("tensordict")
local append = require("tensordict.dict.append")

local function rows(from, n, extra)
  local ids = {}
  for i = 1, n do ids[i] = from + i - 1 end
  local id = T.tensor(ids, "int64")
  local fields = { id = id, obs = { x = id:to("float32"):view(n, 1):expand(n, 3):clone() } }
  if extra then fields.extra = T.zeros(n) end
  return T.TensorDict(fields, { n })
end

local function ids(td) return td:get("id"):tolist() end

describe("data-parallel appends", function()
  local dir
  before_each(function() dir = helpers.tmpdir() end)
  after_each(function() helpers.rmtree(dir) end)

  it("an owner and two joiners write their rows at their offsets, in any order; the owner commits the total", function()
    local path = dir .. "/out"
    local owner = assert(append.open(path, { fsync = false }))
    assert(owner:share(0))
    local second = assert(append.join(owner:path(), path, 3, { fsync = false }))
    local third = assert(append.join(owner:path(), path, 5, { fsync = false }))
    -- the last rank writes first: its files grow past rows nobody wrote yet
    assert(third:write(rows(6, 4)))
    assert(second:write(rows(4, 1)))
    assert(owner:write(rows(1, 2)))
    assert(second:write(rows(5, 1)))
    assert(owner:write(rows(3, 1)))
    assert.are.equal(2, second:rows())
    assert(second:commit())
    assert(third:commit())
    assert(owner:set_total(nil, 9))
    assert(owner:commit())
    local td = T.load_memmap(path)
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9 }, ids(td))
    assert.are.equal("[9, 3]", tostring(td:get({ "obs", "x" }):size()))
    assert.are.same({ 4, 4, 4 }, td:get({ "obs", "x" })[4]:tolist())
    assert.are.same({ ".", "..", "out" }, helpers.output_lines("ls -a " .. dir))
  end)

  it("an owner with no rows commits the joiners' rows with a structure it is given", function()
    local path = dir .. "/out"
    local owner = assert(append.open(path, { fsync = false }))
    assert(owner:share(0))
    local other = assert(append.join(owner:path(), path, 0, { fsync = false }))
    assert(other:write(rows(1, 3)))
    assert(other:commit())
    local ok, msg = owner:set_total(nil, 3)
    assert.is_nil(ok)
    assert.are.equal("3 rows but no structure for them", msg)
    assert(owner:set_total(rows(100, 1), 3))
    assert(owner:commit())
    assert.are.same({ 1, 2, 3 }, ids(T.load_memmap(path)))
  end)

  it("no rows anywhere: an empty folder of batch size [0]", function()
    local path = dir .. "/out"
    local owner = assert(append.open(path, { fsync = false }))
    assert(owner:share(0))
    assert(owner:set_total(nil, 0))
    assert(owner:commit())
    local td = T.load_memmap(path)
    assert.are.equal(0, #td)
    assert.are.same({}, td:keys())
  end)

  it("copy_rows: another append's rows, any key order, into an append with no structure yet", function()
    local path = dir .. "/out"
    local src = assert(append.open(dir .. "/src", { fsync = false }))
    assert(src:write(rows(1, 5)))
    local dst = assert(append.open(path, { fsync = false }))
    assert(dst:share(0))
    assert(dst:copy_rows(2, src, 1, 3)) -- rows 2..4 of src to rows 3..5 of dst
    -- a batch whose keys come in another order copies leaf to leaf by name
    local other = assert(append.open(dir .. "/other", { fsync = false }))
    assert(other:write(T.TensorDict({ obs = { x = T.full({ 2, 3 }, 7) }, id = T.tensor({ 70, 71 }, "int64") }, { 2 })))
    assert(dst:copy_rows(0, other, 0, 2))
    assert(dst:set_total(nil, 5))
    assert(dst:commit())
    local td = T.load_memmap(path)
    assert.are.same({ 70, 71, 2, 3, 4 }, ids(td))
    assert.are.same({ 7, 7, 7 }, td:get({ "obs", "x" })[2]:tolist())
    assert.are.same({ 3, 3, 3 }, td:get({ "obs", "x" })[4]:tolist())
    src:abort()
    other:abort()
  end)

  it("copy_rows refuses rows of another structure and a source without rows", function()
    local src = assert(append.open(dir .. "/src", { fsync = false }))
    assert(src:write(rows(1, 2, true)))
    local dst = assert(append.open(dir .. "/dst", { fsync = false }))
    assert(dst:write(rows(1, 2)))
    local ok, msg = dst:copy_rows(2, src, 0, 2)
    assert.is_nil(ok)
    assert.are.equal("key 'extra' is not in the rows copied into", msg)
    local empty = assert(append.open(dir .. "/empty", { fsync = false }))
    ok, msg = dst:copy_rows(0, empty, 0, 1)
    assert.is_nil(ok)
    assert.truthy(msg:find("has no rows yet (its first batch fixes its files)", 1, true), msg)
    ok, msg = dst:copy_rows(0, src, -1, 1)
    assert.is_nil(ok)
    assert.are.equal("rows and positions must be >= 0, got 1 rows from row -1 to row 0", msg)
    for _, a in ipairs({ src, dst, empty }) do a:abort() end
  end)

  it("refuses: share after a batch, a missing folder, set_total of an unshared append, checkpoints", function()
    local a = assert(append.open(dir .. "/a", { fsync = false }))
    assert(a:write(rows(1, 1)))
    local ok, msg = a:share(0)
    assert.is_nil(ok)
    assert.truthy(msg:find("has rows already; share it before the first batch", 1, true), msg)
    ok, msg = a:set_total(nil, 1)
    assert.is_nil(ok)
    assert.truthy(msg:find("is not the shared append of a data-parallel run's owner", 1, true), msg)
    local j
    j, msg = append.join(dir .. "/nowhere", dir .. "/a", 0, {})
    assert.is_nil(j)
    assert.are.equal(("cannot open the folder '%s/nowhere' of '%s/a': No such file or directory"):format(dir, dir), msg)
    local s = assert(append.open(dir .. "/s", { fsync = false }))
    assert(s:share(2))
    ok, msg = s:checkpoint()
    assert.is_nil(ok)
    assert.truthy(msg:find("is written by several ranks, which do not checkpoint", 1, true), msg)
    ok, msg = s:share(-1)
    assert.is_nil(ok)
    assert.are.equal("row_offset must be >= 0, got -1", msg)
    a:abort()
    s:abort()
  end)

  it("structure: the batch that fixed the structure, nil before any", function()
    local a = assert(append.open(dir .. "/a", { fsync = false }))
    assert.is_nil(a:structure())
    assert(a:write(rows(1, 2)))
    assert(a:write(rows(3, 4)))
    local s = a:structure()
    assert.are.equal(2, #s)
    assert.are.same({ 1, 2 }, ids(s))
    assert.are.same({ "id", "obs" }, s:keys({ sort = true }))
    a:abort()
  end)

  it("a joiner's abort leaves the owner's folder; the owner's abort removes it", function()
    local path = dir .. "/out"
    local owner = assert(append.open(path, { fsync = false }))
    assert(owner:share(0))
    local folder = owner:path()
    local other = assert(append.join(folder, path, 1, { fsync = false }))
    assert(other:write(rows(2, 1)))
    other:abort()
    assert.truthy(helpers.exists(folder .. "/id.memmap"))
    owner:abort()
    assert.is_false(helpers.exists(folder))
    assert.are.same({ ".", ".." }, helpers.output_lines("ls -a " .. dir))
  end)
end)
