; Hand-written: working-set instrumentation (KAGE_TOOL=working-set) outside loops: segments,
; budget checks, coalesced marks.
source_filename = "ws_segments.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

%struct.pair = type { i32, i64 }

@table = global [16 x i32] zeroinitializer

; p[0], p[1], p[2], p[3] as i32: one check for 4 accesses, one mark of 16 bytes.
define i32 @four_ints(ptr %p) {
  %p1 = getelementptr inbounds i32, ptr %p, i64 1
  %p2 = getelementptr inbounds i32, ptr %p, i64 2
  %p3 = getelementptr inbounds i32, ptr %p, i64 3
  %a = load i32, ptr %p, align 4
  %b = load i32, ptr %p1, align 4
  %c = load i32, ptr %p2, align 4
  store i32 %a, ptr %p3, align 4
  %s = add i32 %b, %c
  ret i32 %s
}

; p[0] and p[10] as i64: a 72-byte gap, two marks.
define void @far_apart(ptr %p) {
  %p10 = getelementptr inbounds i64, ptr %p, i64 10
  store i64 0, ptr %p, align 8
  store i64 1, ptr %p10, align 8
  ret void
}

; The call cuts the block: two segments, each with its own check and marks.
define void @split_by_call(ptr %p, ptr %q) {
  store i32 1, ptr %p, align 4
  store i32 2, ptr %q, align 4
  call void @opaque()
  %v = load i32, ptr %p, align 4
  ret void
}

; Struct fields and constant expressions are constant offsets; intrinsics such as
; llvm.assume are no cuts; a GEP with a variable index is a base of its own.
define i32 @fields_and_globals(ptr %s, i64 %i) {
  %field = getelementptr inbounds %struct.pair, ptr %s, i64 0, i32 1
  store i32 0, ptr %s, align 8
  store i64 0, ptr %field, align 8
  call void @llvm.assume(i1 true)
  store i32 1, ptr getelementptr inbounds ([16 x i32], ptr @table, i64 0, i64 2), align 4
  store i32 2, ptr @table, align 4
  %vi = getelementptr inbounds i32, ptr %s, i64 %i
  %vi1 = getelementptr inbounds i32, ptr %vi, i64 1
  %x = load i32, ptr %vi, align 4
  %y = load i32, ptr %vi1, align 4
  %r = add i32 %x, %y
  ret i32 %r
}

; A small constant memcpy merges with its neighbours; a memset of unknown length and a
; large one are marked on their own.
define void @mem(ptr %d, ptr %s, i64 %n) {
  store i32 0, ptr %d, align 4
  %d4 = getelementptr inbounds i8, ptr %d, i64 4
  call void @llvm.memcpy.p0.p0.i64(ptr %d4, ptr %s, i64 12, i1 false)
  call void @llvm.memset.p0.i64(ptr %d, i8 0, i64 %n, i1 false)
  call void @llvm.memset.p0.i64(ptr %s, i8 0, i64 8192, i1 false)
  call void @llvm.memset.p0.i64(ptr %s, i8 0, i64 0, i1 false)
  ret void
}

; Each atomic counts once; a cmpxchg is marked whether or not it stored.
define i32 @atomics(ptr %p) {
  %old = atomicrmw add ptr %p, i32 1 seq_cst, align 4
  %pair = cmpxchg ptr %p, i32 0, i32 1 acq_rel monotonic, align 4
  ret i32 %old
}

; An invoke ends its block's last segment; the landing pad's segment starts after the
; landingpad.
define void @invokes(ptr %p) personality ptr @__gxx_personality_v0 {
entry:
  store i32 1, ptr %p, align 4
  invoke void @opaque()
          to label %cont unwind label %lpad

cont:
  %v = load i32, ptr %p, align 4
  ret void

lpad:
  %lp = landingpad { ptr, i32 }
          cleanup
  store i32 2, ptr %p, align 4
  resume { ptr, i32 } %lp
}

; Static allocas stay at the top of the entry block, before the budget check.
define i32 @with_alloca(i32 %x) {
  %slot = alloca i32, align 4
  store i32 %x, ptr %slot, align 4
  %v = load i32, ptr %slot, align 4
  ret i32 %v
}

; No accesses: nothing but the table entry.
define i32 @no_accesses(i32 %x) {
  %y = add i32 %x, 1
  ret i32 %y
}

; A block reached from an invoke and from a branch: the branch stores the local budget.
define void @joins(ptr %p, i1 %c) personality ptr @__gxx_personality_v0 {
entry:
  store i32 1, ptr %p, align 4
  br i1 %c, label %call, label %join

call:
  invoke void @opaque()
          to label %join unwind label %lpad

join:
  %v = load i32, ptr %p, align 4
  ret void

lpad:
  %lp = landingpad { ptr, i32 }
          cleanup
  resume { ptr, i32 } %lp
}

; A musttail call: nothing may come between it and the ret.
define i32 @tail(ptr %p, i32 %x) {
  store i32 %x, ptr %p, align 4
  %r = musttail call i32 @callee(ptr %p, i32 %x)
  ret i32 %r
}

; setjmp returns twice: the local budget is reloaded after it.
define i32 @jumps(ptr %p, ptr %env) {
  store i32 1, ptr %p, align 4
  %j = call i32 @setjmp(ptr %env) #0
  %v = load i32, ptr %p, align 4
  ret i32 %v
}

; Marks already made since the last checkpoint on every path are left out: the entry's mark
; of p covers the arms' and the join's loads of p; p + 64 is marked on the left only, so the
; join marks it again; the loop's header is a checkpoint and starts over.
define void @redundant(ptr %p, i1 %c, i64 %n) {
entry:
  store i32 1, ptr %p, align 4
  br i1 %c, label %left, label %right

left:
  %a = load i32, ptr %p, align 4
  %q = getelementptr inbounds i8, ptr %p, i64 64
  store i32 %a, ptr %q, align 4
  br label %join

right:
  %b = load i32, ptr %p, align 4
  br label %join

join:
  %q2 = getelementptr inbounds i8, ptr %p, i64 64
  %c2 = load i32, ptr %q2, align 4
  %d = load i32, ptr %p, align 4
  br label %loop

loop:
  %i = phi i64 [ 0, %join ], [ %i.next, %loop ]
  %e = load volatile i32, ptr %p, align 4
  %i.next = add i64 %i, 1
  %more = icmp ult i64 %i.next, %n
  br i1 %more, label %loop, label %exit

exit:
  ret void
}

declare i32 @callee(ptr, i32)
declare i32 @setjmp(ptr) #0
attributes #0 = { returns_twice }

declare void @opaque()
declare void @llvm.assume(i1)
declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare i32 @__gxx_personality_v0(...)
