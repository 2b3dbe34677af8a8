-- blas_core.lua: picks OpenBLAS's kernels where its own detection falls short, before
-- libtensordict (and with it OpenBLAS) is loaded (lib.lua calls prepare()).
--
-- Why: OpenBLAS builds with DYNAMIC_ARCH choose their kernels once, when the library
-- loads, from the CPU's family and model. Debian's 0.3.21 does not know Intel models
-- newer than it (Emerald Rapids, model 207, on the machine this was measured on) and
-- falls back to its Prescott (SSE3) kernels: matmul 64^2 took 21.5 us and 256^2
-- 1.47 ms, against 5.1 us and 253 us with the SkylakeX kernels the CPU can run
-- (docs/benchmarks.md). OPENBLAS_CORETYPE, read at that load, overrides the choice.
-- Only for Intel family 6 models from 0xA0 on (those 0.3.21 does not know), and only
-- when the user has not set OPENBLAS_CORETYPE: SkylakeX where the CPU has the AVX-512
-- subsets those kernels use, else Haswell where it has AVX2 and FMA.
local ffi = require("ffi")

local M = {}

-- The kernels to ask for, given /proc/cpuinfo's text (nil: leave OpenBLAS's choice).
function M.choose(cpuinfo)
  if type(cpuinfo) ~= "string" then return nil end
  local vendor = cpuinfo:match("vendor_id%s*:%s*(%S+)")
  local family = tonumber(cpuinfo:match("cpu family%s*:%s*(%d+)"))
  local model = tonumber(cpuinfo:match("\nmodel%s*:%s*(%d+)") or cpuinfo:match("^model%s*:%s*(%d+)"))
  local flags = cpuinfo:match("\nflags%s*:%s*([^\n]*)")
  if vendor ~= "GenuineIntel" or family ~= 6 or not model or model < 0xA0 or not flags then return nil end
  local has = {}
  for f in flags:gmatch("%S+") do has[f] = true end
  if has.avx512f and has.avx512bw and has.avx512vl and has.avx512dq and has.avx512cd then return "SkylakeX" end
  if has.avx2 and has.fma then return "Haswell" end
  return nil
end

pcall(ffi.cdef, "int setenv(const char *name, const char *value, int overwrite);")

local function unset(name)
  local v = os.getenv(name)
  return v == nil or v == ""
end

-- OpenBLAS's thread count at load, from TD_NUM_THREADS (nil: leave OpenBLAS's own).
-- OpenBLAS starts a worker per extra core when it loads, and each spins on
-- sched_yield for ~0.1 s before it sleeps: a process told to use one thread (each rank
-- of an mpirun job on a 2-core machine, `make bench`'s recipe) lost a core to it at
-- start. Only when the user set none of OpenBLAS's own variables; set_num_threads()
-- still raises the count later.
function M.threads(env)
  env = env or os.getenv
  for _, name in ipairs({ "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS" }) do
    local v = env(name)
    if v ~= nil and v ~= "" then return nil end
  end
  local n = tonumber(env("TD_NUM_THREADS") or "")
  if not n or n < 1 or n % 1 ~= 0 then return nil end
  return n
end

-- Sets OPENBLAS_CORETYPE for this process when choose() says so and it is unset, and
-- OPENBLAS_NUM_THREADS when threads() says so; returns the core type it set (nil when
-- none).
function M.prepare()
  local n = M.threads()
  if n then ffi.C.setenv("OPENBLAS_NUM_THREADS", tostring(n), 0) end
  if not unset("OPENBLAS_CORETYPE") then return nil end
  local f = io.open("/proc/cpuinfo", "rb")
  if not f then return nil end
  local text = f:read(16384) -- the first CPU's block is enough
  f:close()
  local core = M.choose(text)
  if core then ffi.C.setenv("OPENBLAS_CORETYPE", core, 0) end
  return core
end

return M
