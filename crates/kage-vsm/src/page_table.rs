//! The sparse translation from a 64-bit page number to a page (paper §4, Figure 6c, with the
//! extra top level its footnote 1 suggests for 64-bit addresses).
//!
//! A page number (a shadowed address shifted right by the tag table's bits) splits into a
//! top key (its high bits) and an index into a dense segment table. The top table is a
//! sorted vector of the segment tables in use, searched after a one-entry hint: programs
//! touch few segments (heap, stack, a few mappings), so it stays tiny, and unlike a
//! `HashMap` its heap use is known exactly. Pages are boxed, so a segment table costs one
//! pointer per page slot and a page costs nothing until it is first stored to.

/// Sparse 64-bit page number → page map: top table → segment table → `Box<P>`.
#[derive(Debug)]
pub struct PageTable<P> {
    segment_bits: u32,
    top: Vec<Segment<P>>,
    hint: usize,
    pages: usize,
}

#[derive(Debug)]
struct Segment<P> {
    key: u64,
    slots: Box<[Option<Box<P>>]>,
}

impl<P> PageTable<P> {
    /// An empty table whose segment tables each cover `2^segment_bits` pages.
    pub fn new(segment_bits: u32) -> Self {
        assert!(
            segment_bits <= 24,
            "kage-vsm: segment tables of 2^{segment_bits} pages"
        );
        Self {
            segment_bits,
            top: Vec::new(),
            hint: 0,
            pages: 0,
        }
    }

    #[inline]
    fn split(&self, page: u64) -> (u64, usize) {
        let index = (page & ((1u64 << self.segment_bits) - 1)) as usize;
        (page >> self.segment_bits, index)
    }

    #[inline]
    fn find(&self, key: u64) -> Result<usize, usize> {
        match self.top.get(self.hint) {
            Some(segment) if segment.key == key => Ok(self.hint),
            _ => self.top.binary_search_by_key(&key, |segment| segment.key),
        }
    }

    /// The page, if it exists.
    #[inline]
    pub fn get(&self, page: u64) -> Option<&P> {
        let (key, index) = self.split(page);
        let at = self.find(key).ok()?;
        self.top[at].slots[index].as_deref()
    }

    /// The page, if it exists.
    #[inline]
    pub fn get_mut(&mut self, page: u64) -> Option<&mut P> {
        let (key, index) = self.split(page);
        let at = self.find(key).ok()?;
        self.hint = at;
        self.top[at].slots[index].as_deref_mut()
    }

    /// The page, created by `make` if it does not exist yet.
    #[inline(always)]
    pub fn get_or_insert_with(&mut self, page: u64, make: impl FnOnce() -> P) -> &mut P {
        let (key, index) = self.split(page);
        let at = match self.find(key) {
            Ok(at) => at,
            Err(at) => {
                let slots = std::iter::repeat_with(|| None)
                    .take(1 << self.segment_bits)
                    .collect();
                self.top.insert(at, Segment { key, slots });
                at
            }
        };
        self.hint = at;
        let slot = &mut self.top[at].slots[index];
        if slot.is_none() {
            *slot = Some(Box::new(make()));
            self.pages += 1;
        }
        slot.as_deref_mut().expect("just filled")
    }

    /// The number of pages.
    pub fn len(&self) -> usize {
        self.pages
    }

    /// Whether there is no page.
    pub fn is_empty(&self) -> bool {
        self.pages == 0
    }

    /// Every page with its page number, in increasing page number order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &P)> + '_ {
        let bits = self.segment_bits;
        self.top.iter().flat_map(move |segment| {
            segment
                .slots
                .iter()
                .enumerate()
                .filter_map(move |(index, slot)| {
                    slot.as_deref()
                        .map(|page| ((segment.key << bits) | index as u64, page))
                })
        })
    }

    /// Calls `f` on every page with its page number, in increasing page number order.
    pub fn for_each_mut(&mut self, mut f: impl FnMut(u64, &mut P)) {
        let bits = self.segment_bits;
        for segment in &mut self.top {
            for (index, slot) in segment.slots.iter_mut().enumerate() {
                if let Some(page) = slot.as_deref_mut() {
                    f((segment.key << bits) | index as u64, page);
                }
            }
        }
    }

    /// Bytes on the heap for the table itself and the page boxes (`size_of::<P>()` each),
    /// not what the pages point to.
    pub fn heap_bytes(&self) -> usize {
        self.top.capacity() * size_of::<Segment<P>>()
            + self.top.len() * (1usize << self.segment_bits) * size_of::<Option<Box<P>>>()
            + self.pages * size_of::<P>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_over_the_whole_64_bit_space() {
        let mut table = PageTable::<u32>::new(3);
        let pages = [0u64, 7, 8, u64::MAX, u64::MAX - 8, 1 << 40, 5];
        for (n, &page) in pages.iter().enumerate() {
            *table.get_or_insert_with(page, || 0) += n as u32 + 1;
        }
        for (n, &page) in pages.iter().enumerate() {
            assert_eq!(table.get(page), Some(&(n as u32 + 1)));
        }
        assert_eq!(table.get(9), None);
        assert_eq!(table.len(), pages.len());
        let mut sorted = pages.to_vec();
        sorted.sort();
        assert_eq!(
            table.iter().map(|(page, _)| page).collect::<Vec<_>>(),
            sorted
        );
        // Segments: 0 (pages 0, 5, 7), 1 (8), 2^37 (1 << 40), top (MAX, MAX - 8).
        let segments = 5;
        assert_eq!(
            table.heap_bytes(),
            table.top.capacity() * size_of::<Segment<u32>>() + segments * 8 * 8 + pages.len() * 4
        );
    }
}
