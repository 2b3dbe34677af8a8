-- harness.lua: a small test runner for scripts run on every rank under mpirun
-- (scripts/run-mpi-tests.sh). Each rank runs every test; after each, the ranks agree on
-- the outcome (a test passes when it passed on every rank) and rank 0 prints TAP:
-- "1..N", "ok i - name", "not ok i - name". A failing rank writes its error to stderr.
local T = require("tensordict")
local dist = T.dist

local H = { T = T, dist = dist }
local tests = {}

function H.test(name, fn) tests[#tests + 1] = { name = name, fn = fn } end

-- fn must raise, with every given text, at the calling spec's line (tests/spec/helpers.lua).
H.raises = require("helpers").raises

function H.eq(a, b, what)
  if a ~= b then error(("%s: expected %s, got %s"):format(what or "value", tostring(b), tostring(a)), 2) end
end

-- Two TensorDicts with the same keys, batch size, dtypes and values.
function H.same(a, b, what)
  if not a:equal(b) then
    error(("%s: containers differ:\n%s\nvs\n%s"):format(what or "TensorDict", tostring(a), tostring(b)), 2)
  end
  for _, k in ipairs(b:keys({ include_nested = true, leaves_only = true })) do
    local x, y = a:get(k), b:get(k)
    if T.is_tensor(y) and x:dtype() ~= y:dtype() then
      error(("%s: leaf dtype %s, expected %s"):format(what or "TensorDict", x:dtype(), y:dtype()), 2)
    end
  end
end

-- Runs the tests, reports, finalizes. opts.finalize = false leaves MPI as it is (a test
-- that killed a rank: the survivors exit without a collective).
function H.run(opts)
  opts = opts or {}
  if os.getenv("TD_MPI_TEST_LIST") == "1" then -- the runner counts tests it must skip
    print(#tests)
    os.exit(0)
  end
  dist.init({ timeout = 60 })
  local rank = dist.rank()
  if rank == 0 then print("1.." .. #tests) end
  local all_ok = true
  for i, t in ipairs(tests) do
    local ok, err = xpcall(t.fn, debug.traceback)
    if not ok then io.stderr:write(("rank %d: %s: %s\n"):format(rank, t.name, tostring(err))) end
    if not t.alone then
      local flag = T.TensorDict({ ok = T.tensor({ ok and 1 or 0 }, "int32") }, {})
      dist.all_reduce(flag, "min", { timeout = 60 })
      ok = flag.ok:tolist()[1] == 1
    end
    if rank == 0 then print((ok and "ok " or "not ok ") .. i .. " - " .. t.name) end
    all_ok = all_ok and ok
    io.stdout:flush()
  end
  if opts.finalize ~= false then
    dist.barrier()
    dist.finalize()
  end
  os.exit(all_ok and 0 or 1)
end

-- The last test of a file where ranks may be gone: each rank's own outcome, rank 0's
-- printed (no agreement step).
function H.test_alone(name, fn)
  H.test(name, fn)
  tests[#tests].alone = true
end

-- Deterministic data of a rank: what every rank can build for any other rank, so each
-- checks a collective against a reference computed here in one process.
function H.leaf(dtype, rank, shape)
  shape = shape or { 2, 3 }
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local t = T.arange(n):add(rank * 10)
  if dtype == "bool" then t = t:remainder(2) end
  return t:to(dtype):reshape(shape)
end

H.DTYPES = { "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64" }

return H
