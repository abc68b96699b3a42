//! New versions of a path stored against earlier ones: the delta a tool's write or a
//! snapshot's changed file is stored as (`object::delta` encodes it), its base chosen so that a
//! chain never grows past `blob::MAX_DEPTH`.

use crate::base::error::{Error, Result};
use crate::manifest;
use crate::object::{blob, delta, ObjectId};
use crate::repo::Repo;

impl Repo {
    /// `raw` encoded as a delta and the depth of the base it leans on, or None when it is
    /// stored already or a delta is not worth it. The base is `base_id` (whose bytes are
    /// `base_raw`) unless its chain is full: then an ancestor halfway down it, so a path's
    /// history is one whole version and deltas however long it grows, and any version is at
    /// most `MAX_DEPTH` deltas from it.
    pub(crate) fn delta_against(
        &self,
        id: &ObjectId,
        raw: &[u8],
        base_id: &ObjectId,
        base_raw: &[u8],
        level: i32,
    ) -> Result<Option<(Vec<u8>, u8)>> {
        let conn = self.manifest.conn();
        if manifest::loose::has_live(conn, id)? || manifest::objects::has_live(conn, id)? {
            return Ok(None);
        }
        let depth = manifest::loose::depth(conn, base_id)?.unwrap_or(0);
        if delta::can_extend(depth) {
            return Ok(delta::encode(id, raw, base_id, base_raw, depth, level)?.map(|d| (d, depth)));
        }
        let (mut ancestor, mut at) = (*base_id, depth);
        // Each step strictly shallower, so a damaged `object_bases` (a cycle) cannot hold the
        // writer: at most MAX_DEPTH steps.
        while at > blob::MAX_DEPTH / 2 {
            let next = manifest::loose::base(conn, &ancestor)?
                .ok_or_else(|| Error::corrupt(format!("delta {ancestor} has no base recorded; run `trove check`")))?;
            let next_at = manifest::loose::depth(conn, &next)?.unwrap_or(0);
            if next_at >= at {
                return Err(Error::corrupt(format!(
                    "delta {ancestor} at depth {at} is recorded against {next} at depth {next_at}; run `trove check`"
                )));
            }
            (ancestor, at) = (next, next_at);
        }
        let ancestor_raw = self.read_object(&ancestor)?;
        Ok(delta::encode(id, raw, &ancestor, &ancestor_raw, at, level)?.map(|d| (d, at)))
    }
}
