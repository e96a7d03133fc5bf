"""A client generated from the operator's /openapi.json by openapi-python-client, used without
hand edits: lists restarts with filters and pages through them, lists the downtime in /missed and
transitions by kind, and gets a refused parameter back as the documented ErrorBody.

    python client_check.py <dir holding the generated eru_client package> <base URL> <namespace>
"""

import datetime
import sys

sys.path.insert(0, sys.argv[1])
base_url, namespace = sys.argv[2], sys.argv[3]

from eru_client import Client  # noqa: E402
from eru_client.api.default import list_history, list_missed, list_transitions  # noqa: E402
from eru_client.models import (  # noqa: E402
    ErrorBody,
    HistoryPage,
    ListHistoryOutcome,
    ListMissedReason,
    ListTransitionsKind,
    MissedPage,
    Outcome,
    Reason,
    SlotResult,
    TransitionPage,
)

client = Client(base_url=base_url, raise_on_unexpected_status=True)
hour_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)

first = list_history.sync(
    client=client,
    namespace=namespace,
    name="web",
    target="web",
    outcome=ListHistoryOutcome.SUCCEEDED,
    since=hour_ago,
    limit=2,
)
assert isinstance(first, HistoryPage), first
assert len(first.items) == 2, first
assert all(i.outcome == Outcome.SUCCEEDED and i.name == "web" for i in first.items), first
assert all(i.finished_at is not None and i.duration_seconds is not None for i in first.items), first
assert first.items[0].slot > first.items[1].slot, "newest first"
assert isinstance(first.next_cursor, str), first

second = list_history.sync(
    client=client, namespace=namespace, name="web", outcome=ListHistoryOutcome.SUCCEEDED,
    since=hour_ago, limit=2, cursor=first.next_cursor,
)
assert isinstance(second, HistoryPage) and second.items, second
assert second.items[0].slot < first.items[-1].slot, "the next page continues after the first"

missed = list_missed.sync(
    client=client, namespace=namespace, reason=ListMissedReason.OPERATOR_DOWN, limit=1000
)
assert isinstance(missed, MissedPage) and missed.items, missed
down = missed.items[0]
assert down.reason == Reason.OPERATOR_DOWN and down.result == SlotResult.MISSED, down
assert down.window is not None and down.window.start < down.slot <= down.last_slot < down.window.end, down

transitions = list_transitions.sync(
    client=client, kind=ListTransitionsKind.ERU, namespace=namespace, name="web", limit=5
)
assert isinstance(transitions, TransitionPage) and transitions.items, transitions
assert all(t.kind.value == "Eru" for t in transitions.items), transitions

refused = list_history.sync_detailed(client=client, limit=0)
assert refused.status_code == 400 and isinstance(refused.parsed, ErrorBody), refused
assert refused.parsed.error.startswith("limit:"), refused.parsed

print(
    f"generated client: {len(first.items) + len(second.items)} restarts over 2 pages, "
    f"{len(missed.items)} operator_down records, {len(transitions.items)} transitions; "
    f"400 -> ErrorBody({refused.parsed.error!r})"
)
