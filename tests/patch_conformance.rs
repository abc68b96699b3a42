//! Conformance of the apply_patch format: each case is a file (or none), a patch as an agent
//! would write it, and either the workspace afterwards or the error kind and a part of its
//! message. Patches go through `parse` and then `apply_chunks`, the way the tool uses them.

use std::collections::{BTreeMap, BTreeSet};

use trove::patch::{apply_chunks, parse, Chunk, FileOp, Patch};
use trove::{Error, ErrorKind};

enum Want {
    /// The workspace after the patch, as `render` shows it.
    Text(&'static str),
    /// The error's kind and a part of its message.
    Fails(ErrorKind, &'static str),
}

struct Case {
    name: &'static str,
    original: Option<&'static [u8]>,
    patch: &'static str,
    want: Want,
    /// A part of the error's details serialized as JSON; "" when the case does not check them.
    detail: &'static str,
}

fn ok(name: &'static str, original: Option<&'static str>, patch: &'static str, want: &'static str) -> Case {
    Case { name, original: original.map(str::as_bytes), patch, want: Want::Text(want), detail: "" }
}

fn fails(
    name: &'static str,
    original: Option<&'static str>,
    patch: &'static str,
    kind: ErrorKind,
    part: &'static str,
) -> Case {
    Case { name, original: original.map(str::as_bytes), patch, want: Want::Fails(kind, part), detail: "" }
}

impl Case {
    fn with_detail(self, detail: &'static str) -> Case {
        Case { detail, ..self }
    }

    fn with_bytes(self, original: &'static [u8]) -> Case {
        Case { original: Some(original), ..self }
    }
}

const TWO_FNS: &str = "fn foo() {\n    return 1;\n}\n\nfn bar() {\n    return 1;\n}\n";
const ALPHA_BETA: &str = "fn alpha() {\n    one();\n}\n\nfn beta() {\n    two();\n}\n";
const IMPLS: &str = "impl A {\n    fn new() -> Self {\n        Self(0)\n    }\n}\nimpl B {\n    fn zero() -> Self {\n        Self(0)\n    }\n    fn new() -> Self {\n        Self(0)\n    }\n}\n";
const SIX: &str = "a\nb\nc\nd\ne\nf\n";

fn cases() -> Vec<Case> {
    use ErrorKind::{InvalidArgument, NotText, PatchFailed};
    vec![
        // The envelope and its leniency.
        fails(
            "missing_begin",
            None,
            "*** Update File: a.txt\n@@\n-x\n+y\n*** End Patch\n",
            InvalidArgument,
            "patch line 1: missing '*** Begin Patch'",
        ),
        fails("missing_end", None, "*** Begin Patch\n*** Add File: a.txt\n+x\n", InvalidArgument, "patch line 3: missing '*** End Patch'"),
        fails("empty_patch_text", None, " \n\n", InvalidArgument, "patch line 1: the patch is empty"),
        fails(
            "no_operations",
            None,
            "*** Begin Patch\n*** End Patch",
            InvalidArgument,
            "patch line 2: the patch has no file operations",
        ),
        ok(
            "heredoc_wrapper",
            Some("old\n"),
            "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch\nEOF\n",
            "new\n",
        ),
        ok(
            "heredoc_double_quoted_without_command",
            Some("old\n"),
            "<<\"PATCH\"\n*** Begin Patch\n*** Update File: a.txt\n-old\n+new\n*** End Patch\nPATCH",
            "new\n",
        ),
        ok(
            "crlf_patch_text",
            Some("a\nb\n"),
            "*** Begin Patch\r\n*** Update File: a.txt\r\n@@\r\n a\r\n-b\r\n+B\r\n*** End Patch\r\n",
            "a\nB\n",
        ),
        ok(
            "whitespace_around_markers",
            Some("a\n"),
            "\n\n  *** Begin Patch  \n*** Update File: a.txt\n@@\n-a\n+b\n\t*** End Patch \n\n",
            "b\n",
        ),
        // Headers and paths.
        fails(
            "unknown_header",
            None,
            "*** Begin Patch\n*** Rename File: a.txt\n*** End Patch",
            InvalidArgument,
            "patch line 2: unknown header '*** Rename File: a.txt'; the valid headers are '*** Add File: <path>'",
        ),
        fails(
            "text_where_a_header_belongs",
            None,
            "*** Begin Patch\nplease apply\n*** End Patch",
            InvalidArgument,
            "patch line 2: expected a file header ('*** Add File: <path>', '*** Delete File: <path>' or '*** Update File: <path>'), found 'please apply'",
        ),
        fails(
            "absolute_path",
            None,
            "*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch",
            InvalidArgument,
            "patch line 2: the path '/etc/passwd' is absolute",
        ),
        fails(
            "dotdot_path",
            None,
            "*** Begin Patch\n*** Update File: src/../../x\n@@\n-a\n+b\n*** End Patch",
            InvalidArgument,
            "patch line 2: the path 'src/../../x' has a '..' component",
        ),
        fails(
            "dotdot_move_to",
            None,
            "*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../a.txt\n*** End Patch",
            InvalidArgument,
            "patch line 3: the path '../a.txt' has a '..' component",
        ),
        fails("empty_path", None, "*** Begin Patch\n*** Add File:   \n*** End Patch", InvalidArgument, "patch line 2: the path is empty"),
        fails(
            "move_to_not_after_update",
            None,
            "*** Begin Patch\n*** Add File: a.txt\n+x\n*** Move to: b.txt\n*** End Patch",
            InvalidArgument,
            "patch line 4: '*** Move to: <path>' must come right after",
        ),
        fails(
            "end_of_file_outside_a_chunk",
            None,
            "*** Begin Patch\n*** Delete File: a.txt\n*** End of File\n*** End Patch",
            InvalidArgument,
            "patch line 3: '*** End of File' must close a chunk",
        ),
        // Bodies.
        fails(
            "bad_chunk_line",
            None,
            "*** Begin Patch\n*** Update File: src/a.rs\n@@ fn a()\n fn a() {\nfoo\n*** End Patch",
            InvalidArgument,
            "patch line 5: expected a line starting with ' ', '+' or '-' in the chunk for 'src/a.rs', found 'foo'",
        ),
        fails(
            "bad_add_line",
            None,
            "*** Begin Patch\n*** Add File: a.txt\n+one\ntwo\n*** End Patch",
            InvalidArgument,
            "patch line 4: expected a line starting with '+' in the contents of new file 'a.txt', found 'two'",
        ),
        fails(
            "empty_update",
            None,
            "*** Begin Patch\n*** Update File: a.txt\n*** End Patch",
            InvalidArgument,
            "patch line 2: '*** Update File: a.txt' has no chunks",
        ),
        fails(
            "chunk_without_lines",
            None,
            "*** Begin Patch\n*** Update File: a.txt\n@@ fn main\n*** End Patch",
            InvalidArgument,
            "patch line 3: the chunk for 'a.txt' has no lines",
        ),
        fails(
            "only_the_first_chunk_may_omit_at_at",
            None,
            "*** Begin Patch\n*** Update File: a.txt\n a\n-b\n+B\n*** End of File\n c\n*** End Patch",
            InvalidArgument,
            "patch line 7: expected '@@' to start the next chunk for 'a.txt', found ' c'",
        ),
        // Add, Delete, Move.
        ok("add_file_contents", None, "*** Begin Patch\n*** Add File: src/new.rs\n+fn main() {\n+\n+}\n*** End Patch", "fn main() {\n\n}\n"),
        ok("add_empty_file", None, "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch", ""),
        ok("delete_file", Some("x\n"), "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch", "(no files)"),
        ok(
            "move_with_a_change",
            Some("a\nb\n"),
            "*** Begin Patch\n*** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n a\n-b\n+B\n*** End Patch",
            "== src/b.rs ==\na\nB\n",
        ),
        ok("move_only_renames", Some("x\n"), "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b/a.txt\n*** End Patch", "== b/a.txt ==\nx\n"),
        ok(
            "several_operations_with_blank_lines_between",
            Some("keep\nold\n"),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n keep\n-old\n+new\n\n*** Add File: c.txt\n+c\n\n\n*** Add File: d.txt\n+d\n*** End Patch",
            "== a.txt ==\nkeep\nnew\n== c.txt ==\nc\n== d.txt ==\nd\n",
        ),
        // Finding the lines.
        ok("first_chunk_without_at_at", Some("one\ntwo\nthree\n"), "*** Begin Patch\n*** Update File: a.txt\n one\n-two\n+2\n three\n*** End Patch", "one\n2\nthree\n"),
        ok(
            "anchor_picks_the_later_function",
            Some(TWO_FNS),
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@ fn bar() {\n-    return 1;\n+    return 2;\n*** End Patch",
            "fn foo() {\n    return 1;\n}\n\nfn bar() {\n    return 2;\n}\n",
        ),
        ok(
            "multiple_anchors_narrow_in_order",
            Some(IMPLS),
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@ impl B {\n@@ fn new() -> Self {\n-        Self(0)\n+        Self(1)\n*** End Patch",
            "impl A {\n    fn new() -> Self {\n        Self(0)\n    }\n}\nimpl B {\n    fn zero() -> Self {\n        Self(0)\n    }\n    fn new() -> Self {\n        Self(1)\n    }\n}\n",
        ),
        fails(
            "anchor_not_found",
            Some(TWO_FNS),
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@ fn baz() {\n-    return 1;\n+    return 3;\n*** End Patch",
            PatchFailed,
            "'src/lib.rs', chunk 1 (patch line 3): could not find the anchor line '@@ fn baz() {'\nclosest match at line 5:\nfn bar() {",
        )
        .with_detail(r#""closest":[{"line":5,"text":"fn bar() {"},{"line":1,"text":"fn foo() {"}]"#),
        ok(
            "unified_diff_header_is_not_an_anchor",
            Some("x\ny\n"),
            "*** Begin Patch\n*** Update File: a.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n*** End Patch",
            "x\nY\n",
        ),
        ok(
            "eof_chunk_matches_the_last_occurrence",
            Some("x\nend\nx\nend\n"),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n x\n-end\n+END\n*** End of File\n*** End Patch",
            "x\nend\nx\nEND\n",
        ),
        // Each pass runs over the whole file before a looser one: a stricter match later wins.
        ok("exact_match_preferred_over_an_earlier_fuzzy_one", Some("x \nx\n"), "*** Begin Patch\n*** Update File: a.txt\n-x\n+y\n*** End Patch", "x \ny\n"),
        ok("trim_end_pass_before_trim_pass", Some("  x\nx  \n"), "*** Begin Patch\n*** Update File: a.txt\n-x\n+y\n*** End Patch", "  x\ny\n"),
        ok(
            "trim_pass_before_punctuation_pass",
            Some("“x”\n  \"x\"\n"),
            "*** Begin Patch\n*** Update File: a.txt\n-\"x\"\n+y\n*** End Patch",
            "“x”\ny\n",
        ),
        ok(
            "trim_end_match_keeps_the_file_context",
            Some("fn a() {   \n    x();\n}\n"),
            "*** Begin Patch\n*** Update File: a.rs\n@@\n fn a() {\n-    x();\n+    y();\n }\n*** End Patch",
            "fn a() {   \n    y();\n}\n",
        ),
        ok(
            "trim_match_for_reindented_context",
            Some("\tif ok {\n\t\trun();\n\t}\n"),
            "*** Begin Patch\n*** Update File: a.rs\n@@\n if ok {\n-    run();\n+\t\trun_fast();\n }\n*** End Patch",
            "\tif ok {\n\t\trun_fast();\n\t}\n",
        ),
        ok(
            "unicode_punctuation_match",
            Some("let s = “quoted”;\nlet t = ‘well‑known’ — dash;\nend\n"),
            "*** Begin Patch\n*** Update File: a.rs\n@@\n let s = \"quoted\";\n-let t = 'well-known' - dash;\n+let t = 'plain';\n*** End Patch",
            "let s = “quoted”;\nlet t = 'plain';\nend\n",
        ),
        ok("pure_insertion_appends_at_the_end", Some("a\nb\n"), "*** Begin Patch\n*** Update File: a.txt\n@@\n+c\n+d\n*** End Patch", "a\nb\nc\nd\n"),
        ok(
            "pure_insertion_after_the_anchor",
            Some(TWO_FNS),
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@ fn foo() {\n+    log();\n*** End Patch",
            "fn foo() {\n    log();\n    return 1;\n}\n\nfn bar() {\n    return 1;\n}\n",
        ),
        ok(
            "several_chunks_in_one_file",
            Some(SIX),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n a\n-b\n+B\n@@\n e\n-f\n+F\n*** End Patch",
            "a\nB\nc\nd\ne\nF\n",
        ),
        fails(
            "chunks_out_of_order_fail",
            Some(SIX),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n e\n-f\n+F\n@@\n a\n-b\n+B\n*** End Patch",
            PatchFailed,
            "'a.txt', chunk 2 (patch line 7): the context lines:\na\nb\nare at line 1, before line 7 where the search for this chunk started",
        )
        .with_detail(r#""chunk":2"#),
        fails(
            "overlapping_chunks_fail",
            Some("a\nb\nc\nd\n"),
            "*** Begin Patch\n*** Update File: a.txt\n@@\n a\n-b\n+B\n c\n@@\n c\n-d\n+D\n*** End Patch",
            PatchFailed,
            "are at line 3 and overlap lines 1-3 changed by chunk 1",
        ),
        fails(
            "no_match_reports_the_closest_lines",
            Some(ALPHA_BETA),
            "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n fn beta() {\n-    twoo();\n+    three();\n }\n*** End Patch",
            PatchFailed,
            "'src/lib.rs', chunk 1 (patch line 3): could not find the context lines:\nfn beta() {\n    twoo();\n}\nclosest match at line 5:\nfn beta() {\n    two();\n}",
        )
        .with_detail(r#""closest":[{"line":5,"text":"fn beta() {\n    two();\n}"},{"line":1,"text":"fn alpha() {\n    one();\n}"}],"patchLine":3,"path":"src/lib.rs""#),
        ok(
            "trailing_blank_context_line_is_retried_without",
            Some("foo\nbar\nqux\n"),
            "*** Begin Patch\n*** Update File: a.txt\n foo\n-bar\n+baz\n\n*** End Patch",
            "foo\nbaz\nqux\n",
        ),
        ok("empty_context_line_without_its_space", Some("a\n\nb\n"), "*** Begin Patch\n*** Update File: a.txt\n a\n\n-b\n+B\n*** End Patch", "a\n\nB\n"),
        // Bytes of the file.
        ok(
            "crlf_file_keeps_crlf",
            Some("a\r\nb\r\nc\r\n"),
            "*** Begin Patch\n*** Update File: a.txt\n a\n-b\n+B\n+B2\n c\n*** End Patch",
            "a\r\nB\r\nB2\r\nc\r\n",
        ),
        ok("mixed_endings_keep_each_line", Some("a\r\nb\nc\r\n"), "*** Begin Patch\n*** Update File: a.txt\n-c\n+C\n*** End Patch", "a\r\nb\nC\r\n"),
        ok("bom_is_kept", Some("\u{FEFF}a\nb\n"), "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n*** End Patch", "\u{FEFF}A\nb\n"),
        ok("no_final_newline_is_kept", Some("a\nb"), "*** Begin Patch\n*** Update File: a.txt\n a\n-b\n+B\n*** End Patch", "a\nB"),
        ok("empty_file_gets_a_final_newline", Some(""), "*** Begin Patch\n*** Update File: a.txt\n@@\n+first\n*** End Patch", "first\n"),
        fails(
            "non_utf8_file_is_not_text",
            None,
            "*** Begin Patch\n*** Update File: bin.dat\n-x\n+y\n*** End Patch",
            NotText,
            "'bin.dat' is not UTF-8 text (invalid byte at offset 1)",
        )
        .with_bytes(b"x\xff\xfe\n")
        .with_detail(r#""path":"bin.dat""#),
    ]
}

/// Runs `patch` on a workspace holding `original` at the path of the patch's first operation.
fn run(original: Option<&[u8]>, patch: &str) -> Result<Vec<u8>, Error> {
    let patch = parse(patch)?;
    let first = patch.ops.first().map(|op| op.path().to_string()).unwrap_or_default();
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    if let Some(bytes) = original {
        files.insert(first.clone(), bytes.to_vec());
    }
    let missing = |path: &str| Error::not_found(format!("test workspace has no '{path}'"));
    for op in &patch.ops {
        match op {
            FileOp::Add { path, contents, .. } => {
                files.insert(path.clone(), contents.clone().into_bytes());
            }
            FileOp::Delete { path, .. } => {
                files.remove(path).ok_or_else(|| missing(path))?;
            }
            FileOp::Update { path, move_to, chunks, .. } => {
                let old = files.remove(path).ok_or_else(|| missing(path))?;
                let new = apply_chunks(path, &old, chunks)?;
                files.insert(move_to.clone().unwrap_or_else(|| path.clone()), new);
            }
        }
    }
    Ok(render(&first, files))
}

/// The workspace after a patch: the file's bytes alone when it is the only file and still at
/// its path, else every file under a `== path ==` line.
fn render(first: &str, files: BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    if files.is_empty() {
        return b"(no files)".to_vec();
    }
    if files.len() == 1 {
        if let Some(bytes) = files.get(first) {
            return bytes.clone();
        }
    }
    let mut out = Vec::new();
    for (path, bytes) in files {
        out.extend_from_slice(format!("== {path} ==\n").as_bytes());
        out.extend_from_slice(&bytes);
    }
    out
}

fn check(case: &Case) -> Result<(), String> {
    let got = run(case.original, case.patch);
    match (&case.want, got) {
        (Want::Text(want), Ok(bytes)) if bytes == want.as_bytes() && case.detail.is_empty() => Ok(()),
        (Want::Text(want), Ok(bytes)) => {
            Err(format!("expected {want:?} (no details), got {:?}", String::from_utf8_lossy(&bytes)))
        }
        (Want::Text(_), Err(e)) => Err(format!("unexpected {} error: {}", e.kind(), e.message())),
        (Want::Fails(kind, part), Ok(bytes)) => {
            Err(format!("expected a {kind} error with {part:?}, got {:?}", String::from_utf8_lossy(&bytes)))
        }
        (Want::Fails(kind, part), Err(e)) => {
            let details = serde_json::to_string(&e.details()).map_err(|j| j.to_string())?;
            if e.kind() != *kind || !e.message().contains(part) {
                Err(format!("expected a {kind} error with {part:?}, got {}: {:?}", e.kind(), e.message()))
            } else if !details.contains(case.detail) {
                Err(format!("expected details with {:?}, got {details}", case.detail))
            } else {
                Ok(())
            }
        }
    }
}

#[test]
fn patch_conformance_table() {
    let cases = cases();
    let names: BTreeSet<&str> = cases.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    assert!(cases.len() >= 30, "only {} cases", cases.len());
    let failures: Vec<String> =
        cases.iter().filter_map(|case| check(case).err().map(|why| format!("{}: {why}", case.name))).collect();
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n\n"));
}

#[test]
fn patch_parse_keeps_structure_and_line_numbers() {
    let text = "*** Begin Patch\n\
                *** Add File: n.txt\n\
                +x\n\
                *** Delete File: d.txt\n\
                *** Update File: u.rs\n\
                *** Move to: v.rs\n\
                @@ impl B\n\
                @@ fn new\n\
                -old\n\
                +new\n\
                \x20keep\n\
                @@\n\
                +tail\n\
                *** End of File\n\
                *** End Patch";
    let patch = parse(text).expect("valid patch");
    let want = Patch {
        ops: vec![
            FileOp::Add { path: "n.txt".into(), contents: "x\n".into(), line: 2 },
            FileOp::Delete { path: "d.txt".into(), line: 4 },
            FileOp::Update {
                path: "u.rs".into(),
                move_to: Some("v.rs".into()),
                chunks: vec![
                    Chunk {
                        anchors: vec!["impl B".into(), "fn new".into()],
                        old_lines: vec!["old".into(), "keep".into()],
                        new_lines: vec!["new".into(), "keep".into()],
                        eof: false,
                        line: 7,
                    },
                    Chunk { anchors: vec![], old_lines: vec![], new_lines: vec!["tail".into()], eof: true, line: 12 },
                ],
                line: 5,
            },
        ],
    };
    assert_eq!(patch, want);
    let paths: Vec<(&str, usize)> = patch.ops.iter().map(|op| (op.path(), op.line())).collect();
    assert_eq!(paths, [("n.txt", 2), ("d.txt", 4), ("u.rs", 5)]);
}

#[test]
fn patch_failure_leaves_the_input_alone_and_names_the_chunk() {
    // The second chunk fails, so nothing of the first may show: apply_chunks returns no bytes.
    let patch =
        parse("*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+A\n@@\n-zzz\n+y\n*** End Patch").expect("valid patch");
    let FileOp::Update { chunks, .. } = &patch.ops[0] else { panic!("an update") };
    let err = apply_chunks("a.txt", b"a\nb\n", chunks).expect_err("second chunk cannot match");
    assert_eq!(err.kind(), ErrorKind::PatchFailed);
    let details = err.details().expect("details");
    assert_eq!(details["chunk"], 2);
    assert_eq!(details["patchLine"], 6);
    assert_eq!(details["path"], "a.txt");
    assert!(err.message().contains("no similar lines in the file"), "{}", err.message());
}
