//! Region versions and tag validation (paper §3.2, Theorem 1).
//!
//! Every dynamic region instance gets a version when it is entered, from one counter that
//! only grows over the whole run, so versions order instances by their start. The versions
//! of the active regions, outermost first, form the current version vector: it strictly
//! increases with depth. A shadow that stored `v`, the innermost version current when it
//! last validated, knows that its tag for level `i` is still valid iff `current[i] <= v`
//! (Theorem 1): the valid levels are a prefix, whose length [`max_valid_level`] finds.

/// The current version vector: one version per active region level, outermost first.
#[derive(Clone, Debug)]
pub struct VersionStack {
    versions: Vec<u64>,
    next_version: u64,
}

impl Default for VersionStack {
    fn default() -> Self {
        Self::new()
    }
}

impl VersionStack {
    /// An empty stack (depth 0); the first region entered gets version 1, so version 0 is
    /// free to mean "never validated".
    pub const fn new() -> Self {
        Self {
            versions: Vec::new(),
            next_version: 1,
        }
    }

    /// Enters a region: pushes a fresh version (one more than any version given before)
    /// and returns it.
    #[inline]
    pub fn enter(&mut self) -> u64 {
        let version = self.next_version;
        self.next_version += 1;
        self.versions.push(version);
        version
    }

    /// Exits the innermost region and returns its version.
    ///
    /// # Panics
    /// At depth 0: exits must balance enters, and an unbalanced exit is the caller's bug.
    #[inline]
    pub fn exit(&mut self) -> u64 {
        self.versions
            .pop()
            .expect("kage-vsm: region exit at depth 0")
    }

    /// The number of active levels.
    #[inline]
    pub fn depth(&self) -> usize {
        self.versions.len()
    }

    /// The versions of the active levels, outermost first (strictly increasing).
    #[inline]
    pub fn as_slice(&self) -> &[u64] {
        &self.versions
    }

    /// The version of the innermost active level, or 0 at depth 0. This is what a shadow
    /// stores when it validates (the largest current version).
    #[inline]
    pub fn innermost(&self) -> u64 {
        self.versions.last().copied().unwrap_or(0)
    }

    /// The version the next [`enter`](Self::enter) will push.
    pub fn next_version(&self) -> u64 {
        self.next_version
    }

    /// [`max_valid_level`] against this stack.
    #[inline]
    pub fn max_valid_level(&self, stored_version: u64) -> usize {
        max_valid_level(stored_version, &self.versions)
    }

    /// Bytes this stack holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        self.versions.capacity() * size_of::<u64>()
    }
}

/// How many leading levels of `current` are still valid for a shadow that stored
/// `stored_version`: the number of levels `i` with `current[i] <= stored_version`
/// (Theorem 1). Tags at levels from the result on must be scrubbed.
///
/// The paper's `maxValidLevel` returns the index of the deepest valid level; this returns
/// one more, the paper's `scrubStart`. `current` must be strictly increasing, as a
/// [`VersionStack`] is. Usually only the deepest levels changed since the last validation
/// (spatial locality), so a short reverse scan runs before the binary search.
#[inline]
pub fn max_valid_level(stored_version: u64, current: &[u64]) -> usize {
    let mut valid = current.len();
    let mut steps = 0;
    while valid > 0 {
        if current[valid - 1] <= stored_version {
            return valid;
        }
        valid -= 1;
        steps += 1;
        if steps == 4 {
            return current[..valid].partition_point(|&v| v <= stored_version);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_worked_example_only_level_zero_is_valid() {
        // Figure 4: tags stored in region 4; read in region 7 with versions [1, 5, 6, 7].
        assert_eq!(max_valid_level(4, &[1, 5, 6, 7]), 1);
    }

    #[test]
    fn max_valid_level_matches_a_linear_count() {
        let current: Vec<u64> = (0..40).map(|i| 3 * i + 1).collect();
        for depth in 0..current.len() {
            for stored in 0..130 {
                let slice = &current[..depth];
                let expected = slice.iter().filter(|&&v| v <= stored).count();
                assert_eq!(max_valid_level(stored, slice), expected, "{stored} {depth}");
            }
        }
    }

    #[test]
    fn versions_grow_over_the_whole_run() {
        let mut stack = VersionStack::new();
        assert_eq!(stack.innermost(), 0);
        assert_eq!(stack.enter(), 1);
        assert_eq!(stack.enter(), 2);
        assert_eq!(stack.exit(), 2);
        assert_eq!(stack.enter(), 3, "re-entry is a fresh instance");
        assert_eq!(stack.as_slice(), &[1, 3]);
        assert_eq!(stack.depth(), 2);
        assert_eq!(stack.innermost(), 3);
    }

    #[test]
    #[should_panic(expected = "exit at depth 0")]
    fn exit_at_depth_zero_panics() {
        VersionStack::new().exit();
    }
}
