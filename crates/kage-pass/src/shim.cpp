// The only C++ in Kage: registers the Rust module passes with LLVM's new PassBuilder, reads
// the few debug-info fields the C API has no accessor for (src/debuginfo.rs), and wraps the
// few transformations the C API lacks (demoting SSA values to the stack, loop metadata:
// src/nests; splitting a critical edge: src/tools/count.rs; masked vector accesses made plain: src/pass.rs). The passes themselves are `kage_run_on_module` and `kage_version_loops` in
// Rust (src/lib.rs), driven through the C API.
#include <memory>
#include <tuple>
#include <utility>

#include "llvm/ADT/SmallSet.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/TargetLibraryInfo.h"
#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/IR/DebugInfo.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/DebugProgramInstruction.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Metadata.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/InstCombine/InstCombine.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/JumpThreading.h"
#include "llvm/Transforms/Scalar/SimplifyCFG.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Scalar/ScalarizeMaskedMemIntrin.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Transforms/Utils/Local.h"
#include "llvm/Transforms/Utils/Mem2Reg.h"
#include "llvm/Transforms/Utils/PromoteMemToReg.h"
#include "llvm/IR/Dominators.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm-c/Types.h"

// src/lib.rs mirrors this struct field by field.
static_assert(sizeof(llvm::PassPluginLibraryInfo) == 40, "PassPluginLibraryInfo layout changed");

// Returns whether it instrumented the module for a tool that asks for the clean-up below.
extern "C" bool kage_run_on_module(LLVMModuleRef module);
// Versions the loop nests the build selects (KAGE_TOOL=loops); returns whether it did.
extern "C" bool kage_version_loops(LLVMModuleRef module);

namespace {
// Shared by the passes of one pipeline: whether the Kage pass instrumented the module for a
// tool whose helpers need the clean-up (the working set's; see tools::Tool::needs_cleanup).
using CleanupFlag = std::shared_ptr<bool>;

struct KagePass : llvm::PassInfoMixin<KagePass> {
  CleanupFlag NeedsCleanup;
  explicit KagePass(CleanupFlag Flag = std::make_shared<bool>(false)) : NeedsCleanup(std::move(Flag)) {}
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &) {
    *NeedsCleanup = kage_run_on_module(llvm::wrap(&M));
    return llvm::PreservedAnalyses::none();
  }
  static bool isRequired() { return true; } // run at -O0 and on optnone functions too
};

// Line tables (`-gline-tables-only`, kage-cc's default) name each function's subprogram but
// leave out its linkage name, which names a C++ function inlined into another
// (`Accumulator::add_all(...)`, demangled, not `add_all`). Each defined function's
// subprogram gets it here, before inlining makes callees vanish. (clang's
// `-fdebug-info-for-profiling` would emit them too, but it changes the optimiser's
// decisions: Lua's `lessthanothers` gets inlined under it, and not in the program's build.)
static bool addLinkageNames(llvm::Module &M) {
  bool Changed = false;
  for (llvm::Function &F : M) {
    llvm::DISubprogram *SP = F.getSubprogram();
    if (!SP || !SP->getLinkageName().empty() || SP->getName() == F.getName()) continue;
    SP->replaceLinkageName(llvm::MDString::get(M.getContext(), F.getName()));
    Changed = true;
  }
  return Changed;
}

// The first two locations of a loop ID (the loop's start and end, when clang recorded them).
static std::pair<llvm::DILocation *, llvm::DILocation *> loopLocations(llvm::MDNode *Loop) {
  llvm::DILocation *First = nullptr, *Last = nullptr;
  for (unsigned K = 1; K < Loop->getNumOperands(); ++K)
    if (auto *L = llvm::dyn_cast_or_null<llvm::DILocation>(Loop->getOperand(K).get())) {
      if (!First) First = L;
      else if (!Last) Last = L;
    }
  return {First, Last ? Last : First};
}

// What the early pass records of the source as written, for the late pass: named metadata,
// one `!{subprogram, first line, last line}` per loop (`kage.source_loops`) and per function
// (`kage.source_functions`).
static const char *const WrittenTables[] = {"kage.source_loops", "kage.source_functions"};

static void addWritten(llvm::Module &M, unsigned Table, llvm::DISubprogram *SP, unsigned First,
                       unsigned Last) {
  llvm::LLVMContext &C = M.getContext();
  auto Line = [&](unsigned L) {
    return llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(C), L));
  };
  llvm::Metadata *Ops[] = {SP, Line(First), Line(std::max(First, Last))};
  M.getOrInsertNamedMetadata(WrittenTables[Table])->addOperand(llvm::MDNode::get(C, Ops));
}

// Where `F`'s cleanups and epilogues are: its lifetime markers (which come only in optimising
// builds) and its `ret`s (at the closing brace in optimising builds, where the returned value
// is loaded; at -O0 at a lone `return` statement, at the closing brace after several): their
// line, column and scope. Compared as such, not as location nodes: clang's key instructions
// give the load of a returned value a node of its own (another atom group) at the same place.
using CleanupPlace = std::tuple<unsigned, unsigned, const llvm::DIScope *>;
using Cleanups = llvm::SmallSet<CleanupPlace, 4>;
static CleanupPlace placeOf(const llvm::DebugLoc &DL) {
  return {DL.getLine(), DL.getCol(), DL->getScope()};
}
static Cleanups cleanupsOf(llvm::Function &F) {
  Cleanups Found;
  for (llvm::Instruction &I : llvm::instructions(F))
    if ((I.isLifetimeStartOrEnd() || llvm::isa<llvm::ReturnInst>(I)) && I.getDebugLoc())
      Found.insert(placeOf(I.getDebugLoc()));
  return Found;
}

// Whether `I` is code of a cleanup or an epilogue: anything at their places but a call of a
// function (a destructor at the closing brace runs there at every level) and a landing pad's
// code (the place where an exception leaves the function, at every level).
static bool isCleanup(const llvm::Instruction &I, const Cleanups &Skipped) {
  if (!I.getDebugLoc() || !Skipped.count(placeOf(I.getDebugLoc()))) return false;
  if (llvm::isa<llvm::IntrinsicInst>(I)) return true;
  return !llvm::isa<llvm::CallBase>(I) && !I.getParent()->isEHPad();
}

// The line of `I` when it is code of `Own`'s own (not inlined; 0: none).
static unsigned ownLine(const llvm::Instruction &I, const llvm::DISubprogram *Own) {
  const llvm::DebugLoc &DL = I.getDebugLoc();
  if (!Own || !DL || DL.getInlinedAt() || DL->getScope()->getSubprogram() != Own) return 0;
  return DL.getLine();
}

// The loops of `F` that clang gave no location metadata (a `goto` loop; a `while` whose
// body ends in `continue`, whose back edge with the metadata clang drops as unreachable):
// from the first to the last line of all their code (a `goto` loop ends at its `goto`; a
// `while` at its last `continue`, which optimising builds mark only on the cleanups they
// send it through: a loop whose cleanups end at a closing brace is longer by those lines
// than at -O0), the lines an -O0 build gives them. A loop
// that holds a branch with location metadata of its own (not an inner loop's; a `continue`
// that goes back through a block of cleanups), or whose header such a branch goes to (a
// back edge in code that never runs, after a `break`), is recorded by its metadata.
static void recordLoopsWithoutMetadata(llvm::Module &M, llvm::Function &F,
                                       llvm::DISubprogram *Own) {
  llvm::DominatorTree DT(F);
  llvm::LoopInfo LI(DT);
  llvm::SmallPtrSet<const llvm::Loop *, 8> Declared;
  for (llvm::BasicBlock &BB : F) {
    llvm::Instruction *T = BB.getTerminator();
    llvm::MDNode *ID = T ? T->getMetadata(llvm::LLVMContext::MD_loop) : nullptr;
    if (!ID || !loopLocations(ID).first) continue;
    if (const llvm::Loop *Holder = LI.getLoopFor(&BB)) Declared.insert(Holder);
    for (const llvm::BasicBlock *Target : llvm::successors(&BB))
      if (const llvm::Loop *L = LI.getLoopFor(Target); L && L->getHeader() == Target)
        Declared.insert(L);
  }
  for (llvm::Loop *L : LI.getLoopsInPreorder()) {
    if (Declared.count(L)) continue;
    unsigned First = ~0u, Last = 0;
    for (llvm::BasicBlock *BB : L->blocks())
      for (llvm::Instruction &I : *BB)
        if (unsigned Line = ownLine(I, Own)) {
          First = std::min(First, Line);
          Last = std::max(Last, Line);
        }
    if (Last != 0) addWritten(M, 0, Own, First, Last);
  }
}

// Every loop and function as the source wrote it, before the optimiser copies loops
// (vectorised bodies, unrolled remainders), drops their metadata (merged latches) and
// inlines functions (whose copies lose their closing lines): each loop's start and end lines
// from its `llvm.loop` metadata (without it, its code's first and last lines), each
// function's first and last line of code. The late pass
// reads them to give a loop that lost its metadata, and an inlined call, the lines an -O0
// build gives them (src/regions.rs). Named metadata changes no analysis.
static void recordWrittenSource(llvm::Module &M) {
  llvm::SmallPtrSet<llvm::MDNode *, 32> Seen;
  for (llvm::Function &F : M) {
    llvm::DISubprogram *Own = F.getSubprogram();
    // Cleanups at the closing brace come only in optimising builds (lifetime markers, the
    // branches into them, a `return;` that returns from there; not the destructors they
    // call, which -O0 calls there too), and the epilogues of `return` statements (the load
    // of the value returned, the branches, the `ret`) are at other places at -O0 and in
    // optimising builds: none of them count, nor does any terminator, so that a function
    // ends at its last statement at every level (a value returned, a loop's condition count
    // by the code computing them).
    Cleanups Skipped = cleanupsOf(F);
    unsigned Last = 0;
    for (llvm::BasicBlock &BB : F) {
      for (llvm::Instruction &I : BB) {
        if (!I.isTerminator() && !isCleanup(I, Skipped))
          Last = std::max(Last, ownLine(I, Own));
        llvm::MDNode *Loop = I.isTerminator() ? I.getMetadata(llvm::LLVMContext::MD_loop) : nullptr;
        if (!Loop || !Seen.insert(Loop).second) continue;
        auto [Start, End] = loopLocations(Loop);
        llvm::DISubprogram *SP = Start ? Start->getScope()->getSubprogram() : nullptr;
        if (!SP || Start->getLine() == 0) continue;
        addWritten(M, 0, SP, Start->getLine(), End->getLine());
      }
    }
    if (Own && Last != 0) addWritten(M, 1, Own, Own->getLine(), Last);
    if (Own && !F.isDeclaration()) recordLoopsWithoutMetadata(M, F, Own);
  }
}

// How many entries the early pass recorded in table `Table` (0: loops, 1: functions).
extern "C" unsigned kage_written_count(LLVMModuleRef Module, unsigned Table) {
  llvm::NamedMDNode *T = llvm::unwrap(Module)->getNamedMetadata(WrittenTables[Table & 1]);
  return T ? T->getNumOperands() : 0;
}

// Entry `Index` of table `Table`: its subprogram, first and last line. Returns false for an
// entry of another shape.
extern "C" bool kage_written_entry(LLVMModuleRef Module, unsigned Table, unsigned Index,
                                   LLVMMetadataRef *Subprogram, unsigned *First,
                                   unsigned *Last) {
  llvm::NamedMDNode *T = llvm::unwrap(Module)->getNamedMetadata(WrittenTables[Table & 1]);
  if (!T || Index >= T->getNumOperands()) return false;
  llvm::MDNode *Entry = T->getOperand(Index);
  if (Entry->getNumOperands() != 3) return false;
  auto *SP = llvm::dyn_cast_or_null<llvm::DISubprogram>(Entry->getOperand(0).get());
  auto *F = llvm::mdconst::dyn_extract_or_null<llvm::ConstantInt>(Entry->getOperand(1));
  auto *L = llvm::mdconst::dyn_extract_or_null<llvm::ConstantInt>(Entry->getOperand(2));
  if (!SP || !F || !L) return false;
  *Subprogram = llvm::wrap(SP);
  *First = F->getZExtValue();
  *Last = L->getZExtValue();
  return true;
}

// At the start of the pipeline, on code as the source wrote it: names subprograms by their
// linkage names, records where the loops and functions are, and versions the selected loop nests
// (src/nests) before anything unrolls or vectorises them.
struct KageEarlyPass : llvm::PassInfoMixin<KageEarlyPass> {
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &) {
    bool Named = addLinkageNames(M);
    recordWrittenSource(M);
    bool Versioned = kage_version_loops(llvm::wrap(&M));
    return Named || Versioned ? llvm::PreservedAnalyses::none() : llvm::PreservedAnalyses::all();
  }
  static bool isRequired() { return true; }
};

// A relaxed store of a word only this thread writes (metadata `kage.own_word`, ir.rs's
// add_relaxed) that writes back what a marked load of the same word just read, with
// nothing in between that may write memory: what an addition of a count that folded to 0
// leaves. LLVM keeps such pairs (it does not remove atomic accesses); removing them
// changes nothing another thread can see, since no other thread writes the word. A
// single-thread fence takes the store's place.
struct KageDropWriteBacks : llvm::PassInfoMixin<KageDropWriteBacks> {
  llvm::PreservedAnalyses run(llvm::Function &F, llvm::FunctionAnalysisManager &) {
    unsigned Kind = F.getContext().getMDKindID("kage.own_word");
    llvm::SmallVector<llvm::StoreInst *, 16> WriteBacks;
    for (llvm::BasicBlock &BB : F)
      for (llvm::Instruction &I : BB) {
        auto *Store = llvm::dyn_cast<llvm::StoreInst>(&I);
        if (!Store || !Store->getMetadata(Kind)) continue;
        auto *Load = llvm::dyn_cast<llvm::LoadInst>(Store->getValueOperand());
        if (!Load || !Load->getMetadata(Kind) || Load->getParent() != &BB ||
            Load->getPointerOperand() != Store->getPointerOperand())
          continue;
        bool Quiet = true;
        for (auto It = std::next(Load->getIterator()); &*It != Store; ++It)
          if (It->mayWriteToMemory()) Quiet = false;
        if (Quiet) WriteBacks.push_back(Store);
      }
    for (llvm::StoreInst *Store : WriteBacks) {
      auto *Load = llvm::cast<llvm::LoadInst>(Store->getValueOperand());
      // A compiler barrier (no instruction) in its place: the backend moved nothing across
      // the store, and letting it now (MachineSink) made Lua's interpreter loop spill
      // twice as much.
      new llvm::FenceInst(F.getContext(), llvm::AtomicOrdering::SequentiallyConsistent,
                          llvm::SyncScope::SingleThread, Store->getIterator());
      Store->eraseFromParent();
      if (Load->use_empty()) Load->eraseFromParent();
    }
    return WriteBacks.empty() ? llvm::PreservedAnalyses::all() : llvm::PreservedAnalyses::none();
  }
};

// After the AlwaysInliner, nothing else runs at OptimizerLast: the inlined working-set
// helpers would leave each function's local budget in memory (an alloca: mem2reg puts it in
// registers), and, in every hot loop, the `!invariant.load`s of the shadow offset and
// line shift (one pair per mark) and the budget's `llvm.threadlocal.address`. EarlyCSE
// (with MemorySSA) merges the repeated ones within a function; InstCombine folds the
// helpers' arithmetic on constants and phis of constants, JumpThreading and SimplifyCFG
// thread the branches on what a predecessor already decided (the count tool's return
// blocks, where a deferred function that pushed and one that did not meet), and a second
// EarlyCSE merges what that exposed; LICM hoists what is left out of loops. Measured with
// cachegrind on the count tool's builds: Lua -4%, SQLite -4%, zstd -1% instructions (the
// same compile times). Only for modules whose tool asks for it, and not at -O0.
struct KageCleanupPass : llvm::PassInfoMixin<KageCleanupPass> {
  CleanupFlag NeedsCleanup;
  llvm::ModulePassManager Cleanup;
  explicit KageCleanupPass(CleanupFlag Flag) : NeedsCleanup(std::move(Flag)) {
    llvm::FunctionPassManager FPM;
    FPM.addPass(llvm::PromotePass());
    FPM.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    FPM.addPass(llvm::InstCombinePass());
    FPM.addPass(llvm::JumpThreadingPass());
    FPM.addPass(llvm::SimplifyCFGPass());
    FPM.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    FPM.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                      /*UseMemorySSA=*/true));
    // Measured (`--medium`, cachegrind, against the same build without it): SQLite -1.4%
    // instructions, Lua -0.7%, zstd -0.6%, bzip2 -0.2%.
    FPM.addPass(KageDropWriteBacks());
    Cleanup.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(FPM)));
  }
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &MAM) {
    if (!*NeedsCleanup) return llvm::PreservedAnalyses::all();
    return Cleanup.run(M, MAM);
  }
};
} // namespace

extern "C" uint32_t kage_plugin_api_version() { return LLVM_PLUGIN_API_VERSION; }

// The subprogram a local scope (a subprogram, a lexical block) lies in; null for any other
// metadata.
extern "C" LLVMMetadataRef kage_di_scope_subprogram(LLVMMetadataRef Scope) {
  auto *Local = llvm::dyn_cast_or_null<llvm::DILocalScope>(llvm::unwrap(Scope));
  return Local ? llvm::wrap(Local->getSubprogram()) : nullptr;
}

// A subprogram's source name (`Linkage` false) or linkage name (true), not NUL-terminated,
// its length in *Len; "" when it has none or `Subprogram` is not one.
extern "C" const char *kage_di_subprogram_name(LLVMMetadataRef Subprogram, bool Linkage,
                                               size_t *Len) {
  auto *SP = llvm::dyn_cast_or_null<llvm::DISubprogram>(llvm::unwrap(Subprogram));
  llvm::StringRef Name = !SP ? "" : Linkage ? SP->getLinkageName() : SP->getName();
  *Len = Name.size();
  return Name.data();
}

// Splits the critical edge From -> To (From has other successors, To other predecessors):
// the new block on it, whose phis `To`'s were updated for; null if the edge cannot have a
// block of its own (an indirectbr's, a callbr's, one into an EH pad).
extern "C" LLVMBasicBlockRef kage_split_critical_edge(LLVMBasicBlockRef From,
                                                      LLVMBasicBlockRef To) {
  auto *Terminator = llvm::unwrap(From)->getTerminator();
  if (!Terminator) return nullptr;
  for (unsigned I = 0; I < Terminator->getNumSuccessors(); ++I)
    if (Terminator->getSuccessor(I) == llvm::unwrap(To))
      // A switch's several cases to `To` become one edge through the new block.
      return llvm::wrap(llvm::SplitCriticalEdge(
          Terminator, I, llvm::CriticalEdgeSplittingOptions().setMergeIdenticalEdges()));
  return nullptr;
}

// Splits Inst's block before Inst: Inst and what follows it go to a new block, which the
// old one branches to (its successors' phis are updated). Returns the new block.
extern "C" LLVMBasicBlockRef kage_split_block_before(LLVMValueRef Inst) {
  auto *I = llvm::cast<llvm::Instruction>(llvm::unwrap(Inst));
  return llvm::wrap(I->getParent()->splitBasicBlock(I));
}

// Demotes an instruction's value to a stack slot (loads before its uses, a store after it);
// a PHI to stores in its predecessors and a load in its block. Returns the slot, or null
// when the instruction cannot be demoted (a token, or used by a PHI in an EH pad block).
extern "C" LLVMValueRef kage_demote_to_stack(LLVMValueRef Value) {
  auto *I = llvm::dyn_cast_or_null<llvm::Instruction>(llvm::unwrap(Value));
  if (!I || I->getType()->isTokenTy()) return nullptr;
  if (auto *Phi = llvm::dyn_cast<llvm::PHINode>(I)) return llvm::wrap(llvm::DemotePHIToStack(Phi));
  return llvm::wrap(llvm::DemoteRegToStack(*I));
}

// Tells the optimiser what a loop-nest runtime function may touch: the memory its pointer
// arguments point to (the nest's descriptor, an array of counts) and the runtime's own,
// which the program cannot name; parameters in `AddressOnly` are never dereferenced and
// only their address is kept. Without it a call in a nest's instrumented version would
// make every pointer it is given escape and every load of the function wait for it, which
// would slow the original version too (both are one function). The runtime never calls back
// into the program.
extern "C" void kage_declare_runtime_effects(LLVMValueRef Function, const unsigned *AddressOnly,
                                             unsigned Count) {
  auto *F = llvm::cast<llvm::Function>(llvm::unwrap(Function));
  F->setMemoryEffects(llvm::MemoryEffects::argMemOnly() |
                      llvm::MemoryEffects::inaccessibleMemOnly());
  F->addFnAttr(llvm::Attribute::NoCallback);
  for (unsigned K = 0; K < Count; ++K) {
    F->addParamAttr(AddressOnly[K], llvm::Attribute::ReadNone);
    F->addParamAttr(AddressOnly[K],
                    llvm::Attribute::getWithCaptureInfo(
                        F->getContext(), llvm::CaptureInfo(llvm::CaptureComponents::Address)));
  }
}

// Marks a declared global as defined in the same linked image (`dso_local`), which the C
// API cannot: the runtime's globals in code for an executable, reached directly rather
// than through the GOT (ir::declare_runtime_global).
extern "C" void kage_set_dso_local(LLVMValueRef Global) {
  llvm::cast<llvm::GlobalValue>(llvm::unwrap(Global))->setDSOLocal(true);
}

// Whether the call `Call` calls a function of the C library (or the C++ runtime) that the
// target has, as LLVM's TargetLibraryInfo knows them, taking the caller's `-fno-builtin`
// into account (segments::returns_without_callbacks), which the C API cannot tell. The
// target's table is built once per target triple.
extern "C" bool kage_calls_library_function(LLVMValueRef Call) {
  auto *CB = llvm::dyn_cast_or_null<llvm::CallBase>(llvm::unwrap(Call));
  if (!CB || !CB->getCalledFunction()) return false;
  const llvm::Function &Caller = *CB->getFunction();
  static thread_local std::unique_ptr<llvm::TargetLibraryInfoImpl> Table;
  static thread_local std::string TableTriple;
  const std::string &Triple = Caller.getParent()->getTargetTriple().str();
  if (!Table || TableTriple != Triple) {
    Table = std::make_unique<llvm::TargetLibraryInfoImpl>(Caller.getParent()->getTargetTriple());
    TableTriple = Triple;
  }
  llvm::TargetLibraryInfo Library(*Table, &Caller);
  llvm::LibFunc Function;
  return Library.getLibFunc(*CB, Function) && Library.has(Function);
}

// Inlines the call `Call` (a direct call to a function with a body); false when LLVM
// cannot.
// Masked and per-lane vector accesses (`llvm.masked.load`, `store`, `gather`, `scatter`,
// `expandload`, `compressstore`: what the vectoriser emits for AVX2 and AVX-512 targets)
// become one plain access per lane under a branch on its mask bit, as LLVM's code generator
// makes them for targets without such instructions: every tool then sees each lane that is
// accessed as a plain load or store. The default TargetTransformInfo (no target machine)
// finds none of them legal, so the pass scalarises them all.
extern "C" void kage_scalarize_masked_memory(LLVMValueRef Function) {
  llvm::Function &F = *llvm::unwrap<llvm::Function>(Function);
  llvm::FunctionAnalysisManager FAM;
  FAM.registerPass([] { return llvm::TargetIRAnalysis(); });
  FAM.registerPass([] { return llvm::DominatorTreeAnalysis(); });
  FAM.registerPass([] { return llvm::PassInstrumentationAnalysis(); });
  llvm::ScalarizeMaskedMemIntrinPass().run(F, FAM);
}

extern "C" bool kage_inline_call(LLVMValueRef Call) {
  auto *CB = llvm::dyn_cast_or_null<llvm::CallBase>(llvm::unwrap(Call));
  if (!CB) return false;
  llvm::InlineFunctionInfo Info;
  return llvm::InlineFunction(*CB, Info).isSuccess();
}

// A copy of `Function` in its module, named `Name`: the instrumented version of a nest
// calls it instead of `Function` (src/nests/version.rs, `call_copies_of_local_callees`).
extern "C" LLVMValueRef kage_copy_function(LLVMValueRef Function, const char *Name) {
  auto *F = llvm::dyn_cast_or_null<llvm::Function>(llvm::unwrap(Function));
  if (!F || F->isDeclaration()) return nullptr;
  llvm::ValueToValueMapTy Map;
  llvm::Function *Copy = llvm::CloneFunction(F, Map);
  Copy->setName(Name);
  return llvm::wrap(Copy);
}

// The variable record of a stack slot: its declare (`-g`), or with clang's assignment
// tracking (-O1 and up with -g) one of the assignment markers linked to it; null if none.
static llvm::DbgVariableRecord *slotRecord(llvm::AllocaInst *Slot) {
  for (llvm::DbgVariableRecord *Record : llvm::findDVRDeclares(Slot))
    if (Record->getVariable()) return Record;
  for (llvm::DbgVariableRecord *Record : llvm::at::getDVRAssignmentMarkers(Slot))
    if (Record->getVariable()) return Record;
  return nullptr;
}

// Whether a stack slot holds a local variable of a function inlined into this one (its
// debug record's location is inlined).
extern "C" bool kage_slot_of_inlined_callee(LLVMValueRef Value) {
  auto *Slot = llvm::dyn_cast_or_null<llvm::AllocaInst>(llvm::unwrap(Value));
  llvm::DbgVariableRecord *Record = Slot ? slotRecord(Slot) : nullptr;
  return Record && Record->getDebugLoc() && Record->getDebugLoc().getInlinedAt();
}

// The source name of the variable a stack slot or a global holds, from debug information
// (`-g`: a stack slot's variable record, the global's `DIGlobalVariable`): *Len bytes, not
// NUL-terminated; null when there is none, or when the slot is an inlined callee's (its
// name means nothing in the nest's source).
extern "C" const char *kage_variable_name(LLVMValueRef Value, size_t *Len) {
  llvm::Value *V = llvm::unwrap(Value);
  llvm::StringRef Name;
  if (auto *Slot = llvm::dyn_cast_or_null<llvm::AllocaInst>(V)) {
    llvm::DbgVariableRecord *Record = slotRecord(Slot);
    if (Record && !(Record->getDebugLoc() && Record->getDebugLoc().getInlinedAt()))
      Name = Record->getVariable()->getName();
  } else if (auto *Global = llvm::dyn_cast_or_null<llvm::GlobalVariable>(V)) {
    llvm::SmallVector<llvm::DIGlobalVariableExpression *, 1> Expressions;
    Global->getDebugInfo(Expressions);
    if (!Expressions.empty() && Expressions[0]->getVariable())
      Name = Expressions[0]->getVariable()->getName();
  }
  if (Name.empty()) return nullptr;
  *Len = Name.size();
  return Name.data();
}

// Promotes to SSA values the stack slots of `Function` that hold the locals and
// parameters of callees inlined into it (their debug records' locations are inlined), as
// mem2reg would: the `this` of an inlined accessor then points straight at the caller's
// object instead of through a slot.
extern "C" void kage_promote_inlined_slots(LLVMValueRef Function) {
  auto *F = llvm::cast<llvm::Function>(llvm::unwrap(Function));
  std::vector<llvm::AllocaInst *> Slots;
  for (llvm::Instruction &I : F->getEntryBlock())
    if (auto *Slot = llvm::dyn_cast<llvm::AllocaInst>(&I)) {
      llvm::DbgVariableRecord *Record = slotRecord(Slot);
      bool Inlined = Record && Record->getDebugLoc() && Record->getDebugLoc().getInlinedAt();
      if (Inlined && llvm::isAllocaPromotable(Slot)) Slots.push_back(Slot);
    }
  if (Slots.empty()) return;
  llvm::DominatorTree Tree(*F);
  llvm::PromoteMemToReg(Slots, Tree);
}


// Where the loop whose back-edge branch is `Branch` starts and ends in the source: the first
// two locations of its `llvm.loop` metadata (clang records them with debug information; the
// inliner gives them their inlined-at chains), in *Start and *End (the start again when there
// is one). Returns false when the branch has no such metadata.
extern "C" bool kage_loop_locations(LLVMValueRef Branch, LLVMMetadataRef *Start,
                                    LLVMMetadataRef *End) {
  auto *I = llvm::dyn_cast_or_null<llvm::Instruction>(llvm::unwrap(Branch));
  llvm::MDNode *Loop = I ? I->getMetadata(llvm::LLVMContext::MD_loop) : nullptr;
  if (!Loop) return false;
  auto [First, Last] = loopLocations(Loop);
  if (!First) return false;
  *Start = llvm::wrap(First);
  *End = llvm::wrap(Last);
  return true;
}

// A copy of the loop ID of back-edge branch `Branch` that is its own (a cloned loop must not
// share its original's ID), with its location and other properties; `AsWritten` drops what
// asks for vectorising, interleaving, unrolling or distributing it and forbids them.
static void giveOwnLoopID(LLVMValueRef Branch, bool AsWritten) {
  auto *I = llvm::dyn_cast_or_null<llvm::Instruction>(llvm::unwrap(Branch));
  if (!I) return;
  llvm::MDNode *Old = I->getMetadata(llvm::LLVMContext::MD_loop);
  if (!Old && !AsWritten) return;
  llvm::LLVMContext &C = I->getContext();
  llvm::SmallVector<llvm::Metadata *, 8> Ops;
  Ops.push_back(nullptr); // the self reference
  if (Old)
    for (unsigned K = 1; K < Old->getNumOperands(); ++K) {
      llvm::Metadata *Op = Old->getOperand(K).get();
      if (AsWritten)
        if (auto *Node = llvm::dyn_cast_or_null<llvm::MDNode>(Op))
          if (auto *Name = llvm::dyn_cast_or_null<llvm::MDString>(
                  Node->getNumOperands() ? Node->getOperand(0).get() : nullptr))
            if (Name->getString().starts_with("llvm.loop.vectorize") ||
                Name->getString().starts_with("llvm.loop.interleave") ||
                Name->getString().starts_with("llvm.loop.unroll") ||
                Name->getString().starts_with("llvm.loop.distribute"))
              continue;
      Ops.push_back(Op);
    }
  if (AsWritten) {
    auto Flag = [&](const char *Name, bool Value) {
      llvm::Metadata *Parts[] = {llvm::MDString::get(C, Name),
                                 llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(
                                     llvm::Type::getInt1Ty(C), Value))};
      Ops.push_back(llvm::MDNode::get(C, Parts));
    };
    Flag("llvm.loop.vectorize.enable", false);
    llvm::Metadata *Interleave[] = {
        llvm::MDString::get(C, "llvm.loop.interleave.count"),
        llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(C), 1))};
    Ops.push_back(llvm::MDNode::get(C, Interleave));
    Flag("llvm.loop.distribute.enable", false);
    Ops.push_back(llvm::MDNode::get(C, {llvm::MDString::get(C, "llvm.loop.unroll.disable")}));
  }
  llvm::MDNode *Loop = llvm::MDNode::getDistinct(C, Ops);
  Loop->replaceOperandWith(0, Loop);
  I->setMetadata(llvm::LLVMContext::MD_loop, Loop);
}

// Gives the loop whose back-edge branch is `Branch` a loop ID of its own that keeps its
// location and other properties and forbids vectorising, interleaving, unrolling and
// distributing it: the instrumented version must run one source iteration at a time.
extern "C" void kage_keep_loop_as_written(LLVMValueRef Branch) { giveOwnLoopID(Branch, true); }

// Gives the loop whose back-edge branch is `Branch` (any branch: one without a loop ID is
// left alone) a loop ID of its own, with its properties: the pristine copy of a nest is
// optimised as the program asked.
extern "C" void kage_fresh_loop_id(LLVMValueRef Branch) { giveOwnLoopID(Branch, false); }

// Called through PassPluginLibraryInfo::RegisterPassBuilderCallbacks (built in Rust).
extern "C" void kage_register_pass_builder_callbacks(llvm::PassBuilder &PB) {
  // OptimizerLast also runs in clang's -O0 pipeline (buildO0DefaultPipeline invokes it).
  PB.registerOptimizerLastEPCallback(
      [](llvm::ModulePassManager &MPM, llvm::OptimizationLevel Level, llvm::ThinOrFullLTOPhase) {
        auto NeedsCleanup = std::make_shared<bool>(false);
        MPM.addPass(KagePass(NeedsCleanup));
        MPM.addPass(llvm::AlwaysInlinerPass()); // inlines the pass's alwaysinline helpers, if any
        if (Level != llvm::OptimizationLevel::O0) MPM.addPass(KageCleanupPass(NeedsCleanup));
      });
  // PipelineStart runs in the -O0 pipeline too, and in the LTO pre-link ones (not at link).
  PB.registerPipelineStartEPCallback(
      [](llvm::ModulePassManager &MPM, llvm::OptimizationLevel) {
        MPM.addPass(KageEarlyPass());
      });
  PB.registerPipelineParsingCallback(
      [](llvm::StringRef Name, llvm::ModulePassManager &MPM, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (Name == "kage-version-loops") {
          MPM.addPass(KageEarlyPass());
          return true;
        }
        if (Name != "kage") return false;
        MPM.addPass(KagePass());
        return true;
      });
}
