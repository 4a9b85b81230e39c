/* A minimal Lua host: runs the script named by argv[1] with the standard libraries,
 * prints errors to stderr and exits non-zero on failure (lua-src ships no lua.c). */
#include <stdio.h>
#include "lauxlib.h"
#include "lua.h"
#include "lualib.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s script.lua\n", argv[0]);
    return 2;
  }
  lua_State *L = luaL_newstate();
  if (!L) {
    fprintf(stderr, "cannot create Lua state\n");
    return 1;
  }
  luaL_openlibs(L);
  int status = luaL_dofile(L, argv[1]);
  if (status != LUA_OK) {
    fprintf(stderr, "%s\n", lua_tostring(L, -1));
    lua_close(L);
    return 1;
  }
  lua_close(L);
  return 0;
}
