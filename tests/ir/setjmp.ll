; Hand-written: setjmp (returns_twice) called inside a loop; a longjmp may return there.
source_filename = "setjmp.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@env = global [200 x i8] zeroinitializer

define i32 @main() {
entry:
  br label %header

header:
  %i = phi i32 [ 0, %entry ], [ %next, %header ]
  %r = call i32 @_setjmp(ptr @env)
  call void @work()
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, 10
  br i1 %done, label %exit, label %header

exit:
  ret i32 0
}

declare i32 @_setjmp(ptr) returns_twice
declare void @work()
