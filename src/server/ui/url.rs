//! The review pages' URLs: query strings built from a page's state, and the filter values a
//! URL carries read back (blank means absent).

/// `v` as a URL query value.
pub fn encode(v: &str) -> String {
    form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// `path` with the query of `pairs` (none: the path alone).
pub fn with_query<'a>(path: &str, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{query}")
    }
}

/// `&node=NAME` for a link to something read through `repo` when that is a handle over another
/// node's log (a review host's page of it), else nothing: the pages that read stored content or
/// one node's audit log take the node so.
pub fn node_param(repo: &crate::repo::Repo) -> String {
    match repo.node().filter(|_| repo.is_other_node()) {
        Some(node) => format!("&node={}", encode(node)),
        None => String::new(),
    }
}

/// A filter's value, trimmed; `None` when it is absent or blank (an empty form field).
pub fn some(s: &Option<String>) -> Option<String> {
    s.as_ref().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_encoded_and_an_empty_query_is_left_out() {
        assert_eq!(encode("src/a b&c.rs"), "src%2Fa+b%26c.rs");
        assert_eq!(with_query("/ui/audit", []), "/ui/audit");
        assert_eq!(with_query("/ui/audit", [("path", "a/b"), ("follow", "1")]), "/ui/audit?path=a%2Fb&follow=1");
        assert_eq!(some(&Some("  ".into())), None);
        assert_eq!(some(&Some(" x ".into())).as_deref(), Some("x"));
    }
}
