//! Fatal signals: write a best-effort report (complete=false), then die by the same signal.
//! Handlers are installed only where the disposition is still the default one.
//!
//! Below the runtime: what to do on a fatal signal is given to [`install`].

use crate::handlers::real_sigaction;
use std::sync::OnceLock;

/// The signals whose default action ends the process (signal(7): "Term" and "Core"), but
/// SIGKILL and SIGSTOP, which cannot be caught. The real-time signals are added at
/// [`install`] (their range is glibc's to say).
const FATAL: [libc::c_int; 22] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGABRT,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGUSR1,
    libc::SIGSEGV,
    libc::SIGUSR2,
    libc::SIGPIPE,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGSTKFLT,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
    libc::SIGSYS,
];

/// Every signal that ends the process by default: [`FATAL`] and the real-time signals but
/// `reserved` (the runtime's own).
fn fatal_signals(reserved: libc::c_int) -> impl Iterator<Item = libc::c_int> {
    FATAL
        .into_iter()
        .chain(libc::SIGRTMIN()..=libc::SIGRTMAX())
        .filter(move |&sig| sig != reserved)
}

/// Alternate signal stack for the initialising thread, so a stack overflow in the main
/// thread still gets a report.
const ALT_STACK: usize = 256 * 1024;

/// What a fatal signal's handler does after the runtime's `on_fatal` (see [`install`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fatal {
    /// The process dies by the signal now.
    Die,
    /// The runtime kept the signal, and raises it again later: the handler returns.
    Later,
}

/// What [`install`] was given.
static ON_FATAL: OnceLock<fn(i32, *const libc::siginfo_t) -> Fatal> = OnceLock::new();

/// Installs the handlers: on a fatal signal, `on_fatal(signal, info)` runs (on the
/// alternate stack), then the process dies by the signal unless it answered
/// [`Fatal::Later`]. `reserved` is left alone.
pub fn install(on_fatal: fn(i32, *const libc::siginfo_t) -> Fatal, reserved: libc::c_int) {
    let _ = ON_FATAL.set(on_fatal);
    unsafe {
        for sig in fatal_signals(reserved) {
            let mut old: libc::sigaction = std::mem::zeroed();
            if real_sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction != libc::SIG_DFL
            {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = handler as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            real_sigaction(sig, &sa, std::ptr::null_mut());
        }
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) == 0
            && cur.ss_flags & libc::SS_DISABLE != 0
        {
            let mem = libc::mmap(
                std::ptr::null_mut(),
                ALT_STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if mem != libc::MAP_FAILED {
                let ss = libc::stack_t {
                    ss_sp: mem,
                    ss_flags: 0,
                    ss_size: ALT_STACK,
                };
                libc::sigaltstack(&ss, std::ptr::null_mut());
            }
        }
    }
}

unsafe extern "C" fn handler(
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    _ctx: *mut libc::c_void,
) {
    let saved = *libc::__errno_location();
    if let Some(on_fatal) = ON_FATAL.get() {
        if on_fatal(sig, info) == Fatal::Later {
            *libc::__errno_location() = saved;
            return;
        }
    }
    // Die by the same signal: it stays blocked until we return, then the default action runs
    // (a synchronous fault re-executes the faulting instruction and faults again).
    let mut default: libc::sigaction = std::mem::zeroed();
    default.sa_sigaction = libc::SIG_DFL;
    real_sigaction(sig, &default, std::ptr::null_mut());
    libc::raise(sig);
    *libc::__errno_location() = saved;
}
