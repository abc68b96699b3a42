//! The Merkle tree of a transparency log (RFC 6962 / RFC 9162, SHA-256): leaf and node
//! hashing, the tree's root from its leaves, inclusion and consistency proofs made from the
//! hashes of its perfect subtrees, and their verification.
//!
//! A perfect subtree is named by its level and index: `(l, i)` covers leaves `i·2^l ..
//! (i+1)·2^l`. A log keeps every perfect subtree's hash as it completes ([`Frontier`] says which
//! an append completes), so a proof is a handful of lookups and nothing is ever rehashed. Every
//! loop here is bounded by the 64 levels a `u64` size has: nothing recurses on input.

use sha2::{Digest, Sha256};

use crate::base::error::{Error, ErrorKind, Result};

/// A SHA-256 hash of the tree: a leaf, a node or a root.
pub type Hash = [u8; 32];

/// The hash of leaf `data`: SHA-256(0x00 || data).
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// The hash of a node over `left` and `right`: SHA-256(0x01 || left || right).
pub fn node_hash(left: &[u8], right: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The root of an empty tree: SHA-256 of nothing.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

fn bad_proof(what: impl Into<String>) -> Error {
    Error::new(ErrorKind::Corrupt, what)
}

/// Where the hashes of a log's perfect subtrees come from (its store, or memory).
pub trait Nodes {
    /// The hash of perfect subtree `(level, index)`, which must be complete in the log.
    fn node(&self, level: u32, index: u64) -> Result<Hash>;
}

/// The perfect subtrees of a tree of `size` leaves, left to right, as (level, index).
pub fn perfect_subtrees(size: u64) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for level in (0..64u32).rev() {
        if size & (1u64 << level) != 0 {
            out.push((level, start >> level));
            start += 1u64 << level;
        }
    }
    out
}

/// The hash of leaves `lo..hi` as RFC 6962 defines it for a subtree of a log: the maximal
/// aligned perfect subtrees from the left, folded from the right. `lo` must be aligned to a power
/// of two at least `hi - lo` (every range a proof names is).
pub fn range_hash(nodes: &dyn Nodes, lo: u64, hi: u64) -> Result<Hash> {
    if hi <= lo {
        return Ok(empty_root());
    }
    let mut parts = Vec::new();
    let mut at = lo;
    while at < hi {
        // The largest aligned perfect subtree starting here that fits.
        let mut level = if at == 0 { 63 } else { at.trailing_zeros().min(63) };
        while level > 0 && (1u64 << level) > hi - at {
            level -= 1;
        }
        parts.push(nodes.node(level, at >> level)?);
        at += 1u64 << level;
    }
    let mut acc = parts.pop().unwrap_or_else(empty_root);
    while let Some(left) = parts.pop() {
        acc = node_hash(&left, &acc);
    }
    Ok(acc)
}

/// The root of the first `size` leaves of the log.
pub fn root(nodes: &dyn Nodes, size: u64) -> Result<Hash> {
    range_hash(nodes, 0, size)
}

/// The largest power of two smaller than `n` (`n` > 1).
fn split(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// The inclusion proof of leaf `index` in the tree of `size` leaves (RFC 6962 2.1.1, `PATH`),
/// from the leaf's sibling up.
pub fn inclusion_proof(nodes: &dyn Nodes, index: u64, size: u64) -> Result<Vec<Hash>> {
    if index >= size {
        return Err(Error::invalid_argument(format!("leaf {index} is not in a tree of {size} leaves")));
    }
    // Walked from the root down, so the list comes out top first: reversed at the end.
    let mut out = Vec::new();
    let (mut lo, mut hi) = (0u64, size);
    while hi - lo > 1 {
        let k = split(hi - lo);
        if index - lo < k {
            out.push(range_hash(nodes, lo + k, hi)?);
            hi = lo + k;
        } else {
            out.push(range_hash(nodes, lo, lo + k)?);
            lo += k;
        }
    }
    out.reverse();
    Ok(out)
}

/// The consistency proof between the trees of `size1` and `size2` leaves (RFC 6962 2.1.2,
/// `PROOF`): empty when either is empty or they are equal.
pub fn consistency_proof(nodes: &dyn Nodes, size1: u64, size2: u64) -> Result<Vec<Hash>> {
    if size1 > size2 {
        return Err(Error::invalid_argument(format!("a tree of {size1} leaves is not a prefix of one of {size2}")));
    }
    if size1 == 0 || size1 == size2 {
        return Ok(Vec::new());
    }
    // SUBPROOF(m, D[lo:hi], whole), walked from the root down: the outer hashes come first.
    let mut outer = Vec::new();
    let (mut lo, mut hi, mut m, mut whole) = (0u64, size2, size1, true);
    let last = loop {
        let n = hi - lo;
        if m == n {
            break if whole { None } else { Some(range_hash(nodes, lo, hi)?) };
        }
        let k = split(n);
        if m <= k {
            outer.push(range_hash(nodes, lo + k, hi)?);
            hi = lo + k;
        } else {
            outer.push(range_hash(nodes, lo, lo + k)?);
            lo += k;
            m -= k;
            whole = false;
        }
    };
    let mut out: Vec<Hash> = last.into_iter().collect();
    out.extend(outer.into_iter().rev());
    Ok(out)
}

/// For leaf `index` in a tree of `size`: the proof's inner part (below the point where the
/// leaf's path leaves the tree's right border) and its border part.
fn decompose(index: u64, size: u64) -> (usize, usize) {
    let inner = (64 - (index ^ (size - 1)).leading_zeros()) as usize;
    let border = (index >> inner).count_ones() as usize;
    (inner, border)
}

fn hash_of(bytes: &[u8]) -> Result<Hash> {
    bytes.try_into().map_err(|_| bad_proof(format!("a proof hash of {} bytes is not a SHA-256", bytes.len())))
}

/// `seed` hashed up the inner part of a path, leaf `index`'s side at each level.
fn chain_inner(seed: Hash, proof: &[Hash], index: u64) -> Hash {
    proof.iter().enumerate().fold(
        seed,
        |acc, (i, h)| {
            if (index >> i) & 1 == 0 {
                node_hash(&acc, h)
            } else {
                node_hash(h, &acc)
            }
        },
    )
}

/// Like [`chain_inner`], but only the levels where the path comes from the right.
fn chain_inner_right(seed: Hash, proof: &[Hash], index: u64) -> Hash {
    proof.iter().enumerate().fold(seed, |acc, (i, h)| if (index >> i) & 1 == 1 { node_hash(h, &acc) } else { acc })
}

/// `seed` hashed up the tree's right border.
fn chain_border_right(seed: Hash, proof: &[Hash]) -> Hash {
    proof.iter().fold(seed, |acc, h| node_hash(h, &acc))
}

/// The root that an inclusion proof of `leaf` at `index` in a tree of `size` implies.
pub fn root_from_inclusion(index: u64, size: u64, leaf: &[u8], proof: &[Vec<u8>]) -> Result<Hash> {
    if index >= size {
        return Err(bad_proof(format!("leaf {index} cannot be in a tree of {size} leaves")));
    }
    let leaf = hash_of(leaf)?;
    let proof = proof.iter().map(|p| hash_of(p)).collect::<Result<Vec<_>>>()?;
    let (inner, border) = decompose(index, size);
    if proof.len() != inner + border {
        return Err(bad_proof(format!(
            "an inclusion proof for leaf {index} of {size} has {} hashes, not {}",
            proof.len(),
            inner + border
        )));
    }
    let at = chain_inner(leaf, &proof[..inner], index);
    Ok(chain_border_right(at, &proof[inner..]))
}

/// Checks that `leaf` is leaf `index` of the tree of `size` leaves whose root is `root`.
pub fn verify_inclusion(index: u64, size: u64, leaf: &[u8], proof: &[Vec<u8>], root: &[u8]) -> Result<()> {
    let got = root_from_inclusion(index, size, leaf, proof)?;
    if got[..] != *root {
        return Err(bad_proof(format!("the inclusion proof of leaf {index} does not lead to the root of {size}")));
    }
    Ok(())
}

/// Checks that the tree of `size2` leaves with root `root2` extends the tree of `size1` leaves
/// with root `root1` (RFC 9162 2.1.4.2): equal sizes need equal roots and an empty proof; the
/// first tree may not be empty.
pub fn verify_consistency(size1: u64, size2: u64, proof: &[Vec<u8>], root1: &[u8], root2: &[u8]) -> Result<()> {
    let same = |a: &[u8], b: &[u8], what: &str| {
        if a == b {
            Ok(())
        } else {
            Err(bad_proof(format!("the consistency proof from {size1} to {size2} does not lead to {what}")))
        }
    };
    if size2 < size1 {
        return Err(bad_proof(format!("a tree of {size2} leaves cannot extend one of {size1}")));
    }
    // RFC 9162 2.1.4.2: the first tree is not empty (an empty tree proves nothing).
    if size1 == 0 {
        return Err(bad_proof(format!("no consistency proof starts from the empty tree (to {size2})")));
    }

    if size1 == size2 {
        if !proof.is_empty() {
            return Err(bad_proof("a proof between equal sizes must be empty"));
        }
        return same(root1, root2, "the same root");
    }
    if proof.is_empty() {
        return Err(bad_proof(format!("an empty consistency proof from {size1} to {size2}")));
    }
    let proof = proof.iter().map(|p| hash_of(p)).collect::<Result<Vec<_>>>()?;
    let (inner, border) = decompose(size1 - 1, size2);
    let shift = size1.trailing_zeros() as usize;
    let inner = inner - shift;
    // The proof starts with the root of the subtree of size 2^shift, unless size1 is it.
    let (seed, rest) = if size1 == 1u64 << shift { (hash_of(root1)?, &proof[..]) } else { (proof[0], &proof[1..]) };
    if rest.len() != inner + border {
        return Err(bad_proof(format!(
            "a consistency proof from {size1} to {size2} has {} hashes, not {}",
            proof.len(),
            inner + border + usize::from(size1 != 1u64 << shift)
        )));
    }
    let mask = (size1 - 1) >> shift;
    let first = chain_border_right(chain_inner_right(seed, &rest[..inner], mask), &rest[inner..]);
    same(&first, root1, "the first root")?;
    let second = chain_border_right(chain_inner(seed, &rest[..inner], mask), &rest[inner..]);
    same(&second, root2, "the second root")
}

/// The right edge of a growing tree: the hashes of its perfect subtrees, left to right, with
/// their levels. Appending a leaf completes the perfect subtrees [`Frontier::push`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    edge: Vec<(u32, Hash)>,
}

impl Frontier {
    /// The frontier of an empty tree.
    pub fn new() -> Frontier {
        Frontier::default()
    }

    /// The frontier of a tree of `size` leaves, from its perfect subtrees' hashes.
    pub fn of(nodes: &dyn Nodes, size: u64) -> Result<Frontier> {
        let edge = perfect_subtrees(size)
            .into_iter()
            .map(|(l, i)| nodes.node(l, i).map(|h| (l, h)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Frontier { size, edge })
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends leaf hash `leaf`; returns every perfect subtree it completes as (level, index,
    /// hash), the leaf itself first.
    pub fn push(&mut self, leaf: Hash) -> Vec<(u32, u64, Hash)> {
        let index = self.size;
        let mut done = vec![(0, index, leaf)];
        let (mut level, mut hash) = (0u32, leaf);
        while let Some(&(l, left)) = self.edge.last() {
            if l != level {
                break;
            }
            self.edge.pop();
            hash = node_hash(&left, &hash);
            level += 1;
            done.push((level, index >> level, hash));
        }
        self.edge.push((level, hash));
        self.size += 1;
        done
    }

    /// The root of the tree so far.
    pub fn root(&self) -> Hash {
        let mut parts = self.edge.iter().rev();
        let Some(&(_, last)) = parts.next() else { return empty_root() };
        parts.fold(last, |acc, (_, left)| node_hash(left, &acc))
    }

    /// The perfect subtrees' hashes, left to right, as (level, hash).
    pub fn edge(&self) -> &[(u32, Hash)] {
        &self.edge
    }

    /// A frontier from its parts, as [`Frontier::edge`] gave them: the levels must strictly
    /// decrease, and they say the size.
    pub fn from_edge(edge: Vec<(u32, Hash)>) -> Result<Frontier> {
        let mut size = 0u64;
        let mut prev = 64u32;
        for &(l, _) in &edge {
            if l >= prev || l > 63 {
                return Err(bad_proof("a frontier's levels must decrease from left to right"));
            }
            prev = l;
            size |= 1u64 << l;
        }
        Ok(Frontier { size, edge })
    }
}

/// Perfect subtree hashes held in memory (a test log, or a verifier's scratch).
#[derive(Debug, Default)]
pub struct MemoryNodes {
    levels: Vec<Vec<Hash>>,
}

impl MemoryNodes {
    /// Records the subtrees an append completed.
    pub fn record(&mut self, done: &[(u32, u64, Hash)]) {
        for &(level, index, hash) in done {
            let l = level as usize;
            if self.levels.len() <= l {
                self.levels.resize_with(l + 1, Vec::new);
            }
            if self.levels[l].len() as u64 == index {
                self.levels[l].push(hash);
            }
        }
    }
}

impl Nodes for MemoryNodes {
    fn node(&self, level: u32, index: u64) -> Result<Hash> {
        self.levels
            .get(level as usize)
            .and_then(|l| l.get(usize::try_from(index).ok()?))
            .copied()
            .ok_or_else(|| Error::internal(format!("no subtree ({level}, {index}) in the log")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The root by RFC 6962's recursive definition, straight from the leaves.
    fn reference_root(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = split(n as u64) as usize;
                node_hash(&reference_root(&leaves[..k]), &reference_root(&leaves[k..]))
            }
        }
    }

    fn log(n: u64) -> (MemoryNodes, Vec<Hash>, Vec<Hash>) {
        let (mut nodes, mut f, mut leaves, mut roots) = (MemoryNodes::default(), Frontier::new(), Vec::new(), vec![]);
        for i in 0..n {
            let leaf = leaf_hash(format!("entry {i}").as_bytes());
            nodes.record(&f.push(leaf));
            leaves.push(leaf);
            roots.push(f.root());
        }
        (nodes, leaves, roots)
    }

    #[test]
    fn roots_and_proofs_agree_with_the_definition_for_every_size_to_70() {
        let (nodes, leaves, roots) = log(70);
        for size in 1..=70u64 {
            let want = reference_root(&leaves[..size as usize]);
            assert_eq!(roots[size as usize - 1], want, "frontier root of {size}");
            assert_eq!(root(&nodes, size).expect("root"), want, "stored root of {size}");
            for index in 0..size {
                let proof: Vec<Vec<u8>> =
                    inclusion_proof(&nodes, index, size).expect("proof").iter().map(|h| h.to_vec()).collect();
                verify_inclusion(index, size, &leaves[index as usize], &proof, &want).expect("inclusion");
            }
            for size1 in 1..=size {
                let proof: Vec<Vec<u8>> =
                    consistency_proof(&nodes, size1, size).expect("proof").iter().map(|h| h.to_vec()).collect();
                let root1 = roots[size1 as usize - 1];
                verify_consistency(size1, size, &proof, &root1, &want).expect("consistency");
            }
        }
    }

    #[test]
    fn a_frontier_rebuilt_from_the_store_goes_on_the_same() {
        let (nodes, _, roots) = log(45);
        let mut f = Frontier::of(&nodes, 45).expect("frontier");
        assert_eq!(f.root(), roots[44]);
        let again = Frontier::from_edge(f.edge().to_vec()).expect("edge");
        assert_eq!(again, f);
        f.push(leaf_hash(b"entry 45"));
        let (_, _, more) = log(46);
        assert_eq!(f.root(), more[45]);
        assert!(Frontier::from_edge(vec![(1, [0; 32]), (2, [0; 32])]).is_err());
    }
}
