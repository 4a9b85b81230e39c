// The only C++ in Kage: registers the Rust module pass with LLVM's new PassBuilder, and reads
// the few debug-info fields the C API has no accessor for (src/debuginfo.rs).
// The pass itself is `kage_run_on_module` in Rust (src/lib.rs), driven through the C API.
#include <memory>
#include <utility>

#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/Scalar/EarlyCSE.h"
#include "llvm/Transforms/Scalar/LICM.h"
#include "llvm/Transforms/Scalar/LoopPassManager.h"
#include "llvm/Transforms/Utils/Mem2Reg.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm-c/Types.h"

// src/lib.rs mirrors this struct field by field.
static_assert(sizeof(llvm::PassPluginLibraryInfo) == 40, "PassPluginLibraryInfo layout changed");

// Returns whether it instrumented the module for a tool that asks for the clean-up below.
extern "C" bool kage_run_on_module(LLVMModuleRef module);

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

// After the AlwaysInliner, nothing else runs at OptimizerLast: the inlined working-set
// helpers would leave each function's local budget in memory (an alloca: mem2reg puts it in
// registers), and, in every hot loop, the `!invariant.load`s of the shadow offset and
// line shift (one pair per mark) and the budget's `llvm.threadlocal.address`. EarlyCSE
// (with MemorySSA) merges the repeated ones within a function; LICM hoists what is left
// out of loops. Only for modules whose tool asks for it, and not at -O0.
struct KageCleanupPass : llvm::PassInfoMixin<KageCleanupPass> {
  CleanupFlag NeedsCleanup;
  llvm::ModulePassManager Cleanup;
  explicit KageCleanupPass(CleanupFlag Flag) : NeedsCleanup(std::move(Flag)) {
    llvm::FunctionPassManager FPM;
    FPM.addPass(llvm::PromotePass());
    FPM.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    FPM.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                      /*UseMemorySSA=*/true));
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
  PB.registerPipelineParsingCallback(
      [](llvm::StringRef Name, llvm::ModulePassManager &MPM, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (Name != "kage") return false;
        MPM.addPass(KagePass());
        return true;
      });
}
