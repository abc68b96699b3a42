//! Patterns and scopes from arbitrary text (what a client sends): globs and regexes within the
//! limits compile or fail with an error, never a panic or a deep recursion; exclusion lists,
//! scopes and path rules answer for any input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::{FileAccess, Scope};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        let _ = trove::path::components(data);
        return;
    };
    let mode = data.first().copied().unwrap_or(0);
    if trove::pattern::check_glob(text).is_ok() {
        let _ = trove::pattern::glob(text, mode & 1 == 1, mode & 2 == 2);
    } else {
        assert!(trove::pattern::glob(text, false, true).is_err(), "a pattern past the limits is refused");
    }
    let _ = trove::pattern::regex(text, mode & 4 == 4);
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    if let Ok(ex) = trove::Excludes::new(&lines) {
        for l in &lines {
            let _ = ex.is_excluded(l.as_bytes(), l.rsplit('/').next().unwrap_or("").as_bytes(), mode & 8 == 8);
        }
    }
    let (read, write) = lines.split_at(lines.len() / 2);
    let access = FileAccess { read: read.to_vec(), write: write.to_vec() };
    if let Ok(scope) = Scope::new("sess_000000000001", &access) {
        for l in &lines {
            let p = l.as_bytes();
            if scope.can_write(p) {
                assert!(scope.can_read(p), "write implies read");
            }
            let _ = scope.dir_visible(p);
        }
    }
    if let Ok(parts) = trove::path::components(data) {
        assert!(parts.iter().all(|c| !c.is_empty() && *c != b".." && *c != b"."));
    }
});
