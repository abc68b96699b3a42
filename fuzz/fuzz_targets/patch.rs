//! The apply_patch envelope on arbitrary text (what an agent sends): parsing never panics, and
//! what parses applies, or fails with an error, to a fixed file and to a file made from the
//! input itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trove::patch::{apply_chunks, parse, FileOp};

const FILE: &str = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n\n// “quoted” end\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(patch) = parse(text) else { return };
    for op in &patch.ops {
        if let FileOp::Update { path, chunks, .. } = op {
            let _ = apply_chunks(path, FILE.as_bytes(), chunks);
            let _ = apply_chunks(path, data, chunks);
            let _ = apply_chunks(path, b"", chunks);
        }
    }
});
