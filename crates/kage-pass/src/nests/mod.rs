//! Selected loop nests and their versions (`KAGE_TOOL=loops`; docs/abi.md, "Loop nests").
//!
//! Runs at the start of clang's pipeline (src/shim.cpp, `kage_version_loops`), on loops as
//! the source wrote them: [`select`] reads which loops the build names (`KAGE_LOOPS`), each
//! selected loop that no selected loop encloses is the root of a nest, and [`version`]
//! clones the nest into an instrumented version with decision blocks at every level. The
//! program's code outside the nests is left as it is.

pub mod accesses;
pub mod scalars;
pub mod select;
pub mod version;
pub mod versions;

use kage_abi::loops::{Selection, LOOPS_VARIABLE};
use kage_abi::{symbols, Instrumentation, BUILD_TOOLS, NONE, TOOL_VARIABLE};
use llvm_sys::core::*;
use llvm_sys::prelude::*;
use llvm_sys::LLVMLinkage;

use crate::debuginfo;
use crate::ir::{self, c_string, FunctionCfg, RuntimeFunction};
use crate::loops::find_loops;
use crate::regions::StringPool;
use select::LineSpec;

extern "C" {
    /// Declares what a loop-nest runtime function may touch (src/shim.cpp).
    fn kage_declare_runtime_effects(function: LLVMValueRef, address_only: *const u32, count: u32);
}

/// The name of the module flag that marks a module whose nests are versioned.
const VERSIONED_FLAG: &str = "kage.loops.versioned";

/// Where a loop is in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopSource {
    pub file: String,
    pub first_line: u32,
    pub last_line: u32,
}

/// Versions the nests the compiler's environment selects, when it builds for the loops
/// tool. A `KAGE_LOOPS` that is malformed, or names a line of this module's source file
/// where no loop starts, stops the compilation with an error that names it. Returns
/// whether the module changed.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn version_module(module: LLVMModuleRef) -> bool {
    let tool = std::env::var(TOOL_VARIABLE).unwrap_or_default();
    let Some(build) = (BUILD_TOOLS.iter())
        .find(|t| t.name == tool && t.instrumentation.reads_pragmas())
        .map(|t| t.instrumentation)
    else {
        return false;
    };
    if build == Instrumentation::Select {
        return match select_among_versions(module) {
            Ok(changed) => changed,
            Err(e) => fail(&e),
        };
    }
    let value = std::env::var(LOOPS_VARIABLE).unwrap_or_default();
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| e.to_string());
    let specs = match select::parse_specs(&value, &read) {
        Ok(specs) => specs,
        Err(e) => fail(&format!("{LOOPS_VARIABLE}: {e}")),
    };
    match version_module_with(module, &specs, build) {
        Ok(changed) => changed,
        Err(e) => fail(&e),
    }
}

/// Stops the compiler with `message`: a build that silently measured nothing, or the wrong
/// loop, would be worse.
fn fail(message: &str) -> ! {
    eprintln!("kage: {message}");
    std::process::exit(1)
}

/// Versions the nests `specs` select in `module` for `build` (one of the instrumentations
/// that version loops). `Err` names a spec of this module's source file that selects no
/// loop, or a nest that cannot be versioned.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn version_module_with(
    module: LLVMModuleRef,
    specs: &[LineSpec],
    build: Instrumentation,
) -> Result<bool, String> {
    let flag = c_string(VERSIONED_FLAG);
    if !LLVMGetModuleFlag(module, flag.as_ptr(), VERSIONED_FLAG.len()).is_null() {
        return Ok(false); // the pipeline ran twice (LTO pre-link, then again)
    }
    let mut len = 0usize;
    let module_file = ir::lossy_string(LLVMGetSourceFileName(module, &mut len), len);
    // These builds run the first version of a `#pragma kage versions` switch, as a plain
    // compiler does; select builds choose among them.
    versions::remove_marks(module);

    // Find every selected root before changing anything.
    let annotated = annotated_functions(module);
    let mut matched = vec![false; specs.len()];
    let mut roots: Vec<(LLVMValueRef, LLVMBasicBlockRef, Vec<LoopSource>, Selection)> = Vec::new();
    let mut markers: Vec<LLVMValueRef> = Vec::new();
    let mut module_loop_lines: Vec<u32> = Vec::new();
    let mut func = LLVMGetFirstFunction(module);
    while !func.is_null() {
        if can_version(func) {
            let cfg = FunctionCfg::new(func);
            let forest = find_loops(&cfg.successors, 0);
            let sources: Vec<Option<LoopSource>> = (forest.loops.iter())
                .map(|lp| loop_source(&cfg, &lp.blocks, lp.header))
                .collect();
            let mut selected: Vec<Option<Selection>> = vec![None; forest.loops.len()];
            // `#pragma kage profile` before a loop: the loop its marker leads into.
            for (marker, block) in profile_markers(&cfg) {
                markers.push(marker);
                match marked_loop(&cfg, &forest, block) {
                    Some(k) => selected[k] = Some(Selection::Pragma),
                    None => {
                        return Err(format!(
                            "'#pragma kage profile' at {}:{} is not followed by a loop",
                            debug_file(marker),
                            LLVMGetDebugLocLine(marker)
                        ))
                    }
                }
            }
            // `#pragma kage profile` before a function: its outermost loops.
            if annotated.contains(&func) {
                for (k, lp) in forest.loops.iter().enumerate() {
                    if lp.parent.is_none() {
                        selected[k] = Some(Selection::Pragma);
                    }
                }
            }
            for (k, source) in sources.iter().enumerate() {
                let Some(source) = source else { continue };
                if select::names_file(&module_file, &source.file) || module_file == source.file {
                    module_loop_lines.push(source.first_line);
                }
                for (s, spec) in specs.iter().enumerate() {
                    if !select::names_file(&spec.file, &source.file) {
                        continue;
                    }
                    // A report's loop line is its region's first line, which may lie past
                    // the statement's (a `do` loop's body): the innermost loop around it.
                    let around = |j: usize| {
                        (sources[j].as_ref())
                            .is_some_and(|o| o.first_line <= spec.line && spec.line <= o.last_line)
                    };
                    let innermost_around = spec.from_report.is_some()
                        && around(k)
                        && !(0..forest.loops.len())
                            .any(|j| forest.loops[j].parent == Some(k) && around(j));
                    if spec.line == source.first_line || innermost_around {
                        matched[s] = true;
                        let how = if spec.from_report.is_some() {
                            Selection::Report
                        } else {
                            Selection::Line
                        };
                        selected[k] = selected[k].or(Some(how));
                    }
                }
            }
            for (k, lp) in forest.loops.iter().enumerate() {
                let Some(how) = selected[k] else { continue };
                let marked = |p| selected_or_inside(&forest.loops, &selected, p);
                if lp.parent.is_some_and(marked) {
                    continue; // part of an enclosing selected nest
                }
                let file = sources[k]
                    .as_ref()
                    .map_or_else(String::new, |s| s.file.clone());
                let nest_sources = (0..forest.loops.len())
                    .filter(|&j| j == k || is_inside(&forest.loops, j, k))
                    .map(|j| {
                        sources[j].clone().unwrap_or(LoopSource {
                            file: file.clone(),
                            first_line: 0,
                            last_line: 0,
                        })
                    })
                    .collect();
                roots.push((func, cfg.blocks[lp.header], nest_sources, how));
            }
        }
        func = LLVMGetNextFunction(func);
    }
    // The markers have done their work (the code generator would drop them anyway).
    for marker in markers {
        LLVMInstructionEraseFromParent(marker);
    }
    for (spec, _) in specs.iter().zip(&matched).filter(|(_, &m)| !m) {
        if spec.from_report.is_some() && select::names_file(&spec.file, &module_file) {
            // A report's loop may be the optimiser's (a loop made by jump threading, a
            // `switch` dispatch): there is no source loop to version, which is no error.
            eprintln!(
                "kage: {LOOPS_VARIABLE}: no source loop at {spec}: left out (a loop the \
                 optimiser made, or a report older than the source)"
            );
            continue;
        }
        if select::names_file(&spec.file, &module_file) {
            module_loop_lines.sort_unstable();
            module_loop_lines.dedup();
            let lines: Vec<String> = module_loop_lines.iter().map(u32::to_string).collect();
            return Err(format!(
                "{LOOPS_VARIABLE}: no loop starts at {spec} (loops in {module_file} start at \
                 lines {})",
                if lines.is_empty() {
                    "none".to_string()
                } else {
                    lines.join(", ")
                }
            ));
        }
    }
    if roots.is_empty() {
        return Ok(false);
    }

    // What each may touch: `enter`'s frame and `access`'s address are only kept.
    let declare = |symbol, address_only: &[u32]| {
        let function = RuntimeFunction::declare(module, symbol);
        kage_declare_runtime_effects(
            function.value,
            address_only.as_ptr(),
            address_only.len() as u32,
        );
        function
    };
    let calls = version::NestCalls {
        enter: declare(&symbols::LOOPS_ENTER, &[1]),
        decide: declare(&symbols::LOOPS_DECIDE, &[]),
        iter: declare(&symbols::LOOPS_ITER, &[]),
        exit: declare(&symbols::LOOPS_EXIT, &[]),
        trip: (build.reports_loop_accesses()).then(|| declare(&symbols::LOOPS_TRIP, &[])),
        frame_address: frame_address(module),
    };
    let report_access =
        (build.reports_loop_accesses()).then(|| declare(&symbols::LOOPS_ACCESS, &[2]));
    let mut strings = StringPool::new(module);
    for (func, header, sources, how) in roots {
        if build.reports_loop_accesses() {
            accesses::inline_small_callees(func, header);
        }
        let levels = match version::prepare(func, header) {
            Ok(levels) => levels,
            Err(why) => {
                let message = format!(
                    "the loop at {}:{} cannot be versioned: {why}",
                    sources[0].file, sources[0].first_line
                );
                if how != Selection::Report {
                    return Err(message);
                }
                // One of a report's hot loops: the others are still worth profiling.
                eprintln!("kage: {message}; left out");
                continue;
            }
        };
        if levels.len() != sources.len() {
            return Err(format!(
                "the loop at {}:{} changed shape while it was prepared",
                sources[0].file, sources[0].first_line
            ));
        }
        let function_name = function_name(func);
        let (nest_accesses, nest_scalars) = if build.reports_loop_accesses() {
            (
                accesses::memory_accesses(func, &levels),
                scalars::classify(func, &levels),
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let described = Described {
            levels: &levels,
            sources: &sources,
            function: &function_name,
            how,
            accesses: &nest_accesses,
            scalars: &nest_scalars,
        };
        let (nest, unsampled) = emit_nest(module, &described, &mut strings);
        let copies = version::version(module, func, &levels, nest, unsampled, &calls);
        if let Some(report) = &report_access {
            accesses::instrument(module, &nest_accesses, &copies, nest, report);
        }
    }
    let context = LLVMGetModuleContext(module);
    let one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(context), 1, 0));
    LLVMAddModuleFlag(
        module,
        llvm_sys::LLVMModuleFlagBehavior::LLVMModuleFlagBehaviorWarning,
        flag.as_ptr(),
        VERSIONED_FLAG.len(),
        one,
    );
    Ok(true)
}

/// Makes every `#pragma kage versions` switch of `module` a versioned nest (select builds,
/// [`versions`]). `Err` says where a switch is malformed.
///
/// # Safety
/// `module` must be a valid module that nothing else mutates meanwhile.
pub unsafe fn select_among_versions(module: LLVMModuleRef) -> Result<bool, String> {
    let flag = c_string(VERSIONED_FLAG);
    if !LLVMGetModuleFlag(module, flag.as_ptr(), VERSIONED_FLAG.len()).is_null() {
        return Ok(false); // the pipeline ran twice (LTO pre-link, then again)
    }
    let switches = versions::find(module)?;
    if switches.is_empty() {
        return Ok(false);
    }
    // What each may touch: the nest (its id) and the state, nothing of the program's.
    let declare = |symbol| {
        let function = RuntimeFunction::declare(module, symbol);
        kage_declare_runtime_effects(function.value, std::ptr::null(), 0);
        function
    };
    let calls = versions::SelectCalls {
        enter: declare(&symbols::SELECT_ENTER),
        next: declare(&symbols::SELECT_NEXT),
        exit: declare(&symbols::SELECT_EXIT),
    };
    let mut strings = StringPool::new(module);
    for switch in switches {
        versions::transform(module, switch, &calls, &mut strings);
    }
    let context = LLVMGetModuleContext(module);
    let one = LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(context), 1, 0));
    LLVMAddModuleFlag(
        module,
        llvm_sys::LLVMModuleFlagBehavior::LLVMModuleFlagBehaviorWarning,
        flag.as_ptr(),
        VERSIONED_FLAG.len(),
        one,
    );
    Ok(true)
}

/// Whether loop `j` lies inside loop `k` (`k` an ancestor of `j`).
fn is_inside(loops: &[crate::loops::Loop], j: usize, k: usize) -> bool {
    let mut up = loops[j].parent;
    while let Some(p) = up {
        if p == k {
            return true;
        }
        up = loops[p].parent;
    }
    false
}

/// Whether loop `k` or one of its ancestors is selected.
fn selected_or_inside(
    loops: &[crate::loops::Loop],
    selected: &[Option<Selection>],
    k: usize,
) -> bool {
    let mut up = Some(k);
    while let Some(p) = up {
        if selected[p].is_some() {
            return true;
        }
        up = loops[p].parent;
    }
    false
}

/// The string `#pragma kage profile` leaves in its marks.
const PROFILE_MARK: &str = "kage.profile";

/// The C string a constant global holds, without its terminating NULs (`None` for any other
/// value): the text of a pragma's mark.
unsafe fn global_string(value: LLVMValueRef) -> Option<String> {
    let global = LLVMIsAGlobalVariable(value);
    if global.is_null() {
        return None;
    }
    let init = LLVMGetInitializer(global);
    if init.is_null() || LLVMIsConstantString(init) == 0 {
        return None;
    }
    let mut len = 0usize;
    let bytes = LLVMGetAsString(init, &mut len);
    Some(
        ir::lossy_string(bytes, len)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// The mark text of an `llvm.annotation` call (`__builtin_annotation(x, "text")`), `None`
/// when `inst` is not one.
unsafe fn annotation_text(inst: LLVMValueRef) -> Option<String> {
    let annotation = ir::is_call_site(inst)
        && ir::direct_callee(inst)
            .is_some_and(|f| ir::value_name(f).starts_with("llvm.annotation."))
        && LLVMGetNumArgOperands(inst) >= 2;
    annotation
        .then(|| global_string(LLVMGetOperand(inst, 1)))
        .flatten()
}

/// Whether `value` is a global holding the C string [`PROFILE_MARK`].
unsafe fn is_profile_mark(value: LLVMValueRef) -> bool {
    global_string(value).is_some_and(|text| text == PROFILE_MARK)
}

/// The functions `#pragma kage profile` annotates (`llvm.global.annotations`).
unsafe fn annotated_functions(module: LLVMModuleRef) -> Vec<LLVMValueRef> {
    let table = LLVMGetNamedGlobal(module, c"llvm.global.annotations".as_ptr());
    if table.is_null() || LLVMGetInitializer(table).is_null() {
        return Vec::new();
    }
    let entries = LLVMGetInitializer(table);
    let mut out = Vec::new();
    for i in 0..LLVMGetNumOperands(entries) as u32 {
        let entry = LLVMGetOperand(entries, i);
        if entry.is_null() || LLVMGetNumOperands(entry) < 2 {
            continue;
        }
        let (annotated, mark) = (LLVMGetOperand(entry, 0), LLVMGetOperand(entry, 1));
        if !annotated.is_null() && is_profile_mark(mark) && !LLVMIsAFunction(annotated).is_null() {
            out.push(annotated);
        }
    }
    out
}

/// The marks `#pragma kage profile` left before loops in a function (`llvm.annotation`
/// calls of [`PROFILE_MARK`]), with their block's index.
unsafe fn profile_markers(cfg: &FunctionCfg) -> Vec<(LLVMValueRef, usize)> {
    let mut out = Vec::new();
    for (b, &block) in cfg.blocks.iter().enumerate() {
        for inst in ir::instructions(block) {
            if annotation_text(inst).is_some_and(|text| text == PROFILE_MARK) {
                out.push((inst, b));
            }
        }
    }
    out
}

/// The loop a mark in block `block` leads into: the first loop header reached through blocks
/// that branch unconditionally (the statement after the pragma is the loop).
fn marked_loop(
    cfg: &FunctionCfg,
    forest: &crate::loops::LoopForest,
    block: usize,
) -> Option<usize> {
    let mut at = block;
    for _ in 0..16 {
        let next = match cfg.successors[at].as_slice() {
            [only] => *only,
            _ => return None,
        };
        if let Some(k) = forest.loops.iter().position(|l| l.header == next) {
            return Some(k);
        }
        at = next;
    }
    None
}

/// The file of an instruction's debug location ("" without one).
unsafe fn debug_file(inst: LLVMValueRef) -> String {
    let mut len = 0u32;
    let name = LLVMGetDebugLocFilename(inst, &mut len);
    if name.is_null() {
        return String::new();
    }
    ir::lossy_string(name, len as usize)
}

/// Functions whose loops can be versioned: with a body, not the runtime's, not naked.
unsafe fn can_version(func: LLVMValueRef) -> bool {
    if LLVMIsDeclaration(func) != 0 || LLVMGetFirstBasicBlock(func).is_null() {
        return false;
    }
    if ir::value_name(func).starts_with("__kage_")
        || LLVMGetLinkage(func) == LLVMLinkage::LLVMAvailableExternallyLinkage
    {
        return false;
    }
    let kind = LLVMGetEnumAttributeKindForName(c"naked".as_ptr(), 5);
    kind == 0
        || LLVMGetEnumAttributeAtIndex(func, llvm_sys::LLVMAttributeFunctionIndex, kind).is_null()
}

/// Where the loop with `blocks` and `header` (indices into `cfg`) is in the source: the
/// lines of its `llvm.loop` metadata, else the line of its header's first located
/// instruction.
unsafe fn loop_source(cfg: &FunctionCfg, blocks: &[usize], header: usize) -> Option<LoopSource> {
    if let Some(declared) = debuginfo::declared_loop(cfg, blocks, header) {
        return Some(LoopSource {
            file: declared.file,
            first_line: declared.first_line,
            last_line: declared.last_line,
        });
    }
    // A loop without metadata (a `goto` loop): its header's first located instruction.
    let located = ir::instructions(cfg.blocks[header])
        .into_iter()
        .find(|&inst| LLVMGetDebugLocLine(inst) != 0)?;
    let line = LLVMGetDebugLocLine(located);
    let (mut len, mut dir_len) = (0u32, 0u32);
    let name = ir::lossy_string(LLVMGetDebugLocFilename(located, &mut len), len as usize);
    let dir = ir::lossy_string(
        LLVMGetDebugLocDirectory(located, &mut dir_len),
        dir_len as usize,
    );
    Some(LoopSource {
        file: debuginfo::join_path(&dir, &name),
        first_line: line,
        last_line: line,
    })
}

/// The function's source name (demangled).
unsafe fn function_name(func: LLVMValueRef) -> String {
    let symbol = ir::value_name(func);
    let symbol = symbol.strip_prefix('\u{1}').unwrap_or(&symbol);
    debuginfo::display_name(symbol)
}

/// `llvm.addressofreturnaddress.p0`, declared when missing, and its type.
unsafe fn frame_address(module: LLVMModuleRef) -> (LLVMValueRef, LLVMTypeRef) {
    let context = LLVMGetModuleContext(module);
    let ty = LLVMFunctionType(
        LLVMPointerTypeInContext(context, 0),
        std::ptr::null_mut(),
        0,
        0,
    );
    let name = c"llvm.addressofreturnaddress.p0";
    let existing = LLVMGetNamedFunction(module, name.as_ptr());
    let f = if existing.is_null() {
        LLVMAddFunction(module, name.as_ptr(), ty)
    } else {
        existing
    };
    (f, ty)
}

/// What a nest's descriptor says.
struct Described<'a> {
    levels: &'a [version::Level],
    sources: &'a [LoopSource],
    function: &'a str,
    how: Selection,
    accesses: &'a [accesses::NestAccess],
    scalars: &'a [scalars::NestScalar],
}

/// A private constant global holding `values` of `ty` (null for none).
unsafe fn constant_array(
    module: LLVMModuleRef,
    ty: LLVMTypeRef,
    mut values: Vec<LLVMValueRef>,
    name: &str,
) -> LLVMValueRef {
    if values.is_empty() {
        return LLVMConstNull(LLVMPointerTypeInContext(LLVMGetModuleContext(module), 0));
    }
    let init = LLVMConstArray2(ty, values.as_mut_ptr(), values.len() as u64);
    let global = LLVMAddGlobal(module, LLVMTypeOf(init), c_string(name).as_ptr());
    LLVMSetInitializer(global, init);
    LLVMSetGlobalConstant(global, 1);
    LLVMSetLinkage(global, LLVMLinkage::LLVMPrivateLinkage);
    global
}

/// Emits the nest's `struct kage_nest` (writable: the runtime writes its id and whether
/// sampling is over), its levels, accesses and scalars, and its counters of unsampled
/// entries; returns the nest and the counters.
unsafe fn emit_nest(
    module: LLVMModuleRef,
    nest: &Described,
    strings: &mut StringPool,
) -> (LLVMValueRef, LLVMValueRef) {
    let Described {
        levels, sources, ..
    } = *nest;
    let context = LLVMGetModuleContext(module);
    let i32t = LLVMInt32TypeInContext(context);
    let i64t = LLVMInt64TypeInContext(context);
    let ptr = LLVMPointerTypeInContext(context, 0);
    let c32 = |v: u32| LLVMConstInt(i32t, v as u64, 0);
    let mut level_fields = [i32t, i32t, i32t, i32t];
    let level_type = LLVMStructTypeInContext(context, level_fields.as_mut_ptr(), 4, 0);
    let depth = accesses::depths(levels);
    let level_values = (levels.iter().enumerate())
        .map(|(k, level)| {
            let mut fields = [
                c32(level.parent.map_or(NONE, |p| p as u32)),
                c32(depth[k]),
                c32(sources[k].first_line),
                c32(sources[k].last_line),
            ];
            LLVMConstNamedStruct(level_type, fields.as_mut_ptr(), 4)
        })
        .collect();
    let levels_global = constant_array(module, level_type, level_values, "__kage_nest_levels");

    let mut name_of = |name: &Option<String>| match name {
        Some(name) => strings.get(name),
        None => LLVMConstNull(ptr),
    };
    let mut access_fields = [i32t, i32t, i32t, i32t, i32t, i32t, ptr];
    let access_type = LLVMStructTypeInContext(context, access_fields.as_mut_ptr(), 7, 0);
    let access_values = (nest.accesses.iter())
        .map(|a| {
            let mut fields = [
                c32(a.level as u32),
                c32(a.writes as u32),
                c32(a.size),
                c32(a.line),
                c32(a.column),
                c32(0),
                name_of(&a.name),
            ];
            LLVMConstNamedStruct(access_type, fields.as_mut_ptr(), 7)
        })
        .collect();
    let accesses_global =
        constant_array(module, access_type, access_values, "__kage_nest_accesses");
    let mut scalar_fields = [i32t, i32t, i32t, i32t, i64t, ptr];
    let scalar_type = LLVMStructTypeInContext(context, scalar_fields.as_mut_ptr(), 6, 0);
    let scalar_values = (nest.scalars.iter())
        .map(|v| {
            let mut fields = [
                c32(v.level as u32),
                c32(v.kind as u32),
                c32(v.line),
                c32(v.operator.map_or(0, |c| c as u32)),
                LLVMConstInt(i64t, v.step as u64, 1),
                name_of(&v.name),
            ];
            LLVMConstNamedStruct(scalar_type, fields.as_mut_ptr(), 6)
        })
        .collect();
    let scalars_global = constant_array(module, scalar_type, scalar_values, "__kage_nest_scalars");

    // The counters of the entries that skip the runtime once sampling is over.
    let counters_type = LLVMArrayType2(i64t, 1 + levels.len() as u64);
    let counters = LLVMAddGlobal(module, counters_type, c"__kage_nest_unsampled".as_ptr());
    LLVMSetInitializer(counters, LLVMConstNull(counters_type));
    LLVMSetLinkage(counters, LLVMLinkage::LLVMPrivateLinkage);
    LLVMSetAlignment(counters, 8);

    let mut nest_fields = [
        i32t, i32t, ptr, ptr, ptr, i32t, i32t, ptr, i32t, i32t, ptr, ptr,
    ];
    let nest_type = LLVMStructTypeInContext(context, nest_fields.as_mut_ptr(), 12, 0);
    let mut fields = [
        c32(NONE),
        c32(levels.len() as u32),
        levels_global,
        strings.get(nest.function),
        strings.get(&sources[0].file),
        c32(nest.how as u32),
        c32(0),
        counters,
        c32(nest.accesses.len() as u32),
        c32(nest.scalars.len() as u32),
        accesses_global,
        scalars_global,
    ];
    let init = LLVMConstNamedStruct(nest_type, fields.as_mut_ptr(), 12);
    let global = LLVMAddGlobal(module, nest_type, c"__kage_nest".as_ptr());
    LLVMSetInitializer(global, init);
    LLVMSetLinkage(global, LLVMLinkage::LLVMPrivateLinkage);
    LLVMSetAlignment(global, 8);
    (global, counters)
}
