// The only C++ in Kage: registers the Rust module pass with LLVM's new PassBuilder.
// The pass itself is `kage_run_on_module` in Rust (src/lib.rs), driven through the C API.
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Plugins/PassPlugin.h"
#include "llvm-c/Types.h"

// src/lib.rs mirrors this struct field by field.
static_assert(sizeof(llvm::PassPluginLibraryInfo) == 40, "PassPluginLibraryInfo layout changed");

extern "C" void kage_run_on_module(LLVMModuleRef module);

namespace {
struct KagePass : llvm::PassInfoMixin<KagePass> {
  llvm::PreservedAnalyses run(llvm::Module &M, llvm::ModuleAnalysisManager &) {
    kage_run_on_module(llvm::wrap(&M));
    return llvm::PreservedAnalyses::none();
  }
  static bool isRequired() { return true; } // run at -O0 and on optnone functions too
};
} // namespace

extern "C" uint32_t kage_plugin_api_version() { return LLVM_PLUGIN_API_VERSION; }

// Called through PassPluginLibraryInfo::RegisterPassBuilderCallbacks (built in Rust).
extern "C" void kage_register_pass_builder_callbacks(llvm::PassBuilder &PB) {
  // OptimizerLast also runs in clang's -O0 pipeline (buildO0DefaultPipeline invokes it).
  PB.registerOptimizerLastEPCallback(
      [](llvm::ModulePassManager &MPM, llvm::OptimizationLevel, llvm::ThinOrFullLTOPhase) {
        MPM.addPass(KagePass());
        MPM.addPass(llvm::AlwaysInlinerPass()); // inlines the pass's alwaysinline helpers, if any
      });
  PB.registerPipelineParsingCallback(
      [](llvm::StringRef Name, llvm::ModulePassManager &MPM, llvm::ArrayRef<llvm::PassBuilder::PipelineElement>) {
        if (Name != "kage") return false;
        MPM.addPass(KagePass());
        return true;
      });
}
