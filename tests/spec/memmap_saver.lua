-- memmap_saver.lua: the child process of td_memmap_spec's crash test. It saves
-- generation after generation of one container to the prefix given, each generation
-- with every element of every leaf equal to its number, until it is killed.
-- Usage: luajit tests/spec/memmap_saver.lua <prefix> <first generation>
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
local T = require("tensordict")
local prefix, gen = arg[1], tonumber(arg[2])
local td = T.TensorDict({
  a = T.zeros(256, 1024),                  -- 1 MiB, so a save takes a while
  b = T.zeros(256, "int64"),
  nested = { c = T.zeros(256, 64, "float64") },
  tag = "generation",
}, { 256 })
io.stdout:write("ready\n")
io.stdout:flush()
while true do
  td:apply_(function(x) return x:fill_(gen) end)
  td:set("tag", ("generation %d"):format(gen))
  td:memmap(prefix, { existsok = true })
  gen = gen + 1
end
