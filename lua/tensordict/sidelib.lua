-- sidelib.lua: the loader of an optional C library that sits beside libtensordict and
-- links a system library libtensordict never does (libtensordict_mpi: MPI, for dist;
-- libtensordict_h5: HDF5, for h5). Opened on first use, searched in order: $<env> (an
-- explicit choice, not second-guessed), the folder of the libtensordict in use, then
-- the places lib.lua searches. open() never raises: it returns nil and the reason when
-- the library, its FFI declarations or the system library cannot be loaded.
local ffi = require("ffi")
local lib = require("tensordict.lib")

-- spec: {name = "libtensordict_mpi", env =, cdefs = (module), abi = (C function name),
-- global = (load its symbols globally), missing = (how to build it)}.
return function(spec)
  local M = {}
  local so = spec.name .. ".so"

  local function candidates()
    local env = os.getenv(spec.env)
    if env and env ~= "" then return { env } end
    local here = (debug.getinfo(1, "S").source:match("^@(.*)[/\\][^/\\]*$")) or "." -- lua/tensordict
    local list = {}
    local core_dir = lib.path:match("^(.*)/[^/]*$")
    if core_dir then list[#list + 1] = core_dir .. "/" .. so end
    list[#list + 1] = here .. "/" .. so
    list[#list + 1] = here .. "/../../build/" .. so
    list[#list + 1] = here .. "/../../../../lib/" .. so
    local found = package.searchpath(spec.name, package.cpath)
    if found then list[#list + 1] = found end
    return list
  end

  local state = require("tensordict.once")(spec.name, function() return {} end)

  -- The library's namespace, or nil and why not.
  function M.open()
    if state.C then return state.C end
    if state.reason then return nil, state.reason end
    local ok_cdefs, cdefs = pcall(require, spec.cdefs)
    if not ok_cdefs then
      state.reason = ("the FFI declarations (%s) are missing; run 'make'"):format(spec.cdefs:gsub("%.", "/") .. ".lua")
      return nil, state.reason
    end
    local tried = {}
    for _, path in ipairs(candidates()) do
      if lib.file_exists(path) then
        local ok, C = pcall(ffi.load, path, spec.global)
        if ok then
          if not state.declared then ffi.cdef(cdefs.cdef); state.declared = true end
          local abi = C[spec.abi]()
          if abi ~= cdefs.abi_version then
            tried[#tried + 1] = ("%s (ABI version %d, the cdefs expect %d: rebuild)")
              :format(path, abi, cdefs.abi_version)
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
    state.reason = ("%s is not available (%s, or set %s); tried: %s"):format(spec.name, spec.missing, spec.env,
      table.concat(tried, "; "))
    return nil, state.reason
  end

  function M.path() return state.path end

  return M
end
