//! Manifest rows of the search index (schema.sql, version 8): documents (file contents by
//! content id), segments, per-trigram posting lists, and the snapshots fully indexed.
//!
//! A posting list is the ascending document numbers holding one trigram within one segment,
//! stored as LEB128 deltas (the first from zero). Rows are read back as untrusted bytes: a
//! list that does not decode, or does not ascend, is `corrupt` naming its trigram and segment.

use rusqlite::{params, Connection, OptionalExtension};

use super::db;
use crate::base::error::{Error, Result};
use crate::base::grams::Gram;
use crate::base::id::SnapshotId;
use crate::base::varint;
use crate::object::ObjectId;

/// What the index knows of one document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// Its trigrams are indexed.
    Text = 0,
    /// It is binary: a content search never reports a match in it.
    Binary = 1,
    /// It was not indexed (too many distinct trigrams to be worth it): always searched.
    Unindexed = 2,
}

/// Appends `docs` (ascending) to `out` as delta-coded LEB128.
pub fn encode_postings(docs: &[u64], out: &mut Vec<u8>) {
    let mut prev = 0u64;
    for &d in docs {
        varint::put(out, d - prev);
        prev = d;
    }
}

/// Decodes a posting list, appending to `out`; `None` if it is malformed.
pub fn decode_postings(bytes: &[u8], out: &mut Vec<u64>) -> Option<()> {
    let (mut b, mut prev, mut first) = (bytes, 0u64, true);
    while !b.is_empty() {
        let v = varint::take(&mut b)?;
        // Strictly ascending: a zero delta after the first is a malformed list.
        if !first && v == 0 {
            return None;
        }
        prev = prev.checked_add(v)?;
        out.push(prev);
        first = false;
    }
    Some(())
}

/// The document of content `id`, if indexed.
pub fn doc_of(conn: &Connection, id: &ObjectId) -> Result<Option<u64>> {
    let mut stmt =
        conn.prepare_cached("SELECT doc FROM search_docs WHERE id = ?1").map_err(db("reading the search index"))?;
    stmt.query_row([&id.as_bytes()[..]], |r| r.get::<_, i64>(0))
        .optional()
        .map(|d| d.map(|d| d as u64))
        .map_err(db("reading the search index"))
}

/// Records a new document and returns its number (numbers ascend in the order of inserts).
pub fn insert_doc(conn: &Connection, id: &ObjectId, kind: DocKind) -> Result<u64> {
    let mut stmt = conn
        .prepare_cached("INSERT INTO search_docs (id, kind) VALUES (?1, ?2)")
        .map_err(db("writing the search index"))?;
    stmt.execute(params![&id.as_bytes()[..], kind as i64]).map_err(db("writing the search index"))?;
    Ok(conn.last_insert_rowid() as u64)
}

/// Records segment `segment` (documents `segment..=last_doc`) and its posting lists, given in
/// ascending trigram order.
pub fn insert_segment(
    conn: &Connection,
    segment: u64,
    last_doc: u64,
    lists: impl Iterator<Item = (Gram, Vec<u64>)>,
) -> Result<()> {
    let mut stmt = conn
        .prepare_cached("INSERT INTO search_grams (gram, segment, docs) VALUES (?1, ?2, ?3)")
        .map_err(db("writing the search index"))?;
    // The segment row first: the posting rows reference it.
    conn.prepare_cached("INSERT INTO search_segments (segment, last_doc, grams, bytes) VALUES (?1, ?2, 0, 0)")
        .and_then(|mut s| s.execute(params![segment as i64, last_doc as i64]))
        .map_err(db("writing the search index"))?;
    let (mut grams, mut bytes) = (0i64, 0i64);
    let mut buf = Vec::new();
    for (gram, docs) in lists {
        buf.clear();
        encode_postings(&docs, &mut buf);
        stmt.execute(params![i64::from(gram), segment as i64, &buf]).map_err(db("writing the search index"))?;
        grams += 1;
        bytes += buf.len() as i64;
    }
    conn.prepare_cached("UPDATE search_segments SET grams = ?2, bytes = ?3 WHERE segment = ?1")
        .and_then(|mut s| s.execute(params![segment as i64, grams, bytes]))
        .map_err(db("writing the search index"))?;
    Ok(())
}

/// How many segments there are.
pub fn segment_count(conn: &Connection) -> Result<u64> {
    conn.prepare_cached("SELECT COUNT(*) FROM search_segments")
        .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
        .map(|n| n as u64)
        .map_err(db("reading the search index"))
}

/// The documents holding `gram`, over every segment, ascending.
pub fn postings(conn: &Connection, gram: Gram) -> Result<Vec<u64>> {
    let mut stmt = conn
        .prepare_cached("SELECT segment, docs FROM search_grams WHERE gram = ?1 ORDER BY segment")
        .map_err(db("reading the search index"))?;
    let mut rows = stmt.query([i64::from(gram)]).map_err(db("reading the search index"))?;
    let mut out = Vec::new();
    let mut sorted = true;
    while let Some(r) = rows.next().map_err(db("reading the search index"))? {
        let segment: i64 = r.get(0).map_err(db("reading the search index"))?;
        let bytes =
            r.get_ref(1).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db("reading the search index"))?;
        let before = out.len();
        decode_postings(bytes, &mut out).ok_or_else(|| {
            Error::corrupt(format!(
                "the search index's postings of trigram {gram:06x} in segment {segment} do not decode; \
                 run `trove check` (the index can be dropped and rebuilt)"
            ))
        })?;
        sorted &= before == 0 || out.get(before - 1) < out.get(before);
    }
    // Segments cover ascending ranges of documents, so lists join in order; should a merge
    // have left them otherwise, order them.
    if !sorted {
        out.sort_unstable();
        out.dedup();
    }
    Ok(out)
}

/// Documents that are always searched.
pub fn unindexed_docs(conn: &Connection) -> Result<Vec<u64>> {
    let mut stmt = conn
        .prepare_cached("SELECT doc FROM search_docs WHERE kind = 2 ORDER BY doc")
        .map_err(db("reading the search index"))?;
    let rows = stmt.query_map([], |r| r.get::<_, i64>(0)).map_err(db("reading the search index"))?;
    rows.map(|r| r.map(|d| d as u64).map_err(db("reading the search index"))).collect()
}

/// The content id of document `doc`.
pub fn id_of(conn: &Connection, doc: u64) -> Result<Option<ObjectId>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM search_docs WHERE doc = ?1").map_err(db("reading the search index"))?;
    stmt.query_row([doc as i64], |r| super::object(r, 0))
        .optional()
        .map(Option::flatten)
        .map_err(db("reading the search index"))
}

/// Whether every file of `snapshot` has a document.
pub fn snapshot_indexed(conn: &Connection, snapshot: &SnapshotId) -> Result<bool> {
    conn.prepare_cached("SELECT 1 FROM search_snapshots WHERE snapshot = ?1")
        .and_then(|mut s| s.query_row([snapshot.as_str()], |_| Ok(())).optional())
        .map(|r| r.is_some())
        .map_err(db("reading the search index"))
}

/// Records that every file of `snapshot` has a document.
pub fn mark_snapshot(conn: &Connection, snapshot: &SnapshotId) -> Result<()> {
    conn.prepare_cached("INSERT OR IGNORE INTO search_snapshots (snapshot) VALUES (?1)")
        .and_then(|mut s| s.execute([snapshot.as_str()]))
        .map_err(db("writing the search index"))?;
    Ok(())
}

/// Merges every segment into one: each trigram's lists joined in segment order (segments
/// cover ascending document ranges), one trigram in memory at a time.
pub fn merge_segments(conn: &Connection) -> Result<()> {
    let (first, last): (Option<i64>, Option<i64>) = conn
        .query_row("SELECT MIN(segment), MAX(last_doc) FROM search_segments", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(db("merging the search index"))?;
    let (Some(first), Some(last)) = (first, last) else { return Ok(()) };
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS merged_grams (gram INTEGER PRIMARY KEY, docs BLOB NOT NULL);
         DELETE FROM temp.merged_grams;",
    )
    .map_err(db("merging the search index"))?;
    {
        let mut read = conn
            .prepare("SELECT gram, segment, docs FROM search_grams ORDER BY gram, segment")
            .map_err(db("merging the search index"))?;
        let mut write = conn
            .prepare("INSERT INTO temp.merged_grams (gram, docs) VALUES (?1, ?2)")
            .map_err(db("merging the search index"))?;
        let mut rows = read.query([]).map_err(db("merging the search index"))?;
        let (mut current, mut docs, mut buf) = (None::<i64>, Vec::new(), Vec::new());
        let mut flush = |gram: i64, docs: &mut Vec<u64>| -> Result<()> {
            docs.sort_unstable();
            docs.dedup();
            buf.clear();
            encode_postings(docs, &mut buf);
            write.execute(params![gram, &buf]).map_err(db("merging the search index"))?;
            docs.clear();
            Ok(())
        };
        while let Some(r) = rows.next().map_err(db("merging the search index"))? {
            let gram: i64 = r.get(0).map_err(db("merging the search index"))?;
            let segment: i64 = r.get(1).map_err(db("merging the search index"))?;
            if current.is_some_and(|c| c != gram) {
                if let Some(c) = current {
                    flush(c, &mut docs)?;
                }
            }
            current = Some(gram);
            let bytes =
                r.get_ref(2).and_then(|v| v.as_blob().map_err(Into::into)).map_err(db("merging the search index"))?;
            decode_postings(bytes, &mut docs).ok_or_else(|| {
                Error::corrupt(format!(
                    "the search index's postings of trigram {gram:06x} in segment {segment} do not decode"
                ))
            })?;
        }
        if let Some(c) = current {
            flush(c, &mut docs)?;
        }
    }
    conn.execute_batch(&format!(
        "DELETE FROM search_grams;
         DELETE FROM search_segments;
         INSERT INTO search_segments (segment, last_doc, grams, bytes)
             SELECT {first}, {last}, COUNT(*), COALESCE(SUM(LENGTH(docs)), 0) FROM temp.merged_grams;
         INSERT INTO search_grams (gram, segment, docs) SELECT gram, {first}, docs FROM temp.merged_grams ORDER BY gram;
         DELETE FROM temp.merged_grams;"
    ))
    .map_err(db("merging the search index"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postings_round_trip_and_refuse_malformed_lists() {
        let docs = [1u64, 2, 130, 20_000, u64::from(u32::MAX) + 7];
        let mut buf = Vec::new();
        encode_postings(&docs, &mut buf);
        let mut back = Vec::new();
        assert_eq!(decode_postings(&buf, &mut back), Some(()));
        assert_eq!(back, docs);
        for bad in [&[0x80u8][..], &[0xff; 11][..], &[5, 0][..]] {
            assert_eq!(decode_postings(bad, &mut Vec::new()), None, "{bad:?}");
        }
    }
}
