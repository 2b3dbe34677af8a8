-- malformed_spec.lua: dist.recv refuses what a broken peer, or one of another version,
-- sends (issue 28): every data message must carry the bytes the structure declares.
-- Rank 1 sends raw messages (broken_peer.lua), rank 0 receives; other ranks wait.
local H = require("harness")
local T, dist = H.T, H.dist
local peer = require("broken_peer")

local function float64s(n) return T.TensorDict({ x = T.arange(1, n, "float64") }, { n }) end

-- Rank 1 sends td's wire changed by mutate; rank 0 runs receive(tag). Both then meet.
local function exchange(tag, td, mutate, receive)
  local rank = dist.rank()
  local structure, msgs = peer.wire(td)
  if rank == 1 then
    local done = peer.send(0, tag, mutate(structure, msgs))
    dist.barrier()
    done()
  else
    -- the barrier first, so that a failed check cannot leave rank 1 waiting in it
    local ok, err = true, nil
    if rank == 0 then ok, err = pcall(receive, tag) end
    dist.barrier()
    if not ok then error(err, 0) end
  end
end

H.test("a data message shorter than the structure declares fails recv, naming both counts", function()
  exchange(11, float64s(4), function(s, m) m[1] = m[1]:sub(1, 28) return s, m end, function(tag)
    H.raises(function() dist.recv(1, tag) end,
      "tensordict: dist.recv: data message 1 of 1 from rank 1 (tag 11) carried 28 bytes where the "
        .. "structure declares 32 (a peer of another version, or a broken one)")
  end)
  -- into a like of the same structure (the bytes go straight into its leaf)
  exchange(12, float64s(4), function(s, m) m[1] = "" return s, m end, function(tag)
    H.raises(function() dist.recv(1, tag, float64s(4):zero_()) end,
      "tensordict: dist.recv: data message 1 of 1 from rank 1 (tag 12) carried 0 bytes where the "
        .. "structure declares 32")
  end)
  -- irecv's wait, the same check
  exchange(13, float64s(3), function(s, m) m[1] = m[1]:sub(1, 1) return s, m end, function(tag)
    local r = dist.irecv(1, tag)
    H.raises(function() r:wait({ timeout = 30 }) end,
      "tensordict: dist.irecv: data message 1 of 1 from rank 1 (tag 13) carried 1 bytes where the "
        .. "structure declares 24")
  end)
end)

H.test("a data message longer than declared fails before it is received, a cut structure in the reader", function()
  exchange(21, float64s(2), function(s, m) m[1] = m[1] .. "xyz" return s, m end, function(tag)
    H.raises(function() dist.recv(1, tag) end,
      "tensordict: dist.recv: data message 1 of 1 from rank 1 (tag 21) carried 19 bytes where the structure "
        .. "declares 16 (a peer of another version, or a broken one)")
  end)
  -- longer by far, into a like: the message is checked before it is received, so nothing
  -- is written past like's leaf (OpenMPI 4's single-copy path would write it all)
  local guard = T.full({ 70000 }, 7, "uint8")
  exchange(23, float64s(2), function(s, m) m[1] = m[1] .. ("z"):rep(70000) return s, m end, function(tag)
    local like = float64s(2):zero_()
    -- (a raw send cuts its buffer every TD_MPI_CHUNK_BYTES too)
    local first = math.min(70016, tonumber(os.getenv("TD_MPI_CHUNK_BYTES") or "") or 70016)
    H.raises(function() dist.recv(1, tag, like) end,
      ("tensordict: dist.recv: data message 1 of 1 from rank 1 (tag 23) carried %d bytes where the "
        .. "structure declares 16"):format(first))
    H.eq(like.x:sum(), 0, "like untouched")
    H.eq(guard:sum(), 7 * 70000, "memory beside untouched")
  end)
  exchange(22, float64s(2), function(s, m) return s:sub(1, #s - 8), m end, function(tag)
    H.raises(function() dist.recv(1, tag) end, "tensordict: dist.recv: ship: corrupt region")
  end)
end)

H.test("a well-formed transfer through the same raw path is received whole", function()
  exchange(31, float64s(5), function(s, m) return s, m end, function(tag)
    local got = dist.recv(1, tag)
    H.eq(#got, 5, "rows")
    H.same(got, float64s(5), "received")
  end)
end)

H.test("none of 250 random malformed transfers is accepted; every refusal is a tensordict: error", function()
  local r = peer.tries(T, 250, 12345, 1000)
  if dist.rank() == 0 then
    H.eq(r.tries, 250, "tries")
    H.eq(r.accepted, 0, "accepted")
    H.eq(#r.unclean, 0, "errors without the dist.recv prefix: " .. table.concat(r.unclean, " | "))
    for _, name in ipairs(peer.names) do
      assert((r.refused[name] or 0) > 0, "no try of " .. name)
    end
  end
end)

H.run()
