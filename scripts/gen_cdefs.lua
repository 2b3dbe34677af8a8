-- gen_cdefs.lua: turns a public C header into the Lua module of its FFI cdefs.
-- Usage: luajit scripts/gen_cdefs.lua core/include/tensordict.h > lua/tensordict/cdefs.lua
--        luajit scripts/gen_cdefs.lua core/include/tensordict_cuda.h TD_CUDA_ABI_VERSION
--        luajit scripts/gen_cdefs.lua core/include/tensordict_mpi.h TD_MPI_ABI_VERSION
-- The header is the only declaration of the ABI; this keeps Lua from copying it by hand.
-- It drops comments and preprocessor lines (and the C++ guard's lines between them),
-- and keeps the ABI version (TD_ABI_VERSION, or the macro named second) so the loader
-- can check the library it opens.

local function generate(text, path, version_macro)
  path = path or "core/include/tensordict.h"
  version_macro = version_macro or "TD_ABI_VERSION"
  local abi = text:match("#define%s+" .. version_macro .. "%s+(%d+)")
  if not abi then error("gen_cdefs: " .. version_macro .. " is not defined in the header") end
  text = text:gsub("/%*.-%*/", ""):gsub("//[^\n]*", "")
  local out, skipping = {}, false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^%s*#%s*ifdef%s+__cplusplus") then
      skipping = true
    elseif line:match("^%s*#") then
      if line:match("^%s*#%s*endif") then skipping = false end
    elseif not skipping and line:match("%S") then
      out[#out + 1] = (line:gsub("%s+$", ""))
    end
  end
  return ("-- Generated from %s by scripts/gen_cdefs.lua: do not edit.\n"
    .. "return {\n  abi_version = %s,\n  cdef = [[\n%s\n]],\n}\n"):format(path, abi, table.concat(out, "\n"))
end

if arg and arg[0] and arg[0]:match("gen_cdefs%.lua$") and arg[1] then
  local f = assert(io.open(arg[1], "rb"))
  io.write(generate(f:read("*a"), arg[1], arg[2]))
  f:close()
end

return { generate = generate }
