//! Pairing deletions with additions as renames: first by identical content id, then, for text
//! files, by similar content (the share of bytes in lines both sides have, as git scores it).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::base::error::Result;
use crate::model::tree::{Entry, EntryKind};
use crate::object::RandomKeyMap;

/// Past this many deletions or additions, similar-content renames are not looked for (the
/// comparison is quadratic); exact ones still are.
pub const MAX_SIMILAR_CANDIDATES: usize = 1000;

/// Files larger than this are only paired when identical.
pub const MAX_SIMILAR_BYTES: u64 = 1 << 20;

/// A deleted or added file: its path and entry.
pub(crate) type Side<'a> = (&'a [u8], &'a Entry);

/// A pairing: (index into deleted, index into added, similarity percent).
pub(crate) type Pair = (usize, usize, u8);

fn basename(p: &[u8]) -> &[u8] {
    p.rsplit(|&b| b == b'/').next().unwrap_or(p)
}

/// Pairs files with the same content id, preferring one with the same base name.
pub(crate) fn exact(
    deleted: &[Side<'_>],
    added: &[Side<'_>],
    taken_old: &mut [bool],
    taken_new: &mut [bool],
) -> Vec<Pair> {
    let mut by_content: RandomKeyMap<_, Vec<usize>> = RandomKeyMap::default();
    for (j, (_, e)) in added.iter().enumerate() {
        if let (EntryKind::File, Some(id)) = (e.kind, e.content) {
            by_content.entry(id).or_default().push(j);
        }
    }
    let mut pairs = Vec::new();
    for (i, (path, e)) in deleted.iter().enumerate() {
        let (EntryKind::File, Some(id)) = (e.kind, e.content) else { continue };
        let Some(candidates) = by_content.get(&id) else { continue };
        let free = || candidates.iter().copied().filter(|&j| !taken_new[j]);
        let pick = free().find(|&j| basename(added[j].0) == basename(path)).or_else(|| free().next());
        if let Some(j) = pick {
            taken_old[i] = true;
            taken_new[j] = true;
            pairs.push((i, j, 100));
        }
    }
    pairs
}

/// A text's lines as sorted (hash, length) pairs, for counting the bytes two texts share.
pub(crate) fn fingerprint(text: &str) -> Vec<(u64, u32)> {
    let mut lines: Vec<(u64, u32)> = text
        .split_inclusive('\n')
        .map(|l| {
            let mut h = DefaultHasher::new();
            l.hash(&mut h);
            (h.finish(), l.len() as u32)
        })
        .collect();
    lines.sort_unstable();
    lines
}

/// Similarity in percent: bytes in lines both have over the larger size.
fn score(a: &[(u64, u32)], b: &[(u64, u32)], size_a: u64, size_b: u64) -> u8 {
    let (mut i, mut j, mut common) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += u64::from(a[i].1);
                i += 1;
                j += 1;
            }
        }
    }
    let larger = size_a.max(size_b).max(1);
    (common * 100 / larger).min(100) as u8
}

/// Pairs the files left over by `exact` whose similarity reaches `threshold`, best first.
/// `text(side, index)` gives a file's fingerprint when it is text of at most
/// `MAX_SIMILAR_BYTES`. The caller checks `MAX_SIMILAR_CANDIDATES`.
pub(crate) fn similar(
    deleted: &[Side<'_>],
    added: &[Side<'_>],
    taken_old: &mut [bool],
    taken_new: &mut [bool],
    threshold: u8,
    mut text: impl FnMut(bool, usize) -> Result<Option<Vec<(u64, u32)>>>,
) -> Result<Vec<Pair>> {
    let eligible = |e: &Entry| e.kind == EntryKind::File && e.size <= MAX_SIMILAR_BYTES;
    let mut olds = Vec::new();
    for (i, (_, e)) in deleted.iter().enumerate() {
        if !taken_old[i] && eligible(e) {
            if let Some(f) = text(false, i)? {
                olds.push((i, f));
            }
        }
    }
    let mut news = Vec::new();
    for (j, (_, e)) in added.iter().enumerate() {
        if !taken_new[j] && eligible(e) {
            if let Some(f) = text(true, j)? {
                news.push((j, f));
            }
        }
    }
    let mut candidates = Vec::new();
    for (i, fa) in &olds {
        let size_a = deleted[*i].1.size;
        for (j, fb) in &news {
            let size_b = added[*j].1.size;
            // The score can be no more than the smaller size over the larger.
            if size_a.min(size_b) * 100 < u64::from(threshold) * size_a.max(size_b) {
                continue;
            }
            let s = score(fa, fb, size_a, size_b);
            if s >= threshold {
                let same_name = basename(deleted[*i].0) == basename(added[*j].0);
                candidates.push((s, same_name, *i, *j));
            }
        }
    }
    // Best score first, then the same base name, then path order.
    candidates.sort_by(|x, y| y.0.cmp(&x.0).then(y.1.cmp(&x.1)).then(x.2.cmp(&y.2)).then(x.3.cmp(&y.3)));
    let mut pairs = Vec::new();
    for (s, _, i, j) in candidates {
        if !taken_old[i] && !taken_new[j] {
            taken_old[i] = true;
            taken_new[j] = true;
            pairs.push((i, j, s));
        }
    }
    Ok(pairs)
}
