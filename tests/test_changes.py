"""The actions a run takes on a file, and what each means to the writer, --check and the report."""

from __future__ import annotations

import pytest

from opgen.write.changes import Action, summarize

# action: (writes, stale, failed, to stderr, label, planned label)
TABLE = {
    Action.CREATE: (True, True, False, False, "created", "would be created"),
    Action.UPDATE: (True, True, False, False, "updated", "would be updated"),
    Action.UNCHANGED: (False, False, False, False, "unchanged", "unchanged"),
    Action.MERGE: (True, True, False, False, "merged", "would be merged"),
    Action.CONFLICT: (True, True, True, True, "conflict", "would conflict"),
    Action.UNRESOLVED: (False, True, True, True, "unresolved", "unresolved"),
    Action.EDITED: (False, True, True, True, "edited", "edited"),
    Action.OVERWRITE: (True, True, False, False, "overwritten", "would be overwritten"),
    Action.REMOVE: (False, True, False, False, "removed", "would be removed"),
    Action.KEEP: (False, False, False, False, "kept", "kept"),
    Action.SPARE: (False, True, False, True, "not removed", "not removed"),
    Action.ATTACH: (False, True, False, False, "re-attached", "re-attached"),
    Action.UNTRACKED: (False, True, True, True, "untracked", "untracked"),
}


def test_every_action_is_in_the_table() -> None:
    assert set(TABLE) == set(Action)


@pytest.mark.parametrize("action", list(Action))
def test_action_meaning(action: Action) -> None:
    writes, stale, failed, to_stderr, label, planned = TABLE[action]
    assert (action.writes, action.stale, action.failed, action.label, action.planned_label) == (writes, stale, failed, label, planned)
    assert action.to_stderr == to_stderr


def test_only_files_that_need_a_decision_stop_the_whole_run() -> None:
    assert {a for a in Action if a.stops} == {Action.EDITED, Action.UNTRACKED}


def test_summary_counts_the_usual_five_and_the_rest_when_present() -> None:
    assert summarize([Action.CREATE, Action.CREATE, Action.UNCHANGED]) == "2 created, 0 updated, 0 merged, 1 unchanged, 0 conflicts"
    line = summarize([Action.REMOVE, Action.EDITED, Action.CONFLICT])
    assert line == "0 created, 0 updated, 0 merged, 0 unchanged, 1 conflicts, 1 removed, 1 edited by hand"


def test_actions_compare_with_their_manifest_words() -> None:
    assert Action("merge") is Action.MERGE and Action.MERGE == "merge"
