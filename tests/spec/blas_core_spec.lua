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

describe("OpenBLAS as loaded with libtensordict", function()
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
    local root = debug.getinfo(1, "S").source:match("^@(.*)/tests/spec/") or "."
    local lua_path = ("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' "):format(root, root)
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
