; calls_pick with pick() inlined into its loop (clang-22 -O2 -gline-tables-only -fno-unroll-loops of:
;   1  volatile int v[64];
;   2  int out;
;   3  
;   4  static int pick(int i) {
;   5    if (v[i & 31] & 1)
;   6      return v[(i & 31) + 1];
;   7    return v[(i & 31) + 2] * 3;
;   8  }
;   9  
;  10  void calls_pick(int n) {
;  11    int s = 0;
;  12    for (int i = 0; i < n; i++)
;  13      s += pick(i);
;  14    out = s;
;  15  }
; ): the loop's header and the two branches are pick's code (a region without loops or
; calls, kept in registers in a count build), the latch is calls_pick's.
source_filename = "inlined_leaf.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@out = dso_local local_unnamed_addr global i32 0, align 4
@v = dso_local global [64 x i32] zeroinitializer, align 16

; Function Attrs: nofree norecurse nounwind memory(readwrite, argmem: none, target_mem0: none, target_mem1: none) uwtable
define dso_local void @calls_pick(i32 noundef %0) local_unnamed_addr #0 !dbg !13 {
  %2 = icmp sgt i32 %0, 0, !dbg !16
  br i1 %2, label %5, label %3, !dbg !17

3:                                                ; preds = %21, %1
  %4 = phi i32 [ 0, %1 ], [ %23, %21 ], !dbg !18
  store i32 %4, ptr @out, align 4, !dbg !19, !tbaa !9
  ret void, !dbg !20

5:                                                ; preds = %1, %21
  %6 = phi i32 [ %24, %21 ], [ 0, %1 ]
  %7 = phi i32 [ %23, %21 ], [ 0, %1 ]
  %8 = and i32 %6, 31, !dbg !21
  %9 = zext nneg i32 %8 to i64, !dbg !24
  %10 = getelementptr inbounds nuw i32, ptr @v, i64 %9, !dbg !24
  %11 = load volatile i32, ptr %10, align 4, !dbg !24, !tbaa !9
  %12 = and i32 %11, 1, !dbg !25
  %13 = icmp eq i32 %12, 0, !dbg !26
  br i1 %13, label %17, label %14, !dbg !27

14:                                               ; preds = %5
  %15 = getelementptr inbounds nuw i8, ptr %10, i64 4, !dbg !28
  %16 = load volatile i32, ptr %15, align 4, !dbg !29, !tbaa !9
  br label %21, !dbg !30

17:                                               ; preds = %5
  %18 = getelementptr inbounds nuw i8, ptr %10, i64 8, !dbg !31
  %19 = load volatile i32, ptr %18, align 4, !dbg !31, !tbaa !9
  %20 = mul nsw i32 %19, 3, !dbg !32
  br label %21, !dbg !33

21:                                               ; preds = %14, %17
  %22 = phi i32 [ %16, %14 ], [ %20, %17 ], !dbg !34
  %23 = add nsw i32 %22, %7, !dbg !35
  %24 = add nuw nsw i32 %6, 1, !dbg !36
  %25 = icmp eq i32 %24, %0, !dbg !37
  br i1 %25, label %3, label %5, !dbg !38, !llvm.loop !39
}

attributes #0 = { nofree norecurse nounwind memory(readwrite, argmem: none, target_mem0: none, target_mem1: none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7}
!llvm.ident = !{!8}
!llvm.errno.tbaa = !{!9}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "inlined_leaf.c", directory: "/src")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 8, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 2}
!8 = !{!"Debian clang version 22.1.8 (1~deb12u1)"}
!9 = !{!10, !10, i64 0}
!10 = !{!"int", !11, i64 0}
!11 = !{!"omnipotent char", !12, i64 0}
!12 = !{!"Simple C/C++ TBAA"}
!13 = distinct !DISubprogram(name: "calls_pick", scope: !1, file: !1, line: 10, type: !14, scopeLine: 10, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, keyInstructions: true)
!14 = !DISubroutineType(types: !15)
!15 = !{}
!16 = !DILocation(line: 12, column: 21, scope: !13, atomGroup: 10, atomRank: 1)
!17 = !DILocation(line: 12, column: 3, scope: !13, atomGroup: 11, atomRank: 1)
!18 = !DILocation(line: 0, scope: !13)
!19 = !DILocation(line: 14, column: 7, scope: !13, atomGroup: 8, atomRank: 1)
!20 = !DILocation(line: 15, column: 1, scope: !13, atomGroup: 9, atomRank: 1)
!21 = !DILocation(line: 5, column: 11, scope: !22, inlinedAt: !23)
!22 = distinct !DISubprogram(name: "pick", scope: !1, file: !1, line: 4, type: !14, scopeLine: 4, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, keyInstructions: true)
!23 = distinct !DILocation(line: 13, column: 10, scope: !13)
!24 = !DILocation(line: 5, column: 7, scope: !22, inlinedAt: !23)
!25 = !DILocation(line: 5, column: 17, scope: !22, inlinedAt: !23)
!26 = !DILocation(line: 5, column: 17, scope: !22, inlinedAt: !23, atomGroup: 1, atomRank: 2)
!27 = !DILocation(line: 5, column: 17, scope: !22, inlinedAt: !23, atomGroup: 1, atomRank: 1)
!28 = !DILocation(line: 6, column: 12, scope: !22, inlinedAt: !23)
!29 = !DILocation(line: 6, column: 12, scope: !22, inlinedAt: !23, atomGroup: 2, atomRank: 2)
!30 = !DILocation(line: 6, column: 5, scope: !22, inlinedAt: !23, atomGroup: 2, atomRank: 1)
!31 = !DILocation(line: 7, column: 10, scope: !22, inlinedAt: !23)
!32 = !DILocation(line: 7, column: 26, scope: !22, inlinedAt: !23, atomGroup: 3, atomRank: 2)
!33 = !DILocation(line: 7, column: 3, scope: !22, inlinedAt: !23, atomGroup: 3, atomRank: 1)
!34 = !DILocation(line: 0, scope: !22, inlinedAt: !23)
!35 = !DILocation(line: 13, column: 7, scope: !13, atomGroup: 5, atomRank: 2)
!36 = !DILocation(line: 12, column: 27, scope: !13, atomGroup: 6, atomRank: 2)
!37 = !DILocation(line: 12, column: 21, scope: !13, atomGroup: 3, atomRank: 1)
!38 = !DILocation(line: 12, column: 3, scope: !13, atomGroup: 4, atomRank: 1)
!39 = distinct !{!39, !40, !41, !42, !43}
!40 = !DILocation(line: 12, column: 3, scope: !13)
!41 = !DILocation(line: 13, column: 16, scope: !13)
!42 = !{!"llvm.loop.mustprogress"}
!43 = !{!"llvm.loop.unroll.disable"}
