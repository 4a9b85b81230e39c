// The only C++ in Kage: registers the Rust module pass with LLVM's new PassBuilder.
// The pass itself is `kage_run_on_module` in Rust (src/lib.rs), driven through the C API.
#include <memory>
#include <utility>

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

// Returns whether it instrumented the module in a working-set mode.
extern "C" bool kage_run_on_module(LLVMModuleRef module);

namespace {
// Shared by the passes of one pipeline: whether the Kage pass instrumented the module in a
// working-set mode (the only case where the cleanup has anything to do).
using WorkingSetFlag = std::shared_ptr<bool>;

struct KagePass : llvm::PassInfoMixin<KagePass> {
  WorkingSetFlag WorkingSet;
  explicit KagePass(WorkingSetFlag Flag = std::make_shared<bool>(false)) : WorkingSet(std::move(Flag)) {}
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &) {
    *WorkingSet = kage_run_on_module(llvm::wrap(&M));
    return llvm::PreservedAnalyses::none();
  }
  static bool isRequired() { return true; } // run at -O0 and on optnone functions too
};

// After the AlwaysInliner, nothing else runs at OptimizerLast: the inlined working-set
// helpers would leave each function's local budget in memory (an alloca: mem2reg puts it in
// registers), and, in every hot loop, the `!invariant.load`s of the shadow offset and
// line shift (one pair per mark) and the budget's `llvm.threadlocal.address`. EarlyCSE
// (with MemorySSA) merges the repeated ones within a function; LICM hoists what is left
// out of loops. Only for modules instrumented in a working-set mode, and not at -O0.
struct KageCleanupPass : llvm::PassInfoMixin<KageCleanupPass> {
  WorkingSetFlag WorkingSet;
  llvm::ModulePassManager Cleanup;
  explicit KageCleanupPass(WorkingSetFlag Flag) : WorkingSet(std::move(Flag)) {
    llvm::FunctionPassManager FPM;
    FPM.addPass(llvm::PromotePass());
    FPM.addPass(llvm::EarlyCSEPass(/*UseMemorySSA=*/true));
    FPM.addPass(llvm::createFunctionToLoopPassAdaptor(llvm::LICMPass(llvm::LICMOptions()),
                                                      /*UseMemorySSA=*/true));
    Cleanup.addPass(llvm::createModuleToFunctionPassAdaptor(std::move(FPM)));
  }
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &MAM) {
    if (!*WorkingSet) return llvm::PreservedAnalyses::all();
    return Cleanup.run(M, MAM);
  }
};
} // namespace

extern "C" uint32_t kage_plugin_api_version() { return LLVM_PLUGIN_API_VERSION; }

// Called through PassPluginLibraryInfo::RegisterPassBuilderCallbacks (built in Rust).
extern "C" void kage_register_pass_builder_callbacks(llvm::PassBuilder &PB) {
  // OptimizerLast also runs in clang's -O0 pipeline (buildO0DefaultPipeline invokes it).
  PB.registerOptimizerLastEPCallback(
      [](llvm::ModulePassManager &MPM, llvm::OptimizationLevel Level, llvm::ThinOrFullLTOPhase) {
        auto WorkingSet = std::make_shared<bool>(false);
        MPM.addPass(KagePass(WorkingSet));
        MPM.addPass(llvm::AlwaysInlinerPass()); // inlines the pass's alwaysinline helpers, if any
        if (Level != llvm::OptimizationLevel::O0) MPM.addPass(KageCleanupPass(WorkingSet));
      });
  PB.registerPipelineParsingCallback(
      [](llvm::StringRef Name, llvm::ModulePassManager &MPM, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (Name != "kage") return false;
        MPM.addPass(KagePass());
        return true;
      });
}
