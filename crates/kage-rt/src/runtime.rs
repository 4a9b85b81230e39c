//! Process-wide runtime state: one-time initialisation (options, the tool for the build),
//! the end of the program (report), fork handling, and the program-facing control API.
//!
//! The top of the runtime with `abi`: it imports the modules below and none imports it
//! (`gate` reaches [`kage_rt_first_event`] through a link-time declaration).

use crate::gate::{self, ThreadState, DISABLED, FINISHED, GATE};
use crate::options::{self, Options};
use crate::registry::{self, Instrumentations, REGISTRY};
use crate::sync::locks_held;
use crate::thread::{self, THREADS};
use crate::tool::Tool;
use crate::tools;
use crate::{report, signals};
use kage_report::ProgramEnd;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
use std::sync::OnceLock;

pub struct Runtime {
    pub opts: Options,
    pub tool: &'static dyn Tool,
    /// Executable basename, for `%e`.
    pub exe: String,
    /// The working directory when the program started: relative report paths are taken
    /// from it, not from wherever the program has gone since (`chdir`).
    start_dir: Option<std::path::PathBuf>,
    key: libc::pthread_key_t,
}

impl Runtime {
    /// The calling thread's state, created on its first event.
    pub fn thread(&'static self) -> *const ThreadState {
        thread::current_or_create(self.tool, self.key)
    }
}

static RT: OnceLock<Runtime> = OnceLock::new();
static INIT: AtomicU8 = AtomicU8::new(0);
static PID: AtomicU32 = AtomicU32::new(0);
static FORKED_FROM: AtomicU32 = AtomicU32::new(0);
/// The thread that ends the program was left inside the runtime by a signal handler.
static LEFT_BY_HANDLER: AtomicBool = AtomicBool::new(false);

thread_local! {
    static INITIALIZING: Cell<bool> = const { Cell::new(false) };
}

extern "C" {
    // glibc: like atexit, but the handler receives the exit status.
    fn on_exit(
        f: unsafe extern "C" fn(libc::c_int, *mut libc::c_void),
        arg: *mut libc::c_void,
    ) -> libc::c_int;
    // C11: run by quick_exit(), which skips the atexit handlers.
    fn at_quick_exit(f: unsafe extern "C" fn()) -> libc::c_int;
}

/// Whether the runtime is set up.
pub fn initialized() -> bool {
    RT.get().is_some()
}

/// Names on stderr, once each, the modules built for one tool other than the one running:
/// their code is not measured (a program and a library built with different `KAGE_TOOL`s).
pub fn warn_about_other_builds(rt: &Runtime) {
    let running = rt.tool.name();
    for module in registry::built_for_other_tools(running) {
        let built = module
            .instrumentation
            .and_then(kage_abi::Instrumentation::only_tool)
            .unwrap_or("");
        let object = if module.object.is_empty() {
            String::new()
        } else {
            format!("{} ", module.object)
        };
        eprintln!(
            "kage: warning: {object}({}) was built with KAGE_TOOL={built}, but the '{running}' \
             tool runs (the {} was built for it): that code is not measured; build every \
             part of the program with the same KAGE_TOOL (code built without KAGE_TOOL is \
             measured by every tool)",
            module.name,
            if module.in_executable {
                "program's other code, or tool=,"
            } else {
                "program"
            }
        );
    }
}

/// The runtime, initialising it on first use (thread-safe). `None` while this very thread
/// is initialising it (events raised meanwhile are ignored).
#[inline]
pub fn ensure_init() -> Option<&'static Runtime> {
    if let Some(rt) = RT.get() {
        return Some(rt);
    }
    init_slow()
}

#[cold]
fn init_slow() -> Option<&'static Runtime> {
    if INITIALIZING.with(|i| i.get()) {
        return None;
    }
    if INIT.compare_exchange(0, 1, AcqRel, Acquire).is_ok() {
        INITIALIZING.with(|i| i.set(true));
        init();
        INITIALIZING.with(|i| i.set(false));
        INIT.store(2, Release);
    } else {
        while RT.get().is_none() {
            unsafe { libc::sched_yield() };
        }
    }
    RT.get()
}

/// `KAGE_OPTIONS`. From `/proc/self/environ` (the environment the process started with)
/// while the C library has not yet set up `environ`: the runtime starts in the first hook,
/// which an instrumented function of the program's own `.preinit_array` runs before that.
fn kage_options_variable() -> String {
    extern "C" {
        static environ: *const *const std::ffi::c_char;
    }
    // SAFETY: reads the C library's pointer, null or the environment.
    if !unsafe { environ }.is_null() {
        return std::env::var("KAGE_OPTIONS").unwrap_or_default();
    }
    let initial = std::fs::read("/proc/self/environ").unwrap_or_default();
    (initial.split(|&b| b == 0))
        .find_map(|entry| entry.strip_prefix(b"KAGE_OPTIONS="))
        .map(|value| String::from_utf8_lossy(value).into_owned())
        .unwrap_or_default()
}

fn init() {
    let env = kage_options_variable();
    let (mut opts, warnings) = Options::parse(&env, &tools::option_tables());
    registry::set_verbosity(opts.verbosity());
    for w in warnings {
        eprintln!("kage: warning: {w}");
    }
    if opts.help() {
        eprint!(
            "{}",
            opts.help_text(tools::TOOLS.iter().map(|t| (t.name, t.help)))
        );
    }
    let built = registry::instrumentations_seen();
    choose_tool_for_build(&mut opts, built, Options::is_set(&env, options::TOOL.name));
    choose_line_size_for_build(&mut opts, Options::is_set(&env, options::LINE_SIZE.name));
    let info = match tools::select(opts.tool()) {
        Ok(t) => t,
        Err(e) => {
            // The program still runs and still gets a report, from the default tool.
            let t = tools::fallback();
            eprintln!("kage: warning: {e}; using the '{}' tool instead", t.name);
            let _ = opts.set(&options::TOOL, t.name);
            t
        }
    };
    let tool = (info.make)();
    tool.init(&mut opts, built);
    if !opts.enabled() {
        GATE.fetch_or(DISABLED, Relaxed);
    }
    PID.store(std::process::id(), Relaxed);
    let exe = report::program_path();
    let exe = exe.rsplit('/').next().unwrap_or("").to_string();
    let start_dir = std::env::current_dir().ok();
    let mut key: libc::pthread_key_t = 0;
    unsafe { libc::pthread_key_create(&mut key, Some(thread::thread_end)) };
    let handle_signals = opts.handle_signals();
    let _ = RT.set(Runtime {
        opts,
        tool,
        exe,
        start_dir,
        key,
    });
    // The program's signal handlers wait while the runtime is busy on their thread.
    crate::handlers::set_busy_check(gate::runtime_busy);
    unsafe {
        on_exit(exit_handler, std::ptr::null_mut());
        at_quick_exit(quick_exit_handler);
        libc::pthread_atfork(Some(fork_prepare), Some(fork_parent), Some(fork_child));
    }
    if handle_signals {
        signals::install(finish_on_signal, thread::close_signal());
    }
}

/// Code built for one tool (`kage_abi::Instrumentation::only_tool`: `KAGE_TOOL=working-set`
/// or `footprint`) only works with that tool: it becomes the default, and asking for
/// another tool is an error that keeps the program running.
fn choose_tool_for_build(opts: &mut Options, built: Instrumentations, explicit: bool) {
    let Some(built_for) =
        registry::executable_tool().or_else(|| built.iter().find_map(|i| i.only_tool()))
    else {
        return;
    };
    if opts.tool() != built_for {
        if explicit {
            eprintln!(
                "kage: warning: tool={} needs a program built for it or for every tool \
                 (KAGE_TOOL=count-calls), but this one was built with KAGE_TOOL={built_for}; \
                 using the '{built_for}' tool",
                opts.tool()
            );
        }
        let _ = opts.set(&options::TOOL, built_for);
    }
}

/// Code built with `KAGE_TOOL=working-set` marks lines of the size it was built with
/// (`KAGE_WS_LINE_SIZE`, 64 by default): that is the default `line_size=`; a larger one
/// groups them, a smaller one cannot be measured without a rebuild.
fn choose_line_size_for_build(opts: &mut Options, explicit: bool) {
    let Some(shift) = registry::built_line_shift() else {
        return;
    };
    let built = 1u64 << shift;
    let asked = opts.line_size();
    if explicit && asked < built {
        eprintln!(
            "kage: warning: line_size={asked} is smaller than the {built}-byte lines this program \
             was built for; using {built} (rebuild with KAGE_WS_LINE_SIZE={asked} for smaller lines)"
        );
    }
    if !explicit || asked < built {
        let _ = opts.set(&options::LINE_SIZE, &built.to_string());
    }
}

/// `gate`'s way up: the calling thread's state for its first event, initialising the
/// runtime and creating the state as needed; null while events are ignored (the runtime
/// initialising on this thread, or finished).
#[no_mangle]
pub fn kage_rt_first_event() -> *const ThreadState {
    let Some(rt) = ensure_init() else {
        return std::ptr::null();
    };
    if gate::finished() {
        return std::ptr::null();
    }
    rt.thread()
}

const _: gate::FirstEvent = kage_rt_first_event;

unsafe extern "C" fn exit_handler(status: libc::c_int, _: *mut libc::c_void) {
    finish(ProgramEnd::Exit { code: status }, false);
}

unsafe extern "C" fn quick_exit_handler() {
    finish(ProgramEnd::QuickExit, false);
}

/// A fatal signal: write a best-effort report. Building one while the interrupted runtime
/// holds a lock would deadlock: a signal sent to the process (`kill`, Ctrl-C) then waits
/// until the thread releases its last lock, which raises it again; a fault inside the
/// runtime (it cannot wait: the faulting instruction would run again) ends the process
/// without a report.
fn finish_on_signal(sig: i32, info: *const libc::siginfo_t) -> signals::Fatal {
    if locks_held() > 0 {
        if !crate::handlers::synchronous(sig, info) && crate::sync::defer_while_locked(sig) {
            return signals::Fatal::Later;
        }
        let msg = b"kage: fatal signal inside the runtime; no report written\n";
        unsafe { libc::write(2, msg.as_ptr() as *const _, msg.len()) };
        return signals::Fatal::Die;
    }
    finish(ProgramEnd::Signal { signal: sig }, true);
    signals::Fatal::Die
}

/// Ends the analysis and writes the report (once). Later events are ignored.
pub fn finish(end: ProgramEnd, from_signal: bool) {
    let Some(rt) = RT.get() else { return };
    if GATE.fetch_or(FINISHED, AcqRel) & FINISHED != 0 {
        return;
    }
    let ts = gate::current();
    if !ts.is_null() {
        // Exit the calling thread's open frames so `exit()` from deep inside still closes
        // main. When a signal interrupted this thread inside the runtime, its stack may be
        // mid-update: leave it alone (the report is incomplete anyway).
        if from_signal {
            unsafe { tools::count::count_faulted_tree(&*ts) };
        }
        let ended = unsafe { (*ts).end_program() };
        if !ended && !from_signal {
            // Inside the runtime, yet not interrupted: a handler of a fault that came while
            // the runtime ran (a stack overflow in a hook) left it by `siglongjmp`, and the
            // thread has been ignored since.
            eprintln!(
                "kage: warning: a signal handler left the runtime by siglongjmp (a fault \
                 inside it, such as a stack overflow); this thread's events since were not \
                 measured and the report is incomplete"
            );
            LEFT_BY_HANDLER.store(true, Relaxed);
        }
        unsafe { thread::close_suspended(ts) };
        unsafe { (*ts).busy.set((*ts).busy.get() | gate::IN_RUNTIME) };
    }
    // Threads still running (never joined, or busy when another crashed) close their own
    // regions, as if they ended now; one that does not answer leaves the report incomplete.
    let unclosed = thread::close_others();
    // Bounded waits in a signal handler: another thread may hold a lock and be stopped.
    let spins = if from_signal { 1 << 20 } else { u32::MAX };
    let Some(reg) = REGISTRY.try_lock_for(spins) else {
        return;
    };
    let regions = reg.regions.clone();
    drop(reg);
    let Some(threads) = THREADS.try_lock_for(spins) else {
        return;
    };
    let nthreads = threads.started() as u32;
    let results = rt.tool.finish(regions.len());
    drop(threads);
    let pid = PID.load(Relaxed);
    let forked_from = match FORKED_FROM.load(Relaxed) {
        0 => None,
        p => Some(p),
    };
    let r = report::build(report::ReportInput {
        tool: rt.tool.name(),
        program: report::program_path(),
        args: report::command_line(),
        pid,
        forked_from,
        end,
        complete: !from_signal && unclosed.total() == 0 && !LEFT_BY_HANDLER.load(Relaxed),
        unclosed_threads: (unclosed.total() > 0).then_some(unclosed),
        threads: nthreads,
        options: rt.opts.to_map(),
        regions: &regions,
        results,
    });
    let path = kage_report::expand_output(rt.opts.output(), &rt.exe, pid, forked_from.is_some());
    let path = report::from_dir(&path, rt.start_dir.as_deref());
    match report::write(&path, &r, pid) {
        Ok(()) => {
            if rt.opts.verbosity() >= 1 {
                eprintln!("kage: report written to {path}");
            }
            let log = rt.opts.get(&options::REPORT_LOG);
            if !log.is_empty() {
                let log = report::from_dir(log, rt.start_dir.as_deref());
                if let Err(e) = report::log_report(&log, &path) {
                    eprintln!("kage: cannot add the report's path to {log}: {e}");
                }
            }
        }
        Err(e) => eprintln!("kage: cannot write the report to {path}: {e}"),
    }
}

fn set_busy(on: bool) {
    let ts = gate::current();
    if !ts.is_null() {
        let ts = unsafe { &*ts };
        if on {
            ts.busy.set(ts.busy.get() | gate::IN_RUNTIME);
        } else {
            // SAFETY: the calling thread's state, marked busy by `set_busy(true)`.
            unsafe { gate::leave_runtime(ts) };
        }
    }
}

thread_local! {
    /// The forking thread's signal mask before `fork_prepare` blocked every signal.
    static MASK_BEFORE_FORK: std::cell::Cell<libc::sigset_t> =
        const { std::cell::Cell::new(unsafe { std::mem::zeroed() }) };
}

/// Blocks every signal on the calling thread until [`unblock_after_fork`].
unsafe fn block_for_fork() {
    let mut all: libc::sigset_t = std::mem::zeroed();
    libc::sigfillset(&mut all);
    let mut before: libc::sigset_t = std::mem::zeroed();
    libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
    MASK_BEFORE_FORK.set(before);
}

/// The signal mask [`block_for_fork`] found; what came meanwhile is delivered now, the
/// runtime no longer busy.
unsafe fn unblock_after_fork() {
    let before = MASK_BEFORE_FORK.get();
    libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
}

// Fork: hold every runtime lock across fork() so the child never inherits one held by a
// thread that does not exist there. Order: registry, threads (tools lock only under it),
// allocator. Signals wait from before the parent takes the locks until both processes are
// done with them: a signal that ends the child (its parent's `kill` right after `fork`)
// then finds the child's runtime set up, and it writes its report.
unsafe extern "C" fn fork_prepare() {
    block_for_fork();
    set_busy(true);
    REGISTRY.raw_lock();
    THREADS.raw_lock();
    crate::alloc::fork_prepare();
}

unsafe extern "C" fn fork_parent() {
    crate::alloc::fork_release();
    THREADS.raw_unlock();
    REGISTRY.raw_unlock();
    set_busy(false);
    unblock_after_fork();
}

unsafe extern "C" fn fork_child() {
    // A child has no pending signals: those the parent kept are the parent's.
    crate::handlers::forget_pending();
    crate::alloc::fork_release();
    THREADS.raw_unlock();
    REGISTRY.raw_unlock();
    let parent = PID.load(Relaxed);
    FORKED_FROM.store(parent, Relaxed);
    PID.store(std::process::id(), Relaxed);
    // Only the forking thread exists in the child; the report covers what it does from now.
    let me = gate::current();
    THREADS.lock().fork_child(me);
    if let Some(rt) = RT.get() {
        rt.tool.fork_child();
        if !me.is_null() {
            (*(*me).tool.get()).fork_survivor();
        }
    }
    set_busy(false);
    unblock_after_fork();
}

/// `kage_set_enabled`: memory-access delivery on or off.
pub fn set_enabled(on: bool) {
    let Some(rt) = ensure_init() else { return };
    if on {
        GATE.fetch_and(!DISABLED, Relaxed);
    } else {
        GATE.fetch_or(DISABLED, Relaxed);
    }
    rt.tool.set_enabled(on);
}

/// `kage_reset`: discard the statistics gathered so far (all threads).
pub fn reset() {
    let Some(rt) = ensure_init() else { return };
    rt.tool.reset();
    let ts = gate::current();
    if !ts.is_null() {
        unsafe { (*ts).with(|_, t| t.reset()) };
    }
}

extern "C" {
    /// Whether kage-cc linked object files compiled without Kage into the program
    /// (`csrc/tls.c`).
    fn kage_link_has_plain_objects() -> libc::c_int;
}

/// Runs from `.init_array` at the default priority: after every module's registration
/// constructor (priority 1; a shared library's run before the executable's), before `main`.
#[used]
#[link_section = ".init_array"]
static STARTUP_CHECK: extern "C" fn() = startup_check;

/// Says on stderr when the program has no instrumented code, or code compiled without Kage
/// beside it (a `make` that reused a plain build's objects): otherwise such a program runs
/// unmeasured, or partly measured, without a word.
extern "C" fn startup_check() {
    if !registry::is_the_programs_runtime() {
        return;
    }
    registry::note_started();
    // Shared libraries that announced their modules before the executable (which had none,
    // or was not built with kage-cc): the runtime starts now, before main.
    if registry::any_announced() {
        if let Some(rt) = ensure_init() {
            registry::register_announced();
            warn_about_other_builds(rt);
        }
    }
    if registry::runtime_is_preloaded() {
        // Not linked by kage-cc: instrumented libraries come when they come.
        return;
    }
    // SAFETY: a plain C function of the runtime without arguments.
    let plain = unsafe { kage_link_has_plain_objects() } != 0;
    if let Some(warning) = startup_warning(
        registry::modules_registered(),
        registry::instrumentations_seen(),
        plain,
    ) {
        eprintln!("{warning}");
    }
}

/// The start-up warning for a program with `modules` registered modules built for
/// `instrumentations`, linked with objects compiled without Kage when `plain`; `None` when
/// all is well.
fn startup_warning(
    modules: u32,
    instrumentations: crate::registry::Instrumentations,
    plain: bool,
) -> Option<String> {
    const CAUSE: &str = "objects left from a plain build? run `make clean` and build again \
                         with CC=kage-cc (and CXX=kage-c++)";
    if modules == 0 {
        return Some(format!(
            "kage: warning: this program was linked by kage-cc, but none of its code was \
             compiled with it (no instrumented module): nothing is measured and no report is \
             written unless an instrumented library is loaded later; {CAUSE}"
        ));
    }
    if !plain {
        return None;
    }
    let tools: Vec<&str> = (instrumentations.iter())
        .map(|i| i.only_tool().unwrap_or("every tool"))
        .collect();
    Some(format!(
        "kage: warning: {modules} module{} of this program {} compiled with kage-cc (for {}), \
         but some of its object files were not (kage-cc named them when it linked): their \
         code is not measured; {CAUSE}",
        if modules == 1 { "" } else { "s" },
        if modules == 1 { "was" } else { "were" },
        tools.join(", ")
    ))
}

#[cfg(test)]
mod startup_tests {
    use super::startup_warning;
    use crate::registry::Instrumentations;
    use kage_abi::Instrumentation;

    #[test]
    fn warns_about_missing_and_partial_instrumentation_only() {
        let calls = Instrumentations::default().with(Instrumentation::Calls);
        assert_eq!(startup_warning(3, calls, false), None);
        let none = startup_warning(0, Instrumentations::default(), false).unwrap();
        assert!(
            none.contains("none of its code was compiled with it"),
            "{none}"
        );
        assert!(none.contains("make clean"), "{none}");
        let ws = Instrumentations::default().with(Instrumentation::WorkingSet);
        let partial = startup_warning(2, ws, true).unwrap();
        assert!(
            partial
                .contains("2 modules of this program were compiled with kage-cc (for working-set)"),
            "{partial}"
        );
        let one = startup_warning(1, calls, true).unwrap();
        assert!(one.contains("1 module of this program was compiled with kage-cc (for every tool)"));
    }
}
