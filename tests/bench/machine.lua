-- machine.lua: a one-line description of this machine for the benchmark reports:
-- CPU model, cores, memory and kernel, read from /proc (no external command).
local function first_match(path, pattern)
  local f = io.open(path)
  if not f then return nil end
  for line in f:lines() do
    local v = line:match(pattern)
    if v then
      f:close()
      return v
    end
  end
  f:close()
end

return function()
  local model = first_match("/proc/cpuinfo", "^model name%s*:%s*(.-)%s*$") or "unknown CPU"
  local cores = 0
  local f = io.open("/proc/cpuinfo")
  if f then
    for line in f:lines() do
      if line:match("^processor%s*:") then cores = cores + 1 end
    end
    f:close()
  end
  local kib = tonumber(first_match("/proc/meminfo", "^MemTotal:%s*(%d+)") or "")
  local kernel = first_match("/proc/sys/kernel/osrelease", "^(%S+)") or "unknown kernel"
  return ("%s, %d cores, %s memory, Linux %s"):format(model, cores,
    kib and ("%.0f GiB"):format(kib / 1048576) or "unknown", kernel)
end
