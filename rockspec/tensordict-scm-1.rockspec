rockspec_format = "3.0"
package = "tensordict"
version = "scm-1"
source = {
  url = "git+file://.",
}
description = {
  summary = "Batched tensor containers and kernels for LuaJIT, in C through the FFI",
  detailed = [[
    A C library of tensors and tensor containers with PyTorch tensordict's semantics,
    driven from LuaJIT through the FFI with torch7's Lua manners.
  ]],
  license = "MIT",
}
dependencies = {
  "lua == 5.1",
}
build = {
  -- The Makefile is the one build entry point; luarocks passes its install dirs.
  -- PREFIX is the rock's folder, <tree>/lib/luarocks/rocks-5.1/tensordict/<version>:
  -- luarocks moves its lib/ to <tree>/lib/lua/5.1 (where tensordict.pc's libdir must
  -- point) and its bin/ to <tree>/bin; tensordict.pc goes to <tree>/lib/pkgconfig, where
  -- pkg-config looks for a /usr/local tree.
  type = "make",
  build_target = "all",
  install_target = "install",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
  },
  install_variables = {
    PREFIX = "$(PREFIX)",
    LIBDIR = "$(LIBDIR)",
    LUADIR = "$(LUADIR)",
    BINDIR = "$(BINDIR)",
    INCDIR = "$(PREFIX)/include",
    PKGCONFIGDIR = "$(PREFIX)/../../../../pkgconfig",
    PC_LIBDIR = "$(PREFIX)/../../../../lua/5.1",
  },
}
deploy = {
  -- tdflow, tdrepl and tdlua run under LuaJIT (their first line says so): luarocks'
  -- wrappers would start them with the Lua luarocks is configured for (PUC Lua 5.1,
  -- which has no FFI).
  wrap_bin_scripts = false,
}
