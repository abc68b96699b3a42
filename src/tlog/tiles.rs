//! The C2SP `tlog-tiles` layout of a log: the paths of its hash tiles and entry bundles, which
//! tiles a tree of a given size has (and which of them a growth from one size to another
//! changes), and the two tile encodings (hashes end to end; entries each after a big-endian
//! `u16` length). Pure: nothing here reads or writes a store.
//!
//! A tile is 8 levels of the Merkle tree high and 256 nodes wide; a tile at level `L` holds the
//! hashes of the tree's nodes at level `8·L`, so the tiles of level 0 hold the leaves' hashes.
//! The last tile of a level is partial (`.p/<W>`, `W` of 256 nodes) until it fills.

use crate::base::error::{Error, ErrorKind, Result};
use crate::tlog::merkle::Hash;

/// The nodes of the tree a tile's row holds.
pub const WIDTH: u64 = 256;
/// The levels of the tree a tile spans.
pub const HEIGHT: u32 = 8;
/// The longest entry a bundle can carry: its length is a `u16`.
pub const MAX_ENTRY: usize = u16::MAX as usize;
/// The checkpoint's path under the log's prefix.
pub const CHECKPOINT: &str = "checkpoint";
/// The longest checkpoint a reader takes (a note with some cosignatures is well under 4 KiB).
pub const MAX_CHECKPOINT: u64 = 64 << 10;

/// One tile: its level, its index along that level, and how many nodes it holds (1 to 256).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    /// The tile's level: it holds the tree's nodes at level `8 * level`.
    pub level: u32,
    /// Its index along the level: its first node is `index * 256`.
    pub index: u64,
    /// How many nodes it holds: 256 for a full tile.
    pub width: u64,
}

impl Tile {
    /// The hash tile's path: `tile/<L>/<N>[.p/<W>]`.
    pub fn path(&self) -> String {
        format!("tile/{}/{}", self.level, self.suffix())
    }

    /// The path of the entry bundle beside a level-0 tile: `tile/entries/<N>[.p/<W>]`.
    pub fn entries_path(&self) -> String {
        format!("tile/entries/{}", self.suffix())
    }

    /// The index of the first node it holds at its level of the tree.
    pub fn first(&self) -> u64 {
        self.index * WIDTH
    }

    /// Its index as the path writes it (three-digit groups, every one but the last after an
    /// `x`), then `.p/<W>` for a partial tile.
    fn suffix(&self) -> String {
        let mut groups = Vec::new();
        let mut n = self.index;
        loop {
            groups.push(n % 1000);
            n /= 1000;
            if n == 0 {
                break;
            }
        }
        let last = groups.len() - 1;
        let mut out = String::new();
        for (i, g) in groups.iter().rev().enumerate() {
            if i < last {
                out.push_str(&format!("x{g:03}/"));
            } else {
                out.push_str(&format!("{g:03}"));
            }
        }
        if self.width < WIDTH {
            out.push_str(&format!(".p/{}", self.width));
        }
        out
    }
}

/// The tiles of level `level` of a tree of `size` leaves, left to right, made as they are
/// asked for (a size read from a store may be any number).
pub fn level_tiles(size: u64, level: u32) -> impl Iterator<Item = Tile> {
    let nodes = if level < 64 / HEIGHT { size >> (level * HEIGHT) } else { 0 };
    (0..nodes.div_ceil(WIDTH)).map(move |index| Tile { level, index, width: (nodes - index * WIDTH).min(WIDTH) })
}

/// The tiles a reader of a tree of `size` leaves needs that a reader of `old` leaves did not
/// have: at each level, from the tile holding the first new node to the last (partial or
/// full), with the width it has at `size`. `tiles(0, size)` is the whole tree's.
pub fn tiles(old: u64, size: u64) -> Vec<Tile> {
    let mut out = Vec::new();
    for level in 0..(64 / HEIGHT) {
        let shift = level * HEIGHT;
        let (nodes, had) = (size >> shift, old.min(size) >> shift);
        if nodes == 0 {
            break;
        }
        if nodes == had {
            continue;
        }
        for index in had / WIDTH..=(nodes - 1) / WIDTH {
            out.push(Tile { level, index, width: (nodes - index * WIDTH).min(WIDTH) });
        }
    }
    out
}

/// Appends `entry` to a bundle: its length as a big-endian `u16`, then its bytes. An entry
/// longer than [`MAX_ENTRY`] does not fit the format.
pub fn push_entry(bundle: &mut Vec<u8>, entry: &[u8]) -> Result<()> {
    let len = u16::try_from(entry.len()).map_err(|_| {
        Error::invalid_argument(format!("an entry of {} bytes is longer than a tile holds ({MAX_ENTRY})", entry.len()))
    })?;
    bundle.extend_from_slice(&len.to_be_bytes());
    bundle.extend_from_slice(entry);
    Ok(())
}

/// The entries of bundle `bytes` (at `path`), which must be exactly `width` of them.
pub fn split_bundle<'b>(path: &str, bytes: &'b [u8], width: u64) -> Result<Vec<&'b [u8]>> {
    let bad = |what: String| Error::new(ErrorKind::Corrupt, format!("entry bundle {path}: {what}"));
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let [a, b, tail @ ..] = rest else {
            return Err(bad("it ends inside an entry's length".into()));
        };
        let len = u16::from_be_bytes([*a, *b]) as usize;
        if tail.len() < len {
            return Err(bad(format!("entry {} claims {len} bytes, past the bundle's end", out.len())));
        }
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    if out.len() as u64 != width {
        return Err(bad(format!("it holds {} entries, not {width}", out.len())));
    }
    Ok(out)
}

/// The hashes of hash tile `bytes` (at `path`), which must be exactly `width` of them.
pub fn split_hashes(path: &str, bytes: &[u8], width: u64) -> Result<Vec<Hash>> {
    if bytes.len() as u64 != width * 32 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("tile {path}: {} bytes, not the {} of {width} hashes", bytes.len(), width * 32),
        ));
    }
    Ok(bytes.chunks_exact(32).map(|c| c.try_into().unwrap_or([0; 32])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_the_spec() {
        let t = |level, index, width| Tile { level, index, width };
        assert_eq!(t(0, 0, 256).path(), "tile/0/000");
        assert_eq!(t(0, 0, 7).entries_path(), "tile/entries/000.p/7");
        assert_eq!(t(1, 1_234_067, 256).path(), "tile/1/x001/x234/067");
        assert_eq!(t(2, 1000, 3).path(), "tile/2/x001/000.p/3");
        assert_eq!(t(0, 999, 256).entries_path(), "tile/entries/999");
    }

    #[test]
    fn a_tree_has_the_tiles_its_size_fills() {
        let t = |level, index, width| Tile { level, index, width };
        assert!(tiles(0, 0).is_empty());
        assert_eq!(tiles(0, 5), vec![t(0, 0, 5)]);
        assert_eq!(tiles(0, 256), vec![t(0, 0, 256), t(1, 0, 1)]);
        assert_eq!(tiles(0, 70_000), {
            let mut v: Vec<_> = (0..273).map(|i| t(0, i, 256)).collect();
            v.push(t(0, 273, 112));
            v.push(t(1, 0, 256));
            v.push(t(1, 1, 17));
            v.push(t(2, 0, 1));
            v
        });
        // Growing changes the tiles holding new nodes: the partial one and any after it.
        assert_eq!(tiles(5, 9), vec![t(0, 0, 9)]);
        assert_eq!(tiles(255, 257), vec![t(0, 0, 256), t(0, 1, 1), t(1, 0, 1)]);
        assert_eq!(tiles(300, 310), vec![t(0, 1, 54)]);
        assert!(tiles(9, 9).is_empty() && tiles(9, 5).is_empty());
        // Level by level, the same tiles.
        let by_level: Vec<Tile> = (0..8).flat_map(|l| level_tiles(70_000, l)).collect();
        assert_eq!(by_level, tiles(0, 70_000));
        assert_eq!(level_tiles(u64::MAX, 7).count(), 1);
        assert_eq!(level_tiles(u64::MAX, 8).count(), 0);
    }

    #[test]
    fn bundles_round_trip_and_refuse_what_does_not_fit() {
        let mut b = Vec::new();
        for e in [&b"one"[..], b"", b"three"] {
            push_entry(&mut b, e).expect("push");
        }
        assert_eq!(split_bundle("p", &b, 3).expect("split"), vec![&b"one"[..], b"", b"three"]);
        assert!(split_bundle("p", &b, 2).is_err());
        assert!(split_bundle("p", &b[..b.len() - 1], 3).is_err());
        assert!(split_bundle("p", &b[..1], 1).is_err());
        assert!(push_entry(&mut b, &vec![0; MAX_ENTRY + 1]).is_err());
        assert!(push_entry(&mut Vec::new(), &vec![0; MAX_ENTRY]).is_ok());
        assert_eq!(split_hashes("p", &[1; 64], 2).expect("hashes"), vec![[1; 32], [1; 32]]);
        assert!(split_hashes("p", &[1; 63], 2).is_err());
    }
}
