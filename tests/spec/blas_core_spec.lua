-- blas_core_spec.lua: OpenBLAS's kernels chosen for CPUs its detection does not know
-- (lua/tensordict/blas_core.lua).
local blas_core = require("tensordict.blas_core")

local function cpuinfo(vendor, family, model, flags)
  return ("processor\t: 0\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\n"
    .. "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: %s\n\nprocessor\t: 1\n")
    :format(vendor, family, model, flags)
end

local AVX512 = "fpu sse sse2 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl"

describe("blas_core.choose", function()
  it("asks for SkylakeX on an Intel model newer than OpenBLAS 0.3.21 with AVX-512", function()
    assert.are.equal("SkylakeX", blas_core.choose(cpuinfo("GenuineIntel", 6, 207, AVX512)))
    assert.are.equal("SkylakeX", blas_core.choose(cpuinfo("GenuineIntel", 6, 0xA0, AVX512)))
  end)

  it("asks for Haswell there with AVX2 and FMA but not every AVX-512 subset", function()
    assert.are.equal("Haswell", blas_core.choose(cpuinfo("GenuineIntel", 6, 170, "sse avx avx2 fma")))
    assert.are.equal("Haswell", blas_core.choose(cpuinfo("GenuineIntel", 6, 170, "avx2 fma avx512f avx512vl")))
  end)

  it("leaves OpenBLAS's choice for models it knows, other vendors and older CPUs", function()
    assert.is_nil(blas_core.choose(cpuinfo("GenuineIntel", 6, 85, AVX512))) -- Skylake-SP: known
    assert.is_nil(blas_core.choose(cpuinfo("AuthenticAMD", 25, 207, AVX512)))
    assert.is_nil(blas_core.choose(cpuinfo("GenuineIntel", 6, 207, "sse sse2 avx")))
    assert.is_nil(blas_core.choose(cpuinfo("GenuineIntel", 15, 207, AVX512)))
    assert.is_nil(blas_core.choose("vendor_id : GenuineIntel\n"))
    assert.is_nil(blas_core.choose(nil))
  end)
end)

describe("blas_core.threads", function()
  local function env(t) return function(name) return t[name] end end

  it("gives OpenBLAS TD_NUM_THREADS when the user set none of OpenBLAS's variables", function()
    assert.are.equal(1, blas_core.threads(env({ TD_NUM_THREADS = "1" })))
    assert.are.equal(3, blas_core.threads(env({ TD_NUM_THREADS = "3", OPENBLAS_NUM_THREADS = "" })))
  end)

  it("leaves OpenBLAS's own count without TD_NUM_THREADS, with a bad one, or with the user's", function()
    assert.is_nil(blas_core.threads(env({})))
    assert.is_nil(blas_core.threads(env({ TD_NUM_THREADS = "0" })))
    assert.is_nil(blas_core.threads(env({ TD_NUM_THREADS = "1.5" })))
    assert.is_nil(blas_core.threads(env({ TD_NUM_THREADS = "two" })))
    for _, name in ipairs({ "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS" }) do
      assert.is_nil(blas_core.threads(env({ TD_NUM_THREADS = "1", [name] = "4" })), name)
    end
  end)
end)

describe("OpenBLAS as loaded with libtensordict", function()
  local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or "."
  local lua_path = ("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' "):format(root, root)

  -- The threads of a fresh process that loaded the library, and its OPENBLAS_NUM_THREADS.
  local function fresh(env)
    local script = [[require("tensordict")
      local s = io.open("/proc/self/status"):read("*a")
      io.write(s:match("Threads:%s*(%d+)"), " ", os.getenv("OPENBLAS_NUM_THREADS") or "-")]]
    local pipe = io.popen("env -u OPENBLAS_NUM_THREADS -u GOTO_NUM_THREADS -u OMP_NUM_THREADS " .. env
      .. " " .. lua_path .. "luajit -e '" .. script .. "' 2>&1")
    local out = pipe:read("*a")
    pipe:close()
    return out
  end

  it("starts no OpenBLAS worker in a process told TD_NUM_THREADS=1", function()
    assert.are.equal("1 1", fresh("TD_NUM_THREADS=1"))
    -- the user's own setting stays as it is; without TD_NUM_THREADS nothing is set
    assert.are.equal("2", fresh("TD_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2"):match("^%d+ (%S+)$"))
    assert.are.equal("-", fresh("-u TD_NUM_THREADS"):match("^%d+ (%S+)$"))
  end)

  it("runs the kernels choose() names for this CPU, unless OPENBLAS_CORETYPE says otherwise", function()
    local f = io.open("/proc/cpuinfo", "rb")
    if not f then pending("no /proc/cpuinfo") return end
    local want = blas_core.choose(f:read(16384))
    f:close()
    local script = [[
      local ffi = require("ffi")
      require("tensordict")
      ffi.cdef("char *openblas_get_corename(void);")
      local ok, blas = pcall(ffi.load, "openblas")
      io.write(ok and ffi.string(blas.openblas_get_corename()) or "?")]]
    -- a fresh process, from this tree's Lua files (OpenBLAS chooses once, at load)
    local pipe = io.popen("env -u OPENBLAS_CORETYPE " .. lua_path .. "luajit -e '" .. script .. "' 2>&1")
    local core = pipe:read("*a")
    pipe:close()
    if core == "?" then pending("libopenblas.so cannot be opened by name") return end
    if want then assert.are.equal(want, core) else assert.is_truthy(#core > 0, core) end
    pipe = io.popen("OPENBLAS_CORETYPE=Haswell " .. lua_path .. "luajit -e '" .. script .. "' 2>&1")
    core = pipe:read("*a")
    pipe:close()
    assert.are.equal("Haswell", core) -- the user's setting wins
  end)
end)
