//! The directory cache's record: one directory of a live tree as it was last read — each kept
//! entry with the `lstat` fields that vouch for it, a subdirectory's tree id, and the
//! directory's own tree id — one blob per directory (ARCHITECTURE.md, "Directory cache"). A
//! file whose stat matches its entry is not read again: its content ids are those of the entry
//! of the same name in the directory's tree. A directory all of whose entries match (and whose
//! subdirectories kept their trees) keeps its tree id without encoding it again.
//!
//! Version 2 leaves a file's content id and SHA-256 to the tree (version 1 repeated them in
//! every record, more than half of its bytes) and writes small numbers as varints, inodes and
//! devices as differences from the previous entry's; version 3 writes the times that way too
//! (siblings were written together: their mtimes, and their ctimes' lead over their mtimes,
//! are close). Versions 1 and 2 still parse.
//!
//! Records are read back as untrusted bytes: [`Record::parse`] checks every length against
//! the blob before using it, and a malformed record is only a cache miss.

use crate::base::varint;
use crate::model::tree::EntryKind;
use crate::object::{ObjectId, Sha256};

/// What `lstat` says of an entry: the fields the directory cache and the tree keep.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    /// Bytes (a symlink's target length).
    pub size: u64,
    /// Last modification, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Last status change, nanoseconds since the epoch.
    pub ctime_ns: i64,
    /// Inode number.
    pub inode: u64,
    /// Device of the filesystem holding it.
    pub device: u64,
    /// Permission bits and the file-type bits, as `st_mode`.
    pub mode: u32,
}

impl Stat {
    /// The fields of `m`.
    pub fn of(m: &std::fs::Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        Stat {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
            inode: m.ino(),
            device: m.dev(),
            mode: m.mode(),
        }
    }

    /// The permission bits kept in trees (type bits are the entry kind).
    pub fn perm(&self) -> u32 {
        self.mode & 0o7777
    }
}

/// The record format's version byte, as written.
const VERSION: u8 = 3;
/// The version before times were differences from the previous entry's: mtime whole (8 bytes,
/// little-endian), ctime as its difference from the entry's own mtime.
const VERSION_WHOLE_MTIME: u8 = 2;
/// The first version, whose file entries also carry the content id and SHA-256.
const VERSION_WITH_CONTENT: u8 = 1;
/// Set on a file's kind byte when its stat could not vouch for it (racy: changed too close to
/// the read): it is read again next time whatever its stat says.
const RACY: u8 = 0x80;

/// One entry of a record, borrowed from its blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedEntry<'a> {
    /// The entry's name in its directory.
    pub name: &'a [u8],
    /// File, symlink or directory.
    pub kind: EntryKind,
    /// Its `lstat` fields when recorded.
    pub stat: Stat,
    /// A directory's tree id; a file's content id in a version 1 record only (later versions
    /// leave it to the directory's tree, and write none).
    pub content: Option<ObjectId>,
    /// A file's SHA-256, in a version 1 record only.
    pub sha256: Option<Sha256>,
    /// A symlink's target.
    pub target: &'a [u8],
    /// A file read too close to its last change to be trusted next time.
    pub racy: bool,
}

/// A parsed record: the directory's tree id when it was last built, and its entries.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// The directory's tree id when the record was written.
    pub tree: ObjectId,
    entries: &'a [u8],
    count: u32,
    version: u8,
}

fn kind_code(kind: EntryKind) -> u8 {
    match kind {
        EntryKind::File => 0,
        EntryKind::Symlink => 1,
        EntryKind::Dir => 2,
    }
}

/// Builds a record: `tree`, then entries in name order with [`RecordWriter::push`].
pub struct RecordWriter {
    out: Vec<u8>,
    count: u32,
    prev: Prev,
}

/// The previous entry's fields that the next one is written as a difference from (0 before
/// the first): its inode and device (siblings' inodes are close, their device the same), its
/// mtime and its ctime's lead over it (version 3).
#[derive(Default, Clone, Copy)]
struct Prev {
    inode: u64,
    device: u64,
    mtime_ns: i64,
    ctime_lead: i64,
}

impl RecordWriter {
    /// A record of the directory whose tree is `tree`, with no entries yet.
    pub fn new(tree: &ObjectId) -> RecordWriter {
        let mut out = Vec::with_capacity(64);
        out.push(VERSION);
        out.extend_from_slice(tree.as_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        RecordWriter { out, count: 0, prev: Prev::default() }
    }

    /// Appends one entry (a file's `content` and `sha256` are not written: the tree holds
    /// them). Names over 65,535 bytes cannot exist (NAME_MAX is 255); one is left out, which
    /// only makes its directory a cache miss.
    pub fn push(&mut self, e: &CachedEntry<'_>) {
        let (Ok(name_len), Ok(target_len)) = (u16::try_from(e.name.len()), u16::try_from(e.target.len())) else {
            return;
        };
        let racy = if e.racy { RACY } else { 0 };
        let out = &mut self.out;
        out.push(kind_code(e.kind) | racy);
        varint::put(out, u64::from(name_len));
        out.extend_from_slice(e.name);
        varint::put(out, e.stat.size);
        let ctime_lead = e.stat.ctime_ns.wrapping_sub(e.stat.mtime_ns);
        varint::put(out, varint::zigzag(e.stat.mtime_ns.wrapping_sub(self.prev.mtime_ns)));
        varint::put(out, varint::zigzag(ctime_lead.wrapping_sub(self.prev.ctime_lead)));
        varint::put(out, varint::zigzag(e.stat.inode.wrapping_sub(self.prev.inode) as i64));
        varint::put(out, varint::zigzag(e.stat.device.wrapping_sub(self.prev.device) as i64));
        varint::put(out, u64::from(e.stat.mode));
        match e.kind {
            EntryKind::File => {}
            EntryKind::Dir => out.extend_from_slice(e.content.unwrap_or(ObjectId([0; 32])).as_bytes()),
            EntryKind::Symlink => {
                varint::put(out, u64::from(target_len));
                out.extend_from_slice(e.target);
            }
        }
        self.prev = Prev { inode: e.stat.inode, device: e.stat.device, mtime_ns: e.stat.mtime_ns, ctime_lead };
        self.count += 1;
    }

    /// The record's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.out[33..37].copy_from_slice(&self.count.to_le_bytes());
        self.out
    }
}

/// Bytes 0..n of `b`, moving it past them; `None` if it is shorter.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, tail) = b.split_at(n);
    *b = tail;
    Some(head)
}

fn u64_of(b: &mut &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(take(b, 8)?.try_into().ok()?))
}

fn id_of(b: &mut &[u8]) -> Option<[u8; 32]> {
    take(b, 32)?.try_into().ok()
}

/// A varint that must fit `u16` (a name or target length).
fn len_of(b: &mut &[u8]) -> Option<usize> {
    u16::try_from(varint::take(b)?).ok().map(usize::from)
}

impl<'a> Record<'a> {
    /// Parses the header of a record; the entries are checked as they are read.
    pub fn parse(blob: &'a [u8]) -> Option<Record<'a>> {
        let mut b = blob;
        let version = *take(&mut b, 1)?.first()?;
        if !matches!(version, VERSION | VERSION_WHOLE_MTIME | VERSION_WITH_CONTENT) {
            return None;
        }
        let tree = ObjectId(id_of(&mut b)?);
        let count = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?);
        Some(Record { tree, entries: b, count, version })
    }

    /// The entries in name order; `None` (once) where the blob turns out malformed.
    pub fn entries(&self) -> Entries<'a> {
        Entries { rest: self.entries, left: self.count, version: self.version, prev: Prev::default() }
    }

    /// Whether the record names its files' contents itself (version 1) rather than through its
    /// directory's tree.
    pub fn names_contents(&self) -> bool {
        self.version == VERSION_WITH_CONTENT
    }

    /// How many entries it holds.
    pub fn count(&self) -> usize {
        self.count as usize
    }
}

/// The entries of a record; yields `Err(())` and stops at the first malformed one.
pub struct Entries<'a> {
    rest: &'a [u8],
    left: u32,
    version: u8,
    prev: Prev,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<CachedEntry<'a>, ()>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let parsed = match self.version {
            VERSION_WITH_CONTENT => parse_v1_entry(&mut self.rest),
            version => parse_entry(&mut self.rest, &mut self.prev, version),
        };
        if parsed.is_none() {
            self.left = 0;
        }
        Some(parsed.ok_or(()))
    }
}

fn kind_of(code: u8) -> Option<EntryKind> {
    match code & !RACY {
        0 => Some(EntryKind::File),
        1 => Some(EntryKind::Symlink),
        2 => Some(EntryKind::Dir),
        _ => None,
    }
}

/// A version 3 entry (see [`RecordWriter::push`]), or a version 2 one (its mtime whole, its
/// ctime's lead over it not a difference).
fn parse_entry<'a>(b: &mut &'a [u8], prev: &mut Prev, version: u8) -> Option<CachedEntry<'a>> {
    let code = *take(b, 1)?.first()?;
    let kind = kind_of(code)?;
    let name_len = len_of(b)?;
    let name = take(b, name_len)?;
    let size = varint::take(b)?;
    let (mtime_ns, ctime_lead) = if version == VERSION_WHOLE_MTIME {
        (u64_of(b)? as i64, varint::unzigzag(varint::take(b)?))
    } else {
        let mtime_ns = prev.mtime_ns.wrapping_add(varint::unzigzag(varint::take(b)?));
        (mtime_ns, prev.ctime_lead.wrapping_add(varint::unzigzag(varint::take(b)?)))
    };
    let ctime_ns = mtime_ns.wrapping_add(ctime_lead);
    let inode = prev.inode.wrapping_add(varint::unzigzag(varint::take(b)?) as u64);
    let device = prev.device.wrapping_add(varint::unzigzag(varint::take(b)?) as u64);
    let mode = u32::try_from(varint::take(b)?).ok()?;
    *prev = Prev { inode, device, mtime_ns, ctime_lead };
    let stat = Stat { size, mtime_ns, ctime_ns, inode, device, mode };
    let mut e = CachedEntry { name, kind, stat, content: None, sha256: None, target: &[], racy: code & RACY != 0 };
    match kind {
        EntryKind::File => {}
        EntryKind::Dir => e.content = Some(ObjectId(id_of(b)?)),
        EntryKind::Symlink => {
            let len = len_of(b)?;
            e.target = take(b, len)?;
        }
    }
    Some(e)
}

/// A version 1 entry: fixed-width fields, and a file's content id and SHA-256.
fn parse_v1_entry<'a>(b: &mut &'a [u8]) -> Option<CachedEntry<'a>> {
    let code = *take(b, 1)?.first()?;
    let kind = kind_of(code)?;
    let name_len = u16::from_le_bytes(take(b, 2)?.try_into().ok()?) as usize;
    let name = take(b, name_len)?;
    let size = u64_of(b)?;
    let mtime_ns = u64_of(b)? as i64;
    let ctime_ns = u64_of(b)? as i64;
    let inode = u64_of(b)?;
    let device = u64_of(b)?;
    let mode = u32::from_le_bytes(take(b, 4)?.try_into().ok()?);
    let stat = Stat { size, mtime_ns, ctime_ns, inode, device, mode };
    let mut e = CachedEntry { name, kind, stat, content: None, sha256: None, target: &[], racy: code & RACY != 0 };
    match kind {
        EntryKind::File => {
            e.content = Some(ObjectId(id_of(b)?));
            e.sha256 = Some(Sha256(id_of(b)?));
        }
        EntryKind::Dir => e.content = Some(ObjectId(id_of(b)?)),
        EntryKind::Symlink => {
            let len = u16::from_le_bytes(take(b, 2)?.try_into().ok()?) as usize;
            e.target = take(b, len)?;
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(n: u64) -> Stat {
        Stat { size: n, mtime_ns: -5, ctime_ns: n as i64 * 7, inode: n + 1, device: 9, mode: 0o100644 }
    }

    #[test]
    fn records_round_trip_and_refuse_every_truncation() {
        let tree = ObjectId::of(b"tree");
        let entries = [
            CachedEntry {
                name: b"a.rs",
                kind: EntryKind::File,
                stat: stat(3),
                content: None,
                sha256: None,
                target: &[],
                racy: true,
            },
            CachedEntry {
                name: b"dir",
                kind: EntryKind::Dir,
                stat: stat(0),
                content: Some(ObjectId::of(b"sub")),
                sha256: None,
                target: &[],
                racy: false,
            },
            CachedEntry {
                name: b"extremes",
                kind: EntryKind::File,
                stat: Stat {
                    size: u64::MAX,
                    mtime_ns: i64::MIN,
                    ctime_ns: i64::MAX,
                    inode: u64::MAX,
                    device: 0,
                    mode: u32::MAX,
                },
                content: None,
                sha256: None,
                target: &[],
                racy: false,
            },
            CachedEntry {
                name: b"l\xff",
                kind: EntryKind::Symlink,
                stat: stat(4),
                content: None,
                sha256: None,
                target: b"a.rs",
                racy: false,
            },
        ];
        let mut w = RecordWriter::new(&tree);
        for e in &entries {
            w.push(e);
        }
        let blob = w.finish();
        let r = Record::parse(&blob).expect("parse");
        assert_eq!(r.tree, tree);
        let back: Vec<_> = r.entries().collect::<Result<_, _>>().expect("entries");
        assert_eq!(back, entries);
        for cut in 0..blob.len() {
            let ok = Record::parse(&blob[..cut]).is_some_and(|r| r.entries().all(|e| e.is_ok()));
            assert!(!ok, "a record cut at {cut} bytes is refused");
        }
        let mut bad = blob.clone();
        bad[37] = 9;
        assert!(Record::parse(&bad).expect("header").entries().any(|e| e.is_err()), "unknown kind");
    }

    #[test]
    fn a_version_1_record_parses_with_its_files_content() {
        let tree = ObjectId::of(b"tree");
        let mut blob = vec![1];
        blob.extend_from_slice(tree.as_bytes());
        blob.extend_from_slice(&1u32.to_le_bytes());
        blob.push(0);
        blob.extend_from_slice(&4u16.to_le_bytes());
        blob.extend_from_slice(b"a.rs");
        for v in [3u64, 5, 7, 11, 9] {
            blob.extend_from_slice(&v.to_le_bytes());
        }
        blob.extend_from_slice(&0o100644u32.to_le_bytes());
        blob.extend_from_slice(ObjectId::of(b"abc").as_bytes());
        blob.extend_from_slice(&[7; 32]);
        let r = Record::parse(&blob).expect("parse");
        let e: Vec<_> = r.entries().collect::<Result<_, _>>().expect("entries");
        assert_eq!((e.len(), e[0].name), (1, &b"a.rs"[..]));
        assert_eq!((e[0].content, e[0].sha256), (Some(ObjectId::of(b"abc")), Some(Sha256([7; 32]))));
        assert_eq!(e[0].stat.inode, 11);
        // Written again it is a current record: the content is left to the tree.
        let mut w = RecordWriter::new(&r.tree);
        w.push(&e[0]);
        let again = w.finish();
        assert!(again.len() < blob.len() - 64, "{} bytes from {}", again.len(), blob.len());
        let back = Record::parse(&again).expect("parse");
        let back: Vec<_> = back.entries().collect::<Result<_, _>>().expect("entries");
        assert_eq!((back[0].content, back[0].sha256, back[0].stat), (None, None, e[0].stat));
    }

    #[test]
    fn a_version_2_record_parses_with_its_whole_mtimes() {
        // Two files as version 2 wrote them: mtime whole, ctime as its lead over the mtime,
        // inode and device as differences from the previous entry's.
        let tree = ObjectId::of(b"tree");
        let mut blob = vec![2];
        blob.extend_from_slice(tree.as_bytes());
        blob.extend_from_slice(&2u32.to_le_bytes());
        let mtimes = [1_700_000_000_123_456_789i64, 1_700_000_000_123_999_000];
        for (i, name) in [&b"a.rs"[..], b"b.rs"].into_iter().enumerate() {
            blob.push(0);
            varint::put(&mut blob, name.len() as u64);
            blob.extend_from_slice(name);
            varint::put(&mut blob, 10 + i as u64);
            blob.extend_from_slice(&mtimes[i].to_le_bytes());
            varint::put(&mut blob, varint::zigzag(5_000));
            varint::put(&mut blob, varint::zigzag(if i == 0 { 40 } else { 1 }));
            varint::put(&mut blob, varint::zigzag(if i == 0 { 7 } else { 0 }));
            varint::put(&mut blob, 0o100644);
        }
        let r = Record::parse(&blob).expect("parse");
        let e: Vec<_> = r.entries().collect::<Result<_, _>>().expect("entries");
        let stats: Vec<_> = e.iter().map(|e| e.stat).collect();
        let want = |i: usize| Stat {
            size: 10 + i as u64,
            mtime_ns: mtimes[i],
            ctime_ns: mtimes[i] + 5_000,
            inode: 40 + i as u64,
            device: 7,
            mode: 0o100644,
        };
        assert_eq!(stats, [want(0), want(1)]);
        // Written again: the second entry's times are small differences from the first's (the
        // first entry's mtime, a difference from 0, takes one byte more than whole).
        let mut w = RecordWriter::new(&r.tree);
        for e in &e {
            w.push(e);
        }
        let again = w.finish();
        assert_eq!(again[0], VERSION);
        assert!(again.len() < blob.len(), "{} bytes from {}", again.len(), blob.len());
        let back = Record::parse(&again).expect("parse");
        let back: Vec<_> = back.entries().collect::<Result<_, _>>().expect("entries");
        assert_eq!(back, e);
    }

    #[test]
    fn version_3_writes_times_as_differences_from_the_previous_entry() {
        let tree = ObjectId::of(b"tree");
        let file = |name: &'static [u8], size, mtime_ns, ctime_ns, inode| CachedEntry {
            name,
            kind: EntryKind::File,
            stat: Stat { size, mtime_ns, ctime_ns, inode, device: 3, mode: 0o100644 },
            content: None,
            sha256: None,
            target: &[],
            racy: false,
        };
        let mut w = RecordWriter::new(&tree);
        w.push(&file(b"a", 5, 1_000, 1_007, 10));
        w.push(&file(b"b", 6, 1_500, 1_507, 11));
        let mut want = vec![3];
        want.extend_from_slice(tree.as_bytes());
        want.extend_from_slice(&2u32.to_le_bytes());
        // kind, name, size, then mtime, the ctime's lead, inode and device as zigzag
        // differences from the previous entry's (0 before the first), then the mode.
        for (name, size, mtime, lead, inode, device) in [(b'a', 5, 2_000, 14, 20, 6), (b'b', 6, 1_000, 0, 2, 0)] {
            want.extend_from_slice(&[0, 1, name, size]);
            varint::put(&mut want, mtime);
            want.extend_from_slice(&[lead, inode, device]);
            varint::put(&mut want, 0o100644);
        }
        assert_eq!(w.finish(), want);
    }
}
