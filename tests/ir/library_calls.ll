; ModuleID = 'library_calls.c'
source_filename = "library_calls.c"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-pc-linux-gnu"

; Function Attrs: nofree norecurse nounwind memory(read, inaccessiblemem: none, target_mem0: none, target_mem1: none) uwtable
define dso_local i32 @count_equal(ptr noundef readonly captures(none) %0, ptr noundef readonly captures(none) %1, i32 noundef %2) local_unnamed_addr #0 !dbg !14 {
    #dbg_value(ptr %0, !24, !DIExpression(), !30)
    #dbg_value(ptr %1, !25, !DIExpression(), !30)
    #dbg_value(i32 %2, !26, !DIExpression(), !30)
    #dbg_value(i32 0, !27, !DIExpression(), !30)
    #dbg_value(i32 0, !28, !DIExpression(), !31)
  %4 = icmp sgt i32 %2, 0, !dbg !32
  br i1 %4, label %5, label %7, !dbg !34

5:                                                ; preds = %3
  %6 = zext nneg i32 %2 to i64, !dbg !35
  br label %9, !dbg !36

7:                                                ; preds = %9, %3
  %8 = phi i32 [ 0, %3 ], [ %17, %9 ], !dbg !30
  ret i32 %8, !dbg !37

9:                                                ; preds = %5, %9
  %10 = phi i64 [ 0, %5 ], [ %18, %9 ]
  %11 = phi i32 [ 0, %5 ], [ %17, %9 ]
    #dbg_value(i64 %10, !28, !DIExpression(), !31)
    #dbg_value(i32 %11, !27, !DIExpression(), !30)
  %12 = getelementptr inbounds nuw ptr, ptr %0, i64 %10, !dbg !38
  %13 = load ptr, ptr %12, align 8, !dbg !38, !tbaa !39
  %14 = tail call i32 @bcmp(ptr noundef nonnull dereferenceable(4) %13, ptr noundef nonnull dereferenceable(4) %1, i64 4), !dbg !42
  %15 = icmp eq i32 %14, 0, !dbg !43
  %16 = zext i1 %15 to i32, !dbg !43
  %17 = add nuw nsw i32 %11, %16, !dbg !44
    #dbg_value(i32 %17, !27, !DIExpression(), !30)
  %18 = add nuw nsw i64 %10, 1, !dbg !45
    #dbg_value(i64 %18, !28, !DIExpression(), !31)
  %19 = icmp eq i64 %18, %6, !dbg !35
  br i1 %19, label %7, label %9, !dbg !46, !llvm.loop !47
}

; Function Attrs: mustprogress nofree nounwind willreturn memory(argmem: readwrite, inaccessiblemem: readwrite) uwtable
define dso_local noalias ptr @copy(ptr noundef readonly captures(none) %0) local_unnamed_addr #1 !dbg !51 {
    #dbg_value(ptr %0, !56, !DIExpression(), !57)
  %2 = tail call noalias ptr @strdup(ptr noundef %0) #6, !dbg !58
  ret ptr %2, !dbg !59
}

; Function Attrs: mustprogress nofree nounwind willreturn memory(argmem: readwrite, inaccessiblemem: readwrite)
declare !dbg !60 noalias ptr @strdup(ptr noundef readonly captures(none)) local_unnamed_addr #2

; Function Attrs: mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable
define dso_local range(i32 -2147483647, -2147483648) i32 @mixed(i32 noundef %0) local_unnamed_addr #3 !dbg !62 {
    #dbg_value(i32 %0, !66, !DIExpression(), !67)
  %2 = tail call i32 @mix(i32 noundef %0) #7, !dbg !68
  %3 = add nsw i32 %2, 1, !dbg !69
  ret i32 %3, !dbg !70
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(none)
declare !dbg !71 i32 @mix(i32 noundef) local_unnamed_addr #4

; Function Attrs: nocallback nofree nounwind willreturn memory(argmem: read)
declare i32 @bcmp(ptr captures(none), ptr captures(none), i64) local_unnamed_addr #5

attributes #0 = { nofree norecurse nounwind memory(read, inaccessiblemem: none, target_mem0: none, target_mem1: none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #1 = { mustprogress nofree nounwind willreturn memory(argmem: readwrite, inaccessiblemem: readwrite) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #2 = { mustprogress nofree nounwind willreturn memory(argmem: readwrite, inaccessiblemem: readwrite) "alloc-family"="malloc" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #3 = { mustprogress nofree norecurse nosync nounwind willreturn memory(none) uwtable "min-legal-vector-width"="0" "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #4 = { mustprogress nocallback nofree nosync nounwind willreturn memory(none) "no-trapping-math"="true" "stack-protector-buffer-size"="8" "target-cpu"="x86-64" "target-features"="+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87" "tune-cpu"="generic" }
attributes #5 = { nocallback nofree nounwind willreturn memory(argmem: read) }
attributes #6 = { nounwind }
attributes #7 = { nocallback nounwind willreturn memory(none) }

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2, !3, !4, !5, !6, !7, !8}
!llvm.ident = !{!9}
!llvm.errno.tbaa = !{!10}

!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, producer: "Debian clang version 22.1.8 (1~deb12u1)", isOptimized: true, runtimeVersion: 0, emissionKind: FullDebug, splitDebugInlining: false, nameTableKind: None)
!1 = !DIFile(filename: "library_calls.c", directory: "/src/kage/tests/ir", checksumkind: CSK_MD5, checksum: "c2228f9ebef9277d3d311b9a983ed904")
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
!14 = distinct !DISubprogram(name: "count_equal", scope: !1, file: !1, line: 7, type: !15, scopeLine: 7, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !23, keyInstructions: true)
!15 = !DISubroutineType(types: !16)
!16 = !{!17, !18, !20, !17}
!17 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!18 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !19, size: 64)
!19 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !20)
!20 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !21, size: 64)
!21 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !22)
!22 = !DIBasicType(name: "char", size: 8, encoding: DW_ATE_signed_char)
!23 = !{!24, !25, !26, !27, !28}
!24 = !DILocalVariable(name: "words", arg: 1, scope: !14, file: !1, line: 7, type: !18)
!25 = !DILocalVariable(name: "key", arg: 2, scope: !14, file: !1, line: 7, type: !20)
!26 = !DILocalVariable(name: "n", arg: 3, scope: !14, file: !1, line: 7, type: !17)
!27 = !DILocalVariable(name: "equal", scope: !14, file: !1, line: 8, type: !17)
!28 = !DILocalVariable(name: "i", scope: !29, file: !1, line: 9, type: !17)
!29 = distinct !DILexicalBlock(scope: !14, file: !1, line: 9, column: 3)
!30 = !DILocation(line: 0, scope: !14)
!31 = !DILocation(line: 0, scope: !29)
!32 = !DILocation(line: 9, column: 21, scope: !33, atomGroup: 10, atomRank: 1)
!33 = distinct !DILexicalBlock(scope: !29, file: !1, line: 9, column: 3)
!34 = !DILocation(line: 9, column: 3, scope: !29, atomGroup: 11, atomRank: 1)
!35 = !DILocation(line: 9, column: 21, scope: !33, atomGroup: 3, atomRank: 1)
!36 = !DILocation(line: 9, column: 3, scope: !29)
!37 = !DILocation(line: 11, column: 3, scope: !14, atomGroup: 9, atomRank: 1)
!38 = !DILocation(line: 10, column: 21, scope: !33)
!39 = !{!40, !40, i64 0}
!40 = !{!"p1 omnipotent char", !41, i64 0}
!41 = !{!"any pointer", !12, i64 0}
!42 = !DILocation(line: 10, column: 14, scope: !33)
!43 = !DILocation(line: 10, column: 39, scope: !33)
!44 = !DILocation(line: 10, column: 11, scope: !33, atomGroup: 5, atomRank: 2)
!45 = !DILocation(line: 9, column: 27, scope: !33, atomGroup: 6, atomRank: 2)
!46 = !DILocation(line: 9, column: 3, scope: !29, atomGroup: 4, atomRank: 1)
!47 = distinct !{!47, !36, !48, !49, !50}
!48 = !DILocation(line: 10, column: 42, scope: !29)
!49 = !{!"llvm.loop.mustprogress"}
!50 = !{!"llvm.loop.unroll.disable"}
!51 = distinct !DISubprogram(name: "copy", scope: !1, file: !1, line: 15, type: !52, scopeLine: 15, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !55, keyInstructions: true)
!52 = !DISubroutineType(types: !53)
!53 = !{!54, !20}
!54 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !22, size: 64)
!55 = !{!56}
!56 = !DILocalVariable(name: "s", arg: 1, scope: !51, file: !1, line: 15, type: !20)
!57 = !DILocation(line: 0, scope: !51)
!58 = !DILocation(line: 15, column: 36, scope: !51, atomGroup: 1, atomRank: 2)
!59 = !DILocation(line: 15, column: 29, scope: !51, atomGroup: 1, atomRank: 1)
!60 = !DISubprogram(name: "strdup", scope: !61, file: !61, line: 187, type: !52, flags: DIFlagPrototyped, spFlags: DISPFlagOptimized)
!61 = !DIFile(filename: "/usr/include/string.h", directory: "", checksumkind: CSK_MD5, checksum: "0ee11a08692643b86154f96759d0f7fa")
!62 = distinct !DISubprogram(name: "mixed", scope: !1, file: !1, line: 19, type: !63, scopeLine: 19, flags: DIFlagPrototyped | DIFlagAllCallsDescribed, spFlags: DISPFlagDefinition | DISPFlagOptimized, unit: !0, retainedNodes: !65, keyInstructions: true)
!63 = !DISubroutineType(types: !64)
!64 = !{!17, !17}
!65 = !{!66}
!66 = !DILocalVariable(name: "x", arg: 1, scope: !62, file: !1, line: 19, type: !17)
!67 = !DILocation(line: 0, scope: !62)
!68 = !DILocation(line: 19, column: 27, scope: !62)
!69 = !DILocation(line: 19, column: 34, scope: !62, atomGroup: 1, atomRank: 2)
!70 = !DILocation(line: 19, column: 20, scope: !62, atomGroup: 1, atomRank: 1)
!71 = !DISubprogram(name: "mix", scope: !1, file: !1, line: 18, type: !63, flags: DIFlagPrototyped, spFlags: DISPFlagOptimized)
