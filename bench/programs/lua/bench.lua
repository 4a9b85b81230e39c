-- A deterministic Lua workload for the benchmark suite: recursion, table churn, string
-- building and sorting, so the interpreter's dispatch loop, GC and string table all work.
-- Usage: lua bench.lua [scale]; prints a checksum.
local scale = tonumber(arg and arg[1]) or tonumber(os.getenv("KAGE_BENCH_LUA_SCALE")) or 150

local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end

local checksum = 0
for round = 1, scale do
  checksum = checksum + fib(20 + round % 3)

  local t = {}
  for i = 1, 20000 do t[i] = (i * 7919 + round) % 10007 end
  table.sort(t)
  for i = 1, #t, 97 do checksum = (checksum + t[i]) % 1000000007 end

  local words = {}
  for i = 1, 5000 do words[#words + 1] = string.format("w%d_%d", i % 113, round) end
  local joined = table.concat(words, " ")
  local counts = {}
  for w in joined:gmatch("%S+") do counts[w] = (counts[w] or 0) + 1 end
  local distinct = 0
  for _, c in pairs(counts) do distinct = distinct + c end
  checksum = (checksum + distinct + #joined) % 1000000007
end
print(string.format("lua scale=%d checksum=%d", scale, checksum))
