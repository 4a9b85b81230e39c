//! The program's signal handlers, kept out of the runtime.
//!
//! A handler that interrupts the runtime on its thread cannot be measured (the runtime is
//! not re-entered: its events are dropped), and one that does not return (`siglongjmp` to a
//! timeout's recovery point, an exception) would leave the runtime half-way through an
//! update and its thread marked busy for good: every later event of the thread dropped, or
//! a lock held forever. So the runtime defines `sigaction` and `signal` (and glibc's
//! `bsd_signal` and `sysv_signal`), which the program's calls reach in place of the C
//! library's: a handler the program installs is called through [`trampoline`]. When the
//! signal comes while the runtime is busy on the thread, the trampoline keeps it (the
//! signal and its `siginfo_t`) and returns; the runtime runs the handler as soon as it is
//! done ([`deliver_pending`], from `gate::leave_runtime`), with the signal mask the
//! kernel would have set, as an ordinary call of the program's. The footprint tool's hooks
//! in C (csrc/tls.c), outside the runtime, change a range buffer and a leaf slot in place:
//! a signal that comes meanwhile waits too, and the hook runs its handler when it is done
//! ([`kage_run_waiting_handlers`]). Synchronous faults (a
//! `SIGSEGV` the kernel raised for an access, ...) cannot wait: returning would repeat the
//! fault; they are handled at once, as before.
//!
//! A handler that leaves by `siglongjmp` also abandons what it interrupted. The count
//! build keeps a function without calls (or a loop nest without calls) in locals until it
//! returns, noting only which one runs (`__kage_count_running`); the trampoline remembers
//! that note with the stack pointer of the interrupted code while the handler runs, and a
//! resume point (where the `siglongjmp` lands) counts an instance of each note whose code
//! was left ([`take_abandoned`]): the instance, not the accesses that were in its locals.
//!
//! What the program sees is what the C library would have shown it: `sigaction`'s old
//! action is the program's handler, not the trampoline. Every call in the process comes
//! here: `kage-cc` exports these functions from the executable (so shared libraries bind to
//! them), and `kage run` preloads them into a program it did not link. Code that makes the
//! system call itself, and a statically linked program's shared libraries (it has none),
//! are not seen: such handlers behave as before (ignored by the runtime while it is busy).

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::mem::MaybeUninit;
use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicUsize, Ordering::*};

extern "C" {
    /// glibc's `sigaction` by its other exported name: the C library's own, which the
    /// `sigaction` below takes the place of.
    fn __sigaction(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
}

/// The C library's `sigaction`, for the runtime's own handlers (fatal signals, closing
/// threads), which the program is not shown.
///
/// # Safety
/// As `sigaction(2)`.
pub unsafe fn real_sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let result = __sigaction(sig, act, old);
    if result == 0 && !act.is_null() {
        if let Some(slot) = RUNTIME_HANDLERS.get(sig as usize) {
            slot.store((*act).sa_sigaction, Relaxed);
        }
    }
    result
}

/// By signal: the handler the runtime installed for itself, which the program is shown as
/// `SIG_DFL` (the disposition it would have without the runtime).
static RUNTIME_HANDLERS: [AtomicUsize; SIGNALS] = [const { AtomicUsize::new(0) }; SIGNALS];

/// Whether `handler` is the runtime's own for `sig`.
fn runtime_handler(sig: c_int, handler: usize) -> bool {
    handler != libc::SIG_DFL
        && handler != libc::SIG_IGN
        && RUNTIME_HANDLERS
            .get(sig as usize)
            .is_some_and(|h| h.load(Relaxed) == handler)
}

/// Signals are 1 to 64 on Linux.
const SIGNALS: usize = 65;

/// The program's action for one signal, as it gave it to `sigaction`, under a sequence
/// lock: the trampoline reads it in signal context, where no lock can be taken.
struct Action {
    /// Odd while a writer changes `action`.
    sequence: AtomicU32,
    action: UnsafeCell<MaybeUninit<libc::sigaction>>,
}

/// Whether `action` runs a handler of the program's (installed as the trampoline), not one
/// of the C library's dispositions (`SIG_DFL`, `SIG_IGN`; all-zero: never set).
fn handles(action: &libc::sigaction) -> bool {
    action.sa_sigaction != libc::SIG_DFL && action.sa_sigaction != libc::SIG_IGN
}

// SAFETY: `action` is read and written only under `sequence` (readers retry a torn read).
unsafe impl Sync for Action {}

static ACTIONS: [Action; SIGNALS] = [const {
    Action {
        sequence: AtomicU32::new(0),
        action: UnsafeCell::new(MaybeUninit::zeroed()),
    }
}; SIGNALS];

impl Action {
    /// A consistent copy of the program's action.
    fn read(&self) -> libc::sigaction {
        loop {
            let before = self.sequence.load(Acquire);
            if before & 1 == 0 {
                // SAFETY: a plain copy of a `repr(C)` struct of integers; a torn copy is
                // detected by the sequence and discarded.
                let copy = unsafe { std::ptr::read_volatile(self.action.get()) };
                fence(Acquire);
                if self.sequence.load(Relaxed) == before {
                    // SAFETY: zeroed at first, then only whole actions are written.
                    return unsafe { copy.assume_init() };
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Replaces the program's action (writers of one signal take turns on the sequence).
    fn write(&self, action: &libc::sigaction) {
        // No handler on this thread may read it half-written (it would wait for ever).
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        let mut before: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: plain signal-mask calls on local sets.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        }
        loop {
            let now = self.sequence.load(Relaxed);
            if now & 1 == 0
                && self
                    .sequence
                    .compare_exchange_weak(now, now + 1, Acquire, Relaxed)
                    .is_ok()
            {
                break;
            }
            std::hint::spin_loop();
        }
        // SAFETY: the sequence is odd: readers discard what they read meanwhile.
        unsafe { std::ptr::write_volatile(self.action.get(), MaybeUninit::new(*action)) };
        self.sequence.fetch_add(1, Release);
        // SAFETY: the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut()) };
    }
}

/// Signals that came while the runtime was busy on a thread, with their information, in the
/// order they came (a standard signal waits once however often it comes, as the kernel
/// keeps it; real-time signals beyond [`WAITING`] are dropped).
const WAITING: usize = 8;

thread_local! {
    /// How many of [`KEPT`]'s slots hold a signal.
    static KEPT_COUNT: Cell<usize> = const { Cell::new(0) };
    static KEPT: UnsafeCell<[MaybeUninit<libc::siginfo_t>; WAITING]> =
        const { UnsafeCell::new([MaybeUninit::uninit(); WAITING]) };
}

/// What a handler running on this thread interrupted: the stack pointer there, and the
/// count build's running note then (`__kage_count_running`), innermost last.
const NESTED_HANDLERS: usize = 8;

thread_local! {
    static INTERRUPTED_COUNT: Cell<usize> = const { Cell::new(0) };
    static INTERRUPTED: Cell<[(usize, usize); NESTED_HANDLERS]> =
        const { Cell::new([(0, 0); NESTED_HANDLERS]) };
}

extern "C" {
    /// csrc/tls.c: the calling thread's `__kage_count_running`.
    fn kage_count_running_slot() -> *const AtomicPtr<c_void>;
    /// csrc/tls.c: whether a footprint hook is changing its range buffer or leaf slot on
    /// the calling thread (async-signal-safe).
    fn kage_hooks_busy() -> c_int;
    /// csrc/tls.c: the calling thread's flag that a kept signal waits for those hooks.
    fn kage_signal_waiting_slot() -> *mut u64;
}

/// Tells the C part's hooks whether a kept signal waits (they run its handler when they
/// are done: [`kage_run_waiting_handlers`]).
fn set_waiting(waiting: bool) {
    // SAFETY: the calling thread's flag, written only on this thread (in a handler, or
    // outside the hooks).
    unsafe { std::ptr::write_volatile(kage_signal_waiting_slot(), waiting as u64) };
}

/// Notes, while a handler runs, what it interrupted (`sp`: the stack pointer there); the
/// returned guard forgets it and puts the running note back when the handler returns (a
/// handler that leaves by `siglongjmp` never drops it: [`take_abandoned`] finds it).
fn interrupted(sp: usize) -> Interrupted {
    // SAFETY: the calling thread's slot.
    let running = unsafe { &*kage_count_running_slot() }.load(Relaxed) as usize;
    let n = INTERRUPTED_COUNT.with(|c| c.get());
    if n < NESTED_HANDLERS {
        INTERRUPTED.with(|records| {
            let mut all = records.get();
            all[n] = (sp, running);
            records.set(all);
        });
        INTERRUPTED_COUNT.with(|c| c.set(n + 1));
    }
    Interrupted { depth: n, running }
}

/// [`interrupted`]'s guard.
struct Interrupted {
    depth: usize,
    running: usize,
}

impl Drop for Interrupted {
    fn drop(&mut self) {
        INTERRUPTED_COUNT.with(|c| c.set(c.get().min(self.depth)));
        // SAFETY: the calling thread's slot; the interrupted code goes on.
        unsafe { &*kage_count_running_slot() }.store(self.running as *mut c_void, Relaxed);
    }
}

/// The running notes of the code that handlers interrupted and left (their records still
/// here, their stack pointers below `frame`, the frame of the code running now), oldest
/// first, forgotten. A resume point calls it: control may have arrived by a handler's
/// `siglongjmp`.
pub fn take_abandoned(frame: usize, mut each: impl FnMut(usize)) {
    let n = INTERRUPTED_COUNT.with(|c| c.get());
    let all = INTERRUPTED.with(|records| records.get());
    let kept = all[..n].iter().take_while(|&&(sp, _)| sp >= frame).count();
    for &(_, running) in &all[kept..n] {
        if running != 0 {
            each(running);
        }
    }
    INTERRUPTED_COUNT.with(|c| c.set(kept));
}

/// The stack pointer of the code a signal interrupted, from its context.
///
/// # Safety
/// `context` is the kernel's `ucontext_t` for the signal.
unsafe fn interrupted_sp(context: *const c_void) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        let uc = &*(context as *const libc::ucontext_t);
        uc.uc_mcontext.gregs[libc::REG_RSP as usize] as usize
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // The handler's own frame: below the interrupted code's (without an alternate
        // signal stack).
        let _ = context;
        let here = 0u8;
        &here as *const u8 as usize
    }
}

/// Whether a signal the runtime kept for the program waits on this thread.
#[inline(always)]
pub fn pending() -> bool {
    KEPT_COUNT.with(|c| c.get()) != 0
}

/// Drops the signals kept on this thread (a forked child: they were its parent's).
pub fn forget_pending() {
    KEPT_COUNT.with(|c| c.set(0));
    set_waiting(false);
}

/// A fault the kernel raised for the instruction that was running: it repeats if the
/// handler does not run now.
pub fn synchronous(sig: c_int, info: *const libc::siginfo_t) -> bool {
    matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP | libc::SIGSYS
    ) && !info.is_null()
        // SAFETY: the kernel's information for this signal.
        && unsafe { (*info).si_code } > 0
}

/// The runtime's answer to "is the runtime busy on the calling thread?" (a `fn() -> bool`;
/// 0 before it starts: not busy). The gate knows, and sits above this module.
static BUSY_CHECK: AtomicUsize = AtomicUsize::new(0);

/// Tells the trampoline how to ask whether the runtime is busy on the calling thread
/// (`check` must be async-signal-safe).
pub fn set_busy_check(check: fn() -> bool) {
    BUSY_CHECK.store(check as usize, Release);
}

/// Whether the calling thread is inside the runtime.
fn runtime_busy() -> bool {
    match BUSY_CHECK.load(Acquire) {
        0 => false,
        // SAFETY: stored from a `fn() -> bool` by `set_busy_check`.
        check => unsafe { std::mem::transmute::<usize, fn() -> bool>(check)() },
    }
}

/// Keeps `sig` for later on this thread; false when no slot is left.
///
/// # Safety
/// In the handler of `sig` on the calling thread, `info` the kernel's.
unsafe fn keep(sig: c_int, info: *const libc::siginfo_t) -> bool {
    let n = KEPT_COUNT.with(|c| c.get());
    KEPT.with(|kept| {
        let kept = &mut *kept.get();
        // A standard signal waits once, as the kernel would keep it.
        let standard = sig < libc::SIGRTMIN();
        if standard
            && kept[..n]
                .iter()
                .any(|k| k.assume_init_ref().si_signo == sig)
        {
            return true;
        }
        if n == WAITING {
            return false;
        }
        let mut copy: libc::siginfo_t = if info.is_null() {
            std::mem::zeroed()
        } else {
            *info
        };
        copy.si_signo = sig;
        kept[n] = MaybeUninit::new(copy);
        KEPT_COUNT.with(|c| c.set(n + 1));
        set_waiting(true);
        true
    })
}

/// Calls the program's handler of `action`.
///
/// # Safety
/// `action` holds a handler (not `SIG_DFL` or `SIG_IGN`); `info` and `context` are what
/// such a handler may be given.
unsafe fn call(
    action: &libc::sigaction,
    sig: c_int,
    info: *mut libc::siginfo_t,
    context: *mut c_void,
) {
    if action.sa_flags & libc::SA_SIGINFO != 0 {
        let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            std::mem::transmute(action.sa_sigaction);
        handler(sig, info, context);
    } else {
        let handler: extern "C" fn(c_int) = std::mem::transmute(action.sa_sigaction);
        handler(sig);
    }
}

/// What the kernel calls for a signal the program handles (installed with the program's
/// flags and mask, and `SA_SIGINFO`).
unsafe extern "C" fn trampoline(sig: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    let Some(slot) = ACTIONS.get(sig as usize) else {
        return;
    };
    let action = slot.read();
    if action.sa_flags & libc::SA_RESETHAND != 0 {
        // The kernel has reset the disposition: so does the program's view.
        let mut reset = action;
        reset.sa_sigaction = libc::SIG_DFL;
        reset.sa_flags &= !libc::SA_RESETHAND;
        slot.write(&reset);
    }
    if !handles(&action) {
        // Changed meanwhile: the C library's disposition is being set too.
        return;
    }
    if (runtime_busy() || kage_hooks_busy() != 0) && !synchronous(sig, info) {
        let errno = *libc::__errno_location();
        let kept = keep(sig, info);
        *libc::__errno_location() = errno;
        if kept {
            return;
        }
    }
    let _note = interrupted(interrupted_sp(context));
    call(&action, sig, info, context);
}

/// Runs the program's handlers of the signals kept while the runtime was busy on this
/// thread, each with the signal mask the kernel would have set for it. The thread is no
/// longer busy: the handlers are measured like any code, and may leave by `siglongjmp`.
///
/// # Safety
/// On the calling thread, outside the runtime.
#[cold]
#[inline(never)]
pub unsafe fn deliver_pending() {
    loop {
        // Take the oldest kept signal (its slot is free before its handler runs, which may
        // not return).
        let n = KEPT_COUNT.with(|c| c.get());
        if n == 0 {
            set_waiting(false);
            return;
        }
        let mut info = KEPT.with(|kept| {
            let kept = &mut *kept.get();
            let first = kept[0].assume_init();
            kept.copy_within(1..n, 0);
            first
        });
        KEPT_COUNT.with(|c| c.set(n - 1));
        // The others still wait, should this handler not return.
        set_waiting(n > 1);
        let sig = info.si_signo;
        let Some(slot) = ACTIONS.get(sig as usize) else {
            continue;
        };
        let action = slot.read();
        if action.sa_sigaction == libc::SIG_IGN {
            continue;
        }
        if action.sa_sigaction == libc::SIG_DFL {
            // The program reset it meanwhile: the default action, now.
            libc::raise(sig);
            continue;
        }
        let mut blocked = action.sa_mask;
        if action.sa_flags & libc::SA_NODEFER == 0 {
            libc::sigaddset(&mut blocked, sig);
        }
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut before);
        let mut context: libc::ucontext_t = std::mem::zeroed();
        libc::getcontext(&mut context);
        let here = 0u8;
        let _note = interrupted(&here as *const u8 as usize);
        call(
            &action,
            sig,
            &mut info,
            &mut context as *mut libc::ucontext_t as *mut c_void,
        );
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
    }
}

/// The footprint tool's C hooks (csrc/tls.c) are done with their range buffer and leaf slot,
/// and a signal came meanwhile: its handler runs now.
///
/// # Safety
/// Called by those hooks on the calling thread, outside the runtime, with neither held.
#[no_mangle]
#[cold]
pub unsafe extern "C" fn kage_run_waiting_handlers() {
    if !runtime_busy() {
        deliver_pending();
    }
}

/// `sigaction(2)` for the program: a handler is installed as [`trampoline`]; `old` shows the
/// program's own previous action.
///
/// # Safety
/// As `sigaction(2)`.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let Some(slot) = ACTIONS
        .get(sig as usize)
        .filter(|_| sig > 0 && sig != libc::SIGKILL && sig != libc::SIGSTOP)
    else {
        return __sigaction(sig, act, old);
    };
    let previous = slot.read();
    let result = if act.is_null() {
        __sigaction(sig, act, old)
    } else {
        let wanted = *act;
        let mut installed = wanted;
        if handles(&wanted) {
            installed.sa_sigaction = trampoline as *const () as usize;
            installed.sa_flags |= libc::SA_SIGINFO;
        }
        // The program's action is known before the kernel can call the trampoline for it.
        slot.write(&wanted);
        let result = __sigaction(sig, &installed, old);
        if result != 0 {
            slot.write(&previous);
        }
        result
    };
    if result == 0 && !old.is_null() {
        if handles(&previous) {
            // The kernel holds the trampoline: the program installed its handler.
            *old = previous;
        } else if runtime_handler(sig, (*old).sa_sigaction) {
            // The runtime's own (a report on a fatal signal): the program installed none.
            *old = std::mem::zeroed();
            (*old).sa_sigaction = libc::SIG_DFL;
        }
    }
    result
}

/// `signal(3)` as glibc's (BSD semantics): the handler stays installed, interrupted system
/// calls restart, the signal is blocked while its handler runs.
///
/// # Safety
/// As `signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    install_simple(sig, handler, libc::SA_RESTART)
}

/// glibc's other name for [`signal`].
///
/// # Safety
/// As `signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn bsd_signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    install_simple(sig, handler, libc::SA_RESTART)
}

/// `sysv_signal(3)`: the disposition is reset to the default when the handler is called,
/// which runs with the signal not blocked.
///
/// # Safety
/// As `sysv_signal(3)`.
#[no_mangle]
pub unsafe extern "C" fn sysv_signal(
    sig: c_int,
    handler: libc::sighandler_t,
) -> libc::sighandler_t {
    install_simple(sig, handler, libc::SA_RESETHAND | libc::SA_NODEFER)
}

/// A handler without `SA_SIGINFO`, through [`sigaction`]; the previous handler, or
/// `SIG_ERR`.
unsafe fn install_simple(
    sig: c_int,
    handler: libc::sighandler_t,
    flags: c_int,
) -> libc::sighandler_t {
    let mut act: libc::sigaction = std::mem::zeroed();
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    libc::sigemptyset(&mut act.sa_mask);
    if flags & libc::SA_NODEFER == 0 {
        libc::sigaddset(&mut act.sa_mask, sig);
    }
    let mut old: libc::sigaction = std::mem::zeroed();
    if sigaction(sig, &act, &mut old) != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{self, ThreadState};
    use crate::tool::ThreadTool;
    use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize};

    extern "C" {
        // As the footprint tool declares them (one signature per symbol).
        fn kage_fp_buffer_slot() -> *mut crate::tools::footprint::RangeBuffer;
        fn kage_fp_leaf_slot() -> *mut crate::tools::footprint::LeafSlot;
        fn __kage_fp_leaf_enter(entry: *const c_void, parent: *const c_void, frame: *const c_void);
    }

    struct Quiet;
    impl ThreadTool for Quiet {
        fn enter(&mut self, _: u32) {}
        fn exit(&mut self, _: u32) {}
        fn access(&mut self, _: usize, _: u64, _: bool) {}
        fn reset(&mut self) {}
        fn fork_survivor(&mut self) {}
    }

    static CALLS: AtomicUsize = AtomicUsize::new(0);
    static VALUE: AtomicI32 = AtomicI32::new(0);
    static BLOCKED_INSIDE: AtomicBool = AtomicBool::new(false);

    extern "C" fn counting(_: c_int) {
        CALLS.fetch_add(1, SeqCst);
    }

    extern "C" fn with_info(sig: c_int, info: *mut libc::siginfo_t, _: *mut c_void) {
        CALLS.fetch_add(1, SeqCst);
        // SAFETY: the information the handler is given.
        VALUE.store(
            unsafe { (*info).si_value().sival_ptr } as usize as i32,
            SeqCst,
        );
        // The kernel blocks the signal while its handler runs: so does a late delivery.
        let mut now: libc::sigset_t = unsafe { std::mem::zeroed() };
        unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now) };
        BLOCKED_INSIDE.store(unsafe { libc::sigismember(&now, sig) } == 1, SeqCst);
    }

    fn query(sig: c_int) -> libc::sigaction {
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { sigaction(sig, std::ptr::null(), &mut old) }, 0);
        old
    }

    /// One test: the handlers and the thread's state are process-wide.
    #[test]
    fn handlers_wait_while_the_runtime_is_busy_and_the_program_sees_its_own() {
        let ts: &'static ThreadState =
            Box::leak(Box::new(ThreadState::new(Box::new(Quiet), false)));
        gate::set_current(ts);
        set_busy_check(gate::runtime_busy);
        unsafe {
            // signal(3): the previous handler, and the program's view in sigaction(2).
            assert_eq!(
                signal(libc::SIGUSR1, counting as *const () as usize),
                libc::SIG_DFL
            );
            assert_eq!(
                signal(libc::SIGUSR1, counting as *const () as usize),
                counting as *const () as usize
            );
            let seen = query(libc::SIGUSR1);
            assert_eq!(seen.sa_sigaction, counting as *const () as usize);
            assert_eq!(seen.sa_flags & libc::SA_SIGINFO, 0);
            assert_ne!(seen.sa_flags & libc::SA_RESTART, 0);
            // Outside the runtime: at once.
            libc::raise(libc::SIGUSR1);
            assert_eq!(CALLS.load(SeqCst), 1);
            // Inside: kept, once however often it comes (a standard signal), until the
            // runtime is left.
            ts.busy.set(gate::IN_RUNTIME);
            libc::raise(libc::SIGUSR1);
            libc::raise(libc::SIGUSR1);
            assert_eq!(CALLS.load(SeqCst), 1);
            assert!(pending());
            gate::leave_runtime(ts);
            assert_eq!(CALLS.load(SeqCst), 2);
            assert!(!pending());

            // A footprint hook in C changing its range buffer (outside the runtime): kept
            // until a hook is done with it, here one that opens a leaf.
            let appending = (kage_fp_buffer_slot() as *mut u64).add(2);
            *appending = 1;
            libc::raise(libc::SIGUSR1);
            assert_eq!(CALLS.load(SeqCst), 2);
            *appending = 0;
            let frame = 0u64;
            __kage_fp_leaf_enter(
                8 as *const c_void,
                std::ptr::null(),
                &frame as *const u64 as _,
            );
            assert_eq!(CALLS.load(SeqCst), 3);
            assert!(!pending());
            *(kage_fp_leaf_slot() as *mut u64) = 0;

            // SA_SIGINFO: the kept information is the handler's, the signal blocked.
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = with_info as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO;
            assert_eq!(sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()), 0);
            ts.busy.set(gate::IN_RUNTIME);
            // sigqueue(3) to this thread (a process-directed signal may go to another):
            // signal, errno, code, then the sender's pid and uid and the value.
            let mut info = [0u32; 32];
            info[0] = libc::SIGUSR2 as u32;
            info[2] = libc::SI_QUEUE as u32;
            info[4] = libc::getpid() as u32;
            info[5] = libc::getuid();
            info[6] = 42;
            let sent = libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                libc::getpid(),
                libc::gettid(),
                libc::SIGUSR2,
                info.as_ptr(),
            );
            assert_eq!(sent, 0);
            assert_eq!(CALLS.load(SeqCst), 3);
            gate::leave_runtime(ts);
            assert_eq!(CALLS.load(SeqCst), 4);
            assert_eq!(VALUE.load(SeqCst), 42);
            assert!(BLOCKED_INSIDE.load(SeqCst));
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask);
            assert_eq!(libc::sigismember(&mask, libc::SIGUSR2), 0, "mask restored");

            // SA_RESETHAND: one delivery, then the default again, as the program sees it.
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESETHAND;
            let mut old: libc::sigaction = std::mem::zeroed();
            assert_eq!(sigaction(libc::SIGUSR2, &act, &mut old), 0);
            assert_eq!(old.sa_sigaction, with_info as *const () as usize);
            libc::raise(libc::SIGUSR2);
            assert_eq!(CALLS.load(SeqCst), 5);
            assert_eq!(query(libc::SIGUSR2).sa_sigaction, libc::SIG_DFL);

            // Ignored: nothing runs, and the program sees SIG_IGN.
            assert_eq!(
                signal(libc::SIGUSR1, libc::SIG_IGN),
                counting as *const () as usize
            );
            libc::raise(libc::SIGUSR1);
            assert_eq!(CALLS.load(SeqCst), 5);
            assert_eq!(query(libc::SIGUSR1).sa_sigaction, libc::SIG_IGN);
            assert_eq!(signal(libc::SIGUSR1, libc::SIG_DFL), libc::SIG_IGN);

            // The runtime's own handler (a report on a fatal signal) is not the program's:
            // it sees the default disposition.
            let mut own: libc::sigaction = std::mem::zeroed();
            own.sa_sigaction = counting as *const () as usize;
            assert_eq!(real_sigaction(libc::SIGURG, &own, std::ptr::null_mut()), 0);
            assert_eq!(query(libc::SIGURG).sa_sigaction, libc::SIG_DFL);
            assert_eq!(signal(libc::SIGURG, libc::SIG_DFL), libc::SIG_DFL);
        }
    }
}
