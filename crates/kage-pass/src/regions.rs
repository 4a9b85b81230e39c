//! The static region table (docs/abi.md): planning its entries, emitting it as globals, and
//! registering it from a constructor in `llvm.global_ctors`.

use std::collections::{HashMap, HashSet};

use llvm_sys::core::*;
use llvm_sys::prelude::{LLVMContextRef, LLVMModuleRef, LLVMTypeRef, LLVMValueRef};
use llvm_sys::LLVMLinkage;
use llvm_sys::LLVMUnnamedAddr;

use kage_abi::{RegionKind, SourceKey, CTOR_PRIORITY, MODULE_GLOBAL, NONE};

use crate::debuginfo::DeclaredLoop;
use crate::ir::{c_string, RuntimeFunction};
use crate::loops::LoopForest;
use crate::region_tree::{self, Location, NodeKind, RegionTree};

const REGIONS_GLOBAL: &str = "__kage_regions";
/// `kage_region.flags`, the last field.
const FLAGS_FIELD: u32 = 15;
/// Starts with `__kage_`, so the pass never instruments its own constructor.
const CTOR_NAME: &str = "__kage_module_ctor";
const DTOR_NAME: &str = "__kage_module_dtor";

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
    /// An inlined call's site.
    pub call: Option<CallSite>,
}

/// Where an inlined call is, in its caller's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallSite {
    pub file: String,
    pub line: u32,
    pub column: u32,
}

/// Where one function's regions sit in the module's table: its region tree's nodes from
/// `base` on, in the tree's pre-order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSlots {
    pub base: u32,
    /// Each loop's tree node (its body is the next one).
    pub loop_node: Vec<usize>,
    /// Each block's innermost region's tree node.
    pub block_region: Vec<usize>,
}

impl FunctionSlots {
    /// The slots of a function planned as `tree`, its entries from `base` on.
    pub fn new(base: u32, tree: &RegionTree) -> Self {
        FunctionSlots {
            base,
            loop_node: tree.loop_node.clone(),
            block_region: tree.block_region.clone(),
        }
    }
    pub fn function(&self) -> u32 {
        self.base
    }
    pub fn loop_entry(&self, loop_index: usize) -> u32 {
        self.base + self.loop_node[loop_index] as u32
    }
    pub fn loop_body(&self, loop_index: usize) -> u32 {
        self.loop_entry(loop_index) + 1
    }
    /// The innermost region containing `block`.
    pub fn block_region(&self, block: usize) -> u32 {
        self.base + self.block_region.get(block).copied().unwrap_or(0) as u32
    }
}

/// The identity of a function's entries: the function's own, or an inlined callee's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionIdentity {
    pub name: String,
    pub symbol: String,
    pub file: String,
    /// The `DISubprogram` line, preferred as the function's first line.
    pub declared_line: Option<u32>,
    /// The last line of the function's code as written (before inlining: an inlined call's
    /// code may lack its last lines), preferred as its last line.
    pub written_end: Option<u32>,
}

/// An inlined call: its callee and where the call is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlinedCall {
    pub callee: FunctionIdentity,
    pub call: CallSite,
}

/// The entries for one function, in table order, starting at `slots.base`: the nodes of
/// `tree`. `locations[b]` are the locations of block `b`'s instructions, `calls[s]` inlined
/// call `s`. Each entry's lines are those of its code at its own level (an inlined callee's
/// code in the callee's lines, a loop's in its function's), a function's or inlined call's
/// starting at its declaration.
pub fn plan_function(
    slots: &FunctionSlots,
    tree: &RegionTree,
    forest: &LoopForest,
    locations: &[Vec<Location>],
    calls: &[InlinedCall],
    identity: &FunctionIdentity,
    loops_as_written: &[LoopAsWritten],
) -> Vec<RegionEntry> {
    // Lines per node: each located instruction counts for the regions around its block's
    // whose context its chain extends, at their level.
    let mut lines = vec![LineRange::default(); tree.nodes.len()];
    for (b, block) in locations.iter().enumerate() {
        let Some(&region) = tree.block_region.get(b) else {
            continue;
        };
        let mut at = Some(region);
        while let Some(node) = at {
            let context = &tree.nodes[node].context;
            for location in block.iter().filter(|l| l.sites.starts_with(context)) {
                lines[node].add(location.lines.get(context.len()).copied().unwrap_or(0));
            }
            at = tree.nodes[node].parent;
        }
    }
    for (k, range) in loop_lines(tree, forest, locations, calls, loops_as_written)
        .into_iter()
        .enumerate()
    {
        lines[tree.loop_node[k]] = range;
        lines[tree.loop_node[k] + 1] = range;
    }
    let mut out = Vec::with_capacity(tree.nodes.len());
    for (i, node) in tree.nodes.iter().enumerate() {
        // Whose source the node is in: the innermost inlined call of its context.
        let (owner, call) = match node.context.last() {
            Some(&site) => (
                &calls[site as usize].callee,
                Some(&calls[site as usize].call),
            ),
            None => (identity, None),
        };
        let kind = match node.kind {
            NodeKind::Function => RegionKind::Function,
            NodeKind::Loop(_) => RegionKind::Loop,
            NodeKind::LoopBody(_) => RegionKind::LoopBody,
            NodeKind::Inlined(_) => RegionKind::Inlined,
        };
        let mut range = lines[i];
        if matches!(kind, RegionKind::Function | RegionKind::Inlined) {
            if let Some(declared) = owner.declared_line.filter(|&l| l != 0) {
                range.first = declared;
                range.last = range.last.max(declared);
            }
            if let Some(end) = owner.written_end.filter(|&l| l >= range.first) {
                range.last = end;
            }
        }
        out.push(RegionEntry {
            kind,
            parent: node.parent.map_or(NONE, |p| slots.base + p as u32),
            lines: range,
            local_index: slots.base + i as u32,
            name: owner.name.clone(),
            symbol: owner.symbol.clone(),
            file: owner.file.clone(),
            call: (kind == RegionKind::Inlined)
                .then(|| call.cloned())
                .flatten(),
        });
    }
    out
}

/// What says where a loop is in the source, besides its code's lines.
#[derive(Debug, Clone, Default)]
pub struct LoopAsWritten {
    /// What its `llvm.loop` metadata says.
    pub declared: Option<DeclaredLoop>,
    /// The lines of the loops of the function whose source the loop is in, as the source
    /// wrote them ([`WrittenSource::loops`](crate::debuginfo::WrittenSource::loops)).
    pub written: Vec<LineRange>,
}

/// Each loop's lines (its body's too), from its keyword to its end, as at -O0 whatever code
/// the optimiser moved in or out:
/// 1. where its `llvm.loop` metadata says where it is (`loops_as_written[k].declared`), in the
///    source its node is in (the same chain of inlined calls), the metadata's lines;
/// 2. else (the optimiser dropped them: LLVM 22's vectorised loops and unrolled remainders
///    carry none, a `for (;;)` whose latches were merged loses its metadata) the narrowest
///    loop as written in that source (`loops_as_written[k].written`) that holds at least
///    [`WRITTEN_LOOP_SHARE`](region_tree::WRITTEN_LOOP_SHARE) of its code
///    ([`region_tree::holds_most_of`]), of its code outside its inner loops, and a line of
///    its header's: the loop it was copied from, so that the copies are one source region;
/// 3. else (a `goto` loop, a loop the optimiser made) the lines of all its blocks, some of
///    which may lie in nodes below its body.
fn loop_lines(
    tree: &RegionTree,
    forest: &LoopForest,
    locations: &[Vec<Location>],
    calls: &[InlinedCall],
    loops_as_written: &[LoopAsWritten],
) -> Vec<LineRange> {
    let nothing_known = LoopAsWritten::default();
    (0..forest.loops.len())
        .map(|k| {
            let context = &tree.nodes[tree.loop_node[k]].context;
            let known = loops_as_written.get(k).unwrap_or(&nothing_known);
            if let Some(d) = &known.declared {
                let same_calls = d.calls.len() == context.len()
                    && (d.calls.iter().zip(context)).all(|(&(line, column), &site)| {
                        let call = &calls[site as usize].call;
                        call.line == line && call.column == column
                    });
                if same_calls {
                    return LineRange {
                        first: d.first_line,
                        last: d.last_line,
                    };
                }
            }
            // The lines of the loop's code, at its node's level, and of its header's (if it
            // has any there): a loop as written that holds most of a loop's code but not
            // where it begins is one inside it.
            let lp = &forest.loops[k];
            let code = region_tree::code_lines(&lp.blocks, locations, context);
            let header = region_tree::code_lines(&[lp.header], locations, context);
            // And of its own code, outside its inner loops, when it has some: a `goto` loop's
            // code is mostly the `while` inside it, not its own.
            let inner: HashSet<usize> = (forest.loops.iter())
                .filter(|inner| inner.parent == Some(k))
                .flat_map(|inner| inner.blocks.iter().copied())
                .collect();
            let own_blocks: Vec<usize> = (lp.blocks.iter().copied())
                .filter(|b| !inner.contains(b))
                .collect();
            let own = region_tree::code_lines(&own_blocks, locations, context);
            let holds = |range: &LineRange, line: &u32| (range.first..=range.last).contains(line);
            let written = (known.written.iter())
                .filter(|range| region_tree::holds_most_of(range.first, range.last, &code))
                .filter(|range| {
                    own.is_empty() || region_tree::holds_most_of(range.first, range.last, &own)
                })
                .filter(|range| header.is_empty() || header.iter().any(|l| holds(range, l)))
                .min_by_key(|range| (range.last - range.first, range.first));
            if let Some(&range) = written {
                return range;
            }
            let mut range = LineRange::default();
            code.iter().for_each(|&line| range.add(line));
            range
        })
        .collect()
}

/// The loops that are pieces of their parent loop, which the optimiser cut out of it (LLVM's
/// loop simplification makes a loop with several back edges two nested loops when a value
/// changes on some of them only: the path of a `continue`), to be joined into it
/// ([`LoopForest::joining`]): a loop whose metadata starts where its parent's does (the
/// same `DILocation`: column and inlined calls too); or, where one of them has no metadata
/// (left without by the optimiser, or a `goto` loop's), a loop at its parent's lines
/// ([`loop_lines`]) in the same source (chain of inlined calls) where that source has at
/// most one loop as written at those lines (two are `for (...) for (...)` on one line).
pub fn loop_pieces(
    tree: &RegionTree,
    forest: &LoopForest,
    locations: &[Vec<Location>],
    calls: &[InlinedCall],
    loops_as_written: &[LoopAsWritten],
) -> Vec<usize> {
    let lines = loop_lines(tree, forest, locations, calls, loops_as_written);
    let context = |k: usize| &tree.nodes[tree.loop_node[k]].context;
    let start = |k: usize| loops_as_written.get(k)?.declared.as_ref().map(|d| d.start);
    let one_written_loop_at = |k: usize| {
        let written = loops_as_written.get(k).map_or(&[][..], |l| &l.written[..]);
        written.iter().filter(|&&range| range == lines[k]).count() <= 1
    };
    (forest.loops.iter().enumerate())
        .filter_map(|(k, lp)| Some((k, lp.parent?)))
        .filter(|&(k, p)| match (start(k), start(p)) {
            (Some(own), Some(parent)) => own == parent,
            _ => {
                lines[k].first != 0
                    && lines[k] == lines[p]
                    && context(k) == context(p)
                    && one_written_loop_at(k)
            }
        })
        .map(|(k, _)| k)
        .collect()
}

/// The emitted table: `__kage_regions` (the `kage_region[]` array) and `__kage_module`.
pub struct RegionTable {
    pub module_global: LLVMValueRef,
    regions_global: LLVMValueRef,
    array_type: LLVMTypeRef,
    i64_type: LLVMTypeRef,
    /// Each entry's `source_cell`.
    source_cell: Vec<u32>,
}

/// Each entry's `source_cell` ([`kage_abi::Region::source_cell`]): the source regions with
/// several copies among `entries` ([`SourceKey`]) numbered in the order of their first
/// copy, [`NONE`] for the others.
pub fn source_cells(entries: &[RegionEntry]) -> Vec<u32> {
    let mut source_of: Vec<usize> = Vec::with_capacity(entries.len());
    let mut sources: HashMap<SourceKey<&str>, usize> = HashMap::new();
    let mut copies: Vec<u32> = Vec::new();
    for e in entries {
        let parent_source = (e.parent != NONE).then(|| source_of[e.parent as usize] as u32);
        let key = SourceKey::new(
            e.kind,
            parent_source,
            e.lines.first,
            kage_abi::key_function(e.name.as_str(), e.symbol.as_str()),
            e.file.as_str(),
        );
        let next = sources.len();
        let source = *sources.entry(key).or_insert(next);
        if source == copies.len() {
            copies.push(0);
        }
        copies[source] += 1;
        source_of.push(source);
    }
    let mut cell_of_source = vec![NONE; copies.len()];
    let mut cells = 0;
    source_of
        .iter()
        .map(|&source| {
            if copies[source] < 2 {
                return NONE;
            }
            if cell_of_source[source] == NONE {
                cell_of_source[source] = cells;
                cells += 1;
            }
            cell_of_source[source]
        })
        .collect()
}

/// How many cells [`source_cells`] numbered.
fn cell_count(source_cell: &[u32]) -> u32 {
    (source_cell.iter())
        .filter(|&&c| c != NONE)
        .max()
        .map_or(0, |&c| c + 1)
}

impl RegionTable {
    /// Entry `local_index`'s `source_cell`, when other entries of the module are copies of
    /// its source region.
    pub fn source_cell(&self, local_index: u32) -> Option<u32> {
        let cell = self.source_cell[local_index as usize];
        (cell != NONE).then_some(cell)
    }

    /// The module's `source_cells`.
    pub fn source_cells(&self) -> u32 {
        cell_count(&self.source_cell)
    }

    /// Sets the `flags` of the entries `flags` names (by local index).
    ///
    /// # Safety
    /// `self` must come from [`emit_table`] on a module that is still alive.
    pub unsafe fn set_flags(&self, flags: &[(u32, u32)]) {
        if flags.is_empty() {
            return;
        }
        let init = LLVMGetInitializer(self.regions_global);
        let count = self.source_cell.len();
        let mut entries: Vec<LLVMValueRef> = (0..count)
            .map(|i| LLVMGetAggregateElement(init, i as u32))
            .collect();
        let region_type = LLVMTypeOf(entries[0]);
        let i32_type = LLVMInt32TypeInContext(LLVMGetTypeContext(region_type));
        for &(local, value) in flags {
            let entry = entries[local as usize];
            let mut fields: Vec<LLVMValueRef> = (0..FLAGS_FIELD + 1)
                .map(|f| LLVMGetAggregateElement(entry, f))
                .collect();
            fields[FLAGS_FIELD as usize] = LLVMConstInt(i32_type, u64::from(value), 0);
            entries[local as usize] =
                LLVMConstNamedStruct(region_type, fields.as_mut_ptr(), fields.len() as u32);
        }
        let array = LLVMConstArray2(region_type, entries.as_mut_ptr(), count as u64);
        LLVMSetInitializer(self.regions_global, array);
    }

    /// Byte offset, in the thread's records of the module (count instrumentation), of the
    /// word counting the open instances of entry `local_index`'s source region
    /// ([`kage_abi::count::open_offset`]).
    pub fn open_offset(&self, local_index: u32) -> u64 {
        let count = self.source_cell.len() as u32;
        let cell = self.source_cell[local_index as usize];
        kage_abi::count::open_offset(count, local_index, cell) as u64
    }

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
pub struct StringPool {
    module: LLVMModuleRef,
    context: LLVMContextRef,
    made: HashMap<String, LLVMValueRef>,
}

impl StringPool {
    /// A pool for `module`.
    ///
    /// # Safety
    /// `module` must be valid.
    pub unsafe fn new(module: LLVMModuleRef) -> Self {
        StringPool {
            module,
            context: LLVMGetModuleContext(module),
            made: HashMap::new(),
        }
    }

    /// The global holding `s` (NUL bytes dropped), made the first time.
    ///
    /// # Safety
    /// The pool's module must still be valid.
    pub unsafe fn get(&mut self, s: &str) -> LLVMValueRef {
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
    // struct kage_region (kage_abi::Region): six u32, six pointers, four u32 = 88 bytes on
    // 64-bit targets.
    let mut region_fields = [
        i32_type, i32_type, i32_type, i32_type, i32_type, i32_type, ptr_type, ptr_type, ptr_type,
        ptr_type, ptr_type, ptr_type, i32_type, i32_type, i32_type, i32_type,
    ];
    let region_type = LLVMStructTypeInContext(
        context,
        region_fields.as_mut_ptr(),
        region_fields.len() as u32,
        0,
    );
    // struct kage_module: abi_version, region_count, regions, module_name, instrumentation,
    // line_shift, slot, source_cells = 40 bytes.
    let mut module_fields = [
        i32_type, i32_type, ptr_type, ptr_type, i32_type, i32_type, i32_type, i32_type,
    ];
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

    let mut strings = StringPool::new(module);
    let u32_const = |v: u32| LLVMConstInt(i32_type, u64::from(v), 0);
    let source_cell = source_cells(entries);
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
                match &e.call {
                    Some(call) => strings.get(&call.file),
                    None => LLVMConstPointerNull(ptr_type),
                },
                u32_const(e.call.as_ref().map_or(0, |c| c.line)),
                u32_const(e.call.as_ref().map_or(0, |c| c.column)),
                u32_const(source_cell[i]),
                u32_const(0),
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
        u32_const(0),
        u32_const(cell_count(&source_cell)),
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
        source_cell,
    }
}

/// Adds an internal constructor calling `register(&module)` to `llvm.global_ctors` at
/// priority 1, and an internal destructor calling `unregister(&module)` to
/// `llvm.global_dtors` (a `dlclose` that unloads the module runs it: the runtime then keeps
/// what it still needs of the table), keeping any constructors and destructors already
/// there.
///
/// # Safety
/// `module` must be valid; `register` and `unregister` functions of type `void(ptr)` in it.
pub unsafe fn add_registration_ctor(
    module: LLVMModuleRef,
    table: &RegionTable,
    register: RuntimeFunction,
    unregister: RuntimeFunction,
    module_name: &str,
) {
    let ctor = add_module_function(
        module,
        CTOR_NAME,
        table,
        register,
        Some(&no_runtime_message(module_name)),
    );
    append_to_global_array(module, "llvm.global_ctors", ctor);
    let dtor = add_module_function(module, DTOR_NAME, table, unregister, None);
    append_to_global_array(module, "llvm.global_dtors", dtor);
}

/// An internal `void name(void)` that calls `runtime(&module)` when the runtime is there
/// (its entry point is a weak reference: null in a shared library loaded by a program
/// without the runtime), else writes `missing` on stderr, if given.
unsafe fn add_module_function(
    module: LLVMModuleRef,
    name: &str,
    table: &RegionTable,
    runtime: RuntimeFunction,
    missing: Option<&str>,
) -> LLVMValueRef {
    let context = LLVMGetModuleContext(module);
    let void_type = LLVMVoidTypeInContext(context);
    let fn_type = LLVMFunctionType(void_type, std::ptr::null_mut(), 0, 0);
    let function = LLVMAddFunction(module, c_string(name).as_ptr(), fn_type);
    LLVMSetLinkage(function, LLVMLinkage::LLVMInternalLinkage);
    let entry = LLVMAppendBasicBlockInContext(context, function, c_string("entry").as_ptr());
    let calls = LLVMAppendBasicBlockInContext(context, function, c_string("call").as_ptr());
    let alone = LLVMAppendBasicBlockInContext(context, function, c_string("no_runtime").as_ptr());
    let done = LLVMAppendBasicBlockInContext(context, function, c_string("done").as_ptr());
    let builder = LLVMCreateBuilderInContext(context);
    // Without the runtime, a library's constructor says so (the loader would only say
    // `undefined symbol`) before its first hook stops the program.
    LLVMSetLinkage(runtime.value, LLVMLinkage::LLVMExternalWeakLinkage);
    LLVMPositionBuilderAtEnd(builder, entry);
    let absent = LLVMBuildIsNull(builder, runtime.value, c_string("").as_ptr());
    LLVMBuildCondBr(builder, absent, alone, calls);
    LLVMPositionBuilderAtEnd(builder, calls);
    runtime.call(builder, &mut [table.module_global]);
    LLVMBuildBr(builder, done);
    LLVMPositionBuilderAtEnd(builder, alone);
    if let Some(text) = missing {
        write_to_stderr(module, builder, text);
    }
    LLVMBuildBr(builder, done);
    LLVMPositionBuilderAtEnd(builder, done);
    LLVMBuildRetVoid(builder);
    LLVMDisposeBuilder(builder);
    function
}

/// Appends `function` at priority [`CTOR_PRIORITY`] to `llvm.global_ctors` or
/// `llvm.global_dtors` (`array`), keeping its elements (the array global is rebuilt, since a
/// global's type cannot change in place).
unsafe fn append_to_global_array(module: LLVMModuleRef, array: &str, function: LLVMValueRef) {
    let context = LLVMGetModuleContext(module);
    let i32_type = LLVMInt32TypeInContext(context);
    let ptr_type = LLVMPointerTypeInContext(context, 0);
    let name = c_string(array);
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
        function,
        LLVMConstPointerNull(ptr_type),
    ];
    elements.push(LLVMConstNamedStruct(element_type, ours.as_mut_ptr(), 3));
    let array_type = LLVMArrayType2(element_type, elements.len() as u64);
    let global = LLVMAddGlobal(module, array_type, name.as_ptr());
    LLVMSetLinkage(global, LLVMLinkage::LLVMAppendingLinkage);
    LLVMSetInitializer(
        global,
        LLVMConstArray2(element_type, elements.as_mut_ptr(), elements.len() as u64),
    );
}

/// What a module built by kage-cc says when the program that loaded it has no runtime.
pub fn no_runtime_message(module_name: &str) -> String {
    format!(
        "kage: {module_name} was compiled by kage-cc, but the program that loaded it was not \
         linked by kage-cc, so the Kage runtime its code calls is missing: run the program \
         with `kage run -- PROGRAM ARGS...` (which preloads the runtime), or with \
         LD_PRELOAD=<kage>/target/release/libkage_rt.so\n"
    )
}

/// `write(2, text, len)` at the builder's position (a plain libc call: the runtime is the
/// thing missing).
unsafe fn write_to_stderr(
    module: LLVMModuleRef,
    builder: llvm_sys::prelude::LLVMBuilderRef,
    text: &str,
) {
    let context = LLVMGetModuleContext(module);
    let i32_type = LLVMInt32TypeInContext(context);
    let i64_type = LLVMInt64TypeInContext(context);
    let ptr_type = LLVMPointerTypeInContext(context, 0);
    let mut params = [i32_type, ptr_type, i64_type];
    let write_type = LLVMFunctionType(i64_type, params.as_mut_ptr(), 3, 0);
    let name = c_string("write");
    let mut write = LLVMGetNamedFunction(module, name.as_ptr());
    if write.is_null() {
        write = LLVMAddFunction(module, name.as_ptr(), write_type);
    }
    let text_global = StringPool::new(module).get(text);
    let mut args = [
        LLVMConstInt(i32_type, 2, 0),
        text_global,
        LLVMConstInt(i64_type, text.len() as u64, 0),
    ];
    LLVMBuildCall2(
        builder,
        write_type,
        write,
        args.as_mut_ptr(),
        3,
        c_string("").as_ptr(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loops::find_loops;
    use crate::region_tree;
    use llvm_sys::prelude::LLVMMetadataRef;

    fn identity() -> FunctionIdentity {
        FunctionIdentity {
            name: "f".into(),
            symbol: "f".into(),
            file: "/x/f.c".into(),
            declared_line: Some(3),
            written_end: None,
        }
    }

    fn lines(first: u32, last: u32) -> LineRange {
        LineRange { first, last }
    }

    /// `main` and `run` each with an inlined call of `step` (loop at 14, its body), and
    /// `other` with a loop at 14 too: the copies of step, of its loop and of its body
    /// share a cell each, numbered in the order of their first copies; other's loop,
    /// though at the same line, is of another source region.
    #[test]
    fn copies_of_a_source_region_share_a_cell() {
        let entry = |kind, parent, line, local_index: u32, name: &str| RegionEntry {
            kind,
            parent,
            lines: lines(line, line + 2),
            local_index,
            name: name.into(),
            symbol: name.into(),
            file: "/x/f.c".into(),
            call: None,
        };
        use RegionKind::*;
        let entries = [
            entry(Function, NONE, 20, 0, "main"),
            entry(Inlined, 0, 12, 1, "step"),
            entry(Loop, 1, 14, 2, "step"),
            entry(LoopBody, 2, 14, 3, "step"),
            entry(Function, NONE, 30, 4, "run"),
            entry(Inlined, 4, 12, 5, "step"),
            entry(Loop, 5, 14, 6, "step"),
            entry(LoopBody, 6, 14, 7, "step"),
            entry(Function, NONE, 10, 8, "other"),
            entry(Loop, 8, 14, 9, "other"),
            entry(LoopBody, 9, 14, 10, "other"),
        ];
        assert_eq!(
            source_cells(&entries),
            [NONE, 0, 1, 2, NONE, 0, 1, 2, NONE, NONE, NONE]
        );
        // An inlined call and the function it calls are copies too.
        let both = [
            entry(Function, NONE, 12, 0, "step"),
            entry(Function, NONE, 20, 1, "main"),
            entry(Inlined, 1, 12, 2, "step"),
        ];
        assert_eq!(source_cells(&both), [0, NONE, 0]);
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
        let locations: Vec<Vec<Location>> = [4, 5, 6, 7, 8, 10]
            .iter()
            .map(|&line| vec![at(&[], &[line])])
            .collect();
        let tree = region_tree::build(&forest, &vec![Vec::new(); 6], &[]);
        let slots = FunctionSlots::new(3, &tree);
        let entries = plan_function(&slots, &tree, &forest, &locations, &[], &identity(), &[]);
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
        assert!(entries
            .iter()
            .all(|e| e.file == "/x/f.c" && e.name == "f" && e.call.is_none()));
        assert_eq!(slots.block_region(0), 3);
        assert_eq!(slots.block_region(1), 5);
        assert_eq!(slots.block_region(3), 7);
        assert_eq!(slots.loop_entry(1), 6);
        assert_eq!(slots.loop_body(1), 7);
    }

    #[test]
    fn an_inlined_loop_is_its_callees_with_the_callees_lines() {
        // main (lines 20-22) calls sum (declared at 8) at 21:5, inlined; sum's loop is at
        // lines 10-11. 0 (main) -> 1 (sum's) -> 2 (sum's loop) -> 2 | 3 (main's).
        let cfg = vec![vec![1], vec![2], vec![2, 3], vec![]];
        let forest = find_loops(&cfg, 0);
        let locations = vec![
            vec![at(&[], &[20])],
            vec![at(&[0], &[21, 9])],
            vec![at(&[0], &[21, 10]), at(&[0], &[21, 11])],
            vec![at(&[], &[22])],
        ];
        let chains = region_tree::block_chains(&cfg, &locations);
        let tree = region_tree::build(&forest, &chains, &[Some(vec![0])]);
        let slots = FunctionSlots::new(0, &tree);
        let calls = [InlinedCall {
            callee: FunctionIdentity {
                name: "sum".into(),
                symbol: "sum".into(),
                file: "/x/f.c".into(),
                declared_line: Some(8),
                written_end: None,
            },
            call: CallSite {
                file: "/x/f.c".into(),
                line: 21,
                column: 5,
            },
        }];
        let mut main = identity();
        main.name = "main".into();
        main.declared_line = Some(19);
        let entries = plan_function(&slots, &tree, &forest, &locations, &calls, &main, &[]);
        let summary: Vec<(RegionKind, &str, u32, u32, u32, bool)> = (entries.iter())
            .map(|e| {
                (
                    e.kind,
                    e.name.as_str(),
                    e.parent,
                    e.lines.first,
                    e.lines.last,
                    e.call.is_some(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (RegionKind::Function, "main", NONE, 19, 22, false),
                (RegionKind::Inlined, "sum", 0, 8, 11, true),
                (RegionKind::Loop, "sum", 1, 10, 11, false),
                (RegionKind::LoopBody, "sum", 2, 10, 11, false),
            ]
        );
        assert_eq!(entries[1].call.as_ref().unwrap().line, 21);
        assert_eq!(slots.block_region(1), 1);
        assert_eq!(slots.block_region(2), 3);
        assert_eq!(slots.block_region(3), 0);
    }

    #[test]
    fn a_loop_is_a_piece_of_its_parent_by_its_metadata_or_where_the_source_has_one_loop_at_its_lines(
    ) {
        // 0 -> 1 (outer header, line 5) -> 2 (inner header, 6) -> 2 | 3 (7) -> 1 | 4 (9):
        // the inner loop without metadata, its code within the outer loop's lines.
        let cfg = vec![vec![1], vec![2], vec![2, 3], vec![1, 4], vec![]];
        let forest = find_loops(&cfg, 0);
        let locations: Vec<Vec<Location>> = [3, 5, 6, 7, 9]
            .iter()
            .map(|&line| vec![at(&[], &[line])])
            .collect();
        let tree = region_tree::build(&forest, &vec![Vec::new(); 5], &[]);
        let start = |line: u32, column: usize| {
            declared(line, 8, &[]).map(|mut d| {
                d.start = column as LLVMMetadataRef;
                d
            })
        };
        let pieces = |outer: Option<DeclaredLoop>, inner, lines: &[(u32, u32)]| {
            let loops = [outer, inner].map(|declared| LoopAsWritten {
                declared,
                written: written(lines),
            });
            loop_pieces(&tree, &forest, &locations, &[], &loops)
        };
        // One loop as written at 5-8: the inner loop is a piece of it.
        assert_eq!(pieces(start(5, 1), None, &[(5, 8)]), [1]);
        // Two loops as written at 5-8 (`for (...) for (...)` on lines 5 to 8): two loops.
        assert_eq!(
            pieces(start(5, 1), None, &[(5, 8), (5, 8)]),
            Vec::<usize>::new()
        );
        // A loop as written inside the outer one that holds the inner one's code.
        assert_eq!(
            pieces(start(5, 1), None, &[(5, 8), (6, 6)]),
            Vec::<usize>::new()
        );
        // Both with metadata, starting apart (one line, two columns): two loops.
        assert_eq!(
            pieces(start(5, 1), start(5, 9), &[(5, 8)]),
            Vec::<usize>::new()
        );
        // Both with the same start: one loop, also where it is one of two loops as written
        // at those lines (the inner of two loops on one line, cut in two).
        assert_eq!(pieces(start(5, 9), start(5, 9), &[(5, 8), (5, 8)]), [1]);
    }

    /// The lines `plan_function` gives the one loop of 0 -> 1 -> 1 | 2, whose block holds
    /// `code` (lines of the function's own code), with `start`.
    fn one_loop_lines(code: &[u32], start: LoopAsWritten) -> (u32, u32) {
        let cfg = vec![vec![1], vec![1, 2], vec![]];
        let forest = find_loops(&cfg, 0);
        let locations = vec![
            vec![at(&[], &[3])],
            code.iter().map(|&line| at(&[], &[line])).collect(),
            vec![at(&[], &[40])],
        ];
        let tree = region_tree::build(&forest, &vec![Vec::new(); 3], &[]);
        let slots = FunctionSlots::new(0, &tree);
        let entries = plan_function(
            &slots,
            &tree,
            &forest,
            &locations,
            &[],
            &identity(),
            &[start],
        );
        assert_eq!(entries[1].kind, RegionKind::Loop);
        assert_eq!(
            entries[1].lines, entries[2].lines,
            "the body's lines are its loop's"
        );
        (entries[1].lines.first, entries[1].lines.last)
    }

    fn declared(first_line: u32, last_line: u32, calls: &[(u32, u32)]) -> Option<DeclaredLoop> {
        Some(DeclaredLoop {
            file: "/x/f.c".into(),
            first_line,
            last_line,
            calls: calls.to_vec(),
            start: std::ptr::null_mut(),
        })
    }

    fn written(ranges: &[(u32, u32)]) -> Vec<LineRange> {
        ranges
            .iter()
            .map(|&(first, last)| lines(first, last))
            .collect()
    }

    #[test]
    fn a_loop_is_where_its_metadata_says_from_its_keyword_to_its_end() {
        // `for (...) {` at 5, its first statement at 6, its closing brace at 9: the code
        // says 6-8, the metadata 5-9.
        let start = LoopAsWritten {
            declared: declared(5, 9, &[]),
            written: written(&[(5, 9), (20, 25)]),
        };
        assert_eq!(one_loop_lines(&[6, 7, 8], start), (5, 9));
        // Metadata of a loop in an inlined call is not the function's own loop's.
        let start = LoopAsWritten {
            declared: declared(30, 31, &[(7, 3)]),
            written: Vec::new(),
        };
        assert_eq!(one_loop_lines(&[6, 7, 8], start), (6, 8));
    }

    #[test]
    fn a_loop_without_metadata_is_the_narrowest_written_loop_holding_its_code() {
        // A vectorised copy of the inner loop 6-8, inside the outer loop 4-12.
        let nested = written(&[(4, 12), (6, 8), (20, 25)]);
        let start = |written| LoopAsWritten {
            declared: None,
            written,
        };
        assert_eq!(one_loop_lines(&[7, 6, 8, 7], start(nested.clone())), (6, 8));
        // Code moved in from around the loop (line 11), under a quarter of its lines.
        assert_eq!(
            one_loop_lines(&[6, 7, 7, 8, 11], start(nested.clone())),
            (6, 8)
        );
        // The outer loop, its inner loop unrolled whole into it: the inner loop holds only
        // half of its lines.
        assert_eq!(
            one_loop_lines(&[4, 6, 7, 10], start(nested.clone())),
            (4, 12)
        );
        // No loop as written holds three quarters of them (a `goto` loop, one the optimiser
        // made): its code's lines.
        assert_eq!(one_loop_lines(&[7, 14, 15, 30], start(nested)), (7, 30));
        assert_eq!(one_loop_lines(&[7, 9], start(Vec::new())), (7, 9));
    }

    fn at(sites: &[u32], lines: &[u32]) -> Location {
        Location {
            sites: sites.to_vec(),
            lines: lines.to_vec(),
            column: 0,
        }
    }
}
