-- A real workload touching the interpreter's main paths: numbers, strings, tables,
-- closures, coroutines, string patterns, sorting and error handling (pcall uses longjmp).
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
print("fib(24)", fib(24))

local t = {}
for i = 1, 20000 do t[i] = (i * 7919) % 10007 end
table.sort(t)
print("sorted", t[1], t[100], t[20000])

local words = {}
local text = string.rep("the quick brown fox jumps over the lazy dog ", 300)
for w in text:gmatch("%a+") do words[w] = (words[w] or 0) + 1 end
local keys = {}
for k in pairs(words) do keys[#keys + 1] = k end
table.sort(keys)
for _, k in ipairs(keys) do io.write(k, "=", words[k], " ") end
print()

local co = coroutine.wrap(function()
  for i = 1, 5 do coroutine.yield(i * i) end
end)
local acc = {}
for _ = 1, 5 do acc[#acc + 1] = co() end
print("squares", table.concat(acc, ","))

local errors = 0
for i = 1, 100 do
  local ok = pcall(function() if i % 3 == 0 then error("boom " .. i) end return i end)
  if not ok then errors = errors + 1 end
end
print("errors caught", errors)

print(string.format("%.6f", math.sqrt(2)), ("%5.2f"):format(math.pi))
local parts = {}
for i = 1, 1000 do parts[#parts + 1] = tostring(i) end
local joined = table.concat(parts, "-")
print("joined length", #joined, joined:sub(1, 20))
