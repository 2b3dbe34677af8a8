-- late.lua: the modules a lower module calls but cannot require when it loads, because
-- they require it (tensor -> gather, create, print, cuda -> tensor; td_struct,
-- td_memmap -> td_device -> td_struct). The lower module reads
-- late.gather and so on; init.lua binds every entry once all modules are loaded, so a
-- hot path (t[idx], t[mask] = v, tostring(t)) reads a table field, which LuaJIT
-- compiles, instead of calling require, which it cannot. An entry read before init.lua
-- bound it (a script that loads tensordict.tensor alone) is required on first use.
local NAMES = { "create", "gather", "print", "cuda", "td_device" }

local late = setmetatable({}, {
  __index = function(t, name)
    local m = require("tensordict." .. name)
    rawset(t, name, m)
    return m
  end,
})

-- Binds every entry (init.lua calls this after loading all modules).
function late.bind()
  for _, name in ipairs(NAMES) do rawset(late, name, require("tensordict." .. name)) end
end

return late
