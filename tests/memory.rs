//! Memory stays flat whatever the request mix (issue 11, item 10): a server whose workspace
//! holds two 1 GiB files answers reads (text and base64), searches, a 1 GiB download, a snapshot, a
//! delete into the trash, a restore from it and a refused edit, several at once, and its peak
//! resident memory (the kernel's `VmHWM`) stays under 256 MiB. Before content moved as
//! streams, deleting one such file alone took over 2 GB.

mod common;

use std::fs::{self, File};
use std::io::Write;

use common::http::{start, Server};
use serde_json::Value;

const GIB: u64 = 1 << 30;

fn peak_rss_kib(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Downloads `target`, counting the body's bytes without keeping them: (status, length).
fn download_len(server: &Server, target: &str) -> (u16, u64) {
    use std::io::{BufRead, BufReader, Read};
    let mut s = std::net::TcpStream::connect(server.addr).expect("connect");
    let auth = format!("Bearer {}", common::http::TOKEN);
    common::http::send(&mut s, "GET", target, &[("Authorization", &auth)], b"");
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    r.read_line(&mut status_line).expect("status");
    let status = status_line.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status code");
    let mut length = None;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("header");
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse::<u64>().ok();
        }
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    while length.is_none_or(|l| got < l) {
        let n = r.read(&mut buf).expect("body");
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    (status, got)
}

fn tool(server: &Server, id: &str, name: &str, params: &str) -> Value {
    let r = server.call("POST", &format!("/v1/sessions/{id}/tools/{name}"), params);
    assert_eq!(r.status, 200, "{name}: {}", r.text());
    r.json()
}

#[test]
fn a_mix_of_requests_on_1_gib_files_keeps_the_server_under_256_mib() {
    let server = start(Some(common::http::TOKEN), &["--request-timeout", "600s"]);
    let id = server.session(r#"{"workspace": "big"}"#);
    let ws = server.workspace("big");
    // A sparse gigabyte of zeros (binary), and a gigabyte of text lines.
    File::create(ws.join("zeros.bin")).expect("create").set_len(GIB).expect("sparse");
    let mut text = File::create(ws.join("lines.txt")).expect("create");
    let block: String = (0..16_384).map(|i| format!("line {i:06} of a large text file, with some words\n")).collect();
    let mut written = 0u64;
    while written < GIB {
        text.write_all(block.as_bytes()).expect("write");
        written += block.len() as u64;
    }
    drop(text);
    fs::write(ws.join("small.rs"), "fn main() {}\n").expect("write");

    let written = written;
    let requests: Vec<(&str, String)> = vec![
        ("read_file", r#"{"path": "lines.txt", "startLine": 1000, "endLine": 2999}"#.into()),
        ("read_file", r#"{"path": "zeros.bin", "encoding": "base64"}"#.into()),
        ("search_files", r#"{"pattern": "main"}"#.into()),
        (
            "edit_file",
            r#"{"path": "lines.txt", "expectedSha256": "00", "edits": [{"oldText": "a", "newText": "b"}]}"#.into(),
        ),
    ];
    std::thread::scope(|s| {
        for (name, params) in &requests {
            let (server, id) = (&server, &id);
            s.spawn(move || tool(server, id, name, params));
        }
        s.spawn(|| {
            let (status, bytes) = download_len(&server, &format!("/api/sessions/{id}/files/lines.txt?download=1"));
            assert_eq!((status, bytes), (200, written), "the whole gigabyte, streamed");
        });
        s.spawn(|| {
            let r = server.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
            assert_eq!(r.status, 201, "snapshot: {}", r.text());
        });
        s.spawn(|| {
            let r = server.get(&format!("/api/sessions/{id}/files"));
            assert_eq!(r.status, 200, "list: {}", r.text());
        });
    });
    // One after the other: into the trash and back, both files.
    for name in ["lines.txt", "zeros.bin"] {
        let deleted = tool(&server, &id, "delete_file", &format!(r#"{{"path": "{name}"}}"#));
        assert_eq!(deleted["ok"], true, "{deleted}");
        let trash = deleted["data"]["trashId"].as_str().expect("trash id").to_string();
        let restored = tool(&server, &id, "restore_file", &format!(r#"{{"trashId": "{trash}"}}"#));
        assert_eq!(restored["ok"], true, "{restored}");
    }
    assert_eq!(fs::metadata(ws.join("lines.txt")).expect("restored").len(), written);
    let read = tool(&server, &id, "read_file", r#"{"path": "lines.txt", "startLine": 16384, "endLine": 16384}"#);
    assert_eq!(read["data"]["content"], "line 016383 of a large text file, with some words\n", "{read}");

    let peak = peak_rss_kib(server.pid());
    assert!(peak < 256 * 1024, "peak resident memory {} MiB", peak / 1024);
}

/// A server's pooled handles keep one cache of decoded bundles between them, not one each:
/// eight readers at once over 64 MiB of small files (sixteen bundles) read in different
/// orders. With a cache per handle (16 MiB of decoded bundles each) the server grew by 263 MiB
/// here; sharing one, by 68 to 90 MiB (its 16 MiB, the bundles the reads in flight decode, and
/// the allocator's arenas).
#[test]
fn concurrent_readers_share_one_cache_of_decoded_bundles() {
    const FILES: usize = 4096;
    const READERS: usize = 8;
    let server = start(Some(common::http::TOKEN), &[]);
    let id = server.session(r#"{"workspace": "many"}"#);
    let ws = server.workspace("many");
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..FILES {
        // Incompressible 16 KiB, so the bundles hold 4 MiB of members each.
        let bytes: Vec<u8> = (0..16 << 10)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        fs::create_dir_all(ws.join(format!("d{:02}", i / 256))).expect("mkdir");
        fs::write(ws.join(format!("d{:02}/f{i:04}.bin", i / 256)), &bytes).expect("write");
    }
    let snap = server.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
    assert_eq!(snap.status, 201, "snapshot: {}", snap.text());
    let snap = snap.json()["id"].as_str().expect("snapshot id").to_string();
    let before = common::http::rss_kib(server.pid());
    std::thread::scope(|s| {
        for reader in 0..READERS {
            let (server, snap) = (&server, &snap);
            s.spawn(move || {
                // Each reader starts in another bundle and walks through all of them.
                for k in 0..FILES / 16 {
                    let i = (reader * FILES / READERS + k * 7) % FILES;
                    let r = server.get(&format!("/v1/snapshots/{snap}/files/d{:02}/f{i:04}.bin?download=1", i / 256));
                    assert_eq!((r.status, r.body.len()), (200, 16 << 10), "file {i}: {}", r.text());
                }
            });
        }
    });
    let grown = common::http::rss_kib(server.pid()).saturating_sub(before);
    assert!(grown < 160 * 1024, "the server grew by {} MiB reading", grown / 1024);
}
