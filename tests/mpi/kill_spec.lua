-- kill_spec.lua: a rank killed mid-run (SIGKILL, no goodbye): the others' calls fail
-- with a timeout error instead of hanging. Run under scripts/mpirun.sh, whose
-- --enable-recovery keeps the job alive when a rank dies.
local ffi = require("ffi")
local H = require("harness")
local T, dist = H.T, H.dist

ffi.cdef [[ int kill(int pid, int sig); int getpid(void); ]]

H.test_alone("the survivors' recv and all_reduce fail within their timeout", function()
  local rank, size = dist.rank(), dist.size()
  local td = T.TensorDict({ x = T.ones(4) }, {})
  dist.all_reduce(td, "sum") -- everyone alive: this works
  H.eq(td.x:sum(), 4 * size, "before the kill")
  local victim = size - 1
  if rank == victim then ffi.C.kill(ffi.C.getpid(), 9) end
  local now = require("tensordict.util").now
  local t0 = now()
  if rank == 0 then
    H.raises(function() dist.recv(victim, 1, { timeout = 2 }) end, "tensordict: dist.recv: timed out after 2 s")
  else
    H.raises(function() dist.all_reduce(td, "sum", { timeout = 2 }) end,
      "tensordict: dist.all_reduce: timed out after 2 s")
  end
  local took = now() - t0
  assert(took >= 2 and took < 5, ("failed after %.2f s, expected 2..5"):format(took))
end)

H.run({ finalize = false })
