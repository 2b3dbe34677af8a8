-- dist/lib.lua: finds and opens libtensordict_mpi for tensordict.dist, on first use.
-- Search order: $TENSORDICT_MPI_LIB (an explicit choice, not second-guessed), the folder
-- of the libtensordict in use, then the places lib.lua searches. Never raises: open()
-- returns nil and the reason when the library or MPI cannot be loaded.
local ffi = require("ffi")
local lib = require("tensordict.lib")

local M = {}

local function candidates()
  local env = os.getenv("TENSORDICT_MPI_LIB")
  if env and env ~= "" then return { env } end
  local here = ((debug.getinfo(1, "S").source:match("^@(.*)[/\\][^/\\]*$")) or ".") .. "/.." -- lua/tensordict
  local list = {}
  local core_dir = lib.path:match("^(.*)/[^/]*$")
  if core_dir then list[#list + 1] = core_dir .. "/libtensordict_mpi.so" end
  list[#list + 1] = here .. "/libtensordict_mpi.so"
  list[#list + 1] = here .. "/../../build/libtensordict_mpi.so"
  list[#list + 1] = here .. "/../../../../lib/libtensordict_mpi.so"
  local found = package.searchpath("libtensordict_mpi", package.cpath)
  if found then list[#list + 1] = found end
  return list
end

local state = require("tensordict.once")("dist_lib", function() return {} end)

-- The library's namespace, or nil and why not.
function M.open()
  if state.C then return state.C end
  if state.reason then return nil, state.reason end
  local ok_cdefs, cdefs = pcall(require, "tensordict.cdefs_mpi")
  if not ok_cdefs then
    state.reason = "the FFI declarations (tensordict/cdefs_mpi.lua) are missing; run 'make'"
    return nil, state.reason
  end
  local tried = {}
  for _, path in ipairs(candidates()) do
    if lib.file_exists(path) then
      -- Global symbols: OpenMPI's plugins, loaded later with dlopen, look up libmpi's.
      local ok, C = pcall(ffi.load, path, true)
      if ok then
        if not state.declared then ffi.cdef(cdefs.cdef); state.declared = true end
        local abi = C.td_mpi_abi_version()
        if abi ~= cdefs.abi_version then
          tried[#tried + 1] = ("%s (ABI version %d, the cdefs expect %d: rebuild)"):format(path, abi, cdefs.abi_version)
        else
          state.C, state.path = C, path
          return C
        end
      else
        tried[#tried + 1] = path .. " (" .. tostring(C) .. ")"
      end
    else
      tried[#tried + 1] = path .. " (absent)"
    end
  end
  state.reason = "libtensordict_mpi is not available (build it with 'make' where OpenMPI's mpicc "
    .. "is installed, or set TENSORDICT_MPI_LIB); tried: " .. table.concat(tried, "; ")
  return nil, state.reason
end

function M.path() return state.path end

return M
