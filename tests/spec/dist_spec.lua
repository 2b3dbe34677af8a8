-- dist_spec.lua: tensordict.dist in one process. Without libtensordict_mpi (pointed at a
-- missing path) it says why and changes nothing else; with it, a single rank (MPI's
-- singleton start, no mpirun) gives the identities. The multi-rank tests are tests/mpi
-- (scripts/run-mpi-tests.sh).
local helpers = require("helpers")

local root = (debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or ".")
local core_lib = os.getenv("TENSORDICT_LIB") or (root .. "/build/libtensordict.so")
local mpi_lib = core_lib:gsub("libtensordict%.so$", "libtensordict_mpi.so")

-- Runs a Lua chunk in a fresh luajit with the given TENSORDICT_MPI_LIB; its output.
local function run(chunk, mpi_path)
  local file = helpers.tmpname()
  helpers.write(file, chunk)
  local cmd = ("cd %q && LUA_PATH='lua/?.lua;lua/?/init.lua;;' TENSORDICT_LIB=%q TENSORDICT_MPI_LIB=%q "
    .. "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 luajit %q 2>&1")
    :format(root, core_lib, mpi_path, file)
  local pipe = io.popen(cmd)
  local out = pipe:read("*a")
  pipe:close()
  os.remove(file)
  return out
end

local exists = helpers.exists

describe("tensordict.dist without libtensordict_mpi", function()
  it("is_available is false with the reason; init and rank raise; T works", function()
    local out = run([[
      local T = require("tensordict")
      local ok, why = T.dist.is_available()
      print("available", ok)
      print("reason", why)
      print("same module", rawequal(T.dist, require("tensordict.dist")))
      print("init", select(2, pcall(T.dist.init)))
      print("rank", select(2, pcall(T.dist.rank)))
      print("sum", T.ones(3):sum())
    ]], "/nonexistent/libtensordict_mpi.so")
    assert.truthy(out:find("available\tfalse", 1, true), out)
    assert.truthy(out:find("reason\tlibtensordict_mpi is not available (build it with 'make' where OpenMPI's "
      .. "mpicc is installed, or set TENSORDICT_MPI_LIB); tried: /nonexistent/libtensordict_mpi.so (absent)",
      1, true), out)
    assert.truthy(out:find("same module\ttrue", 1, true), out)
    assert.truthy(out:find("init\t[^\n]*tensordict: dist.init: libtensordict_mpi is not available"), out)
    assert.truthy(out:find("tensordict: dist.rank: MPI is not initialized (call dist.init() first)", 1, true), out)
    assert.truthy(out:find("sum\t3", 1, true), out)
  end)
end)

describe("tensordict.dist on one rank", function()
  it("gives the identities and checks its arguments", function()
    if not exists(mpi_lib) then
      pending("libtensordict_mpi.so not built (no mpicc)")
      return
    end
    local out = run([[
      local T = require("tensordict")
      local dist = T.dist
      assert(dist.is_available())
      assert(not dist.is_initialized())
      dist.init({ timeout = 10 })
      print("rank/size", dist.rank(), dist.size())
      local td = T.TensorDict({ a = T.tensor({ 1, 2, 3 }), i = T.tensor({ 4, 5, 6 }, "int32"), s = "x" }, { 3 })
      dist.all_reduce(td, "mean")
      print("mean", td.a:sum(), td.i:sum(), td.s)
      local r = dist.isend(td, 0, 5)
      local got = dist.recv(0, 5)
      r:wait()
      print("self", got:equal(td), got.s)
      print("gather", dist.gather(td, 0):batch_size()[1], dist.all_gather(td):equal(td))
      print("bcast", dist.broadcast(td, 0):equal(td))
      print("scalar", select(2, pcall(dist.gather, T.TensorDict({}, {}), 0)))
      print("range", select(2, pcall(dist.send, td, 1, 0)))
      print("op", select(2, pcall(dist.all_reduce, td, "avg")))
      print("timeout", select(2, pcall(dist.recv, 0, 99, { timeout = 0.05 })))
      dist.finalize()
      print("again", select(2, pcall(dist.init)))
    ]], mpi_lib)
    assert.truthy(out:find("rank/size\t0\t1", 1, true), out)
    assert.truthy(out:find("mean\t6\t15\tx", 1, true), out)
    assert.truthy(out:find("self\ttrue\tx", 1, true), out)
    assert.truthy(out:find("gather\t3\ttrue", 1, true), out)
    assert.truthy(out:find("bcast\ttrue", 1, true), out)
    assert.truthy(out:find("scalar\t[^\n]*tensordict: dist.gather: the containers are joined along batch dim 1, "
      .. "but this one has batch size %[%]"), out)
    assert.truthy(out:find("range\t[^\n]*tensordict: dist.send: destination 1 is out of range %(ranks 0..0%)"), out)
    assert.truthy(out:find("op\t[^\n]*tensordict: dist.all_reduce: op must be \"sum\", \"mean\", \"max\" or "
      .. "\"min\", got 'avg'"), out)
    assert.truthy(out:find("timeout\t[^\n]*tensordict: dist.recv: timed out after 0.05 s"), out)
    assert.truthy(out:find("again\t[^\n]*tensordict: dist.init: MPI was finalized already and cannot start again"), out)
  end)
end)
