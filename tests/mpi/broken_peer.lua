-- broken_peer.lua: a peer that speaks tensordict.dist's wire badly, for the specs and the
-- bench of malformed messages (malformed_spec.lua, tests/bench/bench_dist_malformed.lua).
-- It sends a container as dist.send does (docs/dist.md: the structure in one message,
-- then the leaves' bytes in ship order, cut every TD_MPI_CHUNK_BYTES, default 1 GiB),
-- but from raw byte messages it can change on the way: a data message cut short, empty,
-- too long, left out, or the structure cut.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local dist_lib = require("tensordict.dist.lib")

local M = {}

-- The byte strings a well-behaved sender puts on the wire for td: the structure, and the
-- data messages.
function M.wire(td)
  local d = td._td_p
  local meta_size = tonumber(C.td_ship_meta_size(d))
  local meta = C.td_storage_new_heap(meta_size)
  assert(C.td_ship_pack_meta(d, meta) == meta_size, "pack_meta")
  local structure = ffi.string(C.td_storage_data_borrow(meta), meta_size)
  local total = tonumber(C.td_ship_data_bytes(meta))
  C.td_storage_release(meta)
  local n = tonumber(C.td_ship_leaves(d, nil, nil, nil, 0))
  local leaves, offsets = ffi.new("const td_tensor *[?]", n), ffi.new("int64_t[?]", n)
  assert(C.td_ship_leaves(d, leaves, offsets, ffi.new("int32_t[?]", n), n) == n, "ship_leaves")
  local data = ffi.new("char[?]", math.max(total, 1))
  for i = 0, n - 1 do
    local t = C.td_tensor_contiguous(leaves[i])
    local bytes = tonumber(C.td_tensor_numel(t)) * t.itemsize
    ffi.copy(data + offsets[i], C.td_tensor_data_borrow(t), bytes)
    C.td_tensor_release(t)
  end
  local chunk = tonumber(os.getenv("TD_MPI_CHUNK_BYTES") or "") or 2 ^ 30
  local msgs = {}
  for at = 0, total - 1, chunk do msgs[#msgs + 1] = ffi.string(data + at, math.min(chunk, total - at)) end
  return structure, msgs
end

-- Posts the messages as they are (structure, then each data message) on tag, without
-- waiting: a message the receiver never takes (it failed first) must not block the
-- sender. Returns done(), which cancels what was not taken; call it once the receiver
-- is through (after a barrier). The strings are kept until then.
function M.send(dst, tag, structure, msgs)
  local MPI = assert(dist_lib.open())
  local reqs, keep = {}, { structure }
  local function post(s)
    local r = MPI.td_mpi_isend(s, #s, dst, tag)
    if r == nil then error("raw isend: " .. ffi.string(MPI.td_mpi_last_error())) end
    reqs[#reqs + 1] = r
  end
  post(structure)
  for _, m in ipairs(msgs) do
    keep[#keep + 1] = m
    post(m)
  end
  return function()
    for _, r in ipairs(reqs) do MPI.td_mpi_request_free(r) end -- cancels one still pending
    for i = #keep, 1, -1 do keep[i] = nil end -- the strings MPI read are held until here
  end
end

-- The ways a message goes wrong; each takes the wire (structure, msgs) and a random
-- generator rnd(n) -> 1..n, and returns what is sent instead and whether the receiver
-- must wait for a message that never comes (it then fails on its timeout).
M.mutations = {
  short = function(structure, msgs, rnd) -- one data message loses its last k bytes
    local j = rnd(#msgs)
    msgs[j] = msgs[j]:sub(1, #msgs[j] - rnd(#msgs[j]))
    return structure, msgs
  end,
  empty = function(structure, msgs, rnd)
    msgs[rnd(#msgs)] = ""
    return structure, msgs
  end,
  long = function(structure, msgs, rnd) -- one data message gains k bytes
    local j = rnd(#msgs)
    msgs[j] = msgs[j] .. ("\90"):rep(rnd(64))
    return structure, msgs
  end,
  missing = function(structure, msgs) -- the last data message never comes
    msgs[#msgs] = nil
    return structure, msgs, true
  end,
  structure_cut = function(structure, msgs, rnd) -- the structure loses its last k bytes
    return structure:sub(1, #structure - rnd(#structure)), msgs
  end,
}
M.names = { "short", "empty", "long", "missing", "structure_cut" }

-- A container for try i: 1 to 4 leaves of varied dtypes and sizes, sometimes nested,
-- so the data messages and the structure vary; rnd(n) -> 1..n.
local DTYPES = { "float32", "float64", "int64", "int8", "bool", "float16" }
local function container(T, rnd)
  local rows = rnd(40)
  local fields = {}
  for k = 1, rnd(4) do
    local cols = rnd(8)
    fields["f" .. k] = T.arange(rows * cols):to(DTYPES[rnd(#DTYPES)]):reshape(rows, cols)
  end
  if rnd(3) == 1 then fields.nested = T.TensorDict({ z = T.ones(rows, rnd(5)) }, { rows }) end
  return T.TensorDict(fields, { rows })
end

-- n tries of malformed transfers from rank 1 to rank 0 (every rank runs this; others
-- only join the barriers). Both ranks draw the same sequence from seed, so rank 0 knows
-- which mutation comes and waits briefly for a message that will not. Returns, on rank
-- 0, {tries =, accepted =, refused = {mutation = count}, unclean = {messages that are
-- not "tensordict: dist.recv: ..."}}, and every error text seen once per mutation.
function M.tries(T, n, seed, first_tag)
  local dist = T.dist
  local rank = dist.rank()
  local state = seed
  local function rnd(k) -- a small LCG: the same on every rank, whatever else draws numbers
    state = (state * 1103515245 + 12345) % 2147483648
    return state % k + 1
  end
  local out = { tries = 0, accepted = 0, refused = {}, unclean = {}, seen = {} }
  for i = 1, n do
    local tag = first_tag + i
    local td = container(T, rnd)
    local structure, msgs = M.wire(td)
    local name = M.names[rnd(#M.names)]
    if #msgs == 0 then name = "structure_cut" end
    local waits
    structure, msgs, waits = M.mutations[name](structure, msgs, rnd)
    local into_like = rnd(2) == 1
    if rank == 1 then
      local done = M.send(0, tag, structure, msgs)
      dist.barrier()
      done()
    elseif rank == 0 then
      local like = into_like and td:clone():zero_() or nil
      local ok, err = pcall(dist.recv, 1, tag, like, { timeout = waits and 0.05 or 30 })
      out.tries = out.tries + 1
      if ok then
        out.accepted = out.accepted + 1
      else
        err = tostring(err)
        out.refused[name] = (out.refused[name] or 0) + 1
        if not err:find("tensordict: dist.recv: ", 1, true) then out.unclean[#out.unclean + 1] = err end
        out.seen[name] = out.seen[name] or err
      end
      dist.barrier()
    else
      dist.barrier()
    end
  end
  return out
end

return M
