; Hand-written: C++-style exceptions. The loop's exit through the unwind edge lands in a
; landingpad block, whose settle hook must come after the landingpad.
source_filename = "eh.cc"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define void @_Z4loopPii(ptr %p, i32 %n) personality ptr @__gxx_personality_v0 {
entry:
  br label %header

header:
  %i = phi i32 [ 0, %entry ], [ %next, %cont ]
  invoke void @_Z9may_throwv()
          to label %cont unwind label %lpad

cont:
  store i32 %i, ptr %p, align 4
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, %n
  br i1 %done, label %exit, label %header

exit:
  ret void

lpad:
  %lp = landingpad { ptr, i32 }
          cleanup
  store i32 -1, ptr %p, align 4
  resume { ptr, i32 } %lp
}

declare void @_Z9may_throwv()
declare i32 @__gxx_personality_v0(...)
