//! A parsed patch: its file operations and their chunks, as `parse` builds them and
//! `apply_chunks` uses them.

/// A parsed patch: its file operations in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// The file sections, in order.
    pub ops: Vec<FileOp>,
}

/// One file section of a patch; `line` is the 1-based patch line of its `***` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOp {
    /// `*** Add File: path` followed by `+` lines.
    Add {
        /// The file to create, workspace-relative as written in the patch.
        path: String,
        /// The new file's text: each `+` line without its prefix and with "\n" after it, so a
        /// zero-line Add is the empty file.
        contents: String,
        /// The patch line of the header.
        line: usize,
    },
    /// `*** Delete File: path`
    Delete {
        /// The file to delete.
        path: String,
        /// The patch line of the header.
        line: usize,
    },
    /// `*** Update File: path`, optional `*** Move to: path`, then chunks.
    Update {
        /// The file to change.
        path: String,
        /// Where to move it, if the section says so.
        move_to: Option<String>,
        /// The changes, in file order.
        chunks: Vec<Chunk>,
        /// The patch line of the header.
        line: usize,
    },
}

impl FileOp {
    /// The file the section names first.
    pub fn path(&self) -> &str {
        match self {
            FileOp::Add { path, .. } | FileOp::Delete { path, .. } | FileOp::Update { path, .. } => path,
        }
    }

    /// The 1-based patch line of the section's header.
    pub fn line(&self) -> usize {
        match self {
            FileOp::Add { line, .. } | FileOp::Delete { line, .. } | FileOp::Update { line, .. } => *line,
        }
    }
}

/// One change inside an Update: lines to find in the file and the lines that replace them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The text after each `@@ ` line that opened the chunk: lines to seek, in order, before
    /// looking for `old_lines`.
    pub anchors: Vec<String>,
    /// Context (' ') and removed ('-') lines, without their prefix.
    pub old_lines: Vec<String>,
    /// Context (' ') and added ('+') lines, without their prefix.
    pub new_lines: Vec<String>,
    /// `*** End of File` closed the chunk: `old_lines` are matched at the end of the file first.
    pub eof: bool,
    /// 1-based line number in the patch text where the chunk starts (its first `@@` line, or
    /// its first diff line).
    pub line: usize,
}
