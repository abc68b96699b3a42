# schemathesis hooks for .ci/api-conformance: what the run changes in the requests it generates,
# and why. Loaded through SCHEMATHESIS_HOOKS.
#
# A watcher's wait and long poll hold the request open until an event or their `timeout`
# (the document's bounds: up to 300 s and 60 s; absent or null, 30 s for a wait). Generated
# timeouts within those bounds, and absent or null ones, become a fraction of a second before
# the request is sent, so a run of hundreds of requests ends in minutes; the value stays valid,
# so every check (status, content type, schema, acceptance) still applies to the answer.
# Out-of-bounds values are left alone: the refusal is what those requests test.
import schemathesis

# Each route's upper bound, as the document states it.
BOUNDS = {"/file/watch/wait": 300, "/poll": 60}
SHORT = 0.2


@schemathesis.hook
def before_call(context, case, **kwargs):
    path = case.operation.path
    bound = next((b for end, b in BOUNDS.items() if path.endswith(end)), None)
    if bound is None or not isinstance(case.body, dict):
        return
    timeout = case.body.get("timeout")
    if timeout is None:
        case.body["timeout"] = SHORT
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 <= timeout <= bound:
        case.body["timeout"] = min(timeout, SHORT)
