-- flow/replay_ranks.lua: ReplayBuffer in a data-parallel run (ctx.dist, docs/dist.md):
-- the ranks extend one ring, every rank writing its own rows into it, none copying
-- another's.
--
-- The ranks' rows make one stream in rank order (rank 0's, then rank 1's, ...), which
-- goes into the ring after its newest rows as one process's extends would: of a stream
-- longer than the ring only its last capacity rows stay. A rank cannot know where its
-- rows go before the ranks before it are done, so during the run each keeps them in a
-- folder of its own (`.<name>.spill-R-of-N`, written as MemmapSink writes). At finish
-- the ranks exchange their counts and structures; rank 0 makes the ring (from the
-- structure of the first rank with rows) or keeps the one it reopened, and shares its
-- cursor and fill count; then every rank copies the rows of its own that stay, into
-- their places in the mapped ring, and syncs them; rank 0 moves the counters last.
local append = require("tensordict.dict.append")
local td_memmap = require("tensordict.dict.memmap")
local fs = require("tensordict.fs")
local ranks = require("tensordict.flow.memmap_ranks")

local M = {}

-- This rank's side: extends go to its own spill folder, made at the first one.
function M.open(rb, d)
  return { d = d, path = rb.p.path, spill_path = ranks.own_path(rb.p.path, "spill", d.rank, d.size) }
end

function M.extend(rb, w, td)
  if not w.spill then
    local a, msg = append.open(w.spill_path, { existsok = true, fsync = false })
    if not a then rb:fail("extend: %s", msg) end
    w.spill = a
  end
  if #td > 0 and w.first == nil then w.first = td[{ { 1, 1 } }]:clone() end
  local ok, msg = w.spill:write(td)
  if not ok then rb:fail("extend: %s", msg) end
end

function M.rows(w) return w.spill and w.spill:rows() or 0 end

-- rows (a TensorDict) into ring from row at (0-based), wrapping around.
local function put(ring, at, rows)
  local cap, n = #ring, #rows
  local first = math.min(n, cap - at)
  ring[{ { at + 1, at + first } }] = first == n and rows or rows[{ { 1, first } }]
  if first < n then ring[{ { 1, n - first } }] = rows[{ { first + 1, n } }] end
end

-- Every rank calls it: the stream into the ring. Returns the stream's rows. attach(), make_ring(structure) and
-- map_ring() are the ReplayBuffer's own: rank 0 reopens or makes the ring, then the
-- others map it.
function M.finish(rb, w, attach, make_ring, map_ring)
  local d = w.d
  local all = d.all_values({ rows = M.rows(w), structure = w.first and ranks.structure_text(w.first) or nil })
  local ref = ranks.same_structure(rb, all)
  local starts, total = {}, 0
  for r, x in ipairs(all) do
    starts[r], total = total, total + x.rows
  end
  -- the structure for rank 0, when it had no rows and must make the ring
  local structure = w.first
  if ref and ref ~= 1 then structure = d.dist.broadcast(d.rank == ref - 1 and w.first or nil, ref - 1) end
  -- rank 0: the ring (made from the structure, or the one reopened); its cursor and fill
  local ok, rank, err = ranks.outcomes(w, function()
    if d.rank ~= 0 then return end
    attach()
    if not rb.buf and structure then make_ring(structure) end
    if rb.buf and structure then
      local fits, msg = append.check_rows_like(rb.buf, structure, "the buffer")
      if not fits then rb:fail("extend: %s", msg) end
    end
  end)
  if not ok then ranks.failed(rb, w, rank, err) end
  local at = d.share({ pos = rb.pos, filled = rb.filled })
  if total == 0 then
    M.abort(w)
    return 0
  end
  ok, rank, err = ranks.outcomes(w, function()
    if d.rank ~= 0 then map_ring() end -- the ring rank 0 has just made or kept
    local cap = rb.p.capacity
    local mine, from = all[d.rank + 1].rows, starts[d.rank + 1]
    local skip = math.max(0, total - cap - from) -- rows that later ones overwrite
    if mine > skip then
      local spill, path = w.spill, w.spill_path
      w.spill = nil
      local committed, msg = spill:commit()
      if not committed then rb:fail("extend: %s", msg) end
      w.committed = path
      local rows = td_memmap.load_memmap(path)
      put(rb.buf, (at.pos + from + skip) % cap, skip > 0 and rows[{ { skip + 1, mine } }] or rows)
      rb.buf:sync()
    end
  end)
  if not ok then ranks.failed(rb, w, rank, err) end
  local cap = rb.p.capacity
  rb.pos, rb.filled = (at.pos + total) % cap, math.min(cap, at.filled + total)
  ok, rank, err = ranks.outcomes(w, function()
    if d.rank ~= 0 then return end
    local counters = rb.counters
    counters[3], counters[4] = rb.filled, rb.pos
    local synced, msg = append.sync_counters(counters)
    if not synced then rb:fail("sync: %s", msg) end
  end)
  M.abort(w)
  if not ok then ranks.failed(rb, w, rank, err) end
  return total
end

-- This rank's spill goes. Idempotent.
function M.abort(w)
  local a = w.spill
  w.spill = nil
  if a then a:abort() end
  if w.committed then
    fs.remove_tree(w.committed)
    w.committed = nil
  end
end

return M
