//! Proofs over the audit log, made from the stored Merkle subtrees: a record's inclusion in the
//! tree a checkpoint signs, and one size of the log extending another.

use base64::Engine;

use crate::base::error::{Error, Result};
use crate::manifest;
use crate::manifest::audit::StoredNodes;
use crate::model::audit::{ConsistencyProof, InclusionProof};
use crate::repo::Repo;
use crate::tlog::merkle;

fn b64(h: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(h)
}

impl Repo {
    /// The proof that record `seq` is in the log of `size` records (the latest checkpoint's
    /// when not given).
    pub fn inclusion_proof(&self, seq: i64, size: Option<u64>) -> Result<InclusionProof> {
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let size = match size {
                Some(s) => s,
                None => manifest::audit::latest_checkpoint(conn)?
                    .map(|c| c.size)
                    .ok_or_else(|| Error::not_found("no checkpoint yet: write one with `trove audit checkpoint`"))?,
            };
            let stored = manifest::audit::tree_size(conn)?;
            if size == 0 || size > stored {
                return Err(Error::invalid_argument(format!(
                    "no proof against a log of {size} records: the log holds {stored}"
                )));
            }
            if seq < 1 || seq as u64 > size {
                return Err(Error::not_found(format!("record {seq} is not in the log of {size} records")));
            }
            let nodes = StoredNodes(conn);
            let index = seq as u64 - 1;
            let proof = merkle::inclusion_proof(&nodes, index, size)?;
            let leaf = merkle::Nodes::node(&nodes, 0, index)?;
            Ok(InclusionProof {
                leaf_index: index,
                tree_size: size,
                leaf_hash: b64(&leaf),
                proof: proof.iter().map(|h| b64(h)).collect(),
                root: b64(&merkle::root(&nodes, size)?),
            })
        })
    }

    /// The proof that the log of `to` records extends the log of `from` records.
    pub fn consistency_proof(&self, from: u64, to: u64) -> Result<ConsistencyProof> {
        self.manifest.read(|| {
            let conn = self.manifest.conn();
            let stored = manifest::audit::tree_size(conn)?;
            if from == 0 || from > to || to > stored {
                return Err(Error::invalid_argument(format!(
                    "no consistency proof from {from} to {to} records: give 1 <= from <= to <= {stored}"
                )));
            }
            let nodes = StoredNodes(conn);
            let proof = merkle::consistency_proof(&nodes, from, to)?;
            Ok(ConsistencyProof {
                from,
                to,
                from_root: b64(&merkle::root(&nodes, from)?),
                to_root: b64(&merkle::root(&nodes, to)?),
                proof: proof.iter().map(|h| b64(h)).collect(),
            })
        })
    }
}
