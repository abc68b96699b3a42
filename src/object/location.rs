//! Where a repository is, as `--repo` / `TROVE_REPO` name it: a local directory, or
//! `s3://BUCKET/PREFIX`, parsed once where the argument enters.

use std::ffi::OsStr;
use std::fmt;
use std::path::PathBuf;

use crate::base::error::{Error, Result};

/// A repository's location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on this machine.
    Local(PathBuf),
    /// Keys under `prefix` in an S3-compatible bucket.
    Bucket {
        /// The bucket's name.
        bucket: String,
        /// The keys' common first segments, `/`-separated without a slash at either end; empty
        /// for the bucket's root.
        prefix: String,
    },
}

impl Location {
    /// Parses `--repo`'s value. Text with a URL scheme (`name://`) must be `s3://BUCKET` or
    /// `s3://BUCKET/PREFIX` (a bucket name as S3 allows it, a prefix of key segments); anything
    /// else is a local path, as before.
    pub fn parse(repo: &OsStr) -> Result<Location> {
        let Some(text) = repo.to_str() else { return Ok(Location::Local(PathBuf::from(repo))) };
        let Some((scheme, rest)) = text.split_once("://") else { return Ok(Location::Local(PathBuf::from(repo))) };
        if !scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'+') {
            return Ok(Location::Local(PathBuf::from(repo)));
        }
        if scheme != "s3" {
            return Err(Error::invalid_argument(format!(
                "repository {text:?}: `{scheme}://` is not a store trove writes to; give a directory or s3://BUCKET/PREFIX"
            )));
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
            && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
            && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid_bucket {
            return Err(Error::invalid_argument(format!(
                "repository {text:?}: {bucket:?} is not a bucket name (3 to 63 lowercase letters, digits, `.` and `-`)"
            )));
        }
        let prefix = prefix.trim_end_matches('/');
        // Plain segments only: a prefix can never climb out of itself or need escaping.
        let plain = |s: &str| {
            s.starts_with(|c: char| c.is_ascii_alphanumeric())
                && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        if !prefix.is_empty() && !prefix.split('/').all(plain) {
            return Err(Error::invalid_argument(format!(
                "repository {text:?}: the prefix {prefix:?} must be `/`-separated names of ASCII letters, digits, `.`, `_` and `-`, each starting with a letter or digit"
            )));
        }
        Ok(Location::Bucket { bucket: bucket.to_owned(), prefix: prefix.to_owned() })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(path) => write!(f, "{}", path.display()),
            Location::Bucket { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::Bucket { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::ErrorKind;

    fn parse(s: &str) -> Result<Location> {
        Location::parse(OsStr::new(s))
    }

    #[test]
    fn a_repository_is_a_directory_or_a_bucket() {
        assert_eq!(parse("/srv/repo").expect("path"), Location::Local("/srv/repo".into()));
        assert_eq!(parse("s3:").expect("odd but a path"), Location::Local("s3:".into()));
        assert_eq!(
            parse("s3://bkt").expect("bucket"),
            Location::Bucket { bucket: "bkt".into(), prefix: String::new() }
        );
        let at = parse("s3://my.bucket-1/team/trove/").expect("prefix");
        assert_eq!(at, Location::Bucket { bucket: "my.bucket-1".into(), prefix: "team/trove".into() });
        assert_eq!(at.to_string(), "s3://my.bucket-1/team/trove");
        for bad in [
            "s3://",
            "s3://B",
            "s3://ab",
            "s3://bkt/../x",
            "s3://bkt/a//b",
            "s3://bkt/.x",
            "gs://bkt/x",
            "http://host/x",
        ] {
            assert_eq!(parse(bad).expect_err(bad).kind(), ErrorKind::InvalidArgument, "{bad}");
        }
    }
}
