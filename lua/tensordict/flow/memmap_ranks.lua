-- flow/memmap_ranks.lua: MemmapSink in a data-parallel run (ctx.dist, docs/dist.md):
-- every rank writes its rows straight into the one folder that rank 0 commits
-- (dict/append.lua's share and join, core/store/append_ranks.c), in rank order, as one
-- process writing every row would.
--
-- The plan, made at open: each rank's reservation, the rows ctx.rows_hint says it will
-- write (flow.run's hint: its share of the source when every step keeps rows), starting
-- after the reservations of the ranks before it. Without a hint on every rank, rank 0
-- reserves everything and the others none. A rank writes its first rows into its
-- reservation (the last rank, having none after it, writes all of its rows there) and
-- any beyond into a spill folder of its own.
-- At finish the ranks exchange their row counts: rank r's rows go from the sum of the
-- counts before it. A rank whose reservation starts elsewhere (a hint that missed) first
-- copies its rows out to a folder of its own, and, once every rank has (a barrier),
-- into place; spilled rows are copied into place too. Each rank copies only its own
-- rows and syncs its own writes; then rank 0 commits the folder (trimmed to the total,
-- meta.json, rename) and tells the others the outcome. With a right hint nothing is
-- copied: every row is written once, where it stays.
local append = require("tensordict.dict.append")
local is_tensor = require("tensordict.tensor").is_tensor

local M = {}

local UNLIMITED = math.huge

-- A hidden sibling of path for rank's own folders (spill, moved).
local function own_path(path, what, rank, size)
  local dir, name = path:match("^(.*)/([^/]+)/*$")
  if not dir then dir, name = ".", path end
  return ("%s/.%s.%s-%d-of-%d"):format(dir, name, what, rank, size)
end

-- The text of td's structure, equal on two ranks when their rows fit one folder: the
-- dims after the first, and per leaf its dtype and dims after the first (a non-tensor
-- value: the value).
local function structure_text(td)
  local lines = { "batch " .. tostring(td:batch_size()):gsub("^%[%d+", "[*") }
  for _, k in ipairs(td:keys({ include_nested = true, leaves_only = true, sort = true })) do
    local v = td:get(k)
    local name = type(k) == "table" and table.concat(k, ".") or k
    if is_tensor(v) then
      lines[#lines + 1] = ("%s: %s %s"):format(name, v:dtype(), tostring(v:size()):gsub("^%[%d+", "[*"))
    else
      lines[#lines + 1] = ("%s = %s"):format(name, tostring(v))
    end
  end
  return (table.concat(lines, "\n"))
end

-- The first line where a and b differ.
local function first_difference(a, b)
  local la, lb = {}, {}
  for l in (a .. "\n"):gmatch("(.-)\n") do la[#la + 1] = l end
  for l in (b .. "\n"):gmatch("(.-)\n") do lb[#lb + 1] = l end
  for i = 1, math.max(#la, #lb) do
    if la[i] ~= lb[i] then return la[i] or "(nothing)", lb[i] or "(nothing)" end
  end
end

local function check(sink, ok, msg)
  if not ok then sink:fail("%s", msg) end
  return ok
end

-- Opens this rank's side (sink: the MemmapSink, d: ctx.dist, opts: the append's). Every
-- rank calls it at open: it exchanges the hints and rank 0's folder.
function M.open(sink, d, opts, hint)
  local hints = d.all_values(hint or false)
  local w = { d = d, path = sink.p.path, opts = opts, direct_rows = 0 }
  local planned = true
  for _, h in ipairs(hints) do planned = planned and type(h) == "number" end
  local offset, limit = 0, d.rank == 0 and UNLIMITED or 0
  if planned then
    for r = 1, d.rank do offset = offset + hints[r] end
    limit = d.rank == d.size - 1 and UNLIMITED or hints[d.rank + 1]
  end
  w.offset, w.limit = offset, limit
  local shared = { ok = true }
  if d.rank == 0 then
    local a, msg = append.open(w.path, opts)
    local ok, err = a ~= nil, msg
    if ok then ok, err = a:share(offset) end
    shared = ok and { ok = true, folder = a:path() } or { ok = false, err = err }
    w.direct = a
  end
  shared = d.share(shared)
  if not shared.ok then
    if d.rank == 0 then
      sink:fail("%s", (shared.err:gsub("%(pass existsok%)", "(pass existsok = true to replace it)")))
    end
    sink:fail("rank 0 could not open '%s': %s", w.path, shared.err)
  end
  w.folder = shared.folder
  if d.rank ~= 0 and limit > 0 then
    w.direct = check(sink, append.join(w.folder, w.path, offset, opts))
  end
  return w
end

-- Spilled rows go to a folder of this rank's own (a temporary, never committed).
local function spill(sink, w)
  if not w.spill then
    w.spill = check(sink, append.open(own_path(w.path, "spill", w.d.rank, w.d.size),
      { existsok = true, fsync = false }))
  end
  return w.spill
end

function M.write(sink, w, td)
  if td:batch_dims() == 0 then sink:fail("a batch needs at least one batch dim (rows), got batch size []") end
  local n = #td
  if w.first == nil then
    w.first = (n > 0 and td[{ { 1, 1 } }] or td):clone() -- the structure, for the others
  else
    -- as one append checks every batch against its first (the reservation's and the
    -- spill's appends each see only some of the batches)
    local ok, msg = append.check_rows_like(w.first, td, "the first batch")
    if not ok then sink:fail("%s", msg) end
  end
  if n == 0 then return end
  local room = w.limit - w.direct_rows
  if n <= room then
    check(sink, w.direct:write(td))
    w.direct_rows = w.direct_rows + n
  elseif room > 0 then
    check(sink, w.direct:write(td[{ { 1, room } }]))
    w.direct_rows = w.direct_rows + room
    check(sink, spill(sink, w):write(td[{ { room + 1, n } }]))
  else
    check(sink, spill(sink, w):write(td))
  end
end

function M.rows(w)
  return w.direct_rows + (w.spill and w.spill:rows() or 0)
end

-- The append that copies go through into the shared folder (offsets are absolute
-- rows): the reservation's, or a new one (it takes the structure of the first copy).
local function into_folder(sink, w)
  if not w.direct then w.direct = check(sink, append.join(w.folder, w.path, 0, w.opts)) end
  return w.direct
end

-- This rank's rows into place, from row at: the reservation's rows first (copied out to
-- w.moved before the barrier when they were not in place), then the spilled ones.
local function place(sink, w, at)
  if w.moved then
    check(sink, into_folder(sink, w):copy_rows(at, w.moved, 0, w.direct_rows))
  end
  if w.spill and w.spill:rows() > 0 then
    check(sink, into_folder(sink, w):copy_rows(at + w.direct_rows, w.spill, 0, w.spill:rows()))
  end
end

-- Runs fn on every rank, then every rank's outcome exchanged: true, or false, the
-- first failed rank and its message. A rank that failed tells the others instead of
-- leaving them at a barrier.
local function outcomes(w, fn)
  local ok, err = pcall(fn)
  local all = w.d.all_values({ ok = ok, err = not ok and tostring(err):gsub("^.-tensordict: ", "") or nil })
  for r, o in ipairs(all) do
    if not o.ok then return false, r - 1, o.err end
  end
  return true
end

local function failed(sink, w, rank, err)
  if rank == w.d.rank then error(err, 0) end
  sink:fail("rank %d failed: %s", rank, err)
end
M.outcomes, M.failed = outcomes, failed

-- The reference structure of every rank's (all: d.all_values of {structure =}), the
-- first rank's that had rows (1-based; nil: no rank had rows); raises naming the first
-- rank whose rows differ from it.
local function same_structure(sink, all)
  local ref
  for r, x in ipairs(all) do
    if x.structure then
      if not ref then
        ref = r
      elseif x.structure ~= all[ref].structure then
        local a, b = first_difference(x.structure, all[ref].structure)
        sink:fail("the rows of rank %d do not match those of rank %d (%s, against %s): the ranks "
          .. "write one folder", r - 1, ref - 1, a, b)
      end
    end
  end
  return ref
end
M.same_structure = same_structure

-- Commits the folder (every rank calls it): counts exchanged, rows copied where the plan
-- missed, each rank's writes synced, rank 0's commit. Raises on every rank when any rank
-- failed; the path is left as it was.
function M.finish(sink, w)
  local d = w.d
  local mine = { direct = w.direct_rows, spilled = w.spill and w.spill:rows() or 0, offset = w.offset,
    structure = w.first and structure_text(w.first) or nil }
  local all = d.all_values(mine)
  local ref = same_structure(sink, all)
  -- rank r's rows go after those of the ranks before it; a reservation whose rows are
  -- not where they go (a hint that missed) is misplaced
  local starts, total, misplaced = {}, 0, false
  for r, x in ipairs(all) do
    starts[r] = total
    total = total + x.direct + x.spilled
    misplaced = misplaced or x.direct > 0 and x.offset ~= starts[r]
  end
  local at = starts[d.rank + 1]
  if misplaced then
    local ok, rank, err = outcomes(w, function()
      if w.direct_rows > 0 and at ~= w.offset then
        local moved = own_path(w.path, "moved", d.rank, d.size)
        w.moved = check(sink, append.open(moved, { existsok = true, fsync = false }))
        check(sink, w.moved:copy_rows(0, w.direct, w.offset, w.direct_rows))
      end
    end)
    if not ok then failed(sink, w, rank, err) end
  end
  -- rank 0 needs the structure when it wrote no rows itself
  local structure = w.first
  if ref and ref ~= 1 then structure = d.dist.broadcast(d.rank == ref - 1 and w.first or nil, ref - 1) end
  local ok, rank, err = outcomes(w, function()
    place(sink, w, at)
    if d.rank ~= 0 and w.direct then
      local a = w.direct
      w.direct = nil
      check(sink, a:commit()) -- its writes synced
    end
  end)
  if not ok then failed(sink, w, rank, err) end
  local outcome = { ok = true }
  if d.rank == 0 then
    local cok, cerr = pcall(function()
      check(sink, w.direct:set_total(structure, total))
      local a = w.direct
      w.direct = nil
      check(sink, a:commit())
    end)
    outcome = { ok = cok, err = not cok and tostring(cerr):gsub("^.-tensordict: ", "") or nil }
  end
  outcome = d.share(outcome)
  if not outcome.ok then failed(sink, w, 0, outcome.err) end
  M.abort(w) -- the spill and moved folders
end

-- A data-parallel run that checkpoints: each rank appended to a checkpointed folder of
-- its own (own, at own_path(path, "rank", R, N): resumable by that rank alone, as one
-- process's). At finish every rank copies its rows from there into the one folder rank
-- 0 commits, at their place in rank order, and its checkpoint goes once the folder is
-- committed. Raises on every rank when any failed, with own left to the caller (its
-- checkpoint kept for a resume).
function M.finish_own(sink, d, own, opts)
  local w = M.open(sink, d, opts, nil) -- rank 0 opens the folder, nothing reserved
  local structure = own:structure()
  if structure then w.first = (#structure > 0 and structure[{ { 1, 1 } }] or structure):clone() end
  w.spill = own
  local ok, err = pcall(M.finish, sink, w)
  if not ok then
    w.spill = nil -- the caller's, checkpoint and all
    M.abort(w)
    error(err, 0)
  end
end

M.own_path, M.structure_text = own_path, structure_text -- (replay_ranks.lua's too)

-- Removes this rank's own folders and, on rank 0, the shared one (the path keeps what
-- it held); a joined append only closes. Idempotent.
function M.abort(w)
  for _, k in ipairs({ "direct", "spill", "moved" }) do
    local a = w[k]
    w[k] = nil
    if a then a:abort() end
  end
end

return M
