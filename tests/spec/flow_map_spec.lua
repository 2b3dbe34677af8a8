-- flow_map_spec.lua: flow.Map, the stream node that runs fn in worker processes
-- (lua/tensordict/flow/map.lua): order, ordered = false, in_keys/out_keys, 0-row and
-- partial batches, shipping, determinism for any worker count, failures (errors, exits,
-- signals, Ctrl-C), closing, direct calls and spec round trips.
local T = require("tensordict")
local H = require("helpers")
local ffi = require("ffi")
local flow = require("tensordict.flow")
local Map = require("tensordict.flow.map").Map
local MH = require("map_helpers") -- also declares getpid and kill for the fns below
local bytes, children = MH.bytes, MH.children

-- rows 1..n: x = i (float32), nested n.z = -i (int64), s = "tag" (uniform).
local function data(n)
  local x = n > 0 and T.arange(1, n, "float32") or T.zeros({ 0 }, "float32")
  return T.TensorDict({ x = x, n = { z = -x:to("int64") }, s = "tag" }, { n })
end

local function run(node, n, batch, opts)
  return flow.run(flow.TensorSource { td = data(n), batch_size = batch }, node, flow.Collect {}, opts)
end

-- Every x of a list of batches, in order.
local function xs(list) return H.column(list, "x") end

local function square(b) return T.TensorDict({ x = b.x * b.x, n = { z = b.n.z * 2 }, s = b.s }, b:batch_size()) end

describe("flow.Map", function()
  it("runs fn in workers and emits results in input order", function()
    for _, w in ipairs({ 0, 1, 2, 3 }) do
      local out = run(Map { fn = square, workers = w }, 10, 3)
      assert.equals(4, #out)
      assert.same({ 1, 4, 9, 16, 25, 36, 49, 64, 81, 100 }, xs(out))
      assert.same({ 3, 3, 3, 1 }, { #out[1], #out[2], #out[3], #out[4] }) -- the last partial
      assert.same({ -2, -4, -6 }, out[1].n.z:totable())
      assert.equals("int64", out[1].n.z:dtype())
      assert.equals("tag", out[4].s)
    end
    assert.same({}, children())
  end)

  it("emits as results finish with ordered = false (same rows, any order)", function()
    local out = run(Map { fn = square, workers = 3, ordered = false }, 20, 2)
    local got = xs(out)
    table.sort(got)
    local want = {}
    for i = 1, 20 do want[i] = i * i end
    assert.same(want, got)
  end)

  it("drops batches for which fn returns nil", function()
    local out = run(Map { fn = function(b) if b.x[1] % 4 == 1 then return nil end return b end, workers = 2 }, 8, 2)
    assert.same({ 3, 4, 7, 8 }, xs(out))
  end)

  it("keeps at most two batches per worker ahead of the one whose turn it is (a stalled batch holds back)", function()
    -- batch 1 stalls in its worker while the other worker could take every other batch:
    -- the source is pulled no further than 2 per worker past batch 1 before it is written
    pcall(ffi.cdef, "int usleep(unsigned int usec);")
    local pulled, pulled_at_first_write = 0, nil
    local td = data(60)
    local source = { iter = function()
      local i = 0
      return function()
        if i >= 30 then return nil end
        i, pulled = i + 1, pulled + 1
        return td[{ { 2 * i - 1, 2 * i } }]
      end
    end }
    local sink = { rows = {}, write = function(self, b)
      pulled_at_first_write = pulled_at_first_write or pulled
      for _, x in ipairs(b.x:totable()) do self.rows[#self.rows + 1] = x end
    end, finish = function(self) return self.rows end, abort = function() end }
    local stall = function(b)
      if b.x[1] == 1 then ffi.C.usleep(400000) end
      return b
    end
    local got = flow.run(source, Map { fn = stall, workers = 2 }, sink)
    assert.equals(60, #got)
    assert.same(T.arange(1, 60, "float32"):totable(), got)
    assert.is_true(pulled_at_first_write <= 6, "pulled " .. tostring(pulled_at_first_write) .. " batches")
    assert.same({}, children())
  end)

  it("passes 0-row batches through", function()
    local node = Map { fn = square, workers = 2 }
    node:open({ seed = 0 })
    local r = node(data(0))
    node:close()
    assert.same({ 0 }, r:batch_size())
    assert.same({ 0 }, r.n.z:shape())
  end)

  it("ships only in_keys and writes out_keys back into the batch", function()
    local seen
    local node = Map {
      fn = function(b) return T.TensorDict({ y = b.x + 1, nk = #b:keys() }, b:batch_size()) end,
      workers = 2, in_keys = { "x" }, out_keys = { "y", "nk" },
    }
    assert.same({ "x" }, node.in_keys)
    assert.same({ "y", "nk" }, node.out_keys)
    local out = run(node, 4, 2)
    assert.same({ 2, 3 }, out[1].y:totable())
    assert.equals(1, out[1].nk)            -- fn saw x only
    assert.same({ -1, -2 }, out[1].n.z:totable()) -- the batch kept its other keys
    seen = out
    assert.equals(2, #seen)
    H.raises(function() run(Map { fn = square, in_keys = { "nope" } }, 4, 2) end, "Map: key 'nope' is missing")
    H.raises(function() run(Map { fn = square, workers = 2, out_keys = { "y" } }, 4, 2) end,
      "failed in worker", "fn's result has no key 'y' (out_keys); its keys:")
  end)

  it("gives identical bytes for 0 (inline), 1, 2 and 3 workers", function()
    local function noisy(b) return T.TensorDict({ r = T.randn(#b, 4) + b.x:unsqueeze(2) }, { #b }) end
    local ref
    for _, w in ipairs({ 0, 1, 2, 3 }) do
      local out = run(Map { fn = noisy, workers = w }, 40, 6, { seed = 7 })
      local all = T.cat(out, 1)
      if not ref then ref = bytes(all.r) else assert.equals(ref, bytes(all.r)) end
    end
    local other = T.cat(run(Map { fn = noisy, workers = 2 }, 40, 6, { seed = 8 }), 1)
    assert.not_equals(ref, bytes(other.r))
    local own = T.cat(run(Map { fn = noisy, workers = 2, seed = 7 }, 40, 6, { seed = 99 }), 1)
    assert.equals(ref, bytes(own.r)) -- Map's seed wins over the pipeline's
  end)

  it("ships every dtype and strided leaves", function()
    local src = {}
    for _, dt in ipairs(T.dtypes) do src[dt] = T.arange(0, 11):to(dt):view(4, 3) end
    src.tr = T.arange(1, 12):view(3, 4):transpose(1, 2)
    local td = T.TensorDict(src, { 4 })
    local out = flow.run(flow.TensorSource { td = td, batch_size = 3 }, Map { fn = function(b) return b end },
      flow.Collect { cat = true })
    for k in pairs(src) do assert.equals(bytes(td:get(k)), bytes(out:get(k))) end -- td.bool is a method
  end)

  it("raises a worker's error with the batch number, message and traceback, and closes", function()
    local function fail_on_5(b)
      if b.x[1] == 5 then error("bad batch " .. b.x[1]) end
      return b
    end
    local node = Map { fn = fail_on_5, workers = 2 }
    local err = H.raises(function() run(node, 10, 2) end,
      "Map: batch 3 failed in worker", "bad batch 5", "stack traceback:", "flow_map_spec.lua:")
    assert.truthy(err:find("(Map)", 1, true) or err:find("Map:", 1, true))
    assert.is_nil(node.pool)
    assert.same({}, children())
    H.raises(function() node(data(2)) end, "Map: a batch failed earlier and the workers were stopped")
    node:open({})
    assert.same({ 1, 2 }, node(data(2)).x:totable())
    node:close()
  end)

  it("reports os.exit and SIGKILL in a worker", function()
    H.raises(function()
      run(Map { fn = function(b) if b.x[1] == 3 then os.exit(5) end return b end, workers = 2 }, 6, 2)
    end, "Map: batch 2 failed: worker", "exited with status 5")
    H.raises(function()
      run(Map { fn = function(b)
        if b.x[1] == 3 then ffi.C.kill(ffi.C.getpid(), 9) end
        return b
      end, workers = 2 }, 6, 2)
    end, "Map: batch 2 failed: worker", "killed by signal SIGKILL")
    assert.same({}, children())
  end)

  it("fails the batch, not the worker, when fn returns a freed TensorDict (issue 28)", function()
    local function freeing(b)
      local r = b:clone()
      r:free()
      return r
    end
    local err = H.raises(function() run(Map { fn = freeing, workers = 1 }, 4, 2) end,
      "Map: batch 1 failed in worker 1: fn returned a freed TensorDict")
    assert.is_nil(err:find("exited with status", 1, true))
    assert.is_nil(err:find("stack traceback", 1, true))
    H.raises(function() run(Map { fn = freeing, workers = 0 }, 4, 2) end,
      "Map: batch 1 failed: fn returned a freed TensorDict")
    assert.same({}, children())
  end)

  it("reports a worker that died between batches with the batch it was to take (issue 28)", function()
    local node = Map { fn = function(b) return b end, workers = 2 }
    node:open({})
    assert.same({ 1, 2 }, node(data(2)).x:totable())
    local pid, pid2 = node.pool:pid(1), node.pool:pid(2)
    ffi.C.kill(pid, 9)
    ffi.C.kill(pid2, 9)
    MH.wait_dead(pid)
    MH.wait_dead(pid2)
    local err = H.raises(function()
      for _ = 1, 4 do node(data(2)) end
    end)
    local text = err:match("tensordict: (.*)$")
    assert.equals(("Map: batch 2 failed: worker 1 (pid %d) was killed by signal SIGKILL while idle, "
      .. "before it took this batch"):format(pid), text)
    assert.is_nil(node.pool)
    assert.same({}, children()) -- both reaped
  end)

  it("fails a batch that runs past its timeout and reaps every worker (issue 28)", function()
    local function spin_on_3(b)
      if b.x[1] == 3 then while true do end end
      return b
    end
    local node = Map { fn = spin_on_3, workers = 2, timeout = 2 }
    local err = H.raises(function() run(node, 8, 2) end)
    assert.truthy(err:match("tensordict: Map: batch 2 timed out after 2 s in worker [12]$"), err)
    assert.is_nil(node.pool)
    assert.same({}, children())
    -- a worker stopped with SIGSTOP, the timeout from the run's ctx (a recipe's 'timeout')
    local stop_on_5 = function(b)
      if b.x[1] == 5 then ffi.C.kill(ffi.C.getpid(), 19) end
      return b
    end
    err = H.raises(function() run(Map { fn = stop_on_5, workers = 1 }, 8, 2, { ctx = { timeout = 2 } }) end)
    assert.truthy(err:match("tensordict: Map: batch 3 timed out after 2 s in worker 1$"), err)
    assert.same({}, children())
    -- batches within the limit pass; the node's own timeout wins over ctx's
    local out = run(Map { fn = square, workers = 2, timeout = 60 }, 6, 2, { ctx = { timeout = 1e-9 } })
    assert.same({ 1, 4, 9, 16, 25, 36 }, xs(out))
    H.raises(function() run(Map { fn = square, workers = 2, timeout = 0 }, 4, 2) end,
      "Map: timeout must be a number of seconds > 0, got 0")
    H.raises(function() Map { fn = square, timeout = -1 } end, "timeout: expected number >= 0, got -1")
  end)

  it("names a wrong result", function()
    H.raises(function() run(Map { fn = function() return "x" end, workers = 2 }, 4, 2) end,
      "failed in worker", "fn returned 'x', expected a TensorDict or nil")
    H.raises(function() run(Map { fn = function() return 5 end, workers = 0 }, 4, 2) end,
      "Map: batch 1 failed: fn returned 5, expected a TensorDict or nil")
  end)

  it("never overwrites what a worker's fn kept from an earlier batch", function()
    local kept -- a container viewing the previous batch's shared memory
    local node = Map { fn = function(b)
      local prev = kept and kept.x:clone() or T.zeros(#b, "float32")
      kept = b:select("x")
      return T.TensorDict({ x = b.x, prev = prev }, b:batch_size())
    end, workers = 1 }
    local out = run(node, 8, 2)
    assert.same({ 0, 0 }, out[1].prev:totable())
    assert.same({ 1, 2 }, out[2].prev:totable())
    assert.same({ 3, 4 }, out[3].prev:totable())
    assert.same({ 5, 6 }, out[4].prev:totable())
    assert.same({ 7, 8 }, out[4].x:totable())
  end)

  it("makes a leaf kept from an earlier batch raise instead of changing", function()
    local leaf
    local node = Map { fn = function(b)
      if leaf then leaf:totable() end
      leaf = b.x
      return b
    end, workers = 1 }
    H.raises(function() run(node, 4, 2) end, "Map: batch 2 failed in worker 1", "tensor used after free()")
  end)

  it("runs inline when called directly before open, with the same seeding", function()
    local function noisy(b) return T.TensorDict({ r = T.rand(#b) }, { #b }) end
    local node = Map { fn = noisy, workers = 2, seed = 3 }
    local a = node(data(5))
    local opened = Map { fn = noisy, workers = 2, seed = 3 }
    opened:open({ seed = 0 })
    local b = opened(data(5))
    local b2 = opened(data(5))
    opened:close()
    opened:close() -- idempotent
    assert.equals(bytes(a.r), bytes(b.r))
    assert.not_equals(bytes(b.r), bytes(b2.r)) -- batch 2 has its own stream
    assert.same({}, children())
  end)

  it("checks its parameters and round-trips its spec", function()
    H.raises(function() Map {} end, "Map:", "fn")
    H.raises(function() Map { fn = square, workers = -1 } end, "Map:", "workers")
    flow.register_function("flow_map_spec.square", square)
    local node = Map { fn = "flow_map_spec.square", workers = 3, ordered = false }
    local spec = node:spec()
    assert.same({ type = "Map", fn = "flow_map_spec.square", workers = 3, ordered = false }, spec)
    local again = flow.build(spec)
    assert.same(spec, again:spec())
    assert.same({ 1, 4 }, xs(run(again, 2, 2)))
  end)

  it("is fork safe after the parent used the thread pool and the heap cache", function()
    T.set_num_threads(2)
    local big = T.rand(2 ^ 21)
    local want = big:sum()
    local node = Map { fn = function(b)
      local t = T.empty({ 2 ^ 22 })
      t:fill_(1)
      local ok = big:sum() == want and t:sum() == 2 ^ 22
      return T.TensorDict({ ok = T.full({ #b }, ok and 1 or 0, "int64") }, { #b })
    end, workers = 2 }
    local out = run(node, 4, 1)
    for _, td in ipairs(out) do assert.same({ 1 }, td.ok:totable()) end
  end)

  it("stops its workers when the parent gets SIGINT inside flow.run", function()
    local out, status, dir = MH.interrupt([[
local flow = require("tensordict.flow")
local Map = require("tensordict.flow.map").Map
local td = T.TensorDict({ x = T.arange(1, 8) }, { 8 })
local node = Map { fn = spin, workers = 2 }
local ok, err = pcall(flow.run, flow.TensorSource { td = td, batch_size = 1 }, node, flow.Collect {})
]])
    assert.truthy(out:find("child.lua:14: tensordict: run: interrupted by SIGINT: the nodes were closed and the "
      .. "sink aborted (nothing was committed)", 1, true), out)
    assert.truthy(out:find("children:\n", 1, true), out)
    assert.equals("0", status:match("%d+"))
    for _, pid in ipairs(MH.started(dir)) do assert.is_false(MH.alive(pid)) end
    H.rmtree(dir)
  end)
end)
