; Hand-written: calls of C library functions whose memory effects the pass marks
; (docs/abi.md, "C library functions"), a program's own function of a library name (not
; marked), a musttail call (not marked: nothing may come before its ret), and a masked
; store (made a store per lane).
source_filename = "library.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define i64 @measure(ptr %s) {
  %n = call i64 @strlen(ptr %s)
  ret i64 %n
}

define i32 @compare(ptr %a, ptr %b, i64 %n) {
  %r = call i32 @memcmp(ptr %a, ptr %b, i64 %n)
  ret i32 %r
}

define i64 @own(ptr %s) {
  %n = call i64 @strnlen(ptr %s, i64 8)
  ret i64 %n
}

; Not the C library's strnlen: defined here, instrumented as the program's own.
define i64 @strnlen(ptr %s, i64 %max) {
  %c = load i8, ptr %s, align 1
  %z = zext i8 %c to i64
  ret i64 %z
}

define void @masked(ptr %p, <4 x i1> %m) {
  call void @llvm.masked.store.v4i32.p0(<4 x i32> <i32 1, i32 2, i32 3, i32 4>, ptr align 4 %p, <4 x i1> %m)
  ret void
}

declare i64 @strlen(ptr)
declare i32 @memcmp(ptr, ptr, i64)
declare void @llvm.masked.store.v4i32.p0(<4 x i32>, ptr, <4 x i1>)

; A musttail call: nothing may come between it and its ret, so its effects are not marked.
define i64 @measure_in_tail(ptr %s) {
  %n = musttail call i64 @strlen(ptr %s)
  ret i64 %n
}
