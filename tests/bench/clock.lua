-- clock.lua: the monotonic wall clock for the Lua benchmarks (seconds, as a number):
-- the library's own (util.now), so there is one declaration of clock_gettime.
return require("tensordict.util").now
