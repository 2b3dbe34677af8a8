-- bench_dist_malformed.lua: how dist.recv takes malformed transfers from a broken peer
-- (issue 28; scripts/run-bench.sh launches it with scripts/mpirun.sh -n 2): rank 1 sends
-- TD_MALFORMED_TRIES (default 2000) containers whose wire it changes (tests/mpi/
-- broken_peer.lua: a data message cut short, empty, too long or left out, the structure
-- cut), rank 0 receives each with dist.recv, half of them into a like. The figure is
-- how many were accepted (the goal is 0) and how many refusals were not a clean
-- "tensordict: dist.recv: ..." error (the goal is 0), with the tries per second.
package.path = "lua/?.lua;lua/?/init.lua;tests/mpi/?.lua;" .. package.path
local T = require("tensordict")
local util = require("tensordict.util")
local peer = require("broken_peer")
local dist = T.dist

dist.init({ timeout = 60 })
local n = tonumber(os.getenv("TD_MALFORMED_TRIES") or "") or 2000
local seed = tonumber(os.getenv("TD_MALFORMED_SEED") or "") or 1
local t0 = util.now()
local r = peer.tries(T, n, seed, 100)
local took = util.now() - t0
if dist.rank() == 0 then
  local parts = {}
  for _, name in ipairs(peer.names) do parts[#parts + 1] = ("%s %d"):format(name, r.refused[name] or 0) end
  print(("malformed transfers: %d tries (seed %d), %d accepted, %d refused without a clean message; "
    .. "refused: %s; %.0f tries/s"):format(r.tries, seed, r.accepted, #r.unclean, table.concat(parts, ", "),
    r.tries / took))
  for name, text in pairs(r.seen) do print(("  %s: %s"):format(name, text:gsub("^.-tensordict: ", ""))) end
  for _, text in ipairs(r.unclean) do print("  UNCLEAN: " .. text) end
end
local ok = dist.rank() ~= 0 or (r.accepted == 0 and #r.unclean == 0)
dist.barrier()
dist.finalize()
os.exit(ok and 0 or 1)
