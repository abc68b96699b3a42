"""A client generated from trove's /openapi.json by openapi-python-client, used as a team would:
create a session, work in it through the tools and the sandbox file API, snapshot, delete a file,
end the session, then review it afterwards (sessions with ended ones, the ended session's files,
its diff and changes, the trash, the audit log). Every answer must parse into the generated
models (the client raises on one that does not match the document) and say what was done.

Run by .ci/generated-client: python generated_client.py BASE_URL OPERATOR_TOKEN, with the
generated package `trove_client` on PYTHONPATH.
"""

import sys

from trove_client import AuthenticatedClient
from trove_client.api.default import (
    delete_v1_sessions_by_id,
    get_v1_audit,
    get_v1_sessions,
    get_v1_sessions_by_id_changes,
    get_v1_sessions_by_id_diff,
    get_v1_sessions_by_id_files,
    get_v1_sessions_by_id_files_by_path,
    get_v1_trash,
    post_v1_file_read,
    post_v1_file_write,
    post_v1_sessions,
    post_v1_sessions_by_id_snapshots,
    post_v1_sessions_by_id_tools_delete_file,
    post_v1_sessions_by_id_tools_read_file,
    post_v1_sessions_by_id_tools_write_file,
)
from trove_client.models import (
    DeleteFile,
    ReadFile,
    ReadRequest,
    SessionSpec,
    WriteFile,
    WriteRequest,
)


def expect(value, kind, what):
    """`value` must have parsed into the generated model `kind`, else the client dropped it."""
    if not isinstance(value, kind):
        raise SystemExit(f"{what}: expected a {kind.__name__}, got {value!r}")
    return value


def main(base, token):
    operator = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)

    # A session, and work in it through the tools (operator token) and the file API (its own).
    created = post_v1_sessions.sync(client=operator, body=SessionSpec(workspace="generated", persistent=True))
    session = created.id
    agent = AuthenticatedClient(base_url=base, token=created.session_token, raise_on_unexpected_status=True)
    for path, text in [("src/app.py", "print('hello')\n"), ("notes.md", "# notes\n"), ("old.txt", "old\n")]:
        reply = post_v1_sessions_by_id_tools_write_file.sync(
            session, client=operator, body=WriteFile(path=path, content=text, expected_sha_256="")
        )
        if not reply.ok:
            raise SystemExit(f"write_file {path}: {reply.to_dict()}")
    read = post_v1_sessions_by_id_tools_read_file.sync(session, client=operator, body=ReadFile(path="src/app.py"))
    assert read.ok and read.data.content == "print('hello')\n", read.to_dict()

    written = post_v1_file_write.sync(client=agent, body=WriteRequest(file="/workspace/notes.md", content="# notes\nmore\n"))
    assert written.success, written.to_dict()
    back = post_v1_file_read.sync(client=agent, body=ReadRequest(file="notes.md"))
    assert back.success and back.data.content == "# notes\nmore\n", back.to_dict()
    missing = post_v1_file_read.sync(client=agent, body=ReadRequest(file="nowhere.txt"))
    assert not missing.success and missing.data.error_type == "not_found", missing.to_dict()

    expect(post_v1_sessions_by_id_snapshots.sync(session, client=operator), object, "a snapshot")
    deleted = post_v1_sessions_by_id_tools_delete_file.sync(session, client=operator, body=DeleteFile(path="old.txt"))
    assert deleted.ok and deleted.data.trash_id, deleted.to_dict()

    # The session ends; everything is still there to review.
    delete_v1_sessions_by_id.sync(session, client=operator)
    everyone = get_v1_sessions.sync(client=operator, include_ended=True)
    mine = [s for s in everyone if s.id == session]
    assert mine and mine[0].status.value == "ended", [s.to_dict() for s in everyone]

    files = get_v1_sessions_by_id_files.sync(session, client=operator)
    assert files.source.value == "snapshot", files.to_dict()
    assert [f.path for f in files.files] == ["notes.md", "src/app.py"], files.to_dict()
    one = get_v1_sessions_by_id_files_by_path.sync(session, "src/app.py", client=operator)
    assert one.content == "print('hello')\n", one.to_dict()

    diff = get_v1_sessions_by_id_diff.sync(session, client=operator, patch=True)
    assert {e.path for e in diff.entries} == {"notes.md", "src/app.py"}, diff.to_dict()
    changes = get_v1_sessions_by_id_changes.sync(session, client=operator)
    assert not changes.active and len(changes.trash) == 1, changes.to_dict()
    assert all(e.records for e in changes.entries), changes.to_dict()

    trash = get_v1_trash.sync(client=operator, session=session)
    assert [t.path for t in trash.items] == ["old.txt"], trash.to_dict()

    log = get_v1_audit.sync(client=operator, session=session, after=0)
    operations = {r.operation for r in log.records}
    assert {"session_create", "write_file", "delete_file", "session_end"} <= operations, operations
    print(f"generated client: {len(log.records)} audit records, {len(changes.entries)} changed paths, all parsed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
