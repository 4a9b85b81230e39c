; ModuleID = 'nested_loops.c'
source_filename = "nested_loops.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind memory(argmem: read) uwtable
define dso_local i32 @sum2d(ptr noundef readonly captures(none) %0, i32 noundef %1, i32 noundef %2) local_unnamed_addr #0 !dbg !14 {
    #dbg_value(ptr %0, !21, !DIExpression(), !31)
    #dbg_value(i32 %1, !22, !DIExpression(), !31)
    #dbg_value(i32 %2, !23, !DIExpression(), !31)
    #dbg_value(i32 0, !24, !DIExpression(), !31)
    #dbg_value(i32 0, !25, !DIExpression(), !32)
  %4 = icmp sgt i32 %1, 0, !dbg !33
  br i1 %4, label %5, label %15, !dbg !34

5:                                                ; preds = %3
  %6 = icmp sgt i32 %2, 0
  %7 = zext i32 %2 to i64, !dbg !34
  %8 = zext nneg i32 %1 to i64, !dbg !35
  br label %9, !dbg !34

9:                                                ; preds = %5, %17
  %10 = phi i64 [ 0, %5 ], [ %19, %17 ]
  %11 = phi i32 [ 0, %5 ], [ %18, %17 ]
    #dbg_value(i64 %10, !25, !DIExpression(), !32)
    #dbg_value(i32 0, !27, !DIExpression(), !36)
    #dbg_value(i32 %11, !24, !DIExpression(), !31)
  br i1 %6, label %12, label %17, !dbg !37

12:                                               ; preds = %9
  %13 = mul nuw nsw i64 %10, %7
  %14 = getelementptr inbounds nuw i32, ptr %0, i64 %13, !dbg !37
  br label %21, !dbg !37

15:                                               ; preds = %17, %3
  %16 = phi i32 [ 0, %3 ], [ %18, %17 ], !dbg !38
  ret i32 %16, !dbg !39

17:                                               ; preds = %21, %9
  %18 = phi i32 [ %11, %9 ], [ %26, %21 ], !dbg !31
  %19 = add nuw nsw i64 %10, 1, !dbg !40
    #dbg_value(i64 %19, !25, !DIExpression(), !32)
    #dbg_value(i32 %18, !24, !DIExpression(), !31)
  %20 = icmp eq i64 %19, %8, !dbg !35
  br i1 %20, label %15, label %9, !dbg !41, !llvm.loop !42

21:                                               ; preds = %12, %21
  %22 = phi i64 [ 0, %12 ], [ %27, %21 ]
  %23 = phi i32 [ %11, %12 ], [ %26, %21 ]
    #dbg_value(i64 %22, !27, !DIExpression(), !36)
    #dbg_value(i32 %23, !24, !DIExpression(), !31)
  %24 = getelementptr inbounds nuw i32, ptr %14, i64 %22, !dbg !47
  %25 = load i32, ptr %24, align 4, !dbg !47, !tbaa !10
  %26 = add nsw i32 %25, %23, !dbg !50
    #dbg_value(i32 %26, !24, !DIExpression(), !31)
  %27 = add nuw nsw i64 %22, 1, !dbg !51
    #dbg_value(i64 %27, !27, !DIExpression(), !36)
  %28 = icmp eq i64 %27, %7, !dbg !52
  br i1 %28, label %17, label %21, !dbg !53, !llvm.loop !54
}

; Function Attrs: nofree norecurse nosync nounwind memory(argmem: read) uwtable
define dso_local range(i32 -2147483648, 2147483647) i32 @find(ptr noundef readonly captures(none) %0, i32 noundef %1, i32 noundef %2) local_unnamed_addr #0 !dbg !57 {
    #dbg_value(ptr %0, !59, !DIExpression(), !64)
    #dbg_value(i32 %1, !60, !DIExpression(), !64)
    #dbg_value(i32 %2, !61, !DIExpression(), !64)
    #dbg_value(i32 0, !62, !DIExpression(), !65)
  %4 = icmp sgt i32 %1, 0, !dbg !66
  br i1 %4, label %5, label %18, !dbg !68

5:                                                ; preds = %3
  %6 = zext nneg i32 %1 to i64, !dbg !69
  br label %7, !dbg !70

7:                                                ; preds = %5, %13
  %8 = phi i64 [ 0, %5 ], [ %14, %13 ]
    #dbg_value(i64 %8, !62, !DIExpression(), !65)
  %9 = getelementptr inbounds nuw i32, ptr %0, i64 %8, !dbg !71
  %10 = load i32, ptr %9, align 4, !dbg !71, !tbaa !10
    #dbg_value(i32 %10, !74, !DIExpression(), !79)
  %11 = mul nsw i32 %10, %10, !dbg !81
  %12 = icmp eq i32 %11, %2, !dbg !82
  br i1 %12, label %16, label %13, !dbg !83

13:                                               ; preds = %7
  %14 = add nuw nsw i64 %8, 1, !dbg !84
    #dbg_value(i64 %14, !62, !DIExpression(), !65)
  %15 = icmp eq i64 %14, %6, !dbg !69
  br i1 %15, label %18, label %7, !dbg !85, !llvm.loop !86

16:                                               ; preds = %7
  %17 = trunc nuw nsw i64 %8 to i32
  br label %18, !dbg !88

18:                                               ; preds = %13, %16, %3
  %19 = phi i32 [ -1, %3 ], [ %17, %16 ], [ -1, %13 ]
  ret i32 %19, !dbg !88
}

attributes #0 = { nofree norecurse nosync nounwind memory(argmem: read) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!llvm.ident = !{!9}
!llvm.errno.tbaa = !{!10}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "nested_loops.c", directory: "/src/kage/tests/ir", checksumkind: CSK_MD5, checksum: "c8dbe6e804f5c76d44615d360dce24d3")
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
!14 = distinct !DISubprogram(name: "sum2d", scope: !1, file: !1, line: 4, type: !15, scopeLine: 4, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !20, keyInstructions: true)
!15 = !DISubroutineType(types: !16)
!16 = !{!17, !18, !17, !17}
!17 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!18 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !19, size: 64)
!19 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !17)
!20 = !{!21, !22, !23, !24, !25, !27}
!21 = !DILocalVariable(name: "a", arg: 1, scope: !14, file: !1, line: 4, type: !18)
!22 = !DILocalVariable(name: "n", arg: 2, scope: !14, file: !1, line: 4, type: !17)
!23 = !DILocalVariable(name: "m", arg: 3, scope: !14, file: !1, line: 4, type: !17)
!24 = !DILocalVariable(name: "s", scope: !14, file: !1, line: 5, type: !17)
!25 = !DILocalVariable(name: "i", scope: !26, file: !1, line: 6, type: !17)
!26 = distinct !DILexicalBlock(scope: !14, file: !1, line: 6, column: 3)
!27 = !DILocalVariable(name: "j", scope: !28, file: !1, line: 7, type: !17)
!28 = distinct !DILexicalBlock(scope: !29, file: !1, line: 7, column: 5)
!29 = distinct !DILexicalBlock(scope: !30, file: !1, line: 6, column: 31)
!30 = distinct !DILexicalBlock(scope: !26, file: !1, line: 6, column: 3)
!31 = !DILocation(line: 0, scope: !14)
!32 = !DILocation(line: 0, scope: !26)
!33 = !DILocation(line: 6, column: 21, scope: !30, atomGroup: 17, atomRank: 1)
!34 = !DILocation(line: 6, column: 3, scope: !26, atomGroup: 18, atomRank: 1)
!35 = !DILocation(line: 6, column: 21, scope: !30, atomGroup: 3, atomRank: 1)
!36 = !DILocation(line: 0, scope: !28)
!37 = !DILocation(line: 7, column: 5, scope: !28, atomGroup: 16, atomRank: 1)
!38 = !DILocation(line: 5, column: 7, scope: !14, atomGroup: 1, atomRank: 1)
!39 = !DILocation(line: 11, column: 3, scope: !14, atomGroup: 14, atomRank: 1)
!40 = !DILocation(line: 6, column: 27, scope: !30, atomGroup: 11, atomRank: 2)
!41 = !DILocation(line: 6, column: 3, scope: !26, atomGroup: 4, atomRank: 1)
!42 = distinct !{!42, !43, !44, !45, !46}
!43 = !DILocation(line: 6, column: 3, scope: !26)
!44 = !DILocation(line: 10, column: 3, scope: !26)
!45 = !{!"llvm.loop.mustprogress"}
!46 = !{!"llvm.loop.unroll.disable"}
!47 = !DILocation(line: 8, column: 12, scope: !48)
!48 = distinct !DILexicalBlock(scope: !49, file: !1, line: 7, column: 33)
!49 = distinct !DILexicalBlock(scope: !28, file: !1, line: 7, column: 5)
!50 = !DILocation(line: 8, column: 9, scope: !48, atomGroup: 8, atomRank: 2)
!51 = !DILocation(line: 7, column: 29, scope: !49, atomGroup: 9, atomRank: 2)
!52 = !DILocation(line: 7, column: 23, scope: !49, atomGroup: 6, atomRank: 1)
!53 = !DILocation(line: 7, column: 5, scope: !28, atomGroup: 7, atomRank: 1)
!54 = distinct !{!54, !55, !56, !45, !46}
!55 = !DILocation(line: 7, column: 5, scope: !28)
!56 = !DILocation(line: 9, column: 5, scope: !28)
!57 = distinct !DISubprogram(name: "find", scope: !1, file: !1, line: 14, type: !15, scopeLine: 14, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !58, keyInstructions: true)
!58 = !{!59, !60, !61, !62}
!59 = !DILocalVariable(name: "a", arg: 1, scope: !57, file: !1, line: 14, type: !18)
!60 = !DILocalVariable(name: "n", arg: 2, scope: !57, file: !1, line: 14, type: !17)
!61 = !DILocalVariable(name: "key", arg: 3, scope: !57, file: !1, line: 14, type: !17)
!62 = !DILocalVariable(name: "i", scope: !63, file: !1, line: 15, type: !17)
!63 = distinct !DILexicalBlock(scope: !57, file: !1, line: 15, column: 3)
!64 = !DILocation(line: 0, scope: !57)
!65 = !DILocation(line: 0, scope: !63)
!66 = !DILocation(line: 15, column: 21, scope: !67, atomGroup: 19, atomRank: 1)
!67 = distinct !DILexicalBlock(scope: !63, file: !1, line: 15, column: 3)
!68 = !DILocation(line: 15, column: 3, scope: !63, atomGroup: 20, atomRank: 1)
!69 = !DILocation(line: 15, column: 21, scope: !67, atomGroup: 2, atomRank: 1)
!70 = !DILocation(line: 15, column: 3, scope: !63)
!71 = !DILocation(line: 16, column: 16, scope: !72)
!72 = distinct !DILexicalBlock(scope: !73, file: !1, line: 16, column: 9)
!73 = distinct !DILexicalBlock(scope: !67, file: !1, line: 15, column: 31)
!74 = !DILocalVariable(name: "x", arg: 1, scope: !75, file: !1, line: 2, type: !17)
!75 = distinct !DISubprogram(name: "square", scope: !1, file: !1, line: 2, type: !76, scopeLine: 2, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagLocalToUnit | DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !78, keyInstructions: true)
!76 = !DISubroutineType(types: !77)
!77 = !{!17, !17}
!78 = !{!74}
!79 = !DILocation(line: 0, scope: !75, inlinedAt: !80)
!80 = distinct !DILocation(line: 16, column: 9, scope: !72)
!81 = !DILocation(line: 2, column: 37, scope: !75, inlinedAt: !80, atomGroup: 1, atomRank: 2)
!82 = !DILocation(line: 16, column: 22, scope: !72, atomGroup: 4, atomRank: 2)
!83 = !DILocation(line: 16, column: 22, scope: !72, atomGroup: 4, atomRank: 1)
!84 = !DILocation(line: 15, column: 27, scope: !67, atomGroup: 6, atomRank: 2)
!85 = !DILocation(line: 15, column: 3, scope: !63, atomGroup: 3, atomRank: 1)
!86 = distinct !{!86, !70, !87, !45, !46}
!87 = !DILocation(line: 18, column: 3, scope: !63)
!88 = !DILocation(line: 20, column: 1, scope: !57, atomGroup: 9, atomRank: 1)
