//! Who runs a tool: the repository, the session, its scope and the actor, passed to every tool.

use crate::model::scope::Scope;
use crate::model::session::Session;
use crate::ops::journal::Author;
use crate::repo::Repo;

/// Who calls, on which session, through which repository.
pub struct Caller<'a> {
    pub repo: &'a Repo,
    pub session: &'a Session,
    pub scope: Scope,
    pub actor: &'a str,
}

impl Caller<'_> {
    /// The caller as the author of a change: the session's workspace, within its scope.
    pub fn author(&self) -> Author<'_> {
        Author {
            workspace: &self.session.workspace,
            session: Some(&self.session.id),
            actor: self.actor,
            scope: &self.scope,
        }
    }
}
