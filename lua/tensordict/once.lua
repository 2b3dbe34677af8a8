-- once.lua: process-wide values that must survive a reload of these modules.
-- FFI declarations and metatypes can be made only once per Lua state, and index
-- sentinels must keep their identity; clearing package.loaded (a REPL reload, busted's
-- insulation) would otherwise break them. They live in the Lua registry instead.
local registry = debug.getregistry()

return function(key, make)
  key = "tensordict:" .. key
  local value = registry[key]
  if value == nil then
    value = make()
    registry[key] = value
  end
  return value
end
