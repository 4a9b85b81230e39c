//! The static region tree: functions are its roots, a loop hangs under the loop body around
//! it or its function, a loop body under its loop. Every view that shows regions as a tree
//! walks it from here.

use super::short_name;
use crate::model::{CallSite, Region, RegionKind, Report};

/// The regions of a report by static parent. A region whose parent is not in the report is
/// a root.
pub(crate) struct RegionTree {
    roots: Vec<u32>,
    children: Vec<Vec<u32>>,
}

impl RegionTree {
    /// The tree with siblings in id order.
    pub(crate) fn new(report: &Report) -> RegionTree {
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); report.regions.len()];
        let mut roots = Vec::new();
        for region in &report.regions {
            match region.parent {
                Some(parent) if (parent as usize) < report.regions.len() => {
                    children[parent as usize].push(region.id)
                }
                _ => roots.push(region.id),
            }
        }
        RegionTree { roots, children }
    }

    /// Orders the roots, and the children of every region, by `key` (ties keep id order).
    pub(crate) fn sort_siblings_by_key<K: Ord>(mut self, key: impl Fn(u32) -> K) -> RegionTree {
        self.roots.sort_by_key(|&id| key(id));
        for siblings in &mut self.children {
            siblings.sort_by_key(|&id| key(id));
        }
        self
    }

    /// Leaves out the regions for which `hidden` is true; their children take their place
    /// under their parent (or among the roots), in order.
    pub(crate) fn splice_out(self, hidden: impl Fn(u32) -> bool) -> RegionTree {
        fn shown(tree: &RegionTree, ids: &[u32], hidden: &dyn Fn(u32) -> bool) -> Vec<u32> {
            let mut out = Vec::with_capacity(ids.len());
            for &id in ids {
                if hidden(id) {
                    out.extend(shown(tree, tree.children(id), hidden));
                } else {
                    out.push(id);
                }
            }
            out
        }
        RegionTree {
            roots: shown(&self, &self.roots, &hidden),
            // A hidden region keeps a list too, but nothing leads to it any more.
            children: self
                .children
                .iter()
                .map(|ids| shown(&self, ids, &hidden))
                .collect(),
        }
    }

    pub(crate) fn roots(&self) -> &[u32] {
        &self.roots
    }

    pub(crate) fn children(&self, id: u32) -> &[u32] {
        self.children.get(id as usize).map_or(&[], Vec::as_slice)
    }

    /// Every region in pre-order with its depth (0 for roots).
    pub(crate) fn preorder(&self) -> Vec<(u32, usize)> {
        let mut order = Vec::with_capacity(self.children.len());
        let mut stack: Vec<(u32, usize)> = self.roots.iter().rev().map(|&id| (id, 0)).collect();
        while let Some((id, depth)) = stack.pop() {
            order.push((id, depth));
            stack.extend(
                self.children(id)
                    .iter()
                    .rev()
                    .map(|&child| (child, depth + 1)),
            );
        }
        order
    }

    /// [`preorder`](Self::preorder) with the regions themselves.
    pub(crate) fn walk<'r>(&self, report: &'r Report) -> Vec<(&'r Region, usize)> {
        self.preorder()
            .into_iter()
            .map(|(id, depth)| (&report.regions[id as usize], depth))
            .collect()
    }
}

/// A region's name in a tree: "function main" for a function, "function sum, inlined at
/// inl.c:18" for an inlined call (the region above it is where), the kind for a loop or a
/// loop body (the function above it names it).
pub(crate) fn node_label(region: &Region) -> String {
    match (region.kind, &region.inlined_at) {
        (RegionKind::Function, None) => format!("function {}", short_name(&region.name)),
        (RegionKind::Function, Some(at)) => format!(
            "function {}, inlined at {}",
            short_name(&region.name),
            call_site_label(at)
        ),
        (kind, _) => kind.as_str().to_string(),
    }
}

/// "inl.c:18": a call site with its file's base name.
pub(crate) fn call_site_label(at: &CallSite) -> String {
    let file = at.file.rsplit('/').next().unwrap_or("");
    match (file.is_empty(), at.line) {
        (true, 0) => "an unknown line".to_string(),
        (true, line) => format!("line {line}"),
        (false, 0) => file.to_string(),
        (false, line) => format!("{file}:{line}"),
    }
}

/// [`node_label`] indented two spaces per level.
pub(crate) fn tree_label(region: &Region, depth: usize) -> String {
    format!("{}{}", "  ".repeat(depth), node_label(region))
}
