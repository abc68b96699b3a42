//! Over HTTP (issue 11, item 5): a session scoped to `src/` cannot read outside it through a
//! symlink inside the workspace (to a file, to a directory, into another session's
//! `.sessions/` directory), and the live tree and its snapshot answer alike.

mod common;

use std::fs;
use std::os::unix::fs::symlink;

#[test]
fn links_never_carry_a_scoped_session_outside_its_scope() {
    let server = common::http::start(Some(common::http::TOKEN), &[]);
    let id = server.session(r#"{"workspace": "w", "file_access": {"read": ["src"], "write": []}}"#);
    let ws = server.workspace("w");
    fs::create_dir_all(ws.join("src")).expect("mkdir");
    fs::create_dir_all(ws.join("private")).expect("mkdir");
    fs::create_dir_all(ws.join(".sessions/sess_other")).expect("mkdir");
    fs::write(ws.join("src/a.rs"), "fn a() {}\n").expect("write");
    fs::write(ws.join("secret.txt"), "SECRET\n").expect("write");
    fs::write(ws.join("private/key"), "KEY\n").expect("write");
    fs::write(ws.join(".sessions/sess_other/notes"), "OTHER SESSION\n").expect("write");
    symlink("../secret.txt", ws.join("src/inlink")).expect("link");
    symlink("../private", ws.join("src/dirlink")).expect("link");
    symlink("../.sessions/sess_other/notes", ws.join("src/theirs")).expect("link");
    symlink("a.rs", ws.join("src/alias")).expect("link");

    let snap = server.call("POST", &format!("/v1/sessions/{id}/snapshots"), "");
    assert_eq!(snap.status, 201, "{}", snap.text());
    for source in ["live", "latest"] {
        for path in ["src/inlink", "src/dirlink/key", "src/theirs"] {
            let r = server.get(&format!("/api/sessions/{id}/files/{path}?source={source}"));
            assert_eq!(r.status, 403, "{source} {path}: {}", r.text());
            let body = r.text();
            assert!(!body.contains("SECRET") && !body.contains("KEY") && !body.contains("OTHER"), "{body}");
            assert_eq!(r.json()["message"].as_str(), Some(format!("'{path}' not in session scope").as_str()));
        }
        let r = server.get(&format!("/api/sessions/{id}/files/src/alias?source={source}"));
        assert_eq!((r.status, r.json()["content"].as_str()), (200, Some("fn a() {}\n")), "{source}: {}", r.text());
        // The tools see the same.
        let t = server.call(
            "POST",
            &format!("/v1/sessions/{id}/tools/read_file"),
            &format!(r#"{{"path": "src/dirlink/key", "source": "{source}"}}"#),
        );
        assert_eq!(t.json()["error"]["kind"].as_str(), Some("permission_denied"), "{}", t.text());
    }
}
