//! URL paths as the server decodes them (`path::from_url`), on arbitrary text: never a panic,
//! and whatever is accepted is a workspace path that cannot leave the workspace.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(path) = trove::path::from_url(text) {
        assert!(!path.is_empty() && path[0] != b'/', "relative and not empty");
        assert!(!path.contains(&0) && !path.contains(&b'\\'), "no NUL, no backslash");
        for part in path.split(|&b| b == b'/') {
            assert!(!part.is_empty() && part != b".." && part != b".", "no '..', '.' or empty component");
            assert!(part.len() <= trove::path::MAX_NAME);
        }
        assert_eq!(trove::path::normalize_nonempty(&path).ok().as_deref(), Some(path.as_slice()), "already normal");
    }
});
