; ModuleID = 'deferred.c'
source_filename = "deferred.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: nounwind uwtable
define dso_local range(i32 -2147483647, -2147483648) i32 @get(ptr noundef %0, i32 noundef %1) local_unnamed_addr #0 !dbg !14 {
    #dbg_value(ptr %0, !20, !DIExpression(), !22)
    #dbg_value(i32 %1, !21, !DIExpression(), !22)
  %3 = icmp slt i32 %1, 0, !dbg !23
  br i1 %3, label %4, label %5, !dbg !25

4:                                                ; preds = %2
  tail call void @slow(ptr noundef %0) #2, !dbg !26
  br label %10, !dbg !28

5:                                                ; preds = %2
  %6 = zext nneg i32 %1 to i64, !dbg !29
  %7 = getelementptr inbounds nuw i32, ptr %0, i64 %6, !dbg !29
  %8 = load i32, ptr %7, align 4, !dbg !29, !tbaa !10
  %9 = add nsw i32 %8, 1, !dbg !30
  br label %10, !dbg !31

10:                                               ; preds = %5, %4
  %11 = phi i32 [ 0, %4 ], [ %9, %5 ], !dbg !22
  ret i32 %11, !dbg !32
}

declare !dbg !33 void @slow(ptr noundef) local_unnamed_addr #1

; Function Attrs: nounwind uwtable
define dso_local i32 @always(ptr noundef %0) local_unnamed_addr #0 !dbg !36 {
    #dbg_value(ptr %0, !40, !DIExpression(), !41)
  tail call void @slow(ptr noundef %0) #2, !dbg !42
  %2 = load i32, ptr %0, align 4, !dbg !43, !tbaa !10
  ret i32 %2, !dbg !44
}

attributes #0 = { nounwind uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #2 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!llvm.ident = !{!9}
!llvm.errno.tbaa = !{!10}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "deferred.c", directory: "/src/kage/tests/ir", checksumkind: CSK_MD5, checksum: "c1a58669a603257fb5077207ca8f72f1")
!2 = !{i32 7, !"Dwarf Version", i32 5}
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 1, !"wchar_size", i32 4}
!5 = !{i32 8, !"PIC Level", i32 2}
!6 = !{i32 7, !"PIE Level", i32 2}
!7 = !{i32 7, !"uwtable", i32 2}
!8 = !{i32 7, !"debug-info-assignment-tracking", i1 true}
!9 = !{!"Debian clang version 22.1.8 (1~deb12u1)"}
!10 = !{!11, !11, i64 0}
!11 = !{!"int", !12, i64 0}
!12 = !{!"omnipotent char", !13, i64 0}
!13 = !{!"Simple C/C++ TBAA"}
!14 = distinct !DISubprogram(name: "get", scope: !1, file: !1, line: 5, type: !15, scopeLine: 5, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !19, keyInstructions: true)
!15 = !DISubroutineType(types: !16)
!16 = !{!17, !18, !17}
!17 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!18 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !17, size: 64)
!19 = !{!20, !21}
!20 = !DILocalVariable(name: "a", arg: 1, scope: !14, file: !1, line: 5, type: !18)
!21 = !DILocalVariable(name: "i", arg: 2, scope: !14, file: !1, line: 5, type: !17)
!22 = !DILocation(line: 0, scope: !14)
!23 = !DILocation(line: 6, column: 9, scope: !24, atomGroup: 1, atomRank: 2)
!24 = distinct !DILexicalBlock(scope: !14, file: !1, line: 6, column: 7)
!25 = !DILocation(line: 6, column: 9, scope: !24, atomGroup: 1, atomRank: 1)
!26 = !DILocation(line: 7, column: 5, scope: !27)
!27 = distinct !DILexicalBlock(scope: !24, file: !1, line: 6, column: 14)
!28 = !DILocation(line: 8, column: 5, scope: !27, atomGroup: 2, atomRank: 1)
!29 = !DILocation(line: 10, column: 10, scope: !14)
!30 = !DILocation(line: 10, column: 15, scope: !14, atomGroup: 3, atomRank: 2)
!31 = !DILocation(line: 10, column: 3, scope: !14, atomGroup: 3, atomRank: 1)
!32 = !DILocation(line: 11, column: 1, scope: !14, atomGroup: 4, atomRank: 1)
!33 = !DISubprogram(name: "slow", scope: !1, file: !1, line: 2, type: !34, flags: DIFlagPrototyped, spFlags: DISPFlagOptimized)
!34 = !DISubroutineType(types: !35)
!35 = !{null, !18}
!36 = distinct !DISubprogram(name: "always", scope: !1, file: !1, line: 14, type: !37, scopeLine: 14, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !39, keyInstructions: true)
!37 = !DISubroutineType(types: !38)
!38 = !{!17, !18}
!39 = !{!40}
!40 = !DILocalVariable(name: "a", arg: 1, scope: !36, file: !1, line: 14, type: !18)
!41 = !DILocation(line: 0, scope: !36)
!42 = !DILocation(line: 15, column: 3, scope: !36)
!43 = !DILocation(line: 16, column: 10, scope: !36, atomGroup: 1, atomRank: 2)
!44 = !DILocation(line: 16, column: 3, scope: !36, atomGroup: 1, atomRank: 1)
