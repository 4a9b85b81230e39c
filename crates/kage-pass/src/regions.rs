//! The static region table (docs/abi.md): planning its entries, emitting it as globals, and
//! registering it from a constructor in `llvm.global_ctors`.

use std::collections::HashMap;

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::LLVMLinkage;
use llvm_sys::LLVMUnnamedAddr;

use kage_abi::{RegionKind, CTOR_PRIORITY, MODULE_GLOBAL, NONE};

use crate::ir::{c_string, RuntimeFunction};
use crate::loops::LoopForest;

const REGIONS_GLOBAL: &str = "__kage_regions";
/// Starts with `__kage_`, so the pass never instruments its own constructor.
const CTOR_NAME: &str = "__kage_module_ctor";

/// Lowest and highest non-zero source line seen; 0 when none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LineRange {
    pub first: u32,
    pub last: u32,
}

impl LineRange {
    pub fn add(&mut self, line: u32) {
        if line == 0 {
            return;
        }
        if self.first == 0 || line < self.first {
            self.first = line;
        }
        self.last = self.last.max(line);
    }

    pub fn merge(&mut self, other: LineRange) {
        self.add(other.first);
        self.add(other.last);
    }
}

/// One `struct kage_region`, before it becomes a constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionEntry {
    pub kind: RegionKind,
    pub parent: u32,
    pub lines: LineRange,
    pub local_index: u32,
    pub name: String,
    pub symbol: String,
    pub file: String,
}

/// Where one function's regions sit in the module's table: the function entry at `base`,
/// then loop `k` (pre-order) at `base + 1 + 2k` with its body right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FunctionSlots {
    pub base: u32,
}

impl FunctionSlots {
    pub fn function(self) -> u32 {
        self.base
    }
    pub fn loop_entry(self, loop_index: usize) -> u32 {
        self.base + 1 + 2 * loop_index as u32
    }
    pub fn loop_body(self, loop_index: usize) -> u32 {
        self.loop_entry(loop_index) + 1
    }
    /// The innermost region containing a block whose innermost loop is `innermost`.
    pub fn innermost_region(self, innermost: Option<usize>) -> u32 {
        innermost.map_or(self.function(), |l| self.loop_body(l))
    }
}

/// The identity shared by all of a function's entries.
pub struct FunctionIdentity {
    pub name: String,
    pub symbol: String,
    pub file: String,
    /// The `DISubprogram` line, preferred as the function's first line.
    pub declared_line: Option<u32>,
}

/// The entries for one function, in table order, starting at `slots.base`.
/// `block_lines[b]` are the lines of block `b`'s instructions.
pub fn plan_function(
    slots: FunctionSlots,
    forest: &LoopForest,
    block_lines: &[LineRange],
    identity: &FunctionIdentity,
) -> Vec<RegionEntry> {
    let entry = |kind, parent, lines, local_index| RegionEntry {
        kind,
        parent,
        lines,
        local_index,
        name: identity.name.clone(),
        symbol: identity.symbol.clone(),
        file: identity.file.clone(),
    };
    let mut function_lines = LineRange::default();
    for &lines in block_lines {
        function_lines.merge(lines);
    }
    if let Some(declared) = identity.declared_line {
        function_lines.first = declared;
        function_lines.last = function_lines.last.max(declared);
    }
    let mut out = vec![entry(
        RegionKind::Function,
        NONE,
        function_lines,
        slots.function(),
    )];
    for (k, lp) in forest.loops.iter().enumerate() {
        let mut lines = LineRange::default();
        for &b in &lp.blocks {
            lines.merge(block_lines.get(b).copied().unwrap_or_default());
        }
        let parent = slots.innermost_region(lp.parent);
        out.push(entry(RegionKind::Loop, parent, lines, slots.loop_entry(k)));
        out.push(entry(
            RegionKind::LoopBody,
            slots.loop_entry(k),
            lines,
            slots.loop_body(k),
        ));
    }
    out
}

/// The emitted table: `__kage_regions` (the `kage_region[]` array) and `__kage_module`.
pub struct RegionTable {
    pub module_global: LLVMValueRef,
    regions_global: LLVMValueRef,
    array_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
}

impl RegionTable {
    /// A constant pointer to entry `local_index` (what the region hooks receive).
    ///
    /// # Safety
    /// `self` must come from [`emit_table`] on a module that is still alive.
    pub unsafe fn region_ptr(&self, local_index: u32) -> LLVMValueRef {
        let mut indices = [
            LLVMConstInt(self.i64_type, 0, 0),
            LLVMConstInt(self.i64_type, u64::from(local_index), 0),
        ];
        LLVMConstInBoundsGEP2(
            self.array_type,
            self.regions_global,
            indices.as_mut_ptr(),
            2,
        )
    }
}

/// Private constant C strings, one global per distinct string.
struct StringPool {
    module: LLVMModuleRef,
    context: LLVMContextRef,
    made: HashMap<String, LLVMValueRef>,
}

impl StringPool {
    unsafe fn get(&mut self, s: &str) -> LLVMValueRef {
        if let Some(&g) = self.made.get(s) {
            return g;
        }
        let bytes = s.replace('\0', "");
        let init =
            LLVMConstStringInContext2(self.context, bytes.as_ptr() as *const _, bytes.len(), 0);
        let global = LLVMAddGlobal(
            self.module,
            LLVMTypeOf(init),
            c_string("__kage_str").as_ptr(),
        );
        LLVMSetInitializer(global, init);
        LLVMSetGlobalConstant(global, 1);
        LLVMSetLinkage(global, LLVMLinkage::LLVMPrivateLinkage);
        LLVMSetUnnamedAddress(global, LLVMUnnamedAddr::LLVMGlobalUnnamedAddr);
        LLVMSetAlignment(global, 1);
        self.made.insert(s.to_string(), global);
        global
    }
}

/// What the module-level part of the table says besides its regions.
pub struct ModuleInfo<'a> {
    /// The module's source file name.
    pub name: &'a str,
    /// `enum kage_instrumentation`: how the module's functions were instrumented.
    pub instrumentation: u32,
    /// log2 of the line size built into the marks (working-set modes); 0 otherwise.
    pub line_shift: u32,
}

/// Emits `struct kage_region __kage_regions[]` and `struct kage_module __kage_module` with the
/// exact layout of docs/abi.md, as internal writable globals (the runtime writes `global_id`).
/// `code[i]` is entry `i`'s `code` field: its function for function entries, null otherwise.
///
/// # Safety
/// `module` must be a valid module; `code` as long as `entries`, each null or a function of it.
pub unsafe fn emit_table(
    module: LLVMModuleRef,
    entries: &[RegionEntry],
    code: &[LLVMValueRef],
    info: &ModuleInfo,
) -> RegionTable {
    let context = LLVMGetModuleContext(module);
    let i32_type = LLVMInt32TypeInContext(context);
    let i64_type = LLVMInt64TypeInContext(context);
    let ptr_type = LLVMPointerTypeInContext(context, 0);
    // struct kage_region: six u32 then five pointers = 64 bytes on 64-bit targets.
    let mut region_fields = [
        i32_type, i32_type, i32_type, i32_type, i32_type, i32_type, ptr_type, ptr_type, ptr_type,
        ptr_type, ptr_type,
    ];
    let region_type = LLVMStructTypeInContext(
        context,
        region_fields.as_mut_ptr(),
        region_fields.len() as u32,
        0,
    );
    // struct kage_module: abi_version, region_count, regions, module_name, instrumentation,
    // line_shift = 32 bytes.
    let mut module_fields = [i32_type, i32_type, ptr_type, ptr_type, i32_type, i32_type];
    let module_type = LLVMStructTypeInContext(
        context,
        module_fields.as_mut_ptr(),
        module_fields.len() as u32,
        0,
    );
    let array_type = LLVMArrayType2(region_type, entries.len() as u64);

    let internal_global = |ty, name: &str| {
        let g = LLVMAddGlobal(module, ty, c_string(name).as_ptr());
        LLVMSetLinkage(g, LLVMLinkage::LLVMInternalLinkage);
        LLVMSetAlignment(g, 8);
        g
    };
    let module_global = internal_global(module_type, MODULE_GLOBAL);
    let regions_global = internal_global(array_type, REGIONS_GLOBAL);

    let mut strings = StringPool {
        module,
        context,
        made: HashMap::new(),
    };
    let u32_const = |v: u32| LLVMConstInt(i32_type, u64::from(v), 0);
    let mut region_values: Vec<LLVMValueRef> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let code = match code.get(i) {
                Some(&function) if !function.is_null() => function,
                _ => LLVMConstPointerNull(ptr_type),
            };
            let mut fields = [
                u32_const(NONE),
                u32_const(e.kind as u32),
                u32_const(e.parent),
                u32_const(e.lines.first),
                u32_const(e.lines.last),
                u32_const(e.local_index),
                strings.get(&e.name),
                strings.get(&e.symbol),
                strings.get(&e.file),
                module_global,
                code,
            ];
            LLVMConstNamedStruct(region_type, fields.as_mut_ptr(), fields.len() as u32)
        })
        .collect();
    LLVMSetInitializer(
        regions_global,
        LLVMConstArray2(
            region_type,
            region_values.as_mut_ptr(),
            region_values.len() as u64,
        ),
    );

    let mut module_values = [
        LLVMConstInt(i32_type, u64::from(kage_abi::VERSION), 0),
        u32_const(entries.len() as u32),
        regions_global,
        strings.get(info.name),
        u32_const(info.instrumentation),
        u32_const(info.line_shift),
    ];
    LLVMSetInitializer(
        module_global,
        LLVMConstNamedStruct(
            module_type,
            module_values.as_mut_ptr(),
            module_values.len() as u32,
        ),
    );
    RegionTable {
        module_global,
        regions_global,
        array_type,
        i64_type,
    }
}

/// Adds an internal constructor calling `register_fn(&module)` to `llvm.global_ctors` at
/// priority 1, keeping any constructors already there (the array global is rebuilt, since
/// a global's type cannot change in place).
///
/// # Safety
/// `module` must be valid; `register_fn` a function of type `void(ptr)` in it.
pub unsafe fn add_registration_ctor(
    module: LLVMModuleRef,
    table: &RegionTable,
    register: RuntimeFunction,
) {
    let context = LLVMGetModuleContext(module);
    let void_type = LLVMVoidTypeInContext(context);
    let ctor_type = LLVMFunctionType(void_type, std::ptr::null_mut(), 0, 0);
    let ctor = LLVMAddFunction(module, c_string(CTOR_NAME).as_ptr(), ctor_type);
    LLVMSetLinkage(ctor, LLVMLinkage::LLVMInternalLinkage);
    let entry = LLVMAppendBasicBlockInContext(context, ctor, c_string("entry").as_ptr());
    let builder = LLVMCreateBuilderInContext(context);
    LLVMPositionBuilderAtEnd(builder, entry);
    register.call(builder, &mut [table.module_global]);
    LLVMBuildRetVoid(builder);
    LLVMDisposeBuilder(builder);

    let i32_type = LLVMInt32TypeInContext(context);
    let ptr_type = LLVMPointerTypeInContext(context, 0);
    let name = c_string("llvm.global_ctors");
    let existing = LLVMGetNamedGlobal(module, name.as_ptr());
    let mut elements: Vec<LLVMValueRef> = Vec::new();
    let mut element_type = {
        let mut fields = [i32_type, ptr_type, ptr_type];
        LLVMStructTypeInContext(context, fields.as_mut_ptr(), 3, 0)
    };
    if !existing.is_null() {
        let old_type = LLVMGlobalGetValueType(existing);
        let init = LLVMGetInitializer(existing);
        if LLVMGetTypeKind(old_type) == llvm_sys::LLVMTypeKind::LLVMArrayTypeKind && !init.is_null()
        {
            let old_element = LLVMGetElementType(old_type);
            // Keep the module's own element type when it is the standard {i32, ptr, ptr}.
            if LLVMCountStructElementTypes(old_element) == 3 {
                element_type = old_element;
            }
            for i in 0..LLVMGetArrayLength2(old_type) {
                let element = LLVMGetAggregateElement(init, i as u32);
                if !element.is_null() {
                    elements.push(element);
                }
            }
        }
        LLVMDeleteGlobal(existing);
    }
    let mut ours = [
        LLVMConstInt(i32_type, CTOR_PRIORITY, 0),
        ctor,
        LLVMConstPointerNull(ptr_type),
    ];
    elements.push(LLVMConstNamedStruct(element_type, ours.as_mut_ptr(), 3));
    let array_type = LLVMArrayType2(element_type, elements.len() as u64);
    let ctors = LLVMAddGlobal(module, array_type, name.as_ptr());
    LLVMSetLinkage(ctors, LLVMLinkage::LLVMAppendingLinkage);
    LLVMSetInitializer(
        ctors,
        LLVMConstArray2(element_type, elements.as_mut_ptr(), elements.len() as u64),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::find_loops;

    fn identity() -> FunctionIdentity {
        FunctionIdentity {
            name: "f".into(),
            symbol: "f".into(),
            file: "/x/f.c".into(),
            declared_line: Some(3),
        }
    }

    fn lines(first: u32, last: u32) -> LineRange {
        LineRange { first, last }
    }

    #[test]
    fn line_range_ignores_zero_and_keeps_extremes() {
        let mut r = LineRange::default();
        r.add(0);
        assert_eq!(r, lines(0, 0));
        r.add(7);
        r.add(5);
        r.add(0);
        r.add(9);
        assert_eq!(r, lines(5, 9));
        r.merge(LineRange::default());
        assert_eq!(r, lines(5, 9));
    }

    #[test]
    fn doubly_nested_function_gets_five_entries_in_pre_order() {
        // 0 -> 1 (outer) -> 2 (inner) -> 3 -> 2 | 4; 4 -> 1 | 5
        let cfg = vec![vec![1], vec![2, 5], vec![3], vec![2, 4], vec![1, 5], vec![]];
        let forest = find_loops(&cfg, 0);
        let block_lines = [
            lines(4, 4),
            lines(5, 5),
            lines(6, 6),
            lines(7, 7),
            lines(8, 8),
            lines(10, 10),
        ];
        let entries = plan_function(
            FunctionSlots { base: 3 },
            &forest,
            &block_lines,
            &identity(),
        );
        let summary: Vec<(RegionKind, u32, u32, u32, u32)> = entries
            .iter()
            .map(|e| (e.kind, e.local_index, e.parent, e.lines.first, e.lines.last))
            .collect();
        assert_eq!(
            summary,
            vec![
                (RegionKind::Function, 3, NONE, 3, 10),
                (RegionKind::Loop, 4, 3, 5, 8),
                (RegionKind::LoopBody, 5, 4, 5, 8),
                (RegionKind::Loop, 6, 5, 6, 7),
                (RegionKind::LoopBody, 7, 6, 6, 7),
            ]
        );
        assert!(entries
            .iter()
            .all(|e| e.parent == NONE || e.parent < e.local_index));
        assert!(entries.iter().all(|e| e.file == "/x/f.c" && e.name == "f"));
    }

    #[test]
    fn slots_map_blocks_to_innermost_regions() {
        let slots = FunctionSlots { base: 10 };
        assert_eq!(slots.innermost_region(None), 10);
        assert_eq!(slots.innermost_region(Some(0)), 12);
        assert_eq!(slots.innermost_region(Some(2)), 16);
        assert_eq!(slots.loop_entry(2), 15);
    }
}
