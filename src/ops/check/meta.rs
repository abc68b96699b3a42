//! The metadata check: packs against the index (present, as long as recorded, a pack header),
//! each object's blob header against its index row, loose objects' headers, and chunk lists'
//! shape (and, reading data, their reassembly).

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::Connection;

use crate::base::error::{Error, Result};
use crate::manifest::objects;
use crate::object::blob::{self, Header};
use crate::object::pack::{HEADER_LEN as PACK_HEADER_LEN, MAGIC as PACK_MAGIC};
use crate::object::{delta, ObjectId};

use super::{is_finding, Checking, Problem, ProblemKind};

/// A pack the index names, and what the backend holds under its key.
pub(super) struct PackState {
    pub(super) name: String,
    /// The size the index records.
    pub(super) size: u64,
    /// The file's size; `None` when it is missing.
    pub(super) actual: Option<u64>,
    /// The problem reported for the pack, which its objects' damage is filed under.
    pub(super) problem: Option<usize>,
}

fn db(verb: &'static str) -> impl Fn(rusqlite::Error) -> Error {
    move |e| Error::db(verb, e)
}

/// The blob header read last: ((pack, offset), the header or why it did not read).
type LastHeader = ((String, u64), std::result::Result<Header, String>);

/// One chunk list's rows: (seq, chunk, offset).
type ChunkRows = Vec<(u64, ObjectId, u64)>;

/// How object `id`'s index row disagrees with the header of the blob it points into, if it does.
fn disagreement(
    id: &ObjectId,
    loc: &objects::Location,
    header: &std::result::Result<Header, String>,
) -> Option<String> {
    let h = match header {
        Err(e) => return Some(format!("its blob header is unreadable ({e})")),
        Ok(h) => h,
    };
    let stored = (blob::HEADER_LEN as u64).checked_add(h.payload_len);
    if stored != Some(loc.stored_len) {
        return Some(format!("its blob's length ({stored:?}) is not the index's {}", loc.stored_len));
    }
    if h.raw_len > blob::MAX_RAW {
        return Some(format!("its blob header claims {} bytes", h.raw_len));
    }
    match loc.inner_offset {
        None if h.kind != blob::Kind::Object => Some("its blob is a bundle, the index says an object".into()),
        None if h.id != *id => Some(format!("its blob holds object {}", h.id)),
        None if h.raw_len != loc.raw_len => {
            Some(format!("its blob holds {} bytes, the index says {}", h.raw_len, loc.raw_len))
        }
        None if h.codec == blob::Codec::Delta => Some("its blob is a delta, which trove only ever stores loose".into()),
        Some(_) if h.kind != blob::Kind::Bundle => Some("its blob is no bundle, the index says a bundle member".into()),
        Some(inner) if inner.checked_add(loc.raw_len).is_none_or(|e| e > h.raw_len) => {
            Some(format!("it lies outside its bundle ({} bytes at {inner} of {})", loc.raw_len, h.raw_len))
        }
        _ => None,
    }
}

/// The decoded length of a stored object (packed or loose), if it is stored.
fn stored_raw_len(conn: &Connection, id: &ObjectId) -> Result<Option<u64>> {
    if let Some(loc) = objects::locate(conn, id)? {
        return Ok(Some(loc.raw_len));
    }
    let mut stmt = conn.prepare_cached("SELECT raw_len FROM loose_objects WHERE id = ?1").map_err(db("checking"))?;
    let mut rows = stmt.query([&id.as_bytes()[..]]).map_err(db("checking"))?;
    match rows.next().map_err(db("checking"))? {
        Some(r) => Ok(Some(r.get::<_, i64>(0).map_err(db("checking"))?.max(0) as u64)),
        None => Ok(None),
    }
}

impl Checking<'_> {
    /// Every pack row against the backend; orphan files counted.
    pub(super) fn check_packs(&mut self) -> Result<BTreeMap<String, PackState>> {
        let conn = self.repo.manifest.conn();
        let mut stmt = conn
            .prepare("SELECT name, size, retired IS NOT NULL FROM packs ORDER BY id")
            .map_err(db("listing packs"))?;
        let rows: Vec<(String, i64, bool)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(db("listing packs"))?
            .collect::<rusqlite::Result<_>>()
            .map_err(db("listing packs"))?;
        let backend = self.repo.backend.as_ref();
        let mut packs = BTreeMap::new();
        for (name, size, retired) in rows {
            let size = size.max(0) as u64;
            let actual = match backend.size(&name) {
                Ok(n) => Some(n),
                // A retired pack holds nothing anything points to: a collection stopped between
                // deleting its file and committing the row's deletion leaves just this.
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound && retired => continue,
                Err(e) if e.kind() == crate::base::error::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            let problem = match actual {
                None => Some(self.problem(
                    Problem::new(ProblemKind::PackMissing, format!("pack {name} is missing: the objects it held are lost"))
                        .pack(&name),
                )),
                Some(a) if a != size => Some(self.problem(
                    Problem::new(
                        ProblemKind::PackDamaged,
                        format!("pack {name} has {a} bytes where the index records {size}: it was truncated or overwritten"),
                    )
                    .pack(&name),
                )),
                Some(_) => match backend.get_range(&name, 0, PACK_HEADER_LEN) {
                    Ok(h) if h.get(..4) == Some(&PACK_MAGIC[..]) => None,
                    Ok(_) => Some(self.problem(
                        Problem::new(ProblemKind::PackDamaged, format!("pack {name} does not start with the pack magic"))
                            .pack(&name),
                    )),
                    Err(e) if is_finding(&e) => Some(self.problem(
                        Problem::new(ProblemKind::PackDamaged, format!("pack {name}: {}", e.message())).pack(&name),
                    )),
                    Err(e) => return Err(e),
                },
            };
            self.report.packs += 1;
            packs.insert(name.clone(), PackState { name, size, actual, problem });
        }
        let known: BTreeSet<&String> = packs.keys().collect();
        self.report.orphan_packs =
            backend.list(&self.repo.packs_dir())?.iter().filter(|k| k.ends_with(".pack") && !known.contains(k)).count()
                as u64;
        Ok(packs)
    }

    /// Every objects row: a well-formed row, in an existing pack, within its length, under a
    /// blob header that agrees with it. Rows are streamed, pack by pack in offset order.
    pub(super) fn check_objects(&mut self, packs: &BTreeMap<String, PackState>) -> Result<()> {
        let conn = self.repo.manifest.conn();
        // Bundle members share their bundle's header: read once per blob.
        let mut last: Option<LastHeader> = None;
        objects::for_each_location(conn, |raw_id, loc| self.check_object_row(packs, &mut last, raw_id, loc))
    }

    fn check_object_row(
        &mut self,
        packs: &BTreeMap<String, PackState>,
        last: &mut Option<LastHeader>,
        raw_id: Vec<u8>,
        loc: Result<objects::Location>,
    ) -> Result<()> {
        let backend = self.repo.backend.as_ref();
        let Ok(id) = ObjectId::from_slice(&raw_id) else {
            self.problem(Problem::new(
                ProblemKind::Row,
                format!(
                    "an objects row holds a malformed id ({} bytes); run `trove check --repair-index`",
                    raw_id.len()
                ),
            ));
            return Ok(());
        };
        self.report.objects += 1;
        let loc = match loc {
            Ok(l) => l,
            Err(e) => {
                let p =
                    Problem::new(ProblemKind::Row, format!("object {id}: its index row is malformed: {}", e.message()));
                self.object_problem(id, p);
                return Ok(());
            }
        };
        let Some(pack) = packs.get(&loc.pack) else {
            let p = Problem::new(ProblemKind::Row, format!("object {id}: its index row names no known pack"));
            self.object_problem(id, p);
            return Ok(());
        };
        let end = loc.offset.checked_add(loc.stored_len);
        let within = |size: u64| end.is_some_and(|e| e <= size);
        match (pack.actual, pack.problem) {
            (None, Some(i)) => {
                self.bad.objects.entry(id).or_default().push(i);
                self.reported.insert(id);
                return Ok(());
            }
            (Some(actual), Some(i)) if !within(actual) => {
                self.bad.objects.entry(id).or_default().push(i);
                self.reported.insert(id);
                return Ok(());
            }
            _ => {}
        }
        if !within(pack.size) {
            let p = Problem::new(
                ProblemKind::ObjectDamaged,
                format!(
                    "object {id}: its index row claims {} bytes at offset {} of pack {}, which has {}",
                    loc.stored_len, loc.offset, pack.name, pack.size
                ),
            )
            .pack(&pack.name);
            self.object_problem(id, p);
            return Ok(());
        }
        let key = (loc.pack.clone(), loc.offset);
        if last.as_ref().is_none_or(|(k, _)| *k != key) {
            let header = backend
                .get_range(&loc.pack, loc.offset, blob::HEADER_LEN as u64)
                .and_then(|b| blob::parse_header(&b))
                .map_err(|e| e.message().to_string());
            *last = Some((key, header));
        }
        let Some((_, header)) = last.as_ref() else { return Ok(()) };
        if let Some(why) = disagreement(&id, &loc, header) {
            let p = Problem::new(
                ProblemKind::ObjectDamaged,
                format!("object {id} in pack {} at offset {}: {why}", loc.pack, loc.offset),
            )
            .pack(&loc.pack);
            self.object_problem(id, p);
        }
        Ok(())
    }

    /// Every loose object: its header (and, reading data, its bytes) agrees with its id.
    pub(super) fn check_loose(&mut self, read: bool) -> Result<()> {
        let conn = self.repo.manifest.conn();
        let mut stmt = conn
            .prepare("SELECT id, raw_len, encoded FROM loose_objects ORDER BY id")
            .map_err(db("listing loose objects"))?;
        let mut rows = stmt.query([]).map_err(db("listing loose objects"))?;
        while let Some(r) = rows.next().map_err(db("listing loose objects"))? {
            let raw_id: Vec<u8> = r.get(0).map_err(db("reading a loose object"))?;
            let Ok(id) = ObjectId::from_slice(&raw_id) else {
                self.problem(Problem::new(ProblemKind::Row, "a loose object's row holds a malformed id"));
                continue;
            };
            self.report.loose += 1;
            let raw_len: i64 = r.get(1).map_err(db("reading a loose object"))?;
            let encoded =
                r.get_ref(2).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db("reading a loose object"))?;
            self.check_base(conn, &id, encoded)?;
            let outcome = if read {
                // A delta is checked as readers read it: down its chain to a whole object.
                let decoded = if crate::ops::view::is_delta(encoded) {
                    self.repo.read_object(&id)
                } else {
                    blob::decode(&id, encoded)
                };
                decoded.map(|raw| {
                    self.report.objects_read += 1;
                    self.report.bytes += raw.len() as u64;
                    raw.len() as u64
                })
            } else {
                blob::parse_header(encoded).and_then(|h| {
                    let fits = (blob::HEADER_LEN as u64).checked_add(h.payload_len) == Some(encoded.len() as u64);
                    match (h.id == id && h.kind == blob::Kind::Object, fits) {
                        (true, true) => Ok(h.raw_len),
                        _ => Err(Error::corrupt(format!("object {id} is corrupt: its header disagrees with its row"))),
                    }
                })
            };
            match outcome {
                Ok(n) if n as i64 == raw_len => {}
                Ok(n) => self.object_problem(
                    id,
                    Problem::new(
                        ProblemKind::ObjectDamaged,
                        format!("loose object {id} holds {n} bytes, its row says {raw_len}"),
                    ),
                ),
                Err(e) if is_finding(&e) => {
                    self.object_problem(id, Problem::new(ProblemKind::ObjectDamaged, format!("loose {}", e.message())))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A loose object's row in `object_bases` agrees with its blob (a delta names its base
    /// there, which must be stored; a whole object has no row), so collection keeps what
    /// readers need.
    fn check_base(&mut self, conn: &Connection, id: &ObjectId, encoded: &[u8]) -> Result<()> {
        let recorded = crate::manifest::loose::base(conn, id)?;
        let named = crate::ops::view::is_delta(encoded).then(|| delta::base_of(encoded).ok().map(|(_, b)| b)).flatten();
        let problem = match (named, recorded) {
            (Some(b), Some(r)) if b == r => match stored_raw_len(conn, &b)? {
                Some(_) => None,
                None => Some((ProblemKind::ObjectMissing, format!("loose object {id} is a delta against {b}, which is not stored"))),
            },
            (Some(b), _) => Some((
                ProblemKind::Row,
                format!("loose object {id} is a delta against {b}, which object_bases does not record; run `trove repair index`"),
            )),
            (None, Some(r)) => Some((
                ProblemKind::Row,
                format!("object_bases names {r} as the base of loose object {id}, which is stored whole; run `trove repair index`"),
            )),
            (None, None) => None,
        };
        if let Some((kind, message)) = problem {
            self.object_problem(*id, Problem::new(kind, message));
        }
        Ok(())
    }

    /// Rows of `object_bases` for objects stored nowhere: left by a damaged manifest, they
    /// would keep bases from collection for nothing.
    pub(super) fn check_stray_bases(&mut self) -> Result<()> {
        let conn = self.repo.manifest.conn();
        let mut stmt = conn
            .prepare(
                "SELECT b.id FROM object_bases b
                 WHERE NOT EXISTS (SELECT 1 FROM loose_objects l WHERE l.id = b.id)
                   AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.id = b.id)",
            )
            .map_err(db("checking deltas' bases"))?;
        let stray: Vec<Vec<u8>> =
            stmt.query_map([], |r| r.get(0)).and_then(|rows| rows.collect()).map_err(db("checking deltas' bases"))?;
        for id in stray {
            let shown: String = id.iter().map(|b| format!("{b:02x}")).collect();
            self.problem(Problem::new(
                ProblemKind::Row,
                format!("object_bases names a base for {shown}, which is not stored; run `trove repair index`"),
            ));
        }
        Ok(())
    }

    /// Every chunk list: rows numbered 0, 1, ... whose offsets add up over stored chunks; with
    /// `read`, the chunks' bytes in order hash to the content id. Rows are streamed, one list
    /// held at a time.
    pub(super) fn check_chunk_lists(&mut self, read: bool) -> Result<()> {
        let conn = self.repo.manifest.conn();
        let mut open: Option<(ObjectId, ChunkRows)> = None;
        objects::for_each_chunk_row(conn, |row| {
            let (content, seq, chunk, offset) = match row {
                Ok(r) => r,
                Err(e) if is_finding(&e) => {
                    self.problem(Problem::new(ProblemKind::Row, e.message().to_string()));
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            if open.as_ref().is_none_or(|(c, _)| *c != content) {
                if let Some((c, list)) = open.take() {
                    self.finish_chunk_list(conn, c, &list, read)?;
                }
                open = Some((content, Vec::new()));
            }
            if let Some((_, list)) = open.as_mut() {
                list.push((seq, chunk, offset));
            }
            Ok(())
        })?;
        if let Some((c, list)) = open.take() {
            self.finish_chunk_list(conn, c, &list, read)?;
        }
        Ok(())
    }

    fn finish_chunk_list(
        &mut self,
        conn: &Connection,
        content: ObjectId,
        list: &[(u64, ObjectId, u64)],
        read: bool,
    ) -> Result<()> {
        self.report.chunked += 1;
        if let Some(p) = self.chunk_list_problem(conn, content, list, read)? {
            self.object_problem(content, p);
        }
        Ok(())
    }

    fn chunk_list_problem(
        &mut self,
        conn: &Connection,
        content: ObjectId,
        list: &[(u64, ObjectId, u64)],
        read: bool,
    ) -> Result<Option<Problem>> {
        let mut offset = 0u64;
        let mut whole = blake3::Hasher::new();
        for (n, &(seq, chunk, at)) in list.iter().enumerate() {
            if seq != n as u64 || at != offset {
                return Ok(Some(Problem::new(
                    ProblemKind::ChunkList,
                    format!(
                        "the chunk list of content {content} is malformed at row {seq} (expected row {n} at offset {offset}, found offset {at})"
                    ),
                )));
            }
            let Some(len) = stored_raw_len(conn, &chunk)? else {
                return Ok(Some(Problem::new(
                    ProblemKind::ObjectMissing,
                    format!("chunk {chunk} of content {content} is not stored"),
                )));
            };
            if read {
                match self.repo.read_object(&chunk) {
                    Ok(bytes) => {
                        whole.update(&bytes);
                    }
                    Err(e) if is_finding(&e) => {
                        return Ok(Some(Problem::new(
                            ProblemKind::ObjectDamaged,
                            format!("chunk {chunk} of content {content}: {}", e.message()),
                        )))
                    }
                    Err(e) => return Err(e),
                }
            }
            offset = offset.saturating_add(len);
        }
        if read && ObjectId(*whole.finalize().as_bytes()) != content {
            return Ok(Some(Problem::new(
                ProblemKind::ChunkList,
                format!(
                    "the chunk list of content {content} does not reassemble to it: its chunks hash to another content"
                ),
            )));
        }
        Ok(None)
    }
}
