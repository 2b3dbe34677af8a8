-- h5/lib.lua: finds and opens libtensordict_h5 for tensordict.h5, on first use
-- (sidelib.lua: $TENSORDICT_H5_LIB, then beside libtensordict).
local util = require("tensordict.util")

local M = require("tensordict.sidelib")({
  name = "libtensordict_h5", env = "TENSORDICT_H5_LIB", cdefs = "tensordict.cdefs_h5",
  abi = "td_h5_abi_version", global = false,
  missing = "build it with 'make' where HDF5 is installed: apt-get install libhdf5-dev",
})

-- The namespace, or a "tensordict: call: ..." error saying why there is none.
function M.need(call)
  local C, why = M.open()
  if not C then util.fail(call .. ": " .. why) end
  return C
end

return M
