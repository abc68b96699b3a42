//! apply_patch: parsing the `*** Begin Patch` envelope and applying its chunks to one file's text.
//!
//! The grammar is the one coding agents are trained to write (OpenAI Codex's `apply_patch`):
//!
//! ```text
//! patch  := "*** Begin Patch" NL op+ "*** End Patch"
//! op     := "*** Add File: " path NL ("+" text NL)*
//!         | "*** Delete File: " path NL
//!         | "*** Update File: " path NL ["*** Move to: " path NL] chunk*
//! chunk  := ("@@" [" " anchor] NL)* line+ ["*** End of File" NL]
//! line   := (" " | "-" | "+") text NL
//!         | NL                                  an empty line is an empty context line
//! ```
//!
//! Only the first chunk of an Update may leave out its `@@` line; an anchor is a line to find
//! before the chunk's own lines (`@@ fn main`). The parser is lenient where agents are sloppy in
//! harmless ways (a shell heredoc around the patch, CRLF, blank lines and spaces around the
//! markers, a unified-diff `@@ -1,3 +1,4 @@` header) and strict where a guess could edit the
//! wrong lines. Applying finds every chunk in file order, exactly first and then comparing with
//! looser whitespace and punctuation, and builds the output only once all chunks are placed.

mod apply;
mod ast;
mod parse;

pub use apply::apply_chunks;
pub use ast::{Chunk, FileOp, Patch};
pub use parse::parse;
