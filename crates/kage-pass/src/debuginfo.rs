//! Reading source lines, files and inlined calls from debug info, and choosing debug
//! locations for hooks.

use std::collections::HashMap;
use std::ffi::c_char;

use llvm_sys::core::LLVMGetModuleContext;
use llvm_sys::debuginfo::{
    LLVMDIBuilderCreateDebugLocation, LLVMDIFileGetDirectory, LLVMDIFileGetFilename,
    LLVMDILocationGetColumn, LLVMDILocationGetInlinedAt, LLVMDILocationGetLine,
    LLVMDILocationGetScope, LLVMDIScopeGetFile, LLVMDISubprogramGetLine, LLVMGetSubprogram,
    LLVMInstructionGetDebugLoc,
};
use llvm_sys::prelude::{LLVMMetadataRef, LLVMModuleRef, LLVMValueRef};

use crate::ir;
use crate::region_tree::{Location, Site};

extern "C" {
    /// The subprogram a local scope lies in; null for other metadata (src/shim.cpp).
    fn kage_di_scope_subprogram(scope: LLVMMetadataRef) -> LLVMMetadataRef;
    /// A subprogram's name or linkage name, not NUL-terminated (src/shim.cpp).
    fn kage_di_subprogram_name(
        subprogram: LLVMMetadataRef,
        linkage: bool,
        len: *mut usize,
    ) -> *const c_char;
    /// The start and end `DILocation`s of a loop's `llvm.loop` metadata on its back-edge
    /// branch (src/shim.cpp).
    fn kage_loop_locations(
        branch: LLVMValueRef,
        start: *mut LLVMMetadataRef,
        end: *mut LLVMMetadataRef,
    ) -> bool;
    /// How many loops (`table` 0) or functions (1) the early pass recorded as the source
    /// wrote them (src/shim.cpp).
    fn kage_written_count(module: LLVMModuleRef, table: u32) -> u32;
    /// One of them: its function's subprogram, first and last lines.
    fn kage_written_entry(
        module: LLVMModuleRef,
        table: u32,
        index: u32,
        subprogram: *mut LLVMMetadataRef,
        first: *mut u32,
        last: *mut u32,
    ) -> bool;
}

/// The longest inlined-at chain followed; valid IR's are finite, this only guards against
/// malformed metadata.
const MAX_CHAIN: usize = 10_000;

/// One call the optimiser inlined into the function.
#[derive(Debug, Clone)]
pub struct InlineSite {
    /// The callee's `DISubprogram` (null when its scope has none).
    pub callee: LLVMMetadataRef,
    /// Where the call is: file, line and column in the caller's source.
    pub call_file: String,
    pub call_line: u32,
    pub call_column: u32,
    /// The inlined call this call was itself in, if any.
    pub parent: Option<Site>,
}

/// The inlined calls of one function, each numbered once ([`Site`]).
#[derive(Default)]
pub struct InlineSites {
    pub sites: Vec<InlineSite>,
    /// By the call's `DILocation` (unique per chain of calls: it names its own
    /// inlined-at) and the copy ([`CallCopy`]: 0 for code the optimiser did not duplicate).
    index: HashMap<(LLVMMetadataRef, u32), Site>,
}

/// Which copy of an inlined call an instruction is in, where the optimiser laid copies of
/// the call's code one after another (a loop around the call unrolled whole): the depth of
/// the copied call in the instruction's chain (0: called from the function itself) and the
/// copy's number (1, 2, ...; the first copy is the call's own code). Each copy is a call
/// site of its own: the calls it makes, at deeper levels, too.
pub type CallCopy = (usize, u32);

impl InlineSites {
    /// Where `inst`'s code comes from (see [`Location`]), its inlined calls numbered here;
    /// `None` when it has no debug location.
    ///
    /// # Safety
    /// `inst` must be a valid instruction.
    pub unsafe fn location(&mut self, inst: LLVMValueRef) -> Option<Location> {
        self.location_in_copy(inst, None)
    }

    /// [`location`](Self::location) for an instruction in copy `copy` of an inlined call.
    ///
    /// # Safety
    /// As for [`location`](Self::location).
    pub unsafe fn location_in_copy(
        &mut self,
        inst: LLVMValueRef,
        copy: Option<CallCopy>,
    ) -> Option<Location> {
        let own = LLVMInstructionGetDebugLoc(inst);
        if own.is_null() {
            return None;
        }
        // Outermost first: levels[0] is in the function's own source.
        let mut levels = vec![own];
        while levels.len() < MAX_CHAIN {
            let outer = LLVMDILocationGetInlinedAt(levels[levels.len() - 1]);
            if outer.is_null() {
                break;
            }
            levels.push(outer);
        }
        levels.reverse();
        let mut sites = Vec::with_capacity(levels.len() - 1);
        for j in 1..levels.len() {
            let call = levels[j - 1];
            let parent = sites.last().copied();
            let key = (
                call,
                copy.filter(|&(depth, _)| j > depth).map_or(0, |c| c.1),
            );
            let site = match self.index.get(&key) {
                Some(&site) => site,
                None => {
                    let site = self.sites.len() as Site;
                    self.sites.push(InlineSite {
                        callee: kage_di_scope_subprogram(LLVMDILocationGetScope(levels[j])),
                        call_file: scope_file(LLVMDILocationGetScope(call)),
                        call_line: LLVMDILocationGetLine(call),
                        call_column: LLVMDILocationGetColumn(call),
                        parent,
                    });
                    self.index.insert(key, site);
                    site
                }
            };
            sites.push(site);
        }
        let lines = levels.iter().map(|&l| LLVMDILocationGetLine(l)).collect();
        Some(Location {
            sites,
            lines,
            column: LLVMDILocationGetColumn(own),
        })
    }
}

/// What a `DISubprogram` says of its function: the name to show (demangled from the linkage
/// name where there is one), the linkage name (the name when there is none), its file and
/// its line (0 = unknown).
///
/// # Safety
/// `subprogram` must be null or a valid metadata node.
pub unsafe fn subprogram_identity(subprogram: LLVMMetadataRef) -> (String, String, String, u32) {
    if subprogram.is_null() {
        return (String::new(), String::new(), String::new(), 0);
    }
    let text = |linkage| {
        let mut len = 0usize;
        let ptr = kage_di_subprogram_name(subprogram, linkage, &mut len);
        ir::lossy_string(ptr, len)
    };
    let (name, linkage) = (text(false), text(true));
    let symbol = if linkage.is_empty() {
        name.clone()
    } else {
        linkage
    };
    let shown = if symbol.starts_with("_Z") {
        display_name(&symbol)
    } else {
        name
    };
    (
        shown,
        symbol,
        scope_file(subprogram),
        LLVMDISubprogramGetLine(subprogram),
    )
}

/// The demangled name for C++ (`_Z...`) symbols, else the symbol itself.
pub fn display_name(symbol: &str) -> String {
    if symbol.starts_with("_Z") {
        if let Ok(parsed) = cpp_demangle::Symbol::new(symbol) {
            if let Ok(demangled) = parsed.demangle(&cpp_demangle::DemangleOptions::default()) {
                return demangled;
            }
        }
    }
    symbol.to_string()
}

/// A scope's file as `directory/filename`; "" when unknown.
unsafe fn scope_file(scope: LLVMMetadataRef) -> String {
    if scope.is_null() {
        return String::new();
    }
    let file = LLVMDIScopeGetFile(scope);
    if file.is_null() {
        return String::new();
    }
    let mut len = 0u32;
    let dir = ir::lossy_string(LLVMDIFileGetDirectory(file, &mut len), len as usize);
    let mut len = 0u32;
    let name = ir::lossy_string(LLVMDIFileGetFilename(file, &mut len), len as usize);
    join_path(&dir, &name)
}

/// Where a loop is in the source, as its `llvm.loop` metadata says: from its keyword to its
/// end, in the source of the function the loop is written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredLoop {
    /// The file of the loop's start: `directory/filename`.
    pub file: String,
    pub first_line: u32,
    pub last_line: u32,
    /// The inlined calls the loop's code is in, outermost first: each call's line and
    /// column in its caller (empty when the loop is the function's own).
    pub calls: Vec<(u32, u32)>,
    /// The start's `DILocation` (uniqued: two loops with the same one are one source loop,
    /// at the same column in the same copy of the same inlined call).
    pub start: LLVMMetadataRef,
}

/// The [`DeclaredLoop`] of the loop of `blocks` (indices into `cfg`) headed by `header`, from
/// the metadata of its back-edge branches; `None` when none has a location (a `goto` loop,
/// a loop the optimiser made, or a copy of a loop that it left without one: LLVM 22's
/// vectorised loops, the remainders of unrolled loops).
///
/// # Safety
/// `cfg` must describe a valid function.
pub unsafe fn declared_loop(
    cfg: &ir::FunctionCfg,
    blocks: &[usize],
    header: usize,
) -> Option<DeclaredLoop> {
    let latches = (blocks.iter()).filter(|&&b| cfg.successors[b].contains(&header));
    for &b in latches {
        let branch = llvm_sys::core::LLVMGetBasicBlockTerminator(cfg.blocks[b]);
        let (mut start, mut end) = (std::ptr::null_mut(), std::ptr::null_mut());
        if !kage_loop_locations(branch, &mut start, &mut end) {
            continue;
        }
        let first_line = LLVMDILocationGetLine(start);
        if first_line == 0 {
            continue;
        }
        let mut calls = Vec::new();
        let mut at = LLVMDILocationGetInlinedAt(start);
        while !at.is_null() && calls.len() < MAX_CHAIN {
            calls.push((LLVMDILocationGetLine(at), LLVMDILocationGetColumn(at)));
            at = LLVMDILocationGetInlinedAt(at);
        }
        calls.reverse();
        return Some(DeclaredLoop {
            file: scope_file(LLVMDILocationGetScope(start)),
            first_line,
            last_line: LLVMDILocationGetLine(end).max(first_line),
            calls,
            start,
        });
    }
    None
}

/// The loops and functions of a module as the source wrote them, recorded at the start of
/// the pipeline before the optimiser copied, changed or inlined any (src/shim.cpp,
/// `recordWrittenSource`), by function (`DISubprogram`).
#[derive(Default)]
pub struct WrittenSource {
    /// Each function's loops: first and last lines.
    loops: HashMap<LLVMMetadataRef, Vec<(u32, u32)>>,
    /// Each function's last line of code.
    function_ends: HashMap<LLVMMetadataRef, u32>,
}

impl WrittenSource {
    /// What the early pass recorded in `module` (nothing, for a module it did not see).
    ///
    /// # Safety
    /// `module` must be a valid module.
    pub unsafe fn of_module(module: LLVMModuleRef) -> Self {
        let mut written = WrittenSource::default();
        for table in [0, 1] {
            for i in 0..kage_written_count(module, table) {
                let (mut subprogram, mut first, mut last) = (std::ptr::null_mut(), 0, 0);
                if !kage_written_entry(module, table, i, &mut subprogram, &mut first, &mut last) {
                    continue;
                }
                if table == 0 {
                    written
                        .loops
                        .entry(subprogram)
                        .or_default()
                        .push((first, last));
                } else {
                    let end = written.function_ends.entry(subprogram).or_default();
                    *end = (*end).max(last);
                }
            }
        }
        written
    }

    /// The loops of the function of `subprogram`: first and last lines.
    pub fn loops(&self, subprogram: LLVMMetadataRef) -> &[(u32, u32)] {
        self.loops.get(&subprogram).map_or(&[], Vec::as_slice)
    }

    /// The last line of the code of the function of `subprogram`.
    pub fn function_end(&self, subprogram: LLVMMetadataRef) -> Option<u32> {
        self.function_ends.get(&subprogram).copied()
    }
}

/// The line of the function's `DISubprogram`, if it has one with a non-zero line.
///
/// # Safety
/// `func` must be a valid function.
pub unsafe fn subprogram_line(func: LLVMValueRef) -> Option<u32> {
    let subprogram = LLVMGetSubprogram(func);
    if subprogram.is_null() {
        return None;
    }
    Some(LLVMDISubprogramGetLine(subprogram)).filter(|&line| line != 0)
}

/// The function's source file from its `DISubprogram`: `directory/filename`, or the
/// filename alone when it is already absolute or there is no directory; "" when unknown.
///
/// # Safety
/// `func` must be a valid function.
pub unsafe fn function_file(func: LLVMValueRef) -> String {
    scope_file(LLVMGetSubprogram(func))
}

/// `dir/name`, unless `name` is absolute or `dir` is empty.
pub fn join_path(dir: &str, name: &str) -> String {
    if name.starts_with('/') || dir.is_empty() {
        name.to_string()
    } else if name.is_empty() {
        String::new()
    } else {
        format!("{}/{}", dir.trim_end_matches('/'), name)
    }
}

/// Picks the debug location for hooks inserted in one function: the instrumented
/// instruction's own location, else the first location in its block, else a line-0
/// location in the function's subprogram (what LLVM uses for compiler-made code), else none
/// (the function has no debug info, so its calls need none).
pub struct HookLocations {
    /// Line-0 location scoped to the function's subprogram, when it has one.
    fallback: LLVMMetadataRef,
}

impl HookLocations {
    /// # Safety
    /// `module` and `func` must be valid, `func` defined in `module`.
    pub unsafe fn new(module: LLVMModuleRef, func: LLVMValueRef) -> Self {
        let subprogram = LLVMGetSubprogram(func);
        let fallback = if subprogram.is_null() {
            std::ptr::null_mut()
        } else {
            LLVMDIBuilderCreateDebugLocation(
                LLVMGetModuleContext(module),
                0,
                0,
                subprogram,
                std::ptr::null_mut(),
            )
        };
        HookLocations { fallback }
    }

    /// The location for a hook placed at `inst` (null means "no location").
    ///
    /// # Safety
    /// `inst` must be a valid instruction of the function this was made for.
    pub unsafe fn for_instruction(&self, inst: LLVMValueRef) -> LLVMMetadataRef {
        if self.fallback.is_null() {
            return std::ptr::null_mut();
        }
        let own = LLVMInstructionGetDebugLoc(inst);
        if !own.is_null() {
            return own;
        }
        let mut cursor = ir::first_instruction(ir::parent_block(inst));
        while !cursor.is_null() {
            let loc = LLVMInstructionGetDebugLoc(cursor);
            if !loc.is_null() {
                return loc;
            }
            cursor = ir::next_instruction(cursor);
        }
        self.fallback
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn demangles_cpp_and_keeps_c_names() {
        use super::display_name;
        assert_eq!(display_name("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(display_name("main"), "main");
        assert_eq!(display_name("_Znot_valid!"), "_Znot_valid!");
    }

    use super::join_path;

    #[test]
    fn joins_relative_names_and_keeps_absolute_ones() {
        assert_eq!(join_path("/src/proj", "a.c"), "/src/proj/a.c");
        assert_eq!(join_path("/src/proj/", "sub/a.c"), "/src/proj/sub/a.c");
        assert_eq!(join_path("/src/proj", "/abs/a.c"), "/abs/a.c");
        assert_eq!(join_path("", "a.c"), "a.c");
        assert_eq!(join_path("/src", ""), "");
    }
}
