-- lib.lua: finds and opens libtensordict, declares its cdefs and checks its ABI.
-- Search order (DESIGN.md): $TENSORDICT_LIB, the install dir next to these Lua files
-- (and the build dir of a source tree), package.cpath, then the OS loader.
local ffi = require("ffi")

return require("tensordict.once")("lib", function()
  -- LuaJIT's default room for compiled code (1000 traces, 512 KiB of machine code) is
  -- less than this library's hot paths take in one program: the size sweep filled it
  -- four times, and each time LuaJIT threw every trace away and went back to the
  -- interpreter until the loops were recorded again. More room costs only the memory
  -- that is used. Set once, at the first load; a program may set its own afterwards.
  if jit and jit.opt then jit.opt.start("maxtrace=8000", "maxmcode=16384") end

  local ok_cdefs, cdefs = pcall(require, "tensordict.cdefs")
  if not ok_cdefs then
    error("tensordict: the generated FFI declarations (tensordict/cdefs.lua) are missing; "
      .. "run 'make' in the source tree, or 'make install'", 2)
  end
  ffi.cdef(cdefs.cdef)

  -- The folder holding this file, from the chunk name require gave it.
  local here = (debug.getinfo(1, "S").source:match("^@(.*)[/\\][^/\\]*$")) or "."

  local function candidates()
    local list = {}
    local env = os.getenv("TENSORDICT_LIB")
    if env and env ~= "" then
      list[#list + 1] = env
      return list -- an explicit choice is not second-guessed
    end
    list[#list + 1] = here .. "/libtensordict.so"
    list[#list + 1] = here .. "/../../build/libtensordict.so" -- a source tree after 'make'
    list[#list + 1] = here .. "/../../../../lib/libtensordict.so" -- PREFIX/share/lua/5.1/tensordict
    local found = package.searchpath("libtensordict", package.cpath)
    if found then list[#list + 1] = found end
    list[#list + 1] = "tensordict" -- the OS loader (ld.so.conf, LD_LIBRARY_PATH)
    return list
  end

  local function file_exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
  end

  local function open()
    local tried = {}
    for _, path in ipairs(candidates()) do
      if path == "tensordict" or file_exists(path) then
        local ok, lib = pcall(ffi.load, path)
        if ok then return lib, path end
        tried[#tried + 1] = path .. " (" .. tostring(lib) .. ")"
      else
        tried[#tried + 1] = path .. " (absent)"
      end
    end
    error("tensordict: cannot load libtensordict; tried: " .. table.concat(tried, "; ")
      .. ". Build it with 'make' or set TENSORDICT_LIB", 3)
  end

  require("tensordict.blas_core").prepare() -- before OpenBLAS loads with libtensordict
  local C, path = open()
  local abi = C.td_abi_version()
  if abi ~= cdefs.abi_version then
    error(("tensordict: %s has ABI version %d but the Lua cdefs expect %d; rebuild with 'make'")
      :format(path, abi, cdefs.abi_version), 2)
  end

  -- file_exists: for the loaders of the side libraries (sidelib.lua), which search alike
  return { C = C, path = path, abi_version = abi, cdef = cdefs.cdef, file_exists = file_exists }

end)
