-- late.lua: the modules a lower module calls but cannot require when it loads, because
-- they require it (tensor/core -> gather, create, print, cuda -> tensor/core;
-- dict/struct, dict/memmap -> dict/device -> dict/struct). The lower module reads
-- late.gather and so on; init.lua binds every entry once all modules are loaded, so a
-- hot path (t[idx], t[mask] = v, tostring(t)) reads a table field, which LuaJIT
-- compiles, instead of calling require, which it cannot. An entry read before init.lua
-- bound it (a script that loads tensordict.tensor alone) is required on first use.
local NAMES = { create = "tensor.create", gather = "tensor.gather", print = "tensor.print",
                cuda = "tensor.cuda", td_device = "dict.device" }

local late = setmetatable({}, {
  __index = function(t, name)
    local m = require("tensordict." .. assert(NAMES[name], name))
    rawset(t, name, m)
    return m
  end,
})

-- Binds every entry (init.lua calls this after loading all modules).
function late.bind()
  for name, module in pairs(NAMES) do rawset(late, name, require("tensordict." .. module)) end
end

return late
