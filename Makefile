# Makefile: the one build entry point (see README.md and docs/building.md).
#   make            libtensordict.so and the generated Lua cdefs; where nvcc is found
#                   (PATH or /usr/local/cuda/bin), also libtensordict_cuda.so (docs/cuda.md);
#                   where mpicc is found, also libtensordict_mpi.so (docs/dist.md)
#   make test       luacheck, the layering and table checks, then the C tests and busted
#                   specs; ends with "N passed, N failed"
#   make lint       luacheck over the Lua sources, scripts, plugins and tests (.luacheckrc)
#   make asan       the same tests under AddressSanitizer and UBSan
#   make valgrind   valgrind memcheck over the C tests and a subset of the specs: 0 errors,
#                   0 bytes definitely lost (scripts/run-valgrind.sh)
#   make fuzz       the misuse fuzzer: 100,000 random calls with hostile arguments
#   make fuzz-c     the libFuzzer targets over the readers (FUZZ_SECONDS each)
#   make bench      benchmarks, each a ratio against a reference measured in the same run
#   make bench-quick the size sweep at small sizes, our side only (CI runs it)
#   make install    PREFIX=/usr/local (also LUADIR, LIBDIR, INCDIR, BINDIR, PKGCONFIGDIR,
#                   PC_LIBDIR for luarocks)
#   make deps       installs the Debian packages the project needs
#   make run        the main job: recipes/demo.json and recipes/iris.lua through tdflow
#   make demo       a tour of the kernels and TensorDicts (scripts/demo.lua)

CC      ?= cc
BUILD   ?= build
OPT     ?= -O3
SAN     ?=
CFLAGS  ?=
TD_CFLAGS = -std=c11 $(OPT) -g -fPIC -fvisibility=hidden -Wall -Wextra -Werror \
            -D_GNU_SOURCE -Icore/include $(SAN) $(CFLAGS)
LDLIBS  = -lm -lpthread -lopenblas -lcjson -lsleef -lz

PREFIX  ?= /usr/local
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
LUADIR  ?= $(PREFIX)/share/lua/5.1
BINDIR  ?= $(PREFIX)/bin
# tensordict.pc's folder, and the folder its libdir names: where the library is once
# installed (luarocks moves the rock's LIBDIR into its tree's lib/lua/5.1: the rockspec
# passes both).
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PC_LIBDIR    ?= $(LIBDIR)

LIB_SRCS  = $(wildcard core/src/*.c core/kernels/*.c core/dict/*.c core/store/*.c)
LIB_OBJS  = $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
# core/include: the public headers and the non-ABI ones every library shares (the dtype
# and op tables, philox.h, float_below.h).
INC_HDRS  = $(wildcard core/include/*.h)
LIB_HDRS  = $(INC_HDRS) $(wildcard core/src/*.h core/kernels/*.h core/dict/*.h core/store/*.h)
LIB       = $(BUILD)/libtensordict.so
CDEFS     = lua/tensordict/cdefs.lua
# The Lua layers, a folder each under lua/tensordict (docs/architecture.md)
LUA_LAYERS = $(sort $(notdir $(patsubst %/,%,$(dir $(wildcard lua/tensordict/*/*.lua)))))
MPI_SRCS  = $(wildcard core/mpi/*.c)
MPI_OBJS  = $(MPI_SRCS:%.c=$(BUILD)/obj/%.o)
MPI_LIB   = $(BUILD)/libtensordict_mpi.so
CDEFS_MPI = lua/tensordict/cdefs_mpi.lua
MPICC    ?= mpicc
HAVE_MPI := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo yes)
# libtensordict_h5.so (core/h5): HDF5 wrappers for tensordict.h5 (docs/h5.md), linked
# against HDF5 only; built where pkg-config knows hdf5 (Debian's libhdf5-dev).
H5_SRCS   = $(wildcard core/h5/*.c)
H5_OBJS   = $(H5_SRCS:%.c=$(BUILD)/obj/%.o)
H5_LIB    = $(BUILD)/libtensordict_h5.so
CDEFS_H5  = lua/tensordict/cdefs_h5.lua
H5_CFLAGS := $(shell pkg-config --cflags hdf5 2>/dev/null)
H5_LIBS   := $(shell pkg-config --libs hdf5 2>/dev/null)
HAVE_H5   := $(shell pkg-config --exists hdf5 2>/dev/null && echo yes)
CTESTS    = $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c))
CBENCHES  = $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/bench_*.c))

# The CUDA backend (core/cuda/, docs/cuda.md): its own library, built only where nvcc is
# found; the CPU library never links CUDA. cudart is linked statically (the library then
# needs only the driver, plus cuBLAS); sm_80 and sm_90 code plus sm_90 PTX for newer GPUs.
NVCC       ?= $(shell command -v nvcc 2>/dev/null || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]
CUDA_FLAGS  = -std=c++17 -O3 -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra -Werror all-warnings \
              $(CUDA_ARCHS) -Icore/include
CUDA_LIB    = $(BUILD)/libtensordict_cuda.so
CUDA_OBJS   = $(patsubst %.cu,$(BUILD)/obj/%.o,$(wildcard core/cuda/*.cu))
CUDA_CDEFS  = lua/tensordict/cuda_cdefs.lua

.PHONY: all lib cuda cuda-bench mpi h5 layers tables test check lint asan valgrind fuzz fuzz-c fuzz-targets bench bench-quick install deps \
        clean demo run

all: $(LIB) $(CDEFS) $(CUDA_CDEFS) cuda $(CDEFS_MPI) mpi $(CDEFS_H5) h5

# libtensordict_mpi.so (core/mpi): MPI wrappers for tensordict.dist, linked against MPI
# and libtensordict; libtensordict itself never links MPI. Built only where mpicc is.
ifeq ($(HAVE_MPI),yes)
mpi: $(MPI_LIB)
else
mpi:
	@echo "libtensordict_mpi.so skipped: $(MPICC) not found (install libopenmpi-dev; see docs/dist.md)"
endif

$(BUILD)/obj/core/mpi/%.o: core/mpi/%.c core/mpi/mpi_internal.h $(INC_HDRS)
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(TD_CFLAGS) -c $< -o $@

$(MPI_LIB): $(MPI_OBJS) $(LIB)
	OMPI_CC=$(CC) $(MPICC) $(TD_CFLAGS) -shared -Wl,-soname,libtensordict_mpi.so $(MPI_OBJS) -o $@ \
	  -L$(BUILD) -ltensordict -Wl,-rpath,'$$ORIGIN'

$(CDEFS_MPI): core/include/tensordict_mpi.h scripts/gen_cdefs.lua
	luajit scripts/gen_cdefs.lua core/include/tensordict_mpi.h TD_MPI_ABI_VERSION > $@.tmp && mv $@.tmp $@

ifeq ($(HAVE_H5),yes)
h5: $(H5_LIB)
else
h5:
	@echo "libtensordict_h5.so skipped: pkg-config finds no hdf5 (install libhdf5-dev; see docs/h5.md)"
endif

$(BUILD)/obj/core/h5/%.o: core/h5/%.c core/h5/h5_internal.h $(INC_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) $(H5_CFLAGS) -c $< -o $@

$(H5_LIB): $(H5_OBJS)
	$(CC) $(TD_CFLAGS) -shared -Wl,-soname,libtensordict_h5.so $(H5_OBJS) -o $@ $(H5_LIBS)

$(CDEFS_H5): core/include/tensordict_h5.h scripts/gen_cdefs.lua
	luajit scripts/gen_cdefs.lua core/include/tensordict_h5.h TD_H5_ABI_VERSION > $@.tmp && mv $@.tmp $@

lib: $(LIB)

$(BUILD)/obj/%.o: %.c $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) -c $< -o $@

# Kernels never read errno: without it sqrt is one instruction and its loops vectorise
# (sqrt of 1e5 float32, 1 thread: 101 -> 26 us; the same correctly rounded bits).
$(BUILD)/obj/core/kernels/%.o: TD_CFLAGS += -fno-math-errno

# The SLEEF loops for wider vectors are built for those instruction sets and only run
# where the CPU has them (core/kernels/elementwise_vecmath.c chooses at run time).
$(BUILD)/obj/core/kernels/elementwise_vecmath_avx2.o: TD_CFLAGS += -mavx2 -mfma
$(BUILD)/obj/core/kernels/elementwise_vecmath_avx512.o: TD_CFLAGS += -mavx512f

$(LIB): $(LIB_OBJS)
	$(CC) $(TD_CFLAGS) -shared -Wl,-soname,libtensordict.so $^ -o $@ $(LDLIBS)

$(CDEFS): core/include/tensordict.h scripts/gen_cdefs.lua
	luajit scripts/gen_cdefs.lua core/include/tensordict.h > $@.tmp && mv $@.tmp $@

$(CUDA_CDEFS): core/include/tensordict_cuda.h scripts/gen_cdefs.lua
	luajit scripts/gen_cdefs.lua core/include/tensordict_cuda.h TD_CUDA_ABI_VERSION > $@.tmp && mv $@.tmp $@

ifneq ($(NVCC),)
cuda: $(CUDA_LIB)
else
cuda:
	@echo "nvcc not found (PATH, /usr/local/cuda/bin): skipping libtensordict_cuda.so"
endif

$(BUILD)/obj/core/cuda/%.o: core/cuda/%.cu core/cuda/cuda_internal.h $(INC_HDRS)
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDA_FLAGS) -c $< -o $@

# Linked to libtensordict by soname, found next to it ($ORIGIN) as the Lua loader puts them.
$(CUDA_LIB): $(CUDA_OBJS) $(LIB)
	$(NVCC) -shared -cudart static $(CUDA_ARCHS) -Xlinker -soname,libtensordict_cuda.so \
	  -Xlinker -rpath,'$$ORIGIN' -Xlinker -rpath,$(CUDA_HOME)/lib64 $(CUDA_OBJS) -o $@ \
	  -L$(BUILD) -ltensordict -L$(CUDA_HOME)/lib64 -lcublas

# The CUDA figures (scripts/cuda-check.sh runs them on a machine with a GPU).
cuda-bench: $(BUILD)/bench/bench_cuda
$(BUILD)/bench/bench_cuda: tests/bench/bench_cuda.cu $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(CUDA_ARCHS) -Icore/include $< -o $@ -L$(BUILD) -ltensordict \
	  -ltensordict_cuda -Xlinker -rpath,$(abspath $(BUILD)) -Xlinker -rpath,'$$ORIGIN/..' \
	  -L$(CUDA_HOME)/lib64 -lcublas

$(BUILD)/tests/%: tests/c/%.c $(wildcard tests/c/*.h) $(LIB) $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) -Icore/src $< -o $@ -L$(BUILD) -ltensordict -Wl,-rpath,$(abspath $(BUILD)) $(LDLIBS)

# The embedding test loads the library through LuaJIT's FFI, as a host does: it must not
# link it, or closing the Lua state would not unload it.
$(BUILD)/tests/test_embed: tests/c/test_embed.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) $< -o $@ $$(pkg-config --cflags --libs luajit)

$(BUILD)/bench/%: tests/bench/%.c tests/bench/bench.h $(LIB) $(LIB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) -Icore/src $< -o $@ -L$(BUILD) -ltensordict -Wl,-rpath,$(abspath $(BUILD)) $(LDLIBS) -lopenblas

# core/src -> core/kernels -> core/dict -> core/store: no folder calls or includes one above it.
# The Lua tree likewise: base -> tensor -> dict -> lazy_stack -> facade -> dist, flow ->
# host -> repl, classes required whole, no C calls above the Lua layer.
layers: $(LIB)
	bash scripts/check_layers.sh $(BUILD)
	luajit scripts/check_lua_layers.lua

# dtypes and ops are listed only in their tables (core/include/dtype_table.h, op_table.h).
tables:
	bash scripts/check_tables.sh

# The tests run against whatever BUILD holds; asan re-enters with a sanitized BUILD.
check: all layers tables $(CTESTS)
	BUILD=$(BUILD) TD_PRELOAD="$(TD_PRELOAD)" bash scripts/run-tests.sh

test: deps lint
	@$(MAKE) --no-print-directory check

# Any luacheck warning fails the build (it exits non-zero).
LUA_SCRIPTS = scripts/tdflow scripts/tdrepl
lint: deps
	luacheck -q --no-color lua scripts plugins tests $(LUA_SCRIPTS)

# LuaJIT itself is not sanitized, so the runtimes are preloaded into it for the specs.
# A request too large to allocate must come back as NULL (the library turns it into a
# "tensordict: out of memory" error), as malloc does, not abort under ASan's allocator.
asan: deps
	@ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(MAKE) --no-print-directory check BUILD=build/asan OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  TD_PRELOAD="$$($(CC) -print-file-name=libasan.so):$$($(CC) -print-file-name=libubsan.so)"

# memcheck over the C tests and the specs scripts/run-valgrind.sh names (~7 minutes).
valgrind: deps
	@$(MAKE) --no-print-directory all $(CTESTS)
	BUILD=$(BUILD) bash scripts/run-valgrind.sh

# The misuse fuzzer: 100,000 random calls with hostile arguments (tests/fuzz/misuse.lua;
# FUZZ_SURFACES=api,flow,recipe,dist picks the surfaces, all by default),
# under an 8 GiB address-space limit so a valid but huge request fails instead of swapping.
FUZZ_CALLS ?= 100000
FUZZ_SEED ?= 1
FUZZ_SURFACES ?= all
fuzz: all
	ulimit -v 8388608; LUA_PATH="$(CURDIR)/lua/?.lua;$(CURDIR)/lua/?/init.lua;$(CURDIR)/tests/fuzz/?.lua;;" \
	  TENSORDICT_LIB=$(abspath $(LIB)) luajit tests/fuzz/misuse.lua $(FUZZ_CALLS) $(FUZZ_SEED) $(FUZZ_SURFACES)

# libFuzzer targets over the readers (tests/fuzz/fuzz_*.c), built with clang, ASan and
# UBSan into build/fuzz; each runs FUZZ_SECONDS from its committed seed corpus.
FUZZ_BINS    = $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
ifneq ($(HAVE_MPI),yes)
FUZZ_BINS   := $(filter-out %/fuzz_mpi_recv,$(FUZZ_BINS))
endif
FUZZ_SAN     = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all \
               -fno-omit-frame-pointer
FUZZ_SECONDS ?= 60

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_util.h $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) -fsanitize=fuzzer $< $(LIB_OBJS) -o $@ $(LDLIBS)

# The MPI receive target links the MPI library's objects and MPI itself (it runs MPI as a
# singleton: tests/fuzz/fuzz_mpi_recv.c); built only where mpicc is.
$(BUILD)/fuzz/fuzz_mpi_recv: tests/fuzz/fuzz_mpi_recv.c tests/fuzz/fuzz_util.h $(LIB_OBJS) $(MPI_OBJS)
	@mkdir -p $(dir $@)
	OMPI_CC=$(CC) $(MPICC) $(TD_CFLAGS) -fsanitize=fuzzer $< $(LIB_OBJS) $(MPI_OBJS) -o $@ $(LDLIBS)

# The recipe target embeds LuaJIT and loads the library through the FFI, as tdflow does:
# the shared library of this build (the same sanitizers and coverage), and the cdefs.
$(BUILD)/fuzz/fuzz_recipe: tests/fuzz/fuzz_recipe.c tests/fuzz/fuzz_util.h tests/fuzz/recipe_check.lua \
    $(LIB) $(CDEFS)
	@mkdir -p $(dir $@)
	$(CC) $(TD_CFLAGS) -fsanitize=fuzzer $$(pkg-config --cflags luajit) $< -o $@ $$(pkg-config --libs luajit)

fuzz-targets: $(FUZZ_BINS)

fuzz-c: deps
	@$(MAKE) --no-print-directory fuzz-targets BUILD=build/fuzz CC=clang OPT=-O1 SAN="$(FUZZ_SAN)"
	bash scripts/run-fuzz.sh build/fuzz $(FUZZ_SECONDS)

# The bench harness in a few seconds (CI: so it cannot rot; it asserts nothing about time).
bench-quick: all
	TD_SWEEP_QUICK=1 TD_SWEEP_OUT=$(BUILD)/bench-results TD_TORCH_PYTHON=none \
	  TENSORDICT_LIB=$(abspath $(LIB)) luajit tests/bench/bench_sweep.lua

bench: deps
	@$(MAKE) --no-print-directory all $(CBENCHES)
	BUILD=$(BUILD) bash scripts/run-bench.sh

# The main job: the demo recipe (4M particle states) and the iris recipe through tdflow.
run: deps
	@$(MAKE) --no-print-directory all
	scripts/tdflow run recipes/demo.json
	scripts/tdflow run recipes/iris.lua
	@echo "Explore the result: scripts/tdrepl, then td = T.load_memmap('/tmp/tdflow-demo/particles')"

# A tour of the kernels and the TensorDict API on the embedded iris data.
demo: deps
	@$(MAKE) --no-print-directory all
	luajit scripts/demo.lua

deps:
	@bash scripts/deps.sh

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(LUADIR)/tensordict \
	  $(addprefix $(DESTDIR)$(LUADIR)/tensordict/,$(LUA_LAYERS)) \
	  $(DESTDIR)$(LUADIR)/tensordict/plugins $(DESTDIR)$(BINDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/libtensordict.so
	install -m 644 core/include/tensordict.h $(DESTDIR)$(INCDIR)/tensordict.h
	if [ -f $(CUDA_LIB) ]; then install -m 755 $(CUDA_LIB) $(DESTDIR)$(LIBDIR)/libtensordict_cuda.so; \
	  install -m 644 core/include/tensordict_cuda.h $(DESTDIR)$(INCDIR)/tensordict_cuda.h; fi
	if [ -f $(MPI_LIB) ]; then install -m 755 $(MPI_LIB) $(DESTDIR)$(LIBDIR)/libtensordict_mpi.so; \
	  install -m 644 core/include/tensordict_mpi.h $(DESTDIR)$(INCDIR)/tensordict_mpi.h; fi
	if [ -f $(H5_LIB) ]; then install -m 755 $(H5_LIB) $(DESTDIR)$(LIBDIR)/libtensordict_h5.so; \
	  install -m 644 core/include/tensordict_h5.h $(DESTDIR)$(INCDIR)/tensordict_h5.h; fi
	install -m 644 lua/tensordict/*.lua $(DESTDIR)$(LUADIR)/tensordict/
	for d in $(LUA_LAYERS); do install -m 644 lua/tensordict/$$d/*.lua $(DESTDIR)$(LUADIR)/tensordict/$$d/; done
	install -m 644 plugins/*.lua $(DESTDIR)$(LUADIR)/tensordict/plugins/
	luajit scripts/install_info.lua > $(DESTDIR)$(LUADIR)/tensordict/install_info.lua
	install -m 755 scripts/tdflow scripts/tdrepl scripts/tdlua $(DESTDIR)$(BINDIR)/
	sed -e 's|@PREFIX@|$(abspath $(PREFIX))|' -e 's|@LIBDIR@|$(abspath $(PC_LIBDIR))|' \
	  -e 's|@INCDIR@|$(abspath $(INCDIR))|' -e 's|@LIBS_PRIVATE@|$(LDLIBS)|' \
	  scripts/tensordict.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/tensordict.pc

clean:
	rm -rf build $(CDEFS) $(CUDA_CDEFS)
