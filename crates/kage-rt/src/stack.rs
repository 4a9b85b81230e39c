//! Per-thread stack of open regions and the repair rules of `docs/abi.md`: the hooks may
//! arrive unbalanced (longjmp, exceptions through functions without cleanups, exit), and
//! this turns them into a strictly balanced enter/exit sequence for the tools.
//!
//! One addition to the letter of abi.md, for `func_exit`, `loop_iter` and `settle`: the code
//! that calls these hooks belongs to a known function F, so F is the innermost live
//! function. When the innermost open function frame is not F but F is open deeper, the frames
//! above F's innermost frame are dead (left by a longjmp or an exception) and are exited
//! first. Without it, a `catch` in F followed by F's `func_exit` would leave F open.
//! When F is not open at all, the event is ignored.

/// Receives the balanced events.
pub trait Sink {
    fn enter(&mut self, region: u32);
    fn exit(&mut self, region: u32);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Function,
    Loop,
    Body,
    /// An inlined call: part of its caller's activation, entered and left by `settle`.
    Inlined,
}

/// The static region tree, as settling needs it: read only when a region to settle to is
/// not open (the common case, returning to an open region, needs nothing).
pub trait Ancestors {
    /// `region`'s static parent with its kind; `None` when the parent is its function (or
    /// unknown).
    fn parent(&self, region: u32) -> Option<(u32, FrameKind)>;
    /// `region`'s own kind.
    fn kind(&self, region: u32) -> FrameKind;
    /// `region`'s table entry (its address; 0 if unknown).
    fn entry(&self, region: u32) -> usize;
}

/// The size of a table entry: a loop's body's entry comes right after the loop's
/// (docs/abi.md).
pub const ENTRY_SIZE: usize = core::mem::size_of::<kage_abi::Region>();

/// The most regions settling enters at once (inlined calls nested deeper are not entered).
const MAX_ENTERED: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub region: u32,
    pub kind: FrameKind,
    /// Stack pointer seen by `func_enter` (function frames only).
    pub sp: usize,
    /// The region's table entry (its address), which instrumented code compares with
    /// (`inline`).
    pub entry: usize,
}

#[derive(Debug, Default)]
pub struct RegionStack {
    frames: Vec<Frame>,
    /// The indices in `frames` of the function frames, bottom first: the current activation
    /// starts at the last one, found without a search on every event.
    functions: Vec<usize>,
}

impl RegionStack {
    pub fn new() -> Self {
        RegionStack {
            frames: Vec::with_capacity(64),
            functions: Vec::with_capacity(64),
        }
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The innermost open region.
    #[inline]
    pub fn innermost(&self) -> Option<u32> {
        self.frames.last().map(|f| f.region)
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    fn push<S: Sink + ?Sized>(&mut self, f: Frame, sink: &mut S) {
        if f.kind == FrameKind::Function {
            self.functions.push(self.frames.len());
        }
        self.frames.push(f);
        sink.enter(f.region);
    }

    /// Exits frames, innermost first, until `len` remain.
    fn pop_to<S: Sink + ?Sized>(&mut self, len: usize, sink: &mut S) {
        while self.frames.len() > len {
            if let Some(f) = self.frames.pop() {
                if f.kind == FrameKind::Function {
                    self.functions.pop();
                }
                sink.exit(f.region);
            }
        }
    }

    /// Index of the innermost function frame: the current function activation is it and
    /// the frames above it.
    #[inline]
    fn activation(&self) -> Option<usize> {
        self.functions.last().copied()
    }

    /// Innermost frame of `region` within the current activation.
    fn find_in_activation(&self, region: u32) -> Option<usize> {
        let start = self.activation().unwrap_or(0);
        (start..self.frames.len())
            .rev()
            .find(|&i| self.frames[i].region == region)
    }

    /// Makes function `func` the current activation (see the module doc). False when it is
    /// not open at all.
    fn sync_to<S: Sink + ?Sized>(&mut self, func: u32, sink: &mut S) -> bool {
        match self.activation() {
            Some(a) if self.frames[a].region == func => true,
            _ => match self
                .functions
                .iter()
                .rev()
                .copied()
                .find(|&i| self.frames[i].region == func)
            {
                Some(j) => {
                    self.pop_to(j + 1, sink);
                    true
                }
                None => false,
            },
        }
    }

    /// The lowest function frame whose recorded stack pointer is `dead`, if any. Function
    /// frames' stack pointers decrease strictly from the bottom of the stack up (a function
    /// frame is pushed only after every one at or below its own was exited), so the dead ones
    /// are the topmost: the search runs from the top and stops at the first live one, and
    /// costs one test when none is dead, not the depth of the stack.
    fn first_dead_function(&self, dead: impl Fn(usize) -> bool) -> Option<usize> {
        let mut first = None;
        for &i in self.functions.iter().rev() {
            if !dead(self.frames[i].sp) {
                break;
            }
            first = Some(i);
        }
        first
    }

    /// `__kage_func_enter(F)` (F's table entry at `entry`) with the stack pointer `sp` seen
    /// in the hook.
    pub fn func_enter<S: Sink + ?Sized>(
        &mut self,
        func: u32,
        entry: usize,
        sp: usize,
        sink: &mut S,
    ) {
        // A live caller is always higher on the stack (stacks grow down): function frames at
        // or below `sp` are dead, and so is everything above them.
        if let Some(dead) = self.first_dead_function(|frame_sp| frame_sp <= sp) {
            self.pop_to(dead, sink);
        }
        self.push(
            Frame {
                region: func,
                kind: FrameKind::Function,
                sp,
                entry,
            },
            sink,
        );
    }

    /// `__kage_func_exit(F)`.
    pub fn func_exit<S: Sink + ?Sized>(&mut self, func: u32, sink: &mut S) {
        if !self.sync_to(func, sink) {
            return;
        }
        if let Some(a) = self.activation() {
            self.pop_to(a, sink);
        }
    }

    /// `__kage_loop_iter(L)` (L's table entry at `entry`): `body` is L's body, `parent` L's
    /// static parent, `func` L's function.
    #[allow(clippy::too_many_arguments)]
    pub fn loop_iter<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        lp: u32,
        entry: usize,
        body: u32,
        parent: u32,
        func: u32,
        ancestors: &A,
        sink: &mut S,
    ) {
        if !self.sync_to(func, sink) {
            return;
        }
        if let Some(b) = self.find_in_activation(body) {
            // A new iteration.
            self.pop_to(b, sink);
            self.push(
                Frame {
                    region: body,
                    kind: FrameKind::Body,
                    sp: 0,
                    entry: entry + ENTRY_SIZE,
                },
                sink,
            );
            return;
        }
        self.open_loop_parent(parent, func, ancestors, sink);
        self.push(
            Frame {
                region: lp,
                kind: FrameKind::Loop,
                sp: 0,
                entry,
            },
            sink,
        );
        self.push(
            Frame {
                region: body,
                kind: FrameKind::Body,
                sp: 0,
                entry: entry + ENTRY_SIZE,
            },
            sink,
        );
    }

    /// A region whose static parent is `parent` (of function `func`) is entered, a loop or
    /// a region reported whole: `parent` becomes the innermost open region, as for
    /// `loop_iter`'s entry. False (and nothing changes) when `func` is not open.
    pub fn settle_in_parent<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        parent: u32,
        func: u32,
        ancestors: &A,
        sink: &mut S,
    ) -> bool {
        if !self.sync_to(func, sink) {
            return false;
        }
        self.open_loop_parent(parent, func, ancestors, sink);
        true
    }

    /// Entering a loop, in its parent, which becomes the innermost open region (an inlined
    /// call around the loop is entered first if it is not open). If the parent cannot be
    /// opened (not expected from a well-formed CFG), the loop is entered directly in the
    /// function, the current activation.
    fn open_loop_parent<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        parent: u32,
        func: u32,
        ancestors: &A,
        sink: &mut S,
    ) {
        if self.find_in_activation(parent).is_none() {
            let kind = ancestors.kind(parent);
            self.settle(parent, kind, ancestors.entry(parent), func, ancestors, sink);
        }
        let p = self
            .find_in_activation(parent)
            .or_else(|| self.activation())
            .unwrap_or(0);
        self.pop_to(p + 1, sink);
    }

    /// `__kage_settle(R)`: R (of kind `kind`, its table entry at `entry`) becomes the
    /// innermost open region of the current activation; `func` is R's function (R itself when R is a function). The
    /// frames above R's innermost frame exit; when R is not open, those above its innermost
    /// open static ancestor (or the function) exit, and then the regions between, down to
    /// R, enter, provided they are all inlined calls (a loop or body is only entered by its
    /// loop's iteration hook: otherwise nothing happens).
    #[allow(clippy::too_many_arguments)]
    pub fn settle<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        region: u32,
        kind: FrameKind,
        entry: usize,
        func: u32,
        ancestors: &A,
        sink: &mut S,
    ) {
        // Already the innermost: then its function's activation is the innermost one too.
        if self.frames.last().is_some_and(|f| f.region == region) {
            return;
        }
        // The common moves, without a search (each is what the rules below do in that
        // case: within an activation the open frames are a path down the static tree):
        // back out to the region just around the innermost one, when both are in the
        // innermost activation, or into an inlined call right inside the innermost region.
        let n = self.frames.len();
        if n >= 2
            && self.frames[n - 2].region == region
            && self.frames[n - 1].kind != FrameKind::Function
        {
            self.pop_to(n - 1, sink);
            return;
        }
        if kind == FrameKind::Inlined && n >= 1 {
            let top = self.frames[n - 1];
            let inside_top = match ancestors.parent(region) {
                Some((parent, _)) => parent == top.region,
                None => top.region == func && top.kind == FrameKind::Function,
            };
            if inside_top {
                self.enter_missing(region, kind, entry, 1, ancestors, sink);
                return;
            }
        }
        if !self.sync_to(func, sink) {
            return;
        }
        if let Some(at) = self.find_in_activation(region) {
            self.pop_to(at + 1, sink);
            return;
        }
        // Not open: find the innermost open ancestor, through inlined calls only.
        let mut at = (region, kind);
        let mut missing = 0;
        let base = loop {
            if missing == MAX_ENTERED || at.1 != FrameKind::Inlined {
                return;
            }
            missing += 1;
            match ancestors.parent(at.0) {
                None => match self.activation() {
                    Some(base) => break base,
                    None => return,
                },
                Some(parent) => match self.find_in_activation(parent.0) {
                    Some(base) => break base,
                    None => at = parent,
                },
            }
        };
        self.pop_to(base + 1, sink);
        self.enter_missing(region, kind, entry, missing, ancestors, sink);
    }

    /// Enters `region` (of kind `kind`, at `entry`) after its `missing - 1` innermost
    /// ancestors, which are not open, outermost first.
    fn enter_missing<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        region: u32,
        kind: FrameKind,
        entry: usize,
        missing: usize,
        ancestors: &A,
        sink: &mut S,
    ) {
        if missing > 1 {
            if let Some((parent, parent_kind)) = ancestors.parent(region) {
                let parent_entry = ancestors.entry(parent);
                self.enter_missing(
                    parent,
                    parent_kind,
                    parent_entry,
                    missing - 1,
                    ancestors,
                    sink,
                );
            }
        }
        self.push(
            Frame {
                region,
                kind,
                sp: 0,
                entry,
            },
            sink,
        );
    }

    /// `__kage_resume_at(R)` with the current activation's frame address `sp`: callee frames
    /// (strictly below `sp`) were unwound or jumped out of; then as `settle`.
    #[allow(clippy::too_many_arguments)]
    pub fn resume_at<S: Sink + ?Sized, A: Ancestors + ?Sized>(
        &mut self,
        region: u32,
        kind: FrameKind,
        entry: usize,
        func: u32,
        ancestors: &A,
        sp: usize,
        sink: &mut S,
    ) {
        if let Some(dead) = self.first_dead_function(|frame_sp| frame_sp < sp) {
            self.pop_to(dead, sink);
        }
        self.settle(region, kind, entry, func, ancestors, sink);
    }

    /// Exits every open frame, innermost first (thread exit, process exit, fatal signal).
    pub fn exit_all<S: Sink + ?Sized>(&mut self, sink: &mut S) {
        self.pop_to(0, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records events as `+r` / `-r` and checks balance.
    #[derive(Default)]
    struct Rec {
        ev: Vec<i64>,
        open: Vec<u32>,
    }

    impl Sink for Rec {
        fn enter(&mut self, r: u32) {
            self.ev.push(r as i64);
            self.open.push(r);
        }
        fn exit(&mut self, r: u32) {
            self.ev.push(-(r as i64));
            assert_eq!(self.open.pop(), Some(r), "unbalanced exit");
        }
    }

    impl Rec {
        fn take(&mut self) -> Vec<i64> {
            std::mem::take(&mut self.ev)
        }
    }

    /// The open regions, after checking the index of function frames against the frames.
    fn regions(s: &RegionStack) -> Vec<u32> {
        let functions: Vec<usize> = (s.frames.iter().enumerate())
            .filter(|(_, f)| f.kind == FrameKind::Function)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(s.functions, functions);
        s.frames().iter().map(|f| f.region).collect()
    }

    // Ids: main=1 (loop 2, body 3), f=10 (loop 11 body 12, nested loop 13 body 14), g=20, h=30.
    // Inlined calls: 40 in main's body 3; 41 in 40; 42 in main; 43 in f, around loop 44
    // (body 45).

    /// A region's kind and static parent (the table above); `None` for a function.
    fn step(r: u32) -> Option<(FrameKind, u32)> {
        Some(match r {
            2 | 11 => (FrameKind::Loop, r - 1),
            3 | 12 | 14 | 45 => (FrameKind::Body, r - 1),
            13 => (FrameKind::Loop, 12),
            44 => (FrameKind::Loop, 43),
            40 => (FrameKind::Inlined, 3),
            41 => (FrameKind::Inlined, 40),
            42 => (FrameKind::Inlined, 1),
            43 => (FrameKind::Inlined, 10),
            _ => return None,
        })
    }

    /// A region's (made-up) table entry: consecutive regions' are consecutive.
    fn e(r: u32) -> usize {
        0x1000 + r as usize * ENTRY_SIZE
    }

    fn kind(r: u32) -> FrameKind {
        step(r).map_or(FrameKind::Function, |(kind, _)| kind)
    }

    struct Table;

    impl Ancestors for Table {
        fn parent(&self, region: u32) -> Option<(u32, FrameKind)> {
            let (_, parent) = step(region)?;
            step(parent).map(|(kind, _)| (parent, kind))
        }
        fn kind(&self, region: u32) -> FrameKind {
            kind(region)
        }
        fn entry(&self, region: u32) -> usize {
            e(region)
        }
    }

    #[test]
    fn deep_recursion_costs_each_call_its_own_activation_only() {
        // 400,000 nested calls and their returns: with a search of the whole stack on every
        // call this took minutes (the square of the depth); now it is linear.
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        let depth = 400_000usize;
        let top = 1usize << 40;
        for k in 0..depth {
            s.func_enter(20, e(20), top - 64 * k, &mut r);
        }
        assert_eq!(s.frames().len(), depth);
        // A call at a higher stack pointer than the 1000 innermost frames: they are dead.
        s.func_enter(30, e(30), top - 64 * (depth - 1000) + 8, &mut r);
        assert_eq!(s.frames().len(), depth - 1000 + 1);
        for _ in 0..depth - 1000 + 1 {
            let top = s.frames().last().unwrap().region;
            s.func_exit(top, &mut r);
        }
        assert!(s.is_empty());
    }

    #[test]
    fn settling_enters_and_leaves_inlined_calls() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(1, e(1), 1000, &mut r);
        s.settle(42, kind(42), e(42), 1, &Table, &mut r); // main's code inlined from 42
        s.settle(1, kind(1), e(1), 1, &Table, &mut r); // back in main's own code
        assert_eq!(r.take(), vec![1, 42, -42]);
        s.loop_iter(2, e(2), 3, 1, 1, &Table, &mut r);
        s.settle(41, kind(41), e(41), 1, &Table, &mut r); // straight into 41, inlined in 40
        s.settle(40, kind(40), e(40), 1, &Table, &mut r); // back in 40
        s.settle(41, kind(41), e(41), 1, &Table, &mut r); // into 41 again, right inside 40
        s.settle(40, kind(40), e(40), 1, &Table, &mut r);
        s.loop_iter(2, e(2), 3, 1, 1, &Table, &mut r); // next iteration leaves 40
        s.settle(40, kind(40), e(40), 1, &Table, &mut r);
        s.settle(1, kind(1), e(1), 1, &Table, &mut r); // the loop's exit
        assert_eq!(
            r.take(),
            vec![2, 3, 40, 41, -41, 41, -41, -40, -3, 3, 40, -40, -3, -2]
        );
        // A loop of an inlined call enters the call first; its exit settles in the call.
        s.func_enter(10, e(10), 900, &mut r);
        s.loop_iter(44, e(44), 45, 43, 10, &Table, &mut r);
        s.loop_iter(44, e(44), 45, 43, 10, &Table, &mut r);
        s.settle(43, kind(43), e(43), 10, &Table, &mut r);
        s.settle(10, kind(10), e(10), 10, &Table, &mut r);
        assert_eq!(r.take(), vec![10, 43, 44, 45, -45, 45, -45, -44, -43]);
        // A body is never entered by settling: nothing happens.
        s.settle(14, kind(14), e(14), 10, &Table, &mut r);
        assert_eq!(r.take(), Vec::<i64>::new());
        // Resuming in an inlined call after a longjmp out of a callee.
        s.func_enter(20, e(20), 800, &mut r);
        s.resume_at(43, kind(43), e(43), 10, &Table, 900, &mut r);
        assert_eq!(r.take(), vec![20, -20, 43]);
        s.exit_all(&mut r);
        assert_eq!(regions(&s), Vec::<u32>::new());
    }

    #[test]
    fn nested_loops_and_iterations() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(10, e(10), 1000, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.loop_iter(13, e(13), 14, 12, 10, &Table, &mut r);
        s.loop_iter(13, e(13), 14, 12, 10, &Table, &mut r); // inner iteration
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r); // outer iteration: inner loop exited
        assert_eq!(
            r.take(),
            vec![10, 11, 12, 13, 14, -14, 14, -14, -13, -12, 12]
        );
        s.loop_iter(13, e(13), 14, 12, 10, &Table, &mut r); // inner loop re-entered: a new instance
        s.settle(12, kind(12), e(12), 10, &Table, &mut r); // exit of inner loop into outer body
        s.settle(10, kind(10), e(10), 10, &Table, &mut r); // exit of outer loop
        assert_eq!(r.take(), vec![13, 14, -14, -13, -12, -11]);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r); // re-entry of the same loop
        s.func_exit(10, &mut r); // return from inside the loop
        assert_eq!(r.take(), vec![11, 12, -12, -11, -10]);
        assert!(s.is_empty());
    }

    #[test]
    fn longjmp_out_of_a_loop_then_func_exit() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(1, e(1), 2000, &mut r);
        s.func_enter(10, e(10), 1900, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.loop_iter(13, e(13), 14, 12, 10, &Table, &mut r);
        r.take();
        // longjmp to a setjmp in f before the loops: loop frames stay open, f returns.
        s.func_exit(10, &mut r);
        assert_eq!(r.take(), vec![-14, -13, -12, -11, -10]);
        assert_eq!(regions(&s), vec![1]);
    }

    #[test]
    fn longjmp_out_of_callees_detected_at_next_call() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(1, e(1), 2000, &mut r);
        s.loop_iter(2, e(2), 3, 1, 1, &Table, &mut r);
        s.func_enter(10, e(10), 1900, &mut r);
        s.func_enter(20, e(20), 1800, &mut r);
        r.take();
        // longjmp from g back into main's loop; main calls h at the depth f had.
        s.func_enter(30, e(30), 1900, &mut r);
        assert_eq!(r.take(), vec![-20, -10, 30]);
        assert_eq!(regions(&s), vec![1, 2, 3, 30]);
        // A deeper frame is a live callee: nothing is exited.
        s.func_enter(20, e(20), 1850, &mut r);
        assert_eq!(r.take(), vec![20]);
    }

    #[test]
    fn resume_at_after_setjmp_or_in_a_landing_pad() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(1, e(1), 2000, &mut r);
        s.func_enter(10, e(10), 1900, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.func_enter(20, e(20), 1800, &mut r);
        r.take();
        // longjmp (or an exception) from g lands in main, whose frame address is 2000:
        // f, its loop and g are dead; main itself is not.
        s.resume_at(1, kind(1), e(1), 1, &Table, 2000, &mut r);
        assert_eq!(r.take(), vec![-20, -12, -11, -10]);
        assert_eq!(regions(&s), vec![1]);
        // A first return from setjmp changes nothing.
        s.loop_iter(2, e(2), 3, 1, 1, &Table, &mut r);
        r.take();
        s.resume_at(3, kind(3), e(3), 1, &Table, 2000, &mut r);
        assert_eq!(r.take(), Vec::<i64>::new());
        assert_eq!(regions(&s), vec![1, 2, 3]);
    }

    #[test]
    fn exception_skipping_function_frames() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(1, e(1), 2000, &mut r);
        s.func_enter(10, e(10), 1900, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.func_enter(20, e(20), 1800, &mut r);
        s.func_enter(30, e(30), 1700, &mut r);
        r.take();
        // h throws; g has no cleanup; f catches inside its loop body and the landing pad
        // leads to a loop exit block.
        s.settle(10, kind(10), e(10), 10, &Table, &mut r);
        assert_eq!(r.take(), vec![-30, -20, -12, -11]);
        assert_eq!(regions(&s), vec![1, 10]);
        // Same throw, but f's cleanup pad runs func_exit(f) then resumes to main.
        s.func_enter(20, e(20), 1800, &mut r);
        s.func_enter(30, e(30), 1700, &mut r);
        r.take();
        s.func_exit(10, &mut r);
        assert_eq!(r.take(), vec![-30, -20, -10]);
        assert_eq!(regions(&s), vec![1]);
        // An exit of a function that is not open changes nothing.
        s.func_exit(30, &mut r);
        s.settle(12, kind(12), e(12), 10, &Table, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        assert_eq!(r.take(), Vec::<i64>::new());
        assert_eq!(regions(&s), vec![1]);
    }

    #[test]
    fn recursion() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(10, e(10), 1000, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.func_enter(10, e(10), 900, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r); // the inner activation's own loop instance
        assert_eq!(regions(&s), vec![10, 11, 12, 10, 11, 12]);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.func_exit(10, &mut r);
        assert_eq!(regions(&s), vec![10, 11, 12]);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r); // outer activation's next iteration
        assert_eq!(regions(&s), vec![10, 11, 12]);
        s.func_exit(10, &mut r);
        assert!(s.is_empty());
        assert_eq!(
            r.take(),
            vec![10, 11, 12, 10, 11, 12, -12, 12, -12, -11, -10, -12, 12, -12, -11, -10]
        );
    }

    #[test]
    fn settle_only_within_current_activation() {
        let (mut s, mut r) = (RegionStack::new(), Rec::default());
        s.func_enter(10, e(10), 1000, &mut r);
        s.loop_iter(11, e(11), 12, 10, 10, &Table, &mut r);
        s.func_enter(10, e(10), 900, &mut r); // recursive call from inside the loop
        r.take();
        // settle on the loop body in the inner activation: the body is open only in the
        // outer activation, so nothing happens.
        s.settle(12, kind(12), e(12), 10, &Table, &mut r);
        assert_eq!(r.take(), Vec::<i64>::new());
        s.exit_all(&mut r);
        assert_eq!(r.take(), vec![-10, -12, -11, -10]);
    }
}
