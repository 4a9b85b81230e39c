; Hand-written: one of each memory access docs/abi.md lists, plus ones it leaves alone.
source_filename = "accesses.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

define <4 x i32> @vector_load(ptr %p) {
  %v = load <4 x i32>, ptr %p, align 16
  ret <4 x i32> %v
}

define void @scalar_stores(ptr %p, i1 %b, x86_fp80 %f) {
  store i64 7, ptr %p, align 8
  store volatile i8 1, ptr %p, align 1
  store i1 %b, ptr %p, align 1
  store x86_fp80 %f, ptr %p, align 16
  store { i32, i8 } { i32 1, i8 2 }, ptr %p, align 4
  ret void
}

define i32 @atomics(ptr %p) {
  %a = load atomic i32, ptr %p seq_cst, align 4
  %old = atomicrmw add ptr %p, i32 1 seq_cst, align 4
  %pair = cmpxchg ptr %p, i64 0, i64 1 acq_rel monotonic, align 8
  ret i32 %a
}

define void @mem_intrinsics(ptr %d, ptr %s, i32 %n) {
  call void @llvm.memcpy.p0.p0.i64(ptr %d, ptr %s, i64 100, i1 false)
  call void @llvm.memmove.p0.p0.i32(ptr %d, ptr %s, i32 %n, i1 false)
  call void @llvm.memset.p0.i64(ptr %d, i8 0, i64 64, i1 false)
  call void @llvm.memcpy.inline.p0.p0.i64(ptr %d, ptr %s, i64 8, i1 false)
  call void @llvm.memset.inline.p0.i64(ptr %d, i8 1, i64 4, i1 false)
  ret void
}

; Neither is instrumented: scalable vectors have no compile-time size, and segment
; address spaces are not plain addresses.
define void @not_instrumented(ptr %p, ptr addrspace(256) %fs) {
  %sv = load <vscale x 4 x i32>, ptr %p, align 16
  %x = load i32, ptr addrspace(256) %fs, align 4
  ret void
}

define i32 @two_returns(ptr %p, i1 %c) {
entry:
  br i1 %c, label %a, label %b
a:
  ret i32 1
b:
  %v = load i32, ptr %p, align 4
  ret i32 %v
}

declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memmove.p0.p0.i32(ptr, ptr, i32, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)
declare void @llvm.memcpy.inline.p0.p0.i64(ptr, ptr, i64, i1)
declare void @llvm.memset.inline.p0.i64(ptr, i8, i64, i1)
