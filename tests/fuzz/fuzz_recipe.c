/* fuzz_recipe.c: recipes, from JSON text to the problems `tdflow check` reports.
 *
 * What checks a recipe is Lua (host/recipe.lua, flow/build.lua, every node type's
 * declared parameters and own checks, preflight, the key flow); a pure-C target reaches
 * only the JSON reader under it. So this target embeds LuaJIT: it loads the library
 * through the FFI as tdflow does (build/fuzz/libtensordict.so, built with the same
 * sanitizers and coverage as the target), runs tests/fuzz/recipe_check.lua's check on
 * each input written as a .json file, and aborts on what breaks tdflow's contract (check
 * raised, or a problem is a Lua error from inside the library). Lua's own coverage
 * guides the fuzzer too: a line hook hashes each pair of (chunk, line) executed into
 * libFuzzer's extra counters, so an input that reaches new Lua is kept as one that
 * reaches new C is. The JIT is off (a line hook does not run in compiled traces).
 *
 * LeakSanitizer is off for this target: the library's objects are reachable from Lua's
 * heap, which LuaJIT maps itself and LSan does not scan, so every live one would look
 * leaked. The C targets check leaks. */
#include <lauxlib.h>
#include <libgen.h>
#include <lua.h>
#include <lualib.h>

#include "fuzz_util.h"

int __lsan_is_turned_off(void) { return 1; }

/* libFuzzer reads these as coverage beside the compiler's counters. */
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t lua_edges[1 << 16];
static uintptr_t last_line;

static void on_line(lua_State *L, lua_Debug *ar) {
  if (!lua_getinfo(L, "S", ar)) return;
  /* a chunk's name is one interned string: its address names the file */
  uintptr_t here = (uintptr_t)ar->source * 2654435761u ^ (uintptr_t)ar->currentline * 40503u;
  lua_edges[(here ^ last_line) & (sizeof lua_edges - 1)]++;
  last_line = here >> 1;
}

static lua_State *L;
static int check_ref;
static char recipe_path[512];

static void fail_lua(const char *what) {
  fprintf(stderr, "fuzz_recipe: %s: %s\n", what, lua_tostring(L, -1));
  abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* The tree: this binary is <root>/build/fuzz/fuzz/fuzz_recipe, its library one folder up. */
  char exe[4096] = {0}, root[4096], lib[4096];
  if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) abort();
  char *dir = dirname(exe); /* <root>/build/fuzz/fuzz */
  snprintf(lib, sizeof lib, "%s/../libtensordict.so", dir);
  snprintf(root, sizeof root, "%s/../../..", dir);
  setenv("TENSORDICT_LIB", lib, 1);
  setenv("TDFLOW_PLUGIN_PATH", "", 1);
  snprintf(recipe_path, sizeof recipe_path, "%s/recipe.json", fuzz_dir());

  L = luaL_newstate();
  luaL_openlibs(L);
  char boot[12288];
  snprintf(boot, sizeof boot,
           "jit.off()\n"
           "package.path = '%s/lua/?.lua;%s/lua/?/init.lua;' .. package.path\n"
           "return dofile('%s/tests/fuzz/recipe_check.lua')",
           root, root, root);
  if (luaL_loadstring(L, boot) || lua_pcall(L, 0, 1, 0)) fail_lua("loading recipe_check.lua");
  check_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_sethook(L, on_line, LUA_MASKLINE, 0);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write(recipe_path, data, size);
  lua_rawgeti(L, LUA_REGISTRYINDEX, check_ref);
  lua_pushstring(L, recipe_path);
  lua_pushlstring(L, (const char *)data, size);
  if (lua_pcall(L, 2, 1, 0)) fail_lua("check");
  if (!lua_isnil(L, -1)) {
    fprintf(stderr, "fuzz_recipe: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_pop(L, 1);
  return 0;
}
