/* A minimal Lua host, for the end-to-end tests and the benchmark suite: runs the script
 * named by argv[1] with the standard libraries and the remaining arguments in the global
 * `arg` table, as lua.c would (lua-src ships no lua.c). Prints errors to stderr and exits
 * non-zero on failure. */
#include <stdio.h>
#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s script.lua [args...]\n", argv[0]);
    return 2;
  }
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "cannot create Lua state\n");
    return 1;
  }
  luaL_openlibs(L);
  lua_createtable(L, argc, 0); /* arg[0] is the script, arg[1..] its arguments */
  for (int i = 1; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - 1);
  }
  lua_setglobal(L, "arg");
  int status = luaL_dofile(L, argv[1]);
  if (status != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_close(L);
  return 0;
}
