//! The threads: every thread's state ([`gate::ThreadState`]) is allocated on its first
//! event, registered in a global list and never freed; a pthread key destructor exits the
//! thread's open regions when it ends, and a thread that starts later takes the state over
//! (with its tool part and the statistics it holds), so that a program that starts
//! threads again and again holds as many states as it ever had threads at once.
//!
//! Below the runtime: it is given what it needs (the tool, the pthread key).

use crate::gate::{self, ThreadState};
use crate::sync::SpinLock;
use crate::tool::{ThreadTool, Tool};
use kage_report::UnclosedThreads;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::OnceLock;

/// Every thread state of this process.
pub static THREADS: SpinLock<Threads> = SpinLock::new(Threads::new());

/// The states, by address (leaked: never freed).
pub struct Threads {
    /// Every state: running threads', ended threads' (also in `ended`) and coroutine
    /// contexts'.
    states: Vec<usize>,
    /// States of ended threads that a new thread can take over, most recent last.
    ended: Vec<usize>,
    /// Threads that ran instrumented code (contexts are not threads).
    started: usize,
}

impl Threads {
    const fn new() -> Self {
        Threads {
            states: Vec::new(),
            ended: Vec::new(),
            started: 0,
        }
    }

    /// Number of threads that ran instrumented code.
    pub fn started(&self) -> usize {
        self.started
    }

    /// In a forked child: only `survivor` (the forking thread's state, or null) is left.
    /// The ended threads' states go too: their parts hold the parent's statistics, which
    /// the tool retires (`Tool::fork_child`).
    pub fn fork_child(&mut self, survivor: *const ThreadState) {
        self.states.retain(|&t| t == survivor as usize);
        self.ended.clear();
        self.started = (self.states.iter())
            .filter(|&&t| !unsafe { &*(t as *const ThreadState) }.context)
            .count();
    }
}

/// The calling thread's state, created on its first event with `tool`'s per-thread part,
/// or taken over from a thread that ended; `key` is the pthread key whose destructor
/// ([`thread_end`]) ends it.
pub fn current_or_create(tool: &'static dyn Tool, key: libc::pthread_key_t) -> *const ThreadState {
    let p = gate::current();
    if !p.is_null() {
        return p;
    }
    let ts = match take_over_ended() {
        Some(ts) => ts,
        None => listed_state(|| tool.new_thread(), false),
    };
    gate::set_current(ts);
    unsafe { libc::pthread_setspecific(key, ts as *const ThreadState as *const libc::c_void) };
    ts
}

/// A state whose thread ended, made the calling thread's: its tool part adopts the thread
/// ([`ThreadTool::adopt`]). None when there is none, or the tool's parts cannot be taken
/// over.
fn take_over_ended() -> Option<&'static ThreadState> {
    let mut threads = THREADS.lock();
    let t = *threads.ended.last()?;
    // SAFETY: listed states are leaked; an ended one is no thread's (its thread marked it
    // dead and stopped pointing at it before listing it).
    let ts = unsafe { &*(t as *const ThreadState) };
    // SAFETY: as above; no other thread uses its part (the report writer reads only the
    // tool's atomics).
    if !unsafe { (*ts.tool.get()).adopt() } {
        return None;
    }
    threads.ended.pop();
    threads.started += 1;
    ts.tid.store(unsafe { libc::gettid() }, Relaxed);
    ts.closing.store(false, Relaxed);
    ts.closed.store(false, Release);
    ts.busy.set(0);
    Some(ts)
}

/// A new state for a coroutine's context that starts running on the calling thread
/// (`contexts`), with `tool`'s part for it; listed with the threads, not made current.
pub fn new_context(tool: &'static dyn Tool) -> &'static ThreadState {
    listed_state(|| tool.new_context(), true)
}

/// A new state of the calling thread, listed in [`THREADS`], with the tool part `part`
/// makes (under the list's lock: tools take their own locks only while it is held, see
/// runtime's fork handlers).
fn listed_state(part: impl FnOnce() -> Box<dyn ThreadTool>, context: bool) -> &'static ThreadState {
    let mut threads = THREADS.lock();
    let ts: &'static ThreadState = Box::leak(Box::new(ThreadState::new(part(), context)));
    threads.states.push(ts as *const _ as usize);
    if !context {
        threads.started += 1;
    }
    ts
}

/// What an ended thread's last events find (its thread-local state pointer, once its own
/// state may belong to another thread): a state that takes no event.
fn ended_state() -> &'static ThreadState {
    static ENDED: OnceLock<usize> = OnceLock::new();
    let t = *ENDED.get_or_init(|| {
        let ts = ThreadState::new(Box::new(Ended), false);
        ts.busy.set(gate::DEAD);
        ts.closed.store(true, Relaxed);
        Box::leak(Box::new(ts)) as *const ThreadState as usize
    });
    // SAFETY: leaked above, never written after (its `busy` stays DEAD: no event runs).
    unsafe { &*(t as *const ThreadState) }
}

/// The tool part of [`ended_state`]: it is never called (the state is dead).
struct Ended;

impl ThreadTool for Ended {
    fn enter(&mut self, _region: u32) {}
    fn exit(&mut self, _region: u32) {}
    fn access(&mut self, _addr: usize, _size: u64, _write: bool) {}
    fn reset(&mut self) {}
    fn fork_survivor(&mut self) {}
}

/// Closes the calling thread's states other than `current`: the coroutine contexts it
/// suspended, and the thread's own state while it runs a coroutine (their regions end with
/// the thread, or the program).
///
/// # Safety
/// On the thread whose states they are.
pub unsafe fn close_suspended(current: *const ThreadState) {
    let tid = libc::gettid();
    let mine: Vec<usize> = match THREADS.try_lock_for(1 << 20) {
        Some(threads) => (threads.states.iter().copied())
            .filter(|&t| {
                let ts = &*(t as *const ThreadState);
                t != current as usize && ts.tid.load(Relaxed) == tid && !ts.closed.load(Acquire)
            })
            .collect(),
        None => return,
    };
    for t in mine {
        (*(t as *const ThreadState)).close();
    }
}

/// pthread key destructor: the thread ends. Its state, closed, waits for a thread that
/// starts later to take it over; its last events (other keys' destructors) find a dead
/// state.
///
/// # Safety
/// Called by libc with the pointer stored by [`current_or_create`], on the ending thread.
pub unsafe extern "C" fn thread_end(p: *mut libc::c_void) {
    let ts = &*(p as *const ThreadState);
    let current = gate::current();
    if !current.is_null() && !std::ptr::eq(current, ts) {
        (*current).close();
    }
    let closed = ts.close();
    close_suspended(ts);
    ts.busy.set(gate::DEAD);
    gate::set_current(ended_state());
    if closed && !ts.context {
        if let Some(mut threads) = THREADS.try_lock_for(1 << 20) {
            threads.ended.push(ts as *const ThreadState as usize);
        }
    }
}

/// The signal [`close_others`] sends: the last real-time signal, which programs rarely use
/// (the runtime takes it only while the program ends).
pub fn close_signal() -> libc::c_int {
    libc::SIGRTMAX()
}

/// How long [`close_others`] waits for the threads, at most, and how often it asks again.
const CLOSE_PATIENCE_MS: u32 = 1000;
const CLOSE_RETRY_MS: u32 = 2;
/// Rounds of [`CLOSE_RETRY_MS`] during which only threads that cannot answer are left
/// before [`close_others`] stops waiting (a thread may block signals for a moment).
const CLOSE_GIVE_UP_ROUNDS: u32 = 10;

/// The program ends (the analysis is finished: no thread's events are taken any more) while
/// other threads may still run with regions open: asks each of them, by [`close_signal`],
/// to close its own state (its regions exited on it, as the threading contract of the tools
/// wants; asked again while the signal neither waits for it nor is being handled: a thread
/// inside the runtime when it came could not close then), and waits until all have, or
/// until [`CLOSE_PATIENCE_MS`] passed. A thread that blocks the signal (it stays pending: worker threads of a pool often
/// block every signal) or is stopped cannot answer: once only such threads have been left
/// for [`CLOSE_GIVE_UP_ROUNDS`] rounds, the wait ends. Returns the threads left open, by
/// why (all 0: every thread is closed).
///
/// Async-signal-safe as far as a fatal signal's report needs: no allocation, no lock held
/// while waiting.
pub fn close_others() -> UnclosedThreads {
    let me = gate::current();
    let mut open: [usize; 256] = [0; 256];
    let mut rounds = CLOSE_PATIENCE_MS / CLOSE_RETRY_MS;
    let mut unable_rounds = 0;
    install_close_handler();
    loop {
        // Copy the states not closed yet (bounded: more threads are asked in later rounds).
        let mut n = 0;
        let mut more = false;
        if let Some(threads) = THREADS.try_lock_for(1 << 20) {
            let my_tid = unsafe { libc::gettid() };
            for &t in threads.states.iter() {
                let ts = unsafe { &*(t as *const ThreadState) };
                // The caller's own states (it and its coroutines' contexts) are its to close.
                if t == me as usize || ts.tid.load(Relaxed) == my_tid || ts.closed.load(Acquire) {
                    continue;
                }
                if n == open.len() {
                    more = true;
                    break;
                }
                open[n] = t;
                n += 1;
            }
        }
        if n == 0 && !more {
            return UnclosedThreads::default();
        }
        let pid = unsafe { libc::getpid() };
        let mut left = UnclosedThreads::default();
        for &t in &open[..n] {
            let ts = unsafe { &*(t as *const ThreadState) };
            let closing = ts.closing.load(Acquire);
            let tid = ts.tid.load(Relaxed);
            match can_answer(tid, closing) {
                Answer::Blocking => left.blocking += 1,
                Answer::Stopped => left.stopped += 1,
                Answer::Yes { asked: false } if !closing => {
                    // tgkill: a thread that ended meanwhile is an error (ESRCH), never
                    // another's signal.
                    unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, close_signal()) };
                    left.unanswered += 1;
                }
                Answer::Yes { .. } => left.unanswered += 1,
            }
        }
        unable_rounds = if left.unanswered == 0 && !more {
            unable_rounds + 1
        } else {
            0
        };
        if rounds == 0 || unable_rounds >= CLOSE_GIVE_UP_ROUNDS {
            return left;
        }
        rounds -= 1;
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: CLOSE_RETRY_MS as libc::c_long * 1_000_000,
        };
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// Whether a thread of this process can run [`close_signal`]'s handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// It can; `asked`: the signal waits for it (pending, not blocked).
    Yes { asked: bool },
    /// It blocks the signal, which waits.
    Blocking,
    /// It is stopped or traced.
    Stopped,
}

/// What the kernel says of thread `tid` (`/proc/self/task/<tid>/status`: its state, and its
/// pending and blocked signals); `closing`: it runs the signal's handler (which blocks the
/// signal meanwhile). `Yes` when the status cannot be read (a thread that ended meanwhile).
/// Async-signal-safe: a buffer on the stack, `open` and `read`.
fn can_answer(tid: libc::pid_t, closing: bool) -> Answer {
    // "/proc/self/task/<tid>/status" and its NUL, on the stack.
    let mut path = [0u8; 64];
    let mut number = itoa::Buffer::new();
    let parts: [&[u8]; 3] = [
        b"/proc/self/task/",
        number.format(tid).as_bytes(),
        b"/status",
    ];
    let mut len = 0;
    for part in parts {
        path[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    let mut status = [0u8; 4096];
    let read = unsafe {
        let fd = libc::open(
            path.as_ptr() as *const libc::c_char,
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return Answer::Yes { asked: true };
        }
        let read = libc::read(fd, status.as_mut_ptr() as *mut libc::c_void, status.len());
        libc::close(fd);
        read
    };
    let status = &status[..read.max(0) as usize];
    if let Some(state) = field(status, b"State:") {
        if matches!(state.first(), Some(b'T' | b't')) {
            return Answer::Stopped;
        }
    }
    let mask = |name: &[u8]| {
        field(status, name).map_or(0, |hex| {
            hex.iter()
                .map_while(|&c| (c as char).to_digit(16))
                .fold(0u64, |mask, digit| mask << 4 | digit as u64)
        })
    };
    let bit = 1u64 << (close_signal() - 1);
    let pending = mask(b"SigPnd:") & bit != 0;
    if pending && !closing && mask(b"SigBlk:") & bit != 0 {
        Answer::Blocking
    } else {
        Answer::Yes { asked: pending }
    }
}

/// The value of the line `name` of a `/proc` status file, its leading blanks skipped.
fn field<'a>(status: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let start = status
        .split(|&b| b == b'\n')
        .find(|line| line.starts_with(name))?;
    let value = &start[name.len()..];
    let blanks = value
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    Some(&value[blanks..])
}

fn install_close_handler() {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = close_on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigfillset(&mut sa.sa_mask);
        crate::handlers::real_sigaction(close_signal(), &sa, std::ptr::null_mut());
    }
}

/// [`close_signal`]'s handler, on a thread still running when the program ends.
extern "C" fn close_on_signal(_signal: libc::c_int) {
    // SAFETY: errno is the thread's; the state is the calling thread's own.
    unsafe {
        let saved = *libc::__errno_location();
        let ts = gate::current();
        if !ts.is_null() {
            (*ts).closing.store(true, Release);
            if (*ts).close() {
                close_suspended(ts);
            }
            (*ts).closing.store(false, Release);
        }
        *libc::__errno_location() = saved;
    }
}
