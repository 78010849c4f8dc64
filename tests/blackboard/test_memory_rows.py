"""The memory store keeps a record as plain values and builds the Record when it is read.

A kept ``Record`` with its content's dicts and lists is a handful of objects the cyclic
GC tracks, walked again by every full collection as the board grows: on a board of
350,000 records that was half of a single write's CPU time. Kept as a tuple of plain
values (the canonical text among them), a record is nothing the collector tracks.
"""

from __future__ import annotations

import gc

from blackboard import Level, Premise, RecordKind, Written, create_model
from blackboard.stores import MemoryStore


def test_kept_records_are_nothing_the_cyclic_gc_walks() -> None:
    model = create_model([Level("notes")], store=MemoryStore(), board_id="b")
    control = model.control
    for i in range(200):  # the board's own first objects: not what is counted
        control.write("scout", "notes", {"n": i, "items": [i, {"deep": [i]}]})
    gc.collect()
    before = len(gc.get_objects())
    for i in range(5_000):
        result = control.write("scout", "notes", {"n": i, "items": [i, {"deep": [i]}]})
        assert type(result) is Written
    gc.collect()
    grown = len(gc.get_objects()) - before
    # A kept Record with this content was five tracked objects (25,000 here).
    assert grown < 500, f"{grown} more objects tracked by the GC after 5,000 writes"
    assert model.reader.head() == 5_200
    model.close()


def test_every_read_gives_the_record_as_written_and_content_of_its_own() -> None:
    model = create_model(
        [Level("notes"), Premise("window")], premises={"window": {"w": [1]}}, board_id="b"
    )
    content = {"n": 1, "items": [1, {"deep": ["x"]}], "text": "é\u2028"}
    written = model.control.write("scout", "notes", content, idempotency_key="k1")
    assert type(written) is Written
    first = model.reader.log()[-1]
    assert first.kind is RecordKind.LEVEL and first.content == content
    assert (first.sequence, first.region, first.writer) == (written.sequence, "notes", "scout")
    assert first.idempotency_key == "k1" and first.version is None
    first.content["items"].append("changed by a reader")  # a reader's own copy
    again = model.reader.log()[-1]
    assert again == model.reader.log()[-1] and again.content == content
    assert model.reader.read_level("notes")[0].content == content
    assert model.reader.read_premise("window").value == {"w": [1]}
    repeat = model.control.write("scout", "notes", content, idempotency_key="k1")
    assert repeat == Written(written.sequence, repeat=True)
    model.close()
