//! Who runs a tool: the session, its scope and the actor, passed to every tool.

use crate::model::scope::Scope;
use crate::model::session::Session;

/// Who calls, on which session.
pub struct Caller<'a> {
    pub session: &'a Session,
    pub scope: Scope,
    pub actor: &'a str,
}
