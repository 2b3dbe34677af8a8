-- td_map_spec.lua: td:map over forked worker processes (lua/tensordict/dict/map.lua and
-- the engine in lua/tensordict/dict/workers.lua, core/dict/dict_workers.c, core/dict/dict_ship.c):
-- results and their order, chunking, shipping of every kind of entry, determinism for
-- any worker count, out=, failures (errors, exits, signals, Ctrl-C) and fork safety.
local T = require("tensordict")
local H = require("helpers")
local ffi = require("ffi")
local MH = require("map_helpers") -- also declares getpid and kill for the fns below
local bytes, children = MH.bytes, MH.children

-- rows 1..n: x = i (float32), y = [i, -i] (int64), nested n.z = 2 i (float64),
-- a uniform value s and a stacked value tag (odd / even).
local function data(n)
  local x = n > 0 and T.arange(1, n, "float32") or T.zeros({ 0 }, "float32")
  local y = T.stack({ x:to("int64"), -x:to("int64") }, 2)
  local td = T.TensorDict({ x = x, y = y, n = { z = x:to("float64") * 2 }, s = "hello" }, { n })
  if n > 0 then
    local rows = {}
    for i = 1, n do rows[i] = T.TensorDict({ tag = i % 2 == 1 and "odd" or "even" }, {}) end
    td:set("tag", T.stack(rows, 1):get("tag"))
  end
  return td
end

local function double(c)
  return T.TensorDict({ x2 = c.x * 2, y = c.y, n = { z = c.n.z + 1 } }, c:batch_size())
end

describe("td:map", function()
  it("runs fn on chunks in workers and concatenates the results in order", function()
    local td = data(10)
    for _, w in ipairs({ 0, 1, 2, 3 }) do
      local r = td:map(double, { workers = w, chunk = 3 })
      assert.same({ 10 }, r:batch_size())
      assert.same({ 2, 4, 6, 8, 10, 12, 14, 16, 18, 20 }, r.x2:totable())
      assert.equals("float32", r.x2:dtype())
      assert.equals("int64", r.y:dtype())
      assert.same({ 10, 2 }, r.y:shape())
      assert.same(td.y:totable(), r.y:totable())
      assert.same({ 3, 5, 7 }, r.n.z[{ { 1, 3 } }]:totable())
      assert.equals("float64", r.n.z:dtype())
    end
    assert.same({}, children())
  end)

  it("handles a last partial chunk, a chunk larger than the rows and ordered = false", function()
    local td = data(7)
    assert.same({ 2, 4, 6, 8, 10, 12, 14 }, td:map(double, { workers = 2, chunk = 5 }).x2:totable())
    assert.same({ 2, 4, 6, 8, 10, 12, 14 }, td:map(double, { workers = 3, chunk = 100 }).x2:totable())
    assert.same({ 2, 4, 6, 8, 10, 12, 14 },
      td:map(double, { workers = 2, chunk = 1, ordered = false }).x2:totable())
  end)

  it("maps a 0-row TensorDict by calling fn once on it", function()
    local r = data(0):map(double, { workers = 2 })
    assert.same({ 0 }, r:batch_size())
    assert.same({ 0, 2 }, r.y:shape())
  end)

  it("ships nested keys, uniform and stacked non-tensor values and names", function()
    local td = data(6)
    td:rename({ "rows" })
    local r = td:map(function(c) return c end, { workers = 2, chunk = 4 })
    assert.is_true(r:equal(td))
    assert.equals("hello", r.s)
    assert.same({ "odd", "even", "odd", "even", "odd", "even" }, r.tag)
    assert.same({ 2, 4, 6, 8, 10, 12 }, r.n.z:totable())
    assert.same({ "rows" }, r:names())
    -- strided and expanded leaves come back with the same values
    local e = T.TensorDict({ t = T.arange(1, 12):view(3, 4):transpose(1, 2),
                             b = T.ones(1, 3):expand(4, 3) }, { 4 })
    local re = e:map(function(c) return c end, { workers = 2, chunk = 3 })
    assert.same(e.t:totable(), re.t:totable())
    assert.same(e.b:totable(), re.b:totable())
  end)

  it("ships every dtype", function()
    local src = {}
    for _, dt in ipairs(T.dtypes) do src[dt] = T.arange(0, 7):to(dt):view(4, 2) end
    local td = T.TensorDict(src, { 4 })
    local r = td:map(function(c) return c:clone() end, { workers = 2, chunk = 3 })
    for _, dt in ipairs(T.dtypes) do -- get: td.bool and td.bfloat16 are the casts
      assert.equals(dt, r:get(dt):dtype())
      assert.equals(bytes(td:get(dt)), bytes(r:get(dt)))
    end
  end)

  it("gives identical bytes for any worker count (seeded per chunk)", function()
    local td = data(50)
    local function noisy(c)
      return T.TensorDict({ r = T.rand(#c, 3) + c.x:unsqueeze(2), k = T.randint(1, 100, { #c }) }, { #c })
    end
    local ref = td:map(noisy, { workers = 0, chunk = 7, seed = 11 })
    for _, w in ipairs({ 1, 2, 3 }) do
      local r = td:map(noisy, { workers = w, chunk = 7, seed = 11 })
      assert.equals(bytes(ref.r), bytes(r.r))
      assert.equals(bytes(ref.k), bytes(r.k))
    end
    local other = td:map(noisy, { workers = 2, chunk = 7, seed = 12 })
    assert.not_equals(bytes(ref.r), bytes(other.r))
  end)

  it("writes straight into a shared out and returns it", function()
    local td = data(9)
    local out = T.TensorDict({ x2 = T.empty({ 9 }, "float32", { shared = true }),
                               y = T.empty({ 9, 2 }, "int64", { shared = true }),
                               n = { z = T.empty({ 9 }, "float64", { shared = true }) } }, { 9 })
    local r = td:map(double, { workers = 2, chunk = 2, out = out })
    assert.equals(out, r)
    assert.same({ 2, 4, 6, 8, 10, 12, 14, 16, 18 }, out.x2:totable())
    assert.same(td.y:totable(), out.y:totable())
  end)

  it("writes into a memmap opened r+", function()
    local dir = os.tmpname()
    os.remove(dir)
    local td = data(5)
    local like = double(td):memmap_like(dir)
    local out = T.load_memmap(dir, { mode = "r+" })
    td:map(double, { workers = 2, chunk = 2, out = out })
    assert.same({ 2, 4, 6, 8, 10 }, T.load_memmap(dir).x2:totable())
    like:free()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  it("refuses an out that workers cannot write", function()
    local td = data(4)
    local out = T.TensorDict({ x2 = T.zeros(4), y = T.zeros(4, 2, "int64"), n = { z = T.zeros(4, "float64") } }, { 4 })
    H.raises(function() td:map(double, { workers = 2, out = out }) end,
      "map: out's leaf", "is not in writable shared memory")
    H.raises(function() td:map(double, { out = T.TensorDict({}, { 3 }) }) end,
      "map: out has batch size [3], expected one starting with 4 rows")
  end)

  it("raises a worker's error with its message, traceback and chunk", function()
    local td = data(10)
    local err = H.raises(function()
      td:map(function(c)
        if c.x[1] == 7 then error("boom at " .. c.x[1]) end
        return double(c)
      end, { workers = 2, chunk = 3 })
    end, "map: chunk 3 failed in worker", "boom at 7", "stack traceback:", "td_map_spec.lua:")
    assert.is_nil(err:find("workers.lua", 1, true)) -- the engine's frames are cut
    assert.same({}, children())
  end)

  it("raises the same error inline", function()
    H.raises(function()
      data(4):map(function(c) if c.x[1] > 2 then error("boom") end return c end, { workers = 0, chunk = 2 })
    end, "map: chunk 2 failed: ", "boom", "stack traceback:")
  end)

  it("names a wrong result", function()
    local td = data(8)
    H.raises(function()
      td:map(function(c) return c.x[1] == 1 and c[{ { 1, 1 } }] or c end, { workers = 2, chunk = 3 })
    end,
      "map: chunk 1 failed in worker 1: fn returned a TensorDict of batch size [1] for rows 1..3, "
        .. "expected one starting with 3")
    H.raises(function() td:map(function(c) return c.x[1] == 1 and 42 or c end, { workers = 2, chunk = 3 }) end,
      "fn returned 42 for rows 1..3, expected a TensorDict")
    H.raises(function() td:map(function() return 42 end, { workers = 0, chunk = 3 }) end,
      "map: chunk 1 failed: fn returned 42")
  end)

  it("fails the chunk when fn returns a freed TensorDict (issue 28)", function()
    for _, w in ipairs({ 0, 2 }) do
      H.raises(function()
        data(6):map(function(c) -- with 2 workers, chunk 1 or 2 fails first
          local r = c:clone()
          r:free()
          return r
        end, { workers = w, chunk = 2 })
      end, "fn returned a freed TensorDict for rows ")
      local err = H.raises(function()
        data(2):map(function(c)
          local r = c:clone()
          r:free()
          return r
        end, { workers = w, chunk = 2 })
      end, "fn returned a freed TensorDict for rows 1..2")
      assert.truthy(err:find(w == 0 and "map: chunk 1 failed: fn" or "map: chunk 1 failed in worker 1: fn", 1, true))
    end
    assert.same({}, children())
  end)

  it("keeps the worker whose handler returned a freed TensorDict for the next batch (issue 28)", function()
    local workers = require("tensordict.dict.workers")
    local pool = workers.open(1, function(k)
      local r = T.TensorDict({ x = T.full({ 2 }, k) }, { 2 })
      if k == 1 then r:free() end
      return r
    end, 0, "engine", "batch")
    local pid = pool:pid(1)
    pool:submit(1)
    local ok, err = pcall(pool.next, pool)
    assert.is_false(ok)
    assert.equals("tensordict: engine: batch 1 failed in worker 1: the function returned a freed TensorDict", err)
    pool:submit(2)
    local k, r = pool:next()
    assert.equals(2, k)
    assert.same({ 2, 2 }, r.x:totable())
    assert.equals(pid, pool:pid(1)) -- the same process: it did not die
    pool:close()
    assert.same({}, children())
  end)

  it("fails a chunk that runs past its timeout and reaps the workers (issue 28)", function()
    H.raises(function()
      data(4):map(function(c)
        if c.x[1] == 1 then while true do end end
        return c
      end, { workers = 1, chunk = 2, timeout = 0.5 })
    end, "map: chunk 1 timed out after 0.5 s in worker 1")
    assert.same({}, children())
    assert.same({ 2, 4, 6, 8 }, data(4):map(double, { workers = 2, chunk = 1, timeout = 60 }).x2:totable())
    H.raises(function() data(4):map(double, { timeout = 0 }) end, "map: timeout must be a number of seconds > 0, got 0")
    H.raises(function() data(4):map(double, { timeout = "1" }) end, "map: option timeout must be a number, got '1'")
  end)

  it("reports a worker that calls os.exit with its status", function()
    H.raises(function()
      data(6):map(function(c) if c.x[1] > 3 then os.exit(3) end return c end, { workers = 2, chunk = 2 })
    end, "map: chunk 3 failed: worker", "exited with status 3")
    assert.same({}, children())
  end)

  it("reports a worker killed by a signal", function()
    H.raises(function()
      data(6):map(function(c)
        if c.x[1] > 3 then ffi.C.kill(ffi.C.getpid(), 9) end
        return c
      end, { workers = 2, chunk = 2 })
    end, "was killed by signal SIGKILL")
    assert.same({}, children())
  end)

  it("checks its arguments", function()
    local td = data(4)
    H.raises(function() td:map(42) end, "map: expected a function, got 42")
    H.raises(function() td:map(double, 3) end, "map: options must be a table")
    H.raises(function() td:map(double, { worker = 2 }) end, "map: unknown option 'worker'")
    H.raises(function() td:map(double, { workers = -1 }) end, "map: workers must be a non-negative integer")
    H.raises(function() td:map(double, { chunk = 0 }) end, "map: chunk must be a positive integer")
    H.raises(function() td:map(double, { seed = 1.5 }) end, "map: seed must be a non-negative integer")
    H.raises(function() T.TensorDict({ a = T.zeros(3) }):map(double) end, "at least one batch dim")
  end)

  it("is fork safe: the thread pool, the heap cache, BLAS and the generator work in a worker", function()
    T.set_num_threads(2)
    local big = T.rand(2 ^ 21) -- large enough for the pool and the heap cache
    local want = big:sum()
    local a = T.rand(64, 64)
    local mm = T.matmul(a, a)
    local td = T.TensorDict({ i = T.arange(1, 4) }, { 4 })
    local r = td:map(function(c)
      local s = big:sum()
      local tmp = T.empty({ 2 ^ 22 }) -- a large block: the heap cache's lock
      tmp:fill_(1)
      local t2 = T.empty({ 2 ^ 22 })
      t2:fill_(2)
      local ok = (s == want) and (tmp:sum() == 2 ^ 22) and T.matmul(a, a):eq(mm):all()
      return T.TensorDict({ ok = T.full({ #c }, ok and 1 or 0, "int64") }, { #c })
    end, { workers = 2, chunk = 1 })
    assert.same({ 1, 1, 1, 1 }, r.ok:totable())
  end)

  it("leaves no worker behind when the parent gets SIGINT", function()
    local out, status, dir = MH.interrupt([[
local td = T.TensorDict({ x = T.arange(1, 8) }, { 8 })
local ok, err = pcall(td.map, td, spin, { workers = 2, chunk = 1 })
]])
    assert.truthy(out:find("error: ", 1, true), out)
    assert.truthy(out:find("tensordict: map: interrupted", 1, true), out)
    assert.truthy(out:find("children:\n", 1, true), out) -- none left
    assert.equals("0", status:match("%d+"))
    -- the workers are gone (not just orphaned)
    for _, pid in ipairs(MH.started(dir)) do assert.is_false(MH.alive(pid)) end
    H.rmtree(dir)
  end)
end)
