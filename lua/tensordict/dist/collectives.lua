-- dist/collectives.lua: broadcast, all_reduce, gather and all_gather of TensorDicts
-- (docs/dist.md); dist/init.lua adds them to its module. Every rank calls a collective in
-- the same order with containers of the same structure where one is required.
local ffi = require("ffi")
local C = require("tensordict.lib").C
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local wire = require("tensordict.dist.wire")
local td_join = require("tensordict.dict.join")

local describe = util.describe

return function(M, x)
  local need, check, rank_arg, td_arg, timeout_of = x.need, x.check, x.rank_arg, x.td_arg, x.timeout_of
  local fail = x.fail

  -- Seconds left before a deadline (-1: none).
  local function clock(timeout)
    if timeout < 0 then return function() return -1 end end
    local deadline = util.now() + timeout
    return function() return math.max(0, deadline - util.now()) end, timeout
  end

  -- broadcast(td, root [, opts]): root's container on every rank. On root td is sent;
  -- elsewhere td may be nil (a new container is returned) or a container of the same
  -- structure, filled in place and returned.
  function M.broadcast(td, root, opts)
    need("broadcast")
    local MPI = x.mpi()
    root = rank_arg("broadcast", "root", root)
    local timeout = timeout_of("broadcast", opts)
    local is_root = MPI.td_mpi_rank() == root
    if is_root or td ~= nil then td_arg("broadcast", td) end
    local out = ffi.new("td_mpi_transfer *[1]")
    check("broadcast", MPI.td_mpi_bcast_dict(td and td_core.cdict(td) or nil, root, timeout, out),
      timeout >= 0 and timeout or nil)
    local d = MPI.td_mpi_transfer_result(out[0])
    MPI.td_mpi_transfer_free(out[0])
    if is_root or d == nil then return td end -- sent, or received straight into td
    -- Received into a new container: td (if any) did not take the bytes in place (a
    -- strided leaf, other values) or does not match (this rank took part all the same).
    local msg = wire.received(d)
    if td == nil then return msg end
    return wire.fill_like(msg, td, function(text) fail("broadcast", text) end)
  end

  local OPS = { sum = 0, max = 1, min = 2, mean = 0 }

  -- A number for the reduced leaves' keys, dtypes and shapes, equal on every rank
  -- that has the same ones.
  local function signature(paths, tensors)
    local h = #paths
    for i, t in ipairs(tensors) do
      local text = td_core.key_text(paths[i]) .. wire.layout_text(t)
      for j = 1, #text do h = (h * 31 + text:byte(j)) % 2147483647 end
    end
    return h
  end

  -- all_reduce(td, op [, opts]): every floating and integer leaf reduced over the ranks
  -- in place ("sum", "mean", "max", "min"); bool leaves and non-tensor values are left
  -- as they are. mean divides the sum by the rank count (integers: floor division).
  function M.all_reduce(td, op, opts)
    need("all_reduce")
    local MPI = x.mpi()
    td_arg("all_reduce", td)
    op = op or "sum"
    local code = OPS[op]
    if not code then
      fail("all_reduce", ("op must be \"sum\", \"mean\", \"max\" or \"min\", got %s"):format(describe(op)))
    end
    local left, total = clock(timeout_of("all_reduce", opts))
    local all_paths, all_tensors = wire.leaves(td)
    local paths, tensors = {}, {}
    for i, t in ipairs(all_tensors) do
      if t.h.dtype ~= C.TD_BOOL then paths[#paths + 1], tensors[#tensors + 1] = all_paths[i], t end
    end
    local sig = signature(paths, tensors)
    local both = ffi.new("int64_t[2]", sig, -sig)
    check("all_reduce", MPI.td_mpi_allreduce(both, 2, C.TD_INT64, 1, left()), total)
    if both[0] ~= -both[1] then
      fail("all_reduce", "the containers differ across ranks (their floating and integer leaves' "
        .. "keys, dtypes or shapes)")
    end
    for _, t in ipairs(tensors) do
      local h, target = t.h, t
      local direct = C.td_tensor_is_contiguous(h) == 1 and C.td_tensor_is_writable(h) == 1
      if not direct then target = t:clone():contiguous() end
      check("all_reduce", MPI.td_mpi_allreduce(wire.data(target), C.td_tensor_numel(target.h), h.dtype,
        code, left()), total)
      if not direct then t:copy_(target) end
      if op == "mean" then
        local n = MPI.td_mpi_size()
        if C.td_dtype_is_floating(h.dtype) == 1 then t:div_(n) else t:floor_divide_(n) end
      end
    end
    return td
  end

  -- Every rank's container shipped whole; the pieces, one region each.
  local function gathered(call, td, root, left, timeout)
    local MPI = x.mpi()
    local region, size = wire.pack_whole(td)
    local n = MPI.td_mpi_size()
    local counts = ffi.new("int64_t[?]", n)
    check(call, MPI.td_mpi_allgather_int64(size, counts, left()), timeout)
    local total = 0
    for i = 0, n - 1 do total = total + tonumber(counts[i]) end
    local receives = root == nil or MPI.td_mpi_rank() == root
    local all = receives and wire.region(total) or nil
    local out = all and wire.region_data(all) or nil
    if root == nil then
      check(call, MPI.td_mpi_allgatherv(wire.region_data(region), size, out, counts, left()), timeout)
    else
      check(call, MPI.td_mpi_gatherv(wire.region_data(region), size, out, counts, root, left()), timeout)
    end
    if not receives then return nil end
    local parts, at = {}, 0
    for i = 0, n - 1 do
      local len = tonumber(counts[i])
      local piece = wire.region(len)
      ffi.copy(wire.region_data(piece), ffi.cast("char *", out) + at, len)
      parts[#parts + 1] = wire.unpack_whole(piece)
      at = at + len
    end
    return td_join.cat(parts, 1)
  end

  -- gather(td, dst [, opts]): the containers of every rank joined along batch dim 1, in
  -- rank order, at dst (nil elsewhere).
  local function joinable(call, td)
    td_arg(call, td)
    if td._td_head.ndim == 0 then
      fail(call, "the containers are joined along batch dim 1, but this one has batch size []")
    end
  end

  function M.gather(td, dst, opts)
    need("gather")
    joinable("gather", td)
    dst = rank_arg("gather", "destination", dst)
    return gathered("gather", td, dst, clock(timeout_of("gather", opts)))
  end

  -- all_gather(td [, opts]): the same join on every rank.
  function M.all_gather(td, opts)
    need("all_gather")
    joinable("all_gather", td)
    return gathered("all_gather", td, nil, clock(timeout_of("all_gather", opts)))
  end

  return M
end
