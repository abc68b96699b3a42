//! Typed ids: sessions, snapshots, trash items, API tokens and journal plans, each its own
//! newtype, parsed once where it enters (a request, a command line, a manifest row), so a
//! malformed one is refused there with its kind named, and a session id can never be passed
//! where a snapshot id is meant.
//!
//! All of them are opaque ASCII text of letters, digits, `_` and `-`, 1 to 64 bytes: nothing
//! that could be read as a path or break out of a URL, a log line or a SQL literal. A snapshot id
//! is stricter: the 64 lowercase hex digits of its BLAKE3 hash (a user may still name a snapshot
//! by a prefix; that reference is resolved against the manifest, see `ops::view`).

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::base::error::{Error, Result};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 64;

fn check_text(kind: &str, s: &str) -> Result<()> {
    let ok_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'-';
    if s.is_empty() || s.len() > MAX_ID_LEN || !s.bytes().all(ok_char) {
        return Err(Error::invalid_argument(format!(
            "'{}' is not a {kind} id: ids are 1 to {MAX_ID_LEN} letters, digits, '_' or '-'",
            s.escape_debug()
        )));
    }
    Ok(())
}

/// A node's name: a host name's lowercase letters, digits, `.`, `_` and `-`, 1 to 63 bytes, not
/// starting with `.` (it names a directory of keys in a bucket, `nodes/<name>/`, and files of a
/// cache directory, which may not tell case apart).
fn check_node(kind: &str, s: &str) -> Result<()> {
    let ok_char = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-');
    if s.is_empty() || s.len() > 63 || s.starts_with('.') || !s.bytes().all(ok_char) {
        return Err(Error::invalid_argument(format!(
            "'{}' is not a {kind} name: a node is named by 1 to 63 lowercase letters, digits, '.', '_' or '-', not starting with '.' (--node, TROVE_NODE)",
            s.escape_debug()
        )));
    }
    Ok(())
}

fn check_hex64(kind: &str, s: &str) -> Result<()> {
    if s.len() != 64 || !s.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) {
        return Err(Error::invalid_argument(format!(
            "'{}' is not a {kind} id: a full id is 64 lowercase hex digits",
            s.escape_debug()
        )));
    }
    Ok(())
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $check:path, $pattern:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Parses an id, refusing (`invalid_argument`, naming the text) one that is malformed.
            pub fn parse(s: &str) -> Result<$name> {
                $check($kind, s)?;
                Ok($name(s.to_string()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<$name> {
                $name::parse(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<$name, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&s).map_err(serde::de::Error::custom)
            }
        }

        impl From<$name> for serde_json::Value {
            fn from(id: $name) -> serde_json::Value {
                serde_json::Value::String(id.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({"type": "string", "pattern": $pattern})
            }
        }

        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::Borrowed(ValueRef::Text(self.0.as_bytes())))
            }
        }

        // A malformed id in a row is a conversion failure, which the manifest reports as
        // `corrupt` naming the table, never a value silently dropped.
        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<$name> {
                let s = value.as_str()?;
                $name::parse(s).map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        }
    };
}

typed_id!(
    /// A session: `sess_` and 12 random hex digits for the ones trove creates.
    SessionId,
    "session",
    check_text,
    "^[A-Za-z0-9_-]{1,64}$"
);
typed_id!(
    /// A snapshot: the BLAKE3 hash (64 hex digits) of its workspace, root tree, time and parent.
    SnapshotId,
    "snapshot",
    check_hex64,
    "^[0-9a-f]{64}$"
);
typed_id!(
    /// A trash item: `trash_` and 12 random hex digits.
    TrashId,
    "trash",
    check_text,
    "^[A-Za-z0-9_-]{1,64}$"
);
typed_id!(
    /// An API token's public id (`tok_` and a prefix of its hash), never the secret itself.
    TokenId,
    "token",
    check_text,
    "^[A-Za-z0-9_-]{1,64}$"
);
typed_id!(
    /// A tool journal plan: the unit of one all-or-nothing multi-file change.
    PlanId,
    "plan",
    check_text,
    "^[A-Za-z0-9_-]{1,64}$"
);

typed_id!(
    /// A node of a fleet writing one bucket (`--node`, `TROVE_NODE`; the host name unless set):
    /// it writes its own log, `nodes/<name>/log/`.
    NodeName,
    "node",
    check_node,
    "^[a-z0-9_-][a-z0-9._-]{0,62}$"
);

impl SnapshotId {
    /// The id of a snapshot from its BLAKE3 hash.
    pub fn from_hash(hash: &blake3::Hash) -> SnapshotId {
        SnapshotId(hash.to_hex().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;

    #[test]
    fn ids_refuse_what_is_not_one_and_name_it() {
        for bad in ["", "../etc", "a b", "sess_\u{e9}", &"x".repeat(65)] {
            let e = SessionId::parse(bad).expect_err("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
            assert!(e.to_string().contains("session id"), "{e}");
        }
        assert!(SessionId::parse("sess_0123456789ab").is_ok());
        assert!(SessionId::parse("3f2b8c1e-1d2a-4b7e-9a0c-5e6f7a8b9c0d").is_ok());
        assert!(SnapshotId::parse("abc").is_err());
        assert!(SnapshotId::parse(&"A".repeat(64)).is_err());
        assert!(SnapshotId::parse(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn ids_round_trip_through_serde_and_refuse_bad_json() {
        let id = TrashId::parse("trash_00aa11bb22cc").expect("ok");
        let json = serde_json::to_string(&id).expect("ok");
        assert_eq!(json, "\"trash_00aa11bb22cc\"");
        assert_eq!(serde_json::from_str::<TrashId>(&json).expect("ok"), id);
        assert!(serde_json::from_str::<TrashId>("\"a/b\"").is_err());
    }

    #[test]
    fn a_malformed_id_in_a_row_is_a_conversion_failure() {
        let conn = rusqlite::Connection::open_in_memory().expect("ok");
        let bad: rusqlite::Result<SessionId> = conn.query_row("SELECT 'no/slash'", [], |r| r.get(0));
        assert!(matches!(bad, Err(rusqlite::Error::FromSqlConversionFailure(..))));
        let good: SessionId = conn.query_row("SELECT 'sess_1'", [], |r| r.get(0)).expect("ok");
        assert_eq!(good, "sess_1");
    }
}
