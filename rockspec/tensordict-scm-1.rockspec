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
    INCDIR = "$(PREFIX)/include",
  },
}
