; Hand-written: nothing to instrument, so the module must come out unchanged.
source_filename = "decls.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@g = global i32 0

declare void @external(ptr)

define void @__kage_helper(ptr %p) {
  store i32 1, ptr %p, align 4
  ret void
}
