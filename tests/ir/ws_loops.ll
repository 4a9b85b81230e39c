; Hand-written: working-set instrumentation of loops (KAGE_TOOL=working-set). Simple counted
; loops are marked from their preheader; others per segment, with the loop body's region.
source_filename = "ws_loops.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; for (i = 0; i < n; i++) a[i] = b[i] + 1;  as clang -O2 leaves it: rotated, guarded, with
; a dedicated preheader. Hoisted: T = n, two accesses per iteration, one range per array.
define void @increment(ptr noalias %a, ptr noalias %b, i32 %n) {
entry:
  %guard = icmp sgt i32 %n, 0
  br i1 %guard, label %preheader, label %exit

preheader:
  %count = zext nneg i32 %n to i64
  br label %loop

loop:
  %i = phi i64 [ 0, %preheader ], [ %i.next, %loop ]
  %pb = getelementptr inbounds nuw i32, ptr %b, i64 %i
  %v = load i32, ptr %pb, align 4
  %w = add nsw i32 %v, 1
  %pa = getelementptr inbounds nuw i32, ptr %a, i64 %i
  store i32 %w, ptr %pa, align 4
  %i.next = add nuw nsw i64 %i, 1
  %done = icmp eq i64 %i.next, %count
  br i1 %done, label %exit, label %loop

exit:
  ret void
}

; The vectorized form of the same loop (clang -O2): 8 elements per iteration in two
; 16-byte halves, which merge into one range per array.
define void @vectorized(ptr noalias %a, ptr noalias %b, i64 %n.vec) {
entry:
  br label %vector.body

vector.body:
  %index = phi i64 [ 0, %entry ], [ %index.next, %vector.body ]
  %pb = getelementptr inbounds nuw i32, ptr %b, i64 %index
  %pb.hi = getelementptr inbounds nuw i8, ptr %pb, i64 16
  %lo = load <4 x i32>, ptr %pb, align 4
  %hi = load <4 x i32>, ptr %pb.hi, align 4
  %pa = getelementptr inbounds nuw i32, ptr %a, i64 %index
  %pa.hi = getelementptr inbounds nuw i8, ptr %pa, i64 16
  store <4 x i32> %lo, ptr %pa, align 4
  store <4 x i32> %hi, ptr %pa.hi, align 4
  %index.next = add nuw i64 %index, 8
  %done = icmp eq i64 %index.next, %n.vec
  br i1 %done, label %exit, label %vector.body

exit:
  ret void
}

; Counting down with an i32 counter, sign-extended, exit tested on the counter itself:
; do { a[i] = 0; } while (i-- != 0) from i = s. Hoisted, the range grows downwards.
define void @count_down(ptr %a, i32 %s) {
entry:
  br label %loop

loop:
  %i = phi i32 [ %s, %entry ], [ %i.next, %loop ]
  %idx = sext i32 %i to i64
  %p = getelementptr inbounds i64, ptr %a, i64 %idx
  store i64 0, ptr %p, align 8
  %i.next = add nsw i32 %i, -1
  %more = icmp ne i32 %i, 0
  br i1 %more, label %loop, label %exit

exit:
  ret void
}

; for (j = 0; j < n; j++) A[i * n + j] += B[j], unrolled remainder style: the exit counts
; with its own counter and the row offset is loop-invariant. Hoisted: the A range starts
; at A + 8 * (i * n + s).
define void @row_update(ptr %A, ptr %B, i64 %i, i64 %s, i64 %n) {
entry:
  %row = mul nsw i64 %i, %n
  br label %loop

loop:
  %j = phi i64 [ %s, %entry ], [ %j.next, %loop ]
  %niter = phi i64 [ 0, %entry ], [ %niter.next, %loop ]
  %idx = add nsw i64 %j, %row
  %pa = getelementptr inbounds double, ptr %A, i64 %idx
  %pb = getelementptr inbounds double, ptr %B, i64 %j
  %x = load double, ptr %pa, align 8
  %y = load double, ptr %pb, align 8
  %z = fadd double %x, %y
  store double %z, ptr %pa, align 8
  %j.next = add nsw i64 %j, 1
  %niter.next = add i64 %niter, 1
  %done = icmp eq i64 %niter.next, %n
  br i1 %done, label %exit, label %loop

exit:
  ret void
}

; A search with an early exit: instrumented per segment inside the loop, with the loop
; body's region.
define i64 @find(ptr %a, i64 %n, i32 %x) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %latch ]
  %p = getelementptr inbounds i32, ptr %a, i64 %i
  %v = load i32, ptr %p, align 4
  %found = icmp eq i32 %v, %x
  br i1 %found, label %exit, label %latch

latch:
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop

exit:
  %r = phi i64 [ %i, %loop ], [ -1, %latch ]
  ret i64 %r
}

; A call inside: two segments per iteration, nothing hoisted.
define void @with_call(ptr %a, i64 %n) {
entry:
  br label %loop

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %p = getelementptr inbounds i32, ptr %a, i64 %i
  store i32 1, ptr %p, align 4
  call void @opaque()
  store i32 2, ptr %p, align 4
  %i.next = add i64 %i, 1
  %done = icmp eq i64 %i.next, %n
  br i1 %done, label %exit, label %loop

exit:
  ret void
}

declare void @opaque()
