-- dist/init.lua: TensorDicts across MPI ranks (docs/dist.md): point to point (send, recv,
-- isend, irecv), broadcast, all_reduce, gather and all_gather, over libtensordict_mpi.
--   local dist = require("tensordict.dist")   -- or T.dist
--   if dist.is_available() then dist.init() ... end
-- Nothing here loads MPI until is_available or init is called.
local ffi = require("ffi")
local util = require("tensordict.util")
local td_core = require("tensordict.dict")
local dist_lib = require("tensordict.dist.lib")
local requests = require("tensordict.dist.request")

local M = {}
local is_td, describe = td_core.is_td, util.describe

local state = { timeout = -1 }
local MPI -- the library's namespace, once init ran

local function fail(call, msg) util.fail(("dist.%s: %s"):format(call, msg)) end

-- A C status: negative raises with the library's message (its own "call: " prefix
-- replaced by ours). timeout: the call's whole timeout, named when it passed (the C
-- call saw only the seconds left of it).
local function check(call, status, timeout)
  if status < 0 then
    if status == MPI.TD_MPI_ETIMEOUT and timeout then
      fail(call, ("timed out after %g s (a peer is gone or never made the matching call)"):format(timeout))
    end
    fail(call, (ffi.string(MPI.td_mpi_last_error()):gsub("^[%w_]+: ", "")))
  end
  return status
end

function M.is_available()
  local C, reason = dist_lib.open()
  if not C then return false, reason end
  return true
end

local function need(call)
  if not MPI or MPI.td_mpi_is_initialized() ~= 1 then
    fail(call, "MPI is not initialized (call dist.init() first)")
  end
end

local function rank_arg(call, what, r)
  if not util.is_int(r) then fail(call, ("%s must be a rank (an integer), got %s"):format(what, describe(r))) end
  local n = MPI.td_mpi_size()
  if r < 0 or r >= n then fail(call, ("%s %d is out of range (ranks 0..%d)"):format(what, r, n - 1)) end
  return r
end

local function tag_arg(call, tag)
  if tag == nil then return 0 end
  if not util.is_int(tag) or tag < 0 or tag > MPI.td_mpi_tag_max() then
    fail(call, ("tag must be an integer in 0..%d, got %s"):format(MPI.td_mpi_tag_max(), describe(tag)))
  end
  return tag
end

local function td_arg(call, td, what)
  if not is_td(td) then fail(call, ("%s must be a TensorDict, got %s"):format(what or "td", describe(td))) end
  return td
end

-- The timeout of a call: its option, else init's default (-1: none).
local TIMEOUT_OPTS = { timeout = "number" }
local function timeout_of(call, opts)
  opts = util.options("dist." .. call, opts, TIMEOUT_OPTS)
  local t = opts.timeout
  if t == nil then return state.timeout end
  if not (t >= 0) then fail(call, ("timeout must be >= 0 seconds, got %s"):format(describe(t))) end
  return t
end

------------------------------------------------------------------------- set-up

-- init{timeout = s}: starts MPI (once per process); timeout becomes the default of
-- every blocking call.
function M.init(opts)
  opts = util.options("dist.init", opts, TIMEOUT_OPTS)
  local C, reason = dist_lib.open()
  if not C then fail("init", reason) end
  MPI = C
  requests.bind(C, check)
  if opts.timeout ~= nil then state.timeout = timeout_of("init", opts) end
  check("init", C.td_mpi_init())
  return M
end

function M.is_initialized() return MPI ~= nil and MPI.td_mpi_is_initialized() == 1 end

function M.finalize()
  if not MPI then return end
  check("finalize", MPI.td_mpi_finalize())
end

function M.rank() need("rank"); return (MPI.td_mpi_rank()) end
function M.size() need("size"); return (MPI.td_mpi_size()) end

function M.barrier(opts)
  need("barrier")
  check("barrier", MPI.td_mpi_barrier(timeout_of("barrier", opts)))
end

-- Stops every rank at once (MPI_Abort), for a host that cannot go on.
function M.abort(code)
  need("abort")
  check("abort", MPI.td_mpi_abort(code or 1))
end

------------------------------------------------------------------- point to point

function M.isend(td, dst, tag)
  need("isend")
  td_arg("isend", td)
  return requests.send(td, rank_arg("isend", "destination", dst), tag_arg("isend", tag), "isend")
end

-- like: receive in place into this container (same keys, dtypes and shapes).
function M.irecv(src, tag, like)
  need("irecv")
  if like ~= nil then td_arg("irecv", like, "like") end
  return requests.recv(rank_arg("irecv", "source", src), tag_arg("irecv", tag), like, "irecv")
end

-- The blocking forms: the request, waited on; a failed wait cancels it.
local function finish(call, r, opts)
  local timeout = timeout_of(call, opts)
  local ok, err = pcall(r.wait, r, { timeout = timeout }, call)
  if not ok then
    r:cancel()
    error(err, 0)
  end
  return r.result
end

function M.send(td, dst, tag, opts)
  need("send")
  td_arg("send", td)
  local r = requests.send(td, rank_arg("send", "destination", dst), tag_arg("send", tag), "send")
  finish("send", r, opts)
end

function M.recv(src, tag, like, opts)
  need("recv")
  if like ~= nil and not is_td(like) and type(like) == "table" and opts == nil then
    like, opts = nil, like -- recv(src, tag, {timeout = ...})
  end
  if like ~= nil then td_arg("recv", like, "like") end
  local r = requests.recv(rank_arg("recv", "source", src), tag_arg("recv", tag), like, "recv")
  return finish("recv", r, opts)
end

-- The collectives share these helpers; they are not part of the module (the misuse
-- fuzzer called them as public functions: issue 28).
return require("tensordict.dist.collectives")(M, {
  need = need, check = check, rank_arg = rank_arg, td_arg = td_arg, fail = fail,
  timeout_of = timeout_of, mpi = function() return MPI end,
})
