-- trove manifest schema. The single source of the schema: src/manifest/mod.rs applies it to a
-- new repository and sets PRAGMA user_version to the number below. A later schema adds a
-- migration step keyed by user_version; never edit a released version in place.
-- schema-version: 1

-- Pack files in the object store; `name` is the backend key.
CREATE TABLE packs (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    size        INTEGER NOT NULL,
    objects     INTEGER NOT NULL,
    created_ns  INTEGER NOT NULL
);

-- Object id (BLAKE3 of the raw bytes) -> where its blob lies (the bundle, for small objects).
CREATE TABLE objects (
    id          BLOB PRIMARY KEY,            -- 32 bytes
    pack        INTEGER NOT NULL REFERENCES packs(id),
    offset      INTEGER NOT NULL,            -- of the blob header within the pack
    stored_len  INTEGER NOT NULL,            -- header + payload
    raw_len     INTEGER NOT NULL,            -- of the object itself
    inner_offset INTEGER                     -- bundle members: offset in the bundle's raw bytes
) WITHOUT ROWID;

-- Files over the chunking threshold: content id (BLAKE3 of the whole file) -> ordered chunks.
CREATE TABLE chunk_lists (
    content     BLOB NOT NULL,
    seq         INTEGER NOT NULL,
    chunk       BLOB NOT NULL,               -- an object id
    offset      INTEGER NOT NULL,            -- of the chunk within the file
    PRIMARY KEY (content, seq)
) WITHOUT ROWID;

-- Content-addressed directories: a row exists once per distinct directory content. `data` is
-- the tree's canonical encoding (ARCHITECTURE.md, "Tree"), zstd-compressed; its BLAKE3 (with
-- the tag) is `id`, so every read is verified.
CREATE TABLE trees (
    id          BLOB NOT NULL UNIQUE,
    entries     INTEGER NOT NULL,
    data        BLOB NOT NULL
);

CREATE TABLE workspaces (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    root        BLOB,                        -- last directory snapshotted under this name
    excludes    TEXT,                        -- JSON list replacing the defaults, or NULL
    extra_excludes TEXT NOT NULL DEFAULT '[]', -- JSON list added to the effective list
    created_ns  INTEGER NOT NULL
);

-- What a file looked like when it was last read, so an unchanged file is not read again. Keyed
-- by the first 16 bytes of BLAKE3(path): a third of the size of the paths, as borg's files cache.
CREATE TABLE stat_cache (
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    path_key    BLOB NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    ctime_ns    INTEGER NOT NULL,
    inode       INTEGER NOT NULL,
    device      INTEGER NOT NULL,
    mode        INTEGER NOT NULL,
    content     BLOB NOT NULL,
    sha256      BLOB NOT NULL,
    PRIMARY KEY (workspace, path_key)
) WITHOUT ROWID;

CREATE TABLE snapshots (
    id          TEXT PRIMARY KEY,            -- 64 hex characters
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    session     TEXT,
    parent      TEXT REFERENCES snapshots(id),
    created_ns  INTEGER NOT NULL,
    reason      TEXT NOT NULL,
    root        BLOB NOT NULL REFERENCES trees(id),
    source_dir  BLOB NOT NULL,
    files       INTEGER NOT NULL,
    dirs        INTEGER NOT NULL,
    symlinks    INTEGER NOT NULL,
    bytes       INTEGER NOT NULL,
    added       INTEGER NOT NULL,
    changed     INTEGER NOT NULL,
    removed     INTEGER NOT NULL,
    skipped     INTEGER NOT NULL,            -- sockets, FIFOs, devices
    warnings    TEXT NOT NULL                -- JSON list of {path, message}
);
CREATE INDEX snapshots_by_workspace ON snapshots(workspace, created_ns);

-- The audit log. Append-only: the triggers below refuse UPDATE and DELETE. `seq` is contiguous
-- from 1; `encoded` is the record's canonical encoding (ARCHITECTURE.md), the future Merkle leaf.
CREATE TABLE audit (
    seq         INTEGER PRIMARY KEY,
    time_ns     INTEGER NOT NULL,
    actor       TEXT NOT NULL,
    operation   TEXT NOT NULL,
    workspace   TEXT,
    session     TEXT,
    path        BLOB,
    dest_path   BLOB,
    before_sha256 BLOB,
    after_sha256  BLOB,
    before_object BLOB,
    after_object  BLOB,
    outcome     TEXT NOT NULL,               -- 'ok' or an error kind
    details     TEXT NOT NULL,               -- JSON object
    encoded     BLOB NOT NULL
);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit records are immutable'); END;
-- INSERT OR REPLACE would delete a row without firing the DELETE trigger: only appends pass.
CREATE TRIGGER audit_append_only BEFORE INSERT ON audit
WHEN NEW.seq <= (SELECT COALESCE(MAX(seq), 0) FROM audit)
BEGIN SELECT RAISE(ABORT, 'audit records are append-only'); END;

-- schema-version: 2
-- Sessions (sessions-and-file-access.md): a period of work on one workspace. Ending a session
-- never deletes data: the row stays with status 'ended' so its files stay reviewable.
CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,            -- 'sess_' + 12 hex digits
    workspace   TEXT NOT NULL,               -- workspace name (snapshots are filed under it)
    live_dir    BLOB NOT NULL,               -- the live directory, absolute
    persistent  INTEGER NOT NULL,
    ttl         INTEGER NOT NULL,            -- seconds from created_ns to the forced end
    metadata    TEXT NOT NULL,               -- JSON object, free-form
    file_access TEXT NOT NULL,               -- JSON {"read": [...], "write": [...]}
    status      TEXT NOT NULL,               -- 'ready', 'paused' or 'ended'
    created_ns  INTEGER NOT NULL,
    last_activity_ns INTEGER NOT NULL,
    ended_ns    INTEGER,
    end_reason  TEXT,                        -- 'deleted', 'ttl', 'idle'
    final_snapshot TEXT                      -- the snapshot taken when it ended, if any
);
CREATE INDEX sessions_by_status ON sessions(status);
CREATE INDEX snapshots_by_session ON snapshots(session, created_ns);

-- API tokens of `trove serve`, stored as SHA-256 hashes only: the manifest never holds a
-- usable secret.
CREATE TABLE api_tokens (
    hash        BLOB PRIMARY KEY,            -- SHA-256 of the token
    label       TEXT NOT NULL,
    created_ns  INTEGER NOT NULL
) WITHOUT ROWID;

-- schema-version: 3
-- Objects written one at a time by the agent file tools (pre-images of overwritten, edited,
-- moved and deleted files), and the files of a snapshot that read only a few small ones: the
-- blob format of the packs, kept in the manifest so that storing one commits with the record
-- that refers to it, in one fsync. Big files are chunked and their chunk list goes to
-- `chunk_lists` as for snapshots.
CREATE TABLE loose_objects (
    id          BLOB PRIMARY KEY,            -- BLAKE3 of the raw bytes
    raw_len     INTEGER NOT NULL,
    encoded     BLOB NOT NULL                -- blob header + payload, as in a pack
) WITHOUT ROWID;

-- The trash: what delete_file, apply_patch's Delete and overwriting restores took away. Rows
-- reference objects, so a deleted file shares storage with snapshots and pre-images.
CREATE TABLE trash (
    id          TEXT PRIMARY KEY,            -- 'trash_' + 12 hex digits
    workspace   TEXT NOT NULL,
    session     TEXT,
    path        BLOB NOT NULL,               -- where it was, workspace-relative
    kind        TEXT NOT NULL,               -- 'file' or 'dir'
    size        INTEGER NOT NULL,            -- bytes, all files of a directory summed
    sha256      BLOB,                        -- of a file
    mode        INTEGER NOT NULL,
    object      BLOB,                        -- a file's content object
    deleted_by  TEXT NOT NULL,               -- the actor
    deleted_ns  INTEGER NOT NULL,
    reason      TEXT NOT NULL,               -- the tool: delete_file, apply_patch, restore_file
    audit_seq   INTEGER,
    restored_ns INTEGER                      -- set when restored; the row stays
);
CREATE INDEX trash_by_path ON trash(workspace, path, deleted_ns);

-- The members of a deleted directory, relative to it.
CREATE TABLE trash_entries (
    trash_id    TEXT NOT NULL REFERENCES trash(id),
    rel         BLOB NOT NULL,
    kind        TEXT NOT NULL,               -- 'file', 'dir' or 'symlink'
    size        INTEGER NOT NULL,
    sha256      BLOB,
    mode        INTEGER NOT NULL,
    object      BLOB,                        -- a file's content
    target      BLOB,                        -- a symlink's target
    PRIMARY KEY (trash_id, rel)
) WITHOUT ROWID;

-- Mutations of the live tree in flight (ARCHITECTURE.md, "Tool journal"): written and committed
-- before the tree is touched, deleted in the transaction that records the outcome. A row found
-- on open is a mutation a crash interrupted; it is rolled forward.
CREATE TABLE journal (
    id          TEXT PRIMARY KEY,
    created_ns  INTEGER NOT NULL,
    plan        TEXT NOT NULL                -- JSON, see tools/journal.rs
);

-- schema-version: 4
-- API tokens get an id (shown by `trove token list`, named by `trove token revoke`) and a
-- revocation time; a revoked token is refused at once, by every server reading this manifest.
-- The id is `tok_` and the first 12 hex digits of the token's SHA-256: it names the token
-- without revealing it.
ALTER TABLE api_tokens ADD COLUMN id TEXT;
ALTER TABLE api_tokens ADD COLUMN revoked_ns INTEGER;
UPDATE api_tokens SET id = 'tok_' || lower(hex(substr(hash, 1, 6))) WHERE id IS NULL;
CREATE UNIQUE INDEX api_tokens_by_id ON api_tokens(id);

-- `seq` is contiguous: an insert must be exactly the next number (version 1 refused only
-- rewrites, so a gap could be left).
DROP TRIGGER audit_append_only;
CREATE TRIGGER audit_append_only BEFORE INSERT ON audit
WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit)
BEGIN SELECT RAISE(ABORT, 'audit records are append-only and their seq contiguous'); END;

-- Restores in progress (ARCHITECTURE.md, "Restore"): written before the first file is staged,
-- deleted when the last one is in place. A row found on open is a restore a crash interrupted;
-- its temporary files are removed (every file in place is whole: files land by rename).
CREATE TABLE restores (
    id          TEXT PRIMARY KEY,            -- 'rst_' + 12 hex digits
    target      BLOB NOT NULL,               -- the target directory, absolute
    staging     BLOB NOT NULL,               -- the prefix of its temporary file names
    created_ns  INTEGER NOT NULL
);

-- schema-version: 5
-- The trash as a product (issue 13). Each item keeps its mtime (a directory member's too) for
-- restore and export, a directory's number of files (so a listing need not count members), and
-- the listing's order has an index: newest first, by deletion time then row. Workspaces get a
-- trash retention: an age past which items expire (NULL: 30 days) and a byte quota (NULL: none).
-- A listing is ordered by time within what its filters select: a workspace's or a session's
-- items in time order come from their own indexes; a path prefix from `trash_by_path_only` when
-- it selects few items (ARCHITECTURE.md, "Trash").
ALTER TABLE trash ADD COLUMN mtime_ns INTEGER;
ALTER TABLE trash ADD COLUMN files INTEGER;
ALTER TABLE trash_entries ADD COLUMN mtime_ns INTEGER;
UPDATE trash SET files = (SELECT count(*) FROM trash_entries e WHERE e.trash_id = trash.id AND e.kind = 'file')
WHERE kind = 'dir';
CREATE INDEX trash_by_time ON trash(deleted_ns);
CREATE INDEX trash_by_workspace_time ON trash(workspace, deleted_ns);
CREATE INDEX trash_by_session_time ON trash(session, deleted_ns);
CREATE INDEX trash_by_path_only ON trash(path);
ALTER TABLE workspaces ADD COLUMN trash_age_s INTEGER;
ALTER TABLE workspaces ADD COLUMN trash_quota INTEGER;

-- schema-version: 6
-- The audit log as a transparency log (ARCHITECTURE.md, "Audit log"). `audit_tree` holds the
-- hash of every perfect subtree of the log's Merkle tree (RFC 6962): level 0 are the records'
-- leaf hashes, (l, i) covers records i*2^l+1 .. (i+1)*2^l. Appending a record inserts its leaf
-- and the subtrees it completes; nothing is ever rehashed. The nodes of records appended before
-- this version are computed when the manifest is opened. `audit_checkpoints` are the signed
-- notes of the log's size and root. The indexes serve the operators' queries (partial where
-- most records have no value: an append touches as few index pages as it can). Time needs none:
-- it never decreases along seq, so a time is found by a binary search over seq.
CREATE TABLE audit_tree (
    level       INTEGER NOT NULL,
    idx         INTEGER NOT NULL,
    hash        BLOB NOT NULL,
    PRIMARY KEY (level, idx)
) WITHOUT ROWID;
CREATE TABLE audit_checkpoints (
    size        INTEGER PRIMARY KEY,         -- records covered
    time_ns     INTEGER NOT NULL,
    root        BLOB NOT NULL,               -- the Merkle root of those records
    note        TEXT NOT NULL                -- the C2SP signed note (cosignatures included)
);
CREATE INDEX audit_by_session ON audit(session, seq) WHERE session IS NOT NULL;
CREATE INDEX audit_by_path ON audit(path, seq) WHERE path IS NOT NULL;
CREATE INDEX audit_by_dest ON audit(dest_path, seq) WHERE dest_path IS NOT NULL;
CREATE INDEX audit_by_actor ON audit(actor, seq);
CREATE INDEX audit_by_operation ON audit(operation, seq);

-- schema-version: 7
-- The path index (ARCHITECTURE.md, "Path index"): which version of each path the snapshots of a
-- workspace hold, as runs of consecutive snapshots, so `trove find` and `trove log` never walk
-- every snapshot. `path_index_snapshots` numbers a workspace's snapshots in order (ord from 0)
-- as far as the index covers them; a version row holds from snapshot `from_ord` to `to_ord`
-- (NULL: still in the newest indexed one). Only files and symlinks have rows. It is derived
-- data, filled lazily from tree diffs between consecutive snapshots and rebuilt for a workspace
-- whose snapshots no longer match its numbering (one was forgotten).
CREATE TABLE path_index_snapshots (
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    ord         INTEGER NOT NULL,
    snapshot    TEXT NOT NULL,
    PRIMARY KEY (workspace, ord)
) WITHOUT ROWID;
CREATE TABLE path_versions (
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    path        BLOB NOT NULL,               -- workspace-relative
    name        BLOB NOT NULL,               -- the last component, what a name search matches
    kind        TEXT NOT NULL,               -- file or symlink
    mode        INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    content     BLOB,                        -- a file's content id
    sha256      BLOB,
    target      BLOB,                        -- a symlink's target
    from_ord    INTEGER NOT NULL,
    to_ord      INTEGER
);
CREATE INDEX path_versions_by_path ON path_versions(workspace, path, from_ord);
CREATE INDEX path_versions_by_name ON path_versions(name);

-- schema-version: 8
-- The search index (ARCHITECTURE.md, "Search index"): the trigrams of every text file of the
-- snapshots searched so far, so a content search decompresses only the files that can match.
-- Derived data, built lazily by the first search of a snapshot that needs it. A file content
-- is a document, numbered in the order indexed; a run of indexing writes one segment of
-- postings (its number is its first document's), and segments are merged once there are many.
CREATE TABLE search_docs (
    doc         INTEGER PRIMARY KEY,
    id          BLOB NOT NULL UNIQUE,        -- the file's content id
    kind        INTEGER NOT NULL             -- 0 text (trigrams indexed), 1 binary (a search never
                                             -- matches it), 2 not indexed (always searched)
);
CREATE INDEX search_docs_unindexed ON search_docs(doc) WHERE kind = 2;
CREATE TABLE search_segments (
    segment     INTEGER PRIMARY KEY,         -- the first document it covers
    last_doc    INTEGER NOT NULL,
    grams       INTEGER NOT NULL,            -- rows in search_grams
    bytes       INTEGER NOT NULL             -- bytes of their posting lists
);
CREATE TABLE search_grams (
    gram        INTEGER NOT NULL,            -- three folded bytes, big-endian
    segment     INTEGER NOT NULL REFERENCES search_segments(segment),
    docs        BLOB NOT NULL,               -- ascending document numbers, delta-coded LEB128
    PRIMARY KEY (gram, segment)
) WITHOUT ROWID;
-- Snapshots every file of which has a document.
CREATE TABLE search_snapshots (
    snapshot    TEXT PRIMARY KEY REFERENCES snapshots(id)
) WITHOUT ROWID;

-- The stat cache becomes the directory cache (ARCHITECTURE.md, "Directory cache"): one record per
-- directory of a workspace's live tree, holding each entry's lstat fields, a file's content ids
-- and the directory's tree id, so an unchanged directory costs its stats and one comparison. The
-- per-file rows are dropped: a cache, it costs each workspace one re-read at its next snapshot.
DROP TABLE stat_cache;
CREATE TABLE dir_cache (
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    dir_key     BLOB NOT NULL,               -- first 16 bytes of BLAKE3(workspace-relative path)
    data        BLOB NOT NULL,               -- the record (ARCHITECTURE.md, "Directory cache")
    PRIMARY KEY (workspace, dir_key)
) WITHOUT ROWID;

-- schema-version: 9
-- Retention and garbage collection (ARCHITECTURE.md, "Retention" and "Garbage collection").
-- A workspace's snapshot retention policy (JSON, model/retention.rs; NULL keeps every snapshot),
-- and snapshots an operator pinned, which no policy forgets.
ALTER TABLE workspaces ADD COLUMN snapshot_retention TEXT;
CREATE TABLE pins (
    snapshot    TEXT PRIMARY KEY REFERENCES snapshots(id),
    pinned_ns   INTEGER NOT NULL,
    pinned_by   TEXT NOT NULL
) WITHOUT ROWID;
-- Garbage collection condemns what no root reaches, then deletes what is still condemned and
-- unreached once nothing in flight can have seen it as present (ARCHITECTURE.md, "Garbage
-- collection"). A condemned row is still read, but a writer looking for an existing copy
-- treats it as absent and stores its own, which clears the mark. Marks are epochs: every
-- condemnation (and every pack retirement) happens in an epoch of its own, so it orders
-- against the leases of operations in flight by the order their transactions committed.
CREATE TABLE gc_epochs (
    epoch       INTEGER PRIMARY KEY,
    time_ns     INTEGER NOT NULL
);
ALTER TABLE objects ADD COLUMN condemned INTEGER;   -- the epoch that condemned it
ALTER TABLE loose_objects ADD COLUMN condemned INTEGER;
ALTER TABLE trees ADD COLUMN condemned INTEGER;
ALTER TABLE chunk_lists ADD COLUMN condemned INTEGER;
CREATE INDEX objects_condemned ON objects(condemned) WHERE condemned IS NOT NULL;
CREATE INDEX loose_objects_condemned ON loose_objects(condemned) WHERE condemned IS NOT NULL;
CREATE INDEX trees_condemned ON trees(condemned) WHERE condemned IS NOT NULL;
CREATE INDEX chunk_lists_condemned ON chunk_lists(condemned) WHERE condemned IS NOT NULL;
-- A pack whose objects all moved (rewritten) or went (collected), from the epoch that did it:
-- its file is deleted once nothing in flight can still hold a location in it.
ALTER TABLE packs ADD COLUMN retired INTEGER;
-- Operations in flight (a snapshot, a tool's change, a restore): from before their first
-- lookup of an object to their end, with the newest epoch when they began. A row whose process
-- is gone is stale: garbage collection ignores and removes it.
CREATE TABLE gc_leases (
    id          INTEGER PRIMARY KEY,
    pid         INTEGER NOT NULL,
    pid_start   INTEGER NOT NULL,            -- the process's start time (/proc/PID/stat), against PID reuse
    epoch       INTEGER NOT NULL,
    started_ns  INTEGER NOT NULL,
    what        TEXT NOT NULL
);
-- Pack files the index does not know, with the epoch in which garbage collection first saw them.
CREATE TABLE gc_orphans (
    name        TEXT PRIMARY KEY,
    epoch       INTEGER NOT NULL
) WITHOUT ROWID;

-- schema-version: 10
-- Sessions keep what they were created with beyond the scope (JSON, model/session.rs
-- `SessionOptions`: the seed's `model` and `tools`, the sandbox root absolute paths map from,
-- whether blind overwrites are refused, typed tool results), and a session token each: the
-- bearer a client written against the sandbox file API uses on `/v1/file/*`, valid for that
-- session only and revoked when it ends. Stored as SHA-256 hashes only.
ALTER TABLE sessions ADD COLUMN options TEXT NOT NULL DEFAULT '{}';
CREATE TABLE session_tokens (
    hash        BLOB PRIMARY KEY,            -- SHA-256 of the token
    session     TEXT NOT NULL,
    created_ns  INTEGER NOT NULL,
    revoked_ns  INTEGER
) WITHOUT ROWID;
CREATE INDEX session_tokens_by_session ON session_tokens(session);

-- schema-version: 11
-- A directory's record is kept in parts of at most `manifest::dir_cache::PART` (960) bytes, one
-- row each, numbered from 0: a row that size stays within its page, where a whole record of a big
-- directory spilled into overflow pages and left their tails unused. Records written before stay
-- as they are (one part, however long) until their directory next changes.
CREATE TABLE dir_cache_parts (
    workspace   INTEGER NOT NULL REFERENCES workspaces(id),
    dir_key     BLOB NOT NULL,               -- first 16 bytes of BLAKE3(workspace-relative path)
    part        INTEGER NOT NULL,            -- 0, 1, 2...: the record is their data in this order
    data        BLOB NOT NULL,
    PRIMARY KEY (workspace, dir_key, part)
) WITHOUT ROWID;
INSERT INTO dir_cache_parts (workspace, dir_key, part, data) SELECT workspace, dir_key, 0, data FROM dir_cache;
DROP TABLE dir_cache;
ALTER TABLE dir_cache_parts RENAME TO dir_cache;

-- schema-version: 12
-- The zstd level a garbage collection's recompression (`trove gc --recompress`) encoded a pack's
-- blobs at, each blob kept as it was where that did not make it smaller; NULL for packs a
-- snapshot wrote, at the repository's `zstd_level`, and for packs rewritten from those.
ALTER TABLE packs ADD COLUMN level INTEGER;

-- schema-version: 13
-- Raw bytes of a bundle's members whose index rows a garbage collection deleted while other
-- members stayed: a bundle is one blob, so its dead members' bytes stay in its pack until a
-- collection rebuilds it from the live ones. The pack's dead share counts them (a bundle is
-- not all live because one member is), so the pack is rewritten; a rewrite rebuilds every bundle
-- whose header says it holds more than its live members. Rows go with their pack when it is
-- retired.
CREATE TABLE bundle_dead (
    pack        INTEGER NOT NULL,
    offset      INTEGER NOT NULL,            -- of the bundle's blob header within the pack
    dead_raw    INTEGER NOT NULL,            -- sum of the deleted members' raw lengths
    PRIMARY KEY (pack, offset)
) WITHOUT ROWID;

-- schema-version: 14
-- Upload temporaries in live trees (`.trove-up-<16 hex>.tmp` at a workspace's root), recorded
-- before the file is made and forgotten once it was renamed into place or removed. They are the
-- only files trove removes outside the journal (a crashed upload's, once its process is gone),
-- and the only ones of a live tree a snapshot leaves out as trove's own.
CREATE TABLE upload_temps (
    live_dir    BLOB NOT NULL,               -- the workspace directory, as its session names it
    name        BLOB NOT NULL,               -- the temporary's name at that directory's root
    pid         INTEGER NOT NULL,            -- the process writing it
    pid_start   INTEGER NOT NULL,            -- that process's start time, against pid reuse
    started_ns  INTEGER NOT NULL,
    PRIMARY KEY (live_dir, name)
) WITHOUT ROWID;

-- schema-version: 15
-- Deltas (blob format 2, ARCHITECTURE.md "Deltas"): an object stored against another, its
-- base, names it here, so garbage collection keeps every base a live version needs without
-- reading a blob, and `check` can tell a row from the blob it describes. Written in the
-- transaction that stores the delta; deleted with it.
CREATE TABLE object_bases (
    id          BLOB PRIMARY KEY,            -- the delta's object id (always a loose object)
    base        BLOB NOT NULL                -- the object it is stored against
) WITHOUT ROWID;
-- What leans on an object: one that does is only ever stored again whole.
CREATE INDEX object_bases_by_base ON object_bases(base);

-- schema-version: 16
-- The directory cache leaves the repository for the node-local cache (ARCHITECTURE.md,
-- "Directory cache"): it describes one machine's files, which no other host or copy of the
-- repository shares. Its records are dropped here; each workspace's next snapshot reads its files
-- once and writes them anew, outside the repository.
DROP TABLE dir_cache;
-- The generation the node-local caches must have been built against: `repair snapshots` bumps it
-- (a record may name a tree or content it found lost), and a cache of another generation is
-- emptied before it is used, on every machine.
CREATE TABLE cache_generation (generation INTEGER NOT NULL);
INSERT INTO cache_generation (generation) VALUES (0);

-- schema-version: 17
-- The audit log keeps half its bytes (ARCHITECTURE.md, "Audit record encoding"): a record
-- appended from this version on stores an empty `encoded` when its columns, read back, encode to
-- exactly the record's canonical encoding, which is then computed from them wherever it is
-- needed (verification, bundles, the tree's leaves). A record whose columns would not give it
-- again keeps it whole; the records of earlier versions keep theirs. Nothing to rewrite: a
-- binary that knows version 16 only would take the empty encodings for edited records, so
-- the version is raised and such a binary refuses the manifest.

-- schema-version: 18
-- Where this manifest stands in its repository's record log (ARCHITECTURE.md, "Record log"):
-- the last segment applied or written, 0 for none. Only a repository in a bucket has a log;
-- every other manifest keeps 0. Node-local: never logged.
CREATE TABLE log_position (seq INTEGER NOT NULL);
INSERT INTO log_position (seq) VALUES (0);
-- schema-version: 19
-- When an epoch's condemnations were all made: an epoch that condemns in batches is open (NULL)
-- until its last batch; one made with all it marks in its own transaction (a pack retirement)
-- is closed as it begins. An operation that began while the newest epoch was open may have seen
-- as present what that epoch went on to condemn.
ALTER TABLE gc_epochs ADD COLUMN closed_ns INTEGER;
-- No collection from before is still condemning: its epochs are closed.
UPDATE gc_epochs SET closed_ns = time_ns;
-- A collection's sweep in a repository in a bucket, recorded (and logged) before it marks: it
-- deletes what epochs up to `horizon` condemned. An operation on another host that saw only
-- epochs below a recorded horizon whole may rely on something that sweep deleted, so its
-- writes are refused (ARCHITECTURE.md, "Garbage collection", "In a bucket").
CREATE TABLE gc_sweeps (
    id          INTEGER PRIMARY KEY,
    horizon     INTEGER NOT NULL,
    time_ns     INTEGER NOT NULL
);
-- The collections of a repository in a bucket, one at a time across hosts (`gc.lock` is one
-- host's): a run not ended and begun less than `gc::RUN_STALE` ago (by the store's clock) keeps
-- others from starting.
CREATE TABLE gc_runs (
    id          INTEGER PRIMARY KEY,
    host        TEXT NOT NULL,
    started_ns  INTEGER NOT NULL,
    ended_ns    INTEGER
);
-- The cache generation is logged (ARCHITECTURE.md, "Record log"), so that `repair snapshots` on
-- one host empties every host's directory cache: its one row gets a key.
CREATE TABLE cache_generation_keyed (id INTEGER PRIMARY KEY CHECK (id = 0), generation INTEGER NOT NULL);
INSERT INTO cache_generation_keyed (id, generation) SELECT 0, COALESCE(MAX(generation), 0) FROM cache_generation;
DROP TABLE cache_generation;
ALTER TABLE cache_generation_keyed RENAME TO cache_generation;
-- The host serving a session in a bucket (a random id it keeps in its cache directory): only
-- that host's reaper ends it by ttl or idleness, since ending it snapshots a directory of that
-- host. NULL in a directory, and for sessions made before.
ALTER TABLE sessions ADD COLUMN host TEXT;
-- The public keys that signed the audit log's checkpoints (as `trove audit pubkey` prints them),
-- each with the host that registered it (NULL in a directory) and when: every host of a bucket
-- may sign with a key of its own (node-local), registered with its first checkpoint in the same
-- transaction and logged, so that every host verifies every host's checkpoints.
CREATE TABLE audit_keys (
    verifier    TEXT PRIMARY KEY,
    host        TEXT,
    added_ns    INTEGER NOT NULL
);
-- schema-version: 20
-- The objects of a tool change in flight on a host of a bucket that stored what nothing else
-- reaches (a pre-image or trash item read from the tree): the journal is the host's own, so
-- these rows, logged, make them roots of every host's collection until the plan is closed
-- (deleted with its journal row) or a collection drops them as abandoned, a week after it began
-- (`ops::gc::PLAN_ROOTS_KEPT_NS`).
CREATE TABLE plan_roots (
    plan        TEXT NOT NULL,
    object      BLOB NOT NULL,
    host        TEXT,
    created_ns  INTEGER NOT NULL,
    PRIMARY KEY (plan, object)
);
