"""A cycle too big for one transaction commits in parts and resumes exactly (ADR 0020).

The child (``chunked_child.py``) runs W1 on SQLite with ``commit_every`` small enough
that every cycle commits in several transactions, and ends itself with ``os._exit(137)``
right after its K-th commit: the board then holds part of a cycle. Resumed, the run must
end on the very board an undisturbed run writes (the same digest), for every K, and
after a crash of the resumed run too. Negative control: a resume that ignores where the
interrupted cycle had got to (``--variant forgetful``) must end on another board.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pybb import Blackboard, BlackboardEntry, Controller
from pybb._engine.journal import Journal, Pending
from pybb.errors import RouteError
from pybb.workloads import Decrement, ZeroEven, less_than_3, w1, w1_expected, w1_outcomes

HERE = Path(__file__).parent
CHILD = HERE / "chunked_child.py"
N, EVERY = 120, 40


def child(db: Path, *options: str, every: int = EVERY) -> tuple[int, str, int]:
    """Run the child; its exit status, and its digest and commit count if it finished."""
    command = [sys.executable, str(CHILD), str(db), str(N), str(every), *options]
    done = subprocess.run(command, capture_output=True, text=True, cwd=HERE, timeout=120)
    if done.returncode != 0:
        assert done.returncode == 137, done.stderr
        return done.returncode, "", 0
    _, digest, commits = done.stdout.split()
    return 0, digest, int(commits)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, int]:
    status, digest, commits = child(tmp_path_factory.mktemp("chunked") / "reference.db")
    assert status == 0
    return digest, commits


def test_small_cycles_stay_one_transaction_each(tmp_path: Path) -> None:
    status, _, commits = child(tmp_path / "whole.db", every=10**6)
    assert status == 0 and commits == 4  # the entries' batch, then W1's three cycles


def test_every_crash_between_a_cycles_parts_resumes_to_the_same_board(
    reference: tuple[str, int], tmp_path: Path
) -> None:
    digest, commits = reference
    assert commits > 10  # the cycles did commit in parts
    for k in range(1, commits):
        db = tmp_path / f"k{k}.db"
        assert child(db, "--crash-after", str(k))[0] == 137
        status, resumed, _ = child(db)
        assert status == 0 and resumed == digest, f"crash after commit {k}"


def test_a_resumed_run_crashing_again_still_ends_on_the_same_board(
    reference: tuple[str, int], tmp_path: Path
) -> None:
    digest, commits = reference
    db = tmp_path / "twice.db"
    assert child(db, "--crash-after", str(commits // 2))[0] == 137
    assert child(db, "--crash-after", "2")[0] == 137
    status, resumed, _ = child(db)
    assert (status, resumed) == (0, digest)


def test_negative_control_a_resume_that_forgets_where_the_cycle_was_is_caught(
    reference: tuple[str, int], tmp_path: Path
) -> None:
    digest, commits = reference
    endings = []
    for k in range(commits // 2, commits):
        db = tmp_path / f"forgetful{k}.db"
        assert child(db, "--crash-after", str(k), "--variant", "forgetful")[0] == 137
        status, resumed, _ = child(db, "--variant", "forgetful")
        assert status == 0
        endings.append(resumed)
        if resumed != digest:
            break
    assert digest not in endings[-1:], "a forgetful resume was never caught"


def test_in_process_w1_in_parts_reaches_w1s_outcomes(tmp_path: Path) -> None:
    board, _ = w1(500, f"sqlite:///{tmp_path / 'w1.db'}")
    controller = Controller(board, commit_every=7)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    summary = controller.run()
    assert w1_outcomes(board) == w1_expected(500)
    assert summary.cycles == 3 == controller.cycle_count
    board.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_commit_every_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(RouteError, match="commit_every must be a positive integer"):
        Controller(Blackboard(), commit_every=bad)  # type: ignore[arg-type]


def test_a_batch_the_application_opened_around_the_run_stays_whole(tmp_path: Path) -> None:
    commits: list[int] = []

    class Counting(Journal):
        def _commit(self, items: list[Pending]) -> bool:
            commits.append(len(items))
            return super()._commit(items)

    class Board(Blackboard):
        journal_class = Counting

    board = Board(f"sqlite:///{tmp_path / 'w1.db'}", "w1")
    controller = Controller(board, commit_every=5)
    controller.register_predicate("less_than_3", less_than_3)
    controller.route_predicate(
        "less_than_3", on_fail=[Decrement("decrement", 3), ZeroEven("zero_even", 1)]
    )
    with board.batch():
        for i in range(50):
            board.write_entry(f"e{i}", BlackboardEntry(predicate="less_than_3", measurement=i % 10))
        controller.run()
    assert len(commits) == 1 and w1_outcomes(board) == w1_expected(50)
    with board.batch():
        for i in range(30):
            board.write_entry(f"late{i}", BlackboardEntry(predicate="less_than_3", measurement=9))
    commits.clear()
    cycles = controller.cycle_count
    controller.run()  # on its own, a cycle of more than 5 records commits in parts
    assert len(commits) > 3 * (controller.cycle_count - cycles)
    assert max(commits) <= 5 + 4  # an entry's step (at most 4 records here) is never cut
    board.close()
