; main with fill() inlined (clang-22 -O2 -gline-tables-only -fno-unroll-loops -fno-vectorize of:
;   1 static void fill(double *x, int n, double v) {
;   2   for (int i = 0; i < n; i++)
;   3     x[i] = v * i;
;   4 }
;   ...
;   8 int main(int argc, char **argv) {
;  10   fill(a, argc * 100, 2.0);
;  11   return (int)a[3];
; ): the guard and the loop are fill's code, the load after them main's.
; ModuleID = 'inlined.c'
source_filename = "inlined.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

@a = dso_local local_unnamed_addr global [1000 x double] zeroinitializer, align 16

; Function Attrs: nofree norecurse nosync nounwind memory(readwrite, argmem: none, inaccessiblemem: none, target_mem0: none, target_mem1: none) uwtable
define dso_local i32 @main(i32 noundef %0, ptr noundef readnone captures(none) %1) local_unnamed_addr #0 !dbg !13 {
  %3 = icmp sgt i32 %0, 0, !dbg !16
  br i1 %3, label %4, label %15, !dbg !19

4:                                                ; preds = %2
  %5 = mul nuw nsw i32 %0, 100, !dbg !20
  %6 = zext nneg i32 %5 to i64, !dbg !21
  br label %7, !dbg !22

7:                                                ; preds = %7, %4
  %8 = phi i64 [ 0, %4 ], [ %13, %7 ]
  %9 = trunc i64 %8 to i32, !dbg !23
  %10 = shl i32 %9, 1, !dbg !23
  %11 = uitofp i32 %10 to double, !dbg !23
  %12 = getelementptr inbounds nuw double, ptr @a, i64 %8, !dbg !24
  store double %11, ptr %12, align 8, !dbg !25, !tbaa !26
  %13 = add nuw nsw i64 %8, 1, !dbg !28
  %14 = icmp eq i64 %13, %6, !dbg !21
  br i1 %14, label %15, label %7, !dbg !29, !llvm.loop !30

15:                                               ; preds = %7, %2
  %16 = load double, ptr getelementptr inbounds nuw (i8, ptr @a, i64 24), align 8, !dbg !34, !tbaa !26
  %17 = fptosi double %16 to i32, !dbg !35
  ret i32 %17, !dbg !36
}

attributes #0 = { nofree norecurse nosync nounwind memory(readwrite, argmem: none, inaccessiblemem: none, target_mem0: none, target_mem1: none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7}
!llvm.ident = !{!8}
!llvm.errno.tbaa = !{!9}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: LineTablesOnly, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "inlined.c", directory: "/src")
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
!13 = distinct !DISubprogram(name: "main", scope: !1, file: !1, line: 8, type: !14, scopeLine: 8, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, keyInstructions: true)
!14 = !DISubroutineType(types: !15)
!15 = !{}
!16 = !DILocation(line: 2, column: 21, scope: !17, inlinedAt: !18, atomGroup: 8, atomRank: 1)
!17 = distinct !DISubprogram(name: "fill", scope: !1, file: !1, line: 1, type: !14, scopeLine: 1, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, keyInstructions: true)
!18 = distinct !DILocation(line: 10, column: 3, scope: !13)
!19 = !DILocation(line: 2, column: 3, scope: !17, inlinedAt: !18, atomGroup: 9, atomRank: 1)
!20 = !DILocation(line: 10, column: 16, scope: !13)
!21 = !DILocation(line: 2, column: 21, scope: !17, inlinedAt: !18, atomGroup: 2, atomRank: 1)
!22 = !DILocation(line: 2, column: 3, scope: !17, inlinedAt: !18)
!23 = !DILocation(line: 3, column: 14, scope: !17, inlinedAt: !18, atomGroup: 4, atomRank: 2)
!24 = !DILocation(line: 3, column: 5, scope: !17, inlinedAt: !18)
!25 = !DILocation(line: 3, column: 10, scope: !17, inlinedAt: !18, atomGroup: 4, atomRank: 1)
!26 = !{!27, !27, i64 0}
!27 = !{!"double", !11, i64 0}
!28 = !DILocation(line: 2, column: 27, scope: !17, inlinedAt: !18, atomGroup: 5, atomRank: 2)
!29 = !DILocation(line: 2, column: 3, scope: !17, inlinedAt: !18, atomGroup: 3, atomRank: 1)
!30 = distinct !{!30, !22, !31, !32, !33}
!31 = !DILocation(line: 3, column: 16, scope: !17, inlinedAt: !18)
!32 = !{!"llvm.loop.mustprogress"}
!33 = !{!"llvm.loop.unroll.disable"}
!34 = !DILocation(line: 11, column: 15, scope: !13, atomGroup: 1, atomRank: 3)
!35 = !DILocation(line: 11, column: 10, scope: !13, atomGroup: 1, atomRank: 2)
!36 = !DILocation(line: 11, column: 3, scope: !13, atomGroup: 1, atomRank: 1)
