//! Reading source lines and files from debug info, and choosing debug locations for hooks.

use llvm_sys::core::LLVMGetModuleContext;
use llvm_sys::debuginfo::{
    LLVMDIBuilderCreateDebugLocation, LLVMDIFileGetDirectory, LLVMDIFileGetFilename,
    LLVMDILocationGetInlinedAt, LLVMDILocationGetLine, LLVMDIScopeGetFile, LLVMDISubprogramGetLine,
    LLVMGetSubprogram, LLVMInstructionGetDebugLoc,
};
use llvm_sys::prelude::{LLVMMetadataRef, LLVMModuleRef, LLVMValueRef};

use crate::ir;

/// The source line of `inst` in its own function: inlined code maps to the line of the
/// outermost call site, so a region's lines stay inside the function's source.
/// 0 when the instruction has no location.
///
/// # Safety
/// `inst` must be a valid instruction.
pub unsafe fn outermost_line(inst: LLVMValueRef) -> u32 {
    let mut loc = LLVMInstructionGetDebugLoc(inst);
    if loc.is_null() {
        return 0;
    }
    // The chain is finite in valid IR; the bound only guards against malformed metadata.
    for _ in 0..10_000 {
        let outer = LLVMDILocationGetInlinedAt(loc);
        if outer.is_null() {
            break;
        }
        loc = outer;
    }
    LLVMDILocationGetLine(loc)
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
    let subprogram = LLVMGetSubprogram(func);
    if subprogram.is_null() {
        return String::new();
    }
    let file = LLVMDIScopeGetFile(subprogram);
    if file.is_null() {
        return String::new();
    }
    let mut len = 0u32;
    let dir = ir::lossy_string(LLVMDIFileGetDirectory(file, &mut len), len as usize);
    let mut len = 0u32;
    let name = ir::lossy_string(LLVMDIFileGetFilename(file, &mut len), len as usize);
    join_path(&dir, &name)
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
