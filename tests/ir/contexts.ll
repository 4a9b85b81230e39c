; Hand-written: a coroutine made with makecontext, switched to with swapcontext, and a
; setcontext; each call goes through the runtime.
source_filename = "contexts.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@main_ctx = global [968 x i8] zeroinitializer
@co_ctx = global [968 x i8] zeroinitializer
@counter = global i32 0

define void @coroutine() {
entry:
  %v = load i32, ptr @counter
  %w = add i32 %v, 1
  store i32 %w, ptr @counter
  %r = call i32 @swapcontext(ptr @co_ctx, ptr @main_ctx)
  ret void
}

define i32 @main() {
entry:
  %g = call i32 @getcontext(ptr @co_ctx)
  call void (ptr, ptr, i32, ...) @makecontext(ptr @co_ctx, ptr @coroutine, i32 0)
  %r = call i32 @swapcontext(ptr @main_ctx, ptr @co_ctx)
  %v = load i32, ptr @counter
  %done = icmp eq i32 %v, 0
  br i1 %done, label %again, label %exit

again:
  %s = call i32 @setcontext(ptr @co_ctx)
  br label %exit

exit:
  ret i32 0
}

declare i32 @getcontext(ptr) returns_twice
declare void @makecontext(ptr, ptr, i32, ...)
declare i32 @swapcontext(ptr, ptr)
declare i32 @setcontext(ptr)
