; ModuleID = 'loop_after_call.c'
source_filename = "loop_after_call.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: nounwind uwtable
define dso_local i32 @sum_after_note(ptr noundef readonly captures(none) %0, i32 noundef %1) local_unnamed_addr #0 !dbg !14 {
    #dbg_value(ptr %0, !21, !DIExpression(), !26)
    #dbg_value(i32 %1, !22, !DIExpression(), !26)
  tail call void @note(i32 noundef %1) #2, !dbg !27
    #dbg_value(i32 0, !23, !DIExpression(), !26)
    #dbg_value(i32 0, !24, !DIExpression(), !28)
  %3 = icmp sgt i32 %1, 0, !dbg !29
  br i1 %3, label %4, label %6, !dbg !31

4:                                                ; preds = %2
  %5 = zext nneg i32 %1 to i64, !dbg !32
  br label %8, !dbg !33

6:                                                ; preds = %8, %2
  %7 = phi i32 [ 0, %2 ], [ %13, %8 ], !dbg !26
  ret i32 %7, !dbg !34

8:                                                ; preds = %4, %8
  %9 = phi i64 [ 0, %4 ], [ %14, %8 ]
  %10 = phi i32 [ 0, %4 ], [ %13, %8 ]
    #dbg_value(i64 %9, !24, !DIExpression(), !28)
    #dbg_value(i32 %10, !23, !DIExpression(), !26)
  %11 = getelementptr inbounds nuw i32, ptr %0, i64 %9, !dbg !35
  %12 = load i32, ptr %11, align 4, !dbg !35, !tbaa !10
  %13 = add nsw i32 %12, %10, !dbg !36
    #dbg_value(i32 %13, !23, !DIExpression(), !26)
  %14 = add nuw nsw i64 %9, 1, !dbg !37
    #dbg_value(i64 %14, !24, !DIExpression(), !28)
  %15 = icmp eq i64 %14, %5, !dbg !32
  br i1 %15, label %6, label %8, !dbg !38, !llvm.loop !39
}

declare !dbg !43 void @note(i32 noundef) local_unnamed_addr #1

attributes #0 = { nounwind uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #2 = { nounwind }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!llvm.ident = !{!9}
!llvm.errno.tbaa = !{!10}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "loop_after_call.c", directory: "/src/kage/tests/ir", checksumkind: CSK_MD5, checksum: "f041d94d87539d015c299bfed72dccfc")
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
!14 = distinct !DISubprogram(name: "sum_after_note", scope: !1, file: !1, line: 5, type: !15, scopeLine: 5, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !20, keyInstructions: true)
!15 = !DISubroutineType(types: !16)
!16 = !{!17, !18, !17}
!17 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!18 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !19, size: 64)
!19 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !17)
!20 = !{!21, !22, !23, !24}
!21 = !DILocalVariable(name: "a", arg: 1, scope: !14, file: !1, line: 5, type: !18)
!22 = !DILocalVariable(name: "n", arg: 2, scope: !14, file: !1, line: 5, type: !17)
!23 = !DILocalVariable(name: "s", scope: !14, file: !1, line: 7, type: !17)
!24 = !DILocalVariable(name: "i", scope: !25, file: !1, line: 8, type: !17)
!25 = distinct !DILexicalBlock(scope: !14, file: !1, line: 8, column: 3)
!26 = !DILocation(line: 0, scope: !14)
!27 = !DILocation(line: 6, column: 3, scope: !14)
!28 = !DILocation(line: 0, scope: !25)
!29 = !DILocation(line: 8, column: 21, scope: !30, atomGroup: 10, atomRank: 1)
!30 = distinct !DILexicalBlock(scope: !25, file: !1, line: 8, column: 3)
!31 = !DILocation(line: 8, column: 3, scope: !25, atomGroup: 11, atomRank: 1)
!32 = !DILocation(line: 8, column: 21, scope: !30, atomGroup: 3, atomRank: 1)
!33 = !DILocation(line: 8, column: 3, scope: !25)
!34 = !DILocation(line: 10, column: 3, scope: !14, atomGroup: 9, atomRank: 1)
!35 = !DILocation(line: 9, column: 10, scope: !30)
!36 = !DILocation(line: 9, column: 7, scope: !30, atomGroup: 5, atomRank: 2)
!37 = !DILocation(line: 8, column: 27, scope: !30, atomGroup: 6, atomRank: 2)
!38 = !DILocation(line: 8, column: 3, scope: !25, atomGroup: 4, atomRank: 1)
!39 = distinct !{!39, !33, !40, !41, !42}
!40 = !DILocation(line: 9, column: 13, scope: !25)
!41 = !{!"llvm.loop.mustprogress"}
!42 = !{!"llvm.loop.unroll.disable"}
!43 = !DISubprogram(name: "note", scope: !1, file: !1, line: 2, type: !44, flags: DIFlagPrototyped, spFlags: DISPFlagOptimized)
!44 = !DISubroutineType(types: !45)
!45 = !{null, !17}
