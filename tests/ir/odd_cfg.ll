; Hand-written: control flow and functions the pass must survive or leave alone.
source_filename = "odd_cfg.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; The b1 <-> b2 cycle has two entries: irreducible, so not a loop.
define void @irreducible(i1 %c, i1 %d) {
entry:
  br i1 %c, label %b1, label %b2
b1:
  br label %b2
b2:
  br i1 %d, label %b1, label %out
out:
  ret void
}

; A self loop, plus an unreachable block with a load, a ret and a branch into the loop.
define i32 @self_loop_and_dead_code(ptr %p, i32 %n) {
entry:
  br label %spin
spin:
  %i = phi i32 [ 0, %entry ], [ %i.next, %spin ], [ 0, %dead ]
  %i.next = add i32 %i, 1
  %again = icmp ult i32 %i.next, %n
  br i1 %again, label %spin, label %done
done:
  ret i32 %i.next
dead:
  %x = load i32, ptr %p, align 4
  %c = icmp eq i32 %x, 0
  br i1 %c, label %spin, label %dead.ret
dead.ret:
  ret i32 %x
}

; Nothing may sit between a musttail call and its ret.
define i32 @_ZN2ns6tailerEi(i32 %x) {
  %r = musttail call i32 @callee(i32 %x)
  ret i32 %r
}

define void @opted_out(ptr %p) disable_sanitizer_instrumentation {
  store i32 0, ptr %p, align 4
  ret void
}

define void @__kage_internal(ptr %p) {
  store i32 0, ptr %p, align 4
  ret void
}

define void @naked_fn() naked {
  call void asm sideeffect "ret", ""()
  unreachable
}

declare i32 @callee(i32)
