//! Following symlinks inside a workspace the way the kernel would, but in the open: a path is
//! resolved component by component, links are expanded by trove (relative to their directory),
//! and the caller learns the path actually reached and every link followed on the way, so the
//! session's scope can be checked on what is really read (DESIGN.md: "Scope is checked on the
//! resolved path"). One resolver serves the live tree and snapshots alike, so their answers
//! agree.
//!
//! Rules: a link with an absolute target, a `..` above the workspace root, a loop (more than
//! [`MAX_LINKS`] links) or a missing component all end as "not found": an answer never tells
//! what lies outside the workspace. A file in the middle of a path is "not found" too.

use std::collections::VecDeque;

use crate::base::error::{Error, ErrorKind, Result};
use crate::base::path;

/// Links followed in one resolution before it is judged a loop (Linux's `MAXSYMLINKS`).
pub const MAX_LINKS: usize = 40;

/// What a name in a directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Missing,
    Dir,
    File,
    /// A symlink and its target.
    Symlink(Vec<u8>),
    /// A socket, FIFO or device: never served.
    Other,
}

/// Where a path leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The workspace-relative path reached, with no symlink in it ("" for the root).
    pub path: Vec<u8>,
    /// `Found::Dir`, `Found::File` or `Found::Other`.
    pub kind: Found,
    /// The workspace-relative path of every link followed, in order.
    pub links: Vec<Vec<u8>>,
}

fn not_found(rel: &[u8]) -> Error {
    Error::new(ErrorKind::NotFound, format!("file '{}' not found", path::display(rel)))
}

/// Says what `name` is in directory `dir` (workspace-relative, with no symlink in it).
pub type Look<'a> = dyn FnMut(&[u8], &[u8]) -> Result<Found> + 'a;

/// Resolves workspace-relative `rel` (already normalized) with `look`.
pub fn resolve(rel: &[u8], look: &mut Look<'_>) -> Result<Resolved> {
    let mut pending: VecDeque<Vec<u8>> =
        rel.split(|&b| b == b'/').filter(|c| !c.is_empty()).map(<[u8]>::to_vec).collect();
    let mut reached: Vec<Vec<u8>> = Vec::new();
    let mut links = Vec::new();
    let mut kind = Found::Dir;
    while let Some(part) = pending.pop_front() {
        if kind != Found::Dir {
            // A name after a file: there is nothing below a file.
            return Err(not_found(rel));
        }
        match part.as_slice() {
            b"." => continue,
            b".." => {
                // Above the root is outside the workspace.
                reached.pop().ok_or_else(|| not_found(rel))?;
                continue;
            }
            _ => {}
        }
        if reached.len() >= path::MAX_DEPTH {
            return Err(Error::new(
                ErrorKind::TooDeep,
                format!("'{}' leads more than {} directories deep", path::display(rel), path::MAX_DEPTH),
            ));
        }
        let dir = reached.join(&b'/');
        match look(&dir, &part)? {
            Found::Missing => return Err(not_found(rel)),
            Found::Symlink(target) => {
                links.push(crate::fs::walk::join_rel(&dir, &part));
                if links.len() > MAX_LINKS || target.first() == Some(&b'/') || target.is_empty() {
                    return Err(not_found(rel));
                }
                // The target replaces the link, relative to the link's directory.
                for c in target.split(|&b| b == b'/').filter(|c| !c.is_empty()).rev() {
                    pending.push_front(c.to_vec());
                }
                kind = Found::Dir;
            }
            found => {
                reached.push(part);
                kind = found;
            }
        }
    }
    Ok(Resolved { path: reached.join(&b'/'), kind, links })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A namespace from a map of path -> what it is.
    fn ns(entries: &[(&str, Found)]) -> impl FnMut(&[u8], &[u8]) -> Result<Found> {
        let map: HashMap<Vec<u8>, Found> = entries.iter().map(|(p, f)| (p.as_bytes().to_vec(), f.clone())).collect();
        move |dir, name| Ok(map.get(&crate::fs::walk::join_rel(dir, name)).cloned().unwrap_or(Found::Missing))
    }

    fn link(t: &str) -> Found {
        Found::Symlink(t.as_bytes().to_vec())
    }

    #[test]
    fn links_resolve_relative_to_their_directory_and_report_what_they_pass() {
        let mut look = ns(&[
            ("src", Found::Dir),
            ("src/a.rs", Found::File),
            ("src/in", link("../secret/key")),
            ("secret", Found::Dir),
            ("secret/key", Found::File),
            ("src/dirlink", link("../secret")),
            ("src/self", link(".")),
        ]);
        let r = resolve(b"src/in", &mut look).expect("resolves");
        assert_eq!((r.path.as_slice(), r.kind.clone()), (&b"secret/key"[..], Found::File));
        assert_eq!(r.links, vec![b"src/in".to_vec()]);
        let r = resolve(b"src/dirlink/key", &mut look).expect("through a directory link");
        assert_eq!(r.path, b"secret/key");
        let r = resolve(b"src/self/self/a.rs", &mut look).expect("dot links");
        assert_eq!((r.path.as_slice(), r.links.len()), (&b"src/a.rs"[..], 2));
    }

    #[test]
    fn escapes_loops_and_files_in_the_middle_are_not_found() {
        let mut look = ns(&[
            ("up", link("../outside")),
            ("abs", link("/etc/passwd")),
            ("loop1", link("loop2")),
            ("loop2", link("loop1")),
            ("f", Found::File),
            ("empty", link("")),
            ("deep", Found::Dir),
            ("deep/up2", link("../../x")),
        ]);
        for p in ["up", "abs", "loop1", "f/x", "f/..", "missing", "empty", "deep/up2"] {
            let e = resolve(p.as_bytes(), &mut look).expect_err(p);
            assert_eq!(e.kind(), ErrorKind::NotFound, "{p}");
            assert_eq!(e.message(), format!("file '{p}' not found"), "the same answer for every cause");
        }
    }
}
