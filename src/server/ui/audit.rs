//! The audit timeline of the review pages: the records newest first under filters the URL
//! keeps, each with a permalink, its details, and a badge saying what proves it: a signed
//! checkpoint that verification reached, a signed checkpoint that does not verify (a later
//! record it covers was rewritten), nothing yet (after the last checkpoint), or a failed
//! verification.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use askama::Template;

use crate::base::error::{ErrorKind, Result};
use crate::base::id::SessionId;
use crate::model::audit::{AuditQuery, FullRecord, Order, VerifyReport};
use crate::repo::Repo;

use super::url::{node_param, some, with_query};

/// How many records one page shows.
pub const PAGE: usize = 100;
/// How long a verification of the whole log is reused: verifying reads every record, and a
/// busy log would otherwise be read whole at every page load. Records appended since are shown
/// as not yet covered, which is what they are as far as this report knows.
const VERIFIED_REUSE: Duration = Duration::from_secs(10);

/// A verification, when it ran, and the sizes of the signed checkpoints it saw.
type Kept = (Instant, VerifyReport, Vec<u64>);

/// The last verification of each log read (this node's, and in a fleet each other node's by
/// name), and when it ran.
#[derive(Default)]
pub struct Verified {
    last: Mutex<HashMap<String, Kept>>,
}

impl Verified {
    /// A verification of `repo`'s log at most [`VERIFIED_REUSE`] old, with the sizes of the
    /// signed checkpoints.
    fn get(&self, repo: &Repo) -> Result<(VerifyReport, Vec<u64>)> {
        let log = repo.node().unwrap_or_default().to_owned();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, report, sizes)) = last.get(&log) {
            if at.elapsed() < VERIFIED_REUSE {
                return Ok((report.clone(), sizes.clone()));
            }
        }
        let report = match repo.trusted_audit_keys() {
            Ok(keys) => repo.verify_audit(&keys)?,
            // Another node's log that never signed a checkpoint registers no key: nothing of it
            // is proven yet, which is what the badges then say.
            Err(e) if e.kind() == ErrorKind::NotFound && repo.is_other_node() => {
                tracing::debug!(log, error = %e, "a node's log without a signed checkpoint: its records shown unproven");
                let records = repo.audit_size()?;
                VerifyReport { records, unsigned_tail: records, ..Default::default() }
            }
            Err(e) => return Err(e),
        };
        let mut sizes: Vec<u64> = repo.checkpoints()?.iter().map(|c| c.size).collect();
        sizes.sort_unstable();
        last.insert(log, (Instant::now(), report.clone(), sizes.clone()));
        Ok((report, sizes))
    }
}

/// The timeline's filters, as the URL carries them.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct AuditFilters {
    pub session: Option<String>,
    pub workspace: Option<String>,
    pub actor: Option<String>,
    pub operation: Option<String>,
    pub outcome: Option<String>,
    pub path: Option<String>,
    /// Records before this seq (the next page back).
    pub before: Option<i64>,
    /// `1`: the page follows the log (a live tail: `assets/ui/follow.js` reads it again every
    /// few seconds and puts the new records in place).
    pub follow: Option<u8>,
    /// In a fleet, the node whose log is shown (blank: this node's): a seq is a position in
    /// one node's log.
    pub node: Option<String>,
}

/// One record's line, and its details when opened.
pub struct RecordView {
    pub seq: i64,
    /// Its permalink (naming another node's log with `node=`).
    pub link: String,
    pub time: String,
    pub actor: String,
    pub operation: String,
    pub outcome: String,
    pub refused: bool,
    pub workspace: String,
    pub session: Option<String>,
    pub path: String,
    /// The badge: `verified`, `unproven`, `unsigned` or `failed`, and its words.
    pub proof: &'static str,
    pub proof_text: String,
    /// The record as JSON, pretty.
    pub details: String,
}

#[derive(Template)]
#[template(path = "ui/audit.html")]
pub struct AuditPage {
    pub form_token: Option<String>,
    pub f: AuditFilters,
    pub records: Vec<RecordView>,
    pub verified_to: u64,
    pub unsigned_tail: u64,
    pub problems: Vec<String>,
    /// The link to the next page back, with the same filters.
    pub older: Option<String>,
    pub follow: bool,
    pub follow_link: String,
    /// In a fleet, the node whose log this is, whether that is another node, and every node's
    /// log's link.
    pub node: Option<String>,
    pub other_node: bool,
    pub nodes: Vec<(String, String)>,
}

#[derive(Template)]
#[template(path = "ui/audit_record.html")]
pub struct RecordPage {
    pub form_token: Option<String>,
    pub r: RecordView,
    /// In a fleet, another node's log holding it.
    pub other_node: Option<String>,
    /// The timeline of its log, at it.
    pub timeline: String,
}

/// The badge of record `seq` under `report`.
fn proof(seq: i64, report: &VerifyReport, sizes: &[u64]) -> (&'static str, String) {
    if report.first_bad_seq.is_some_and(|bad| seq >= bad) {
        return ("failed", "failed verification".into());
    }
    let s = seq.max(0) as u64;
    match sizes.iter().find(|size| **size >= s) {
        Some(size) if s <= report.verified_to => ("verified", format!("covered by checkpoint {size} (verified)")),
        // Signed, but the checkpoint does not verify, as a later record it covers was found
        // rewritten: this record may be intact, yet nothing proves it. (Without a problem found,
        // a checkpoint past `verified_to` is one signed after the verification read the log.)
        Some(size) if report.first_bad_seq.is_some() => ("unproven", format!("checkpoint {size} does not verify")),
        _ => ("unsigned", "after the last checkpoint".into()),
    }
}

fn view(repo: &Repo, full: &FullRecord, report: &VerifyReport, sizes: &[u64]) -> RecordView {
    let e = full.entry();
    let (proof, proof_text) = proof(full.seq, report, sizes);
    RecordView {
        seq: e.seq,
        link: format!("/ui/audit/{}{}", e.seq, node_param(repo).replacen('&', "?", 1)),
        time: e.time.clone(),
        actor: e.actor.clone(),
        operation: e.operation.clone(),
        refused: e.outcome != "ok",
        outcome: e.outcome.clone(),
        workspace: e.workspace.clone().unwrap_or_default(),
        session: e.session.as_ref().map(|s| s.to_string()),
        path: e.path.clone().unwrap_or_default(),
        proof,
        proof_text,
        details: serde_json::to_string_pretty(&e).unwrap_or_default(),
    }
}

/// The timeline's link under `f` (without `before`, with `follow` as given), and `before` if
/// given.
fn link_of(f: &AuditFilters, follow: bool, before: Option<i64>) -> String {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    for (name, value) in [
        ("session", &f.session),
        ("workspace", &f.workspace),
        ("actor", &f.actor),
        ("operation", &f.operation),
        ("outcome", &f.outcome),
        ("path", &f.path),
        ("node", &f.node),
    ] {
        if let Some(v) = some(value) {
            pairs.push((name, v));
        }
    }
    if follow {
        pairs.push(("follow", "1".into()));
    }
    if let Some(seq) = before {
        pairs.push(("before", seq.to_string()));
    }
    with_query("/ui/audit", pairs.iter().map(|(k, v)| (*k, v.as_str())))
}

/// The timeline under `f`, of `repo`'s log (in a fleet, the node `f.node` names); `nodes`, the
/// fleet's nodes (none outside one), each linked to its own log's timeline.
pub fn timeline(
    repo: &Repo,
    verified: &Verified,
    f: AuditFilters,
    form_token: String,
    nodes: Vec<String>,
) -> Result<AuditPage> {
    let session = match some(&f.session) {
        Some(s) => Some(SessionId::parse(&s)?),
        None => None,
    };
    let path = some(&f.path).map(|p| crate::base::path::from_text(&p)).transpose()?;
    let q = AuditQuery {
        actor: some(&f.actor),
        session,
        workspace: some(&f.workspace),
        operation: some(&f.operation),
        outcome: some(&f.outcome),
        path,
        order: f.before.map_or(Order::Newest, Order::Before),
        // One more than a page: whether there are older records to link to.
        limit: PAGE + 1,
        ..Default::default()
    };
    let all = repo.audit_query(&q)?;
    let (report, sizes) = verified.get(repo)?;
    let more = all.len() > PAGE;
    let records: Vec<RecordView> = all.iter().rev().take(PAGE).map(|r| view(repo, r, &report, &sizes)).collect();
    let older = more.then(|| records.last().map(|r| link_of(&f, false, Some(r.seq)))).flatten();
    let follow = f.follow == Some(1);
    let follow_link = link_of(&f, !follow, None);
    let nodes = nodes
        .into_iter()
        .map(|n| {
            let link =
                link_of(&AuditFilters { node: Some(n.clone()), before: None, follow: None, ..f.clone() }, false, None);
            (n, link)
        })
        .collect();
    Ok(AuditPage {
        node: repo.node().map(str::to_owned),
        other_node: repo.is_other_node(),
        nodes,
        form_token: Some(form_token),
        verified_to: report.verified_to,
        unsigned_tail: report.unsigned_tail,
        problems: report.problems.clone(),
        f,
        records,
        older,
        follow,
        follow_link,
    })
}

/// Record `seq`'s own page.
pub fn record(repo: &Repo, verified: &Verified, seq: i64, form_token: String) -> Result<RecordPage> {
    let full = repo
        .audit_record(seq)?
        .ok_or_else(|| crate::base::error::Error::not_found(format!("there is no audit record {seq}")))?;
    let (report, sizes) = verified.get(repo)?;
    let r = view(repo, &full, &report, &sizes);
    let other_node = repo.node().filter(|_| repo.is_other_node()).map(str::to_owned);
    let timeline = format!("/ui/audit{}#seq-{seq}", node_param(repo).replacen('&', "?", 1));
    Ok(RecordPage { form_token: Some(form_token), r, other_node, timeline })
}
