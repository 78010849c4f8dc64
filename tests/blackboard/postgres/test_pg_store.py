"""The PostgreSQL store's own promises: options, schema versioning, names, wake-ups, errors."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pg_harness import PgSpace, pg_space
from pg_workers import Workers

from blackboard import Level, Premise, StoreError, Written, create_model
from blackboard.errors import StoreConfigError
from blackboard.stores import PendingWrite, open_store
from blackboard.stores import _pg_schema as schema_module
from blackboard.stores._base import Appended
from blackboard.stores._pg_schema import SCHEMA_VERSION, channel_name, dec, enc
from blackboard.stores._postgres import PostgresStore
from blackboard.testing import check_store
from storekit import drop_pg_schema, pg_server

__all__ = ["pg_space"]

pytestmark = pytest.mark.postgres


def _level(content: str, **extra: object) -> PendingWrite:
    from blackboard._json import encode
    from blackboard._records import RecordKind

    return PendingWrite(RecordKind.LEVEL, "l", "w", encode(content, "c"), **extra)  # type: ignore[arg-type]


# -- choosing the store and its schema ---------------------------------------------------


def test_open_store_picks_postgres_by_url(pg_space: PgSpace) -> None:
    with open_store(pg_space.url) as store:
        assert isinstance(store, PostgresStore)
        assert pg_space.schema in repr(store)
    with psycopg.connect(pg_space.server) as conn:
        found = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
            (pg_space.schema,),
        ).fetchone()
    assert found is not None and found[0] >= 6  # the store's tables are in that schema


def test_schema_keyword_and_search_path_option(pg_space: PgSpace) -> None:
    with PostgresStore(pg_space.server, schema=pg_space.schema) as store:
        store.open_board("b", "{}", [])
    options = f"options=-csearch_path%3D{pg_space.schema}"
    sep = "&" if "?" in pg_space.server else "?"
    with PostgresStore(f"{pg_space.server}{sep}{options}") as store:
        assert store.open_board("b", "{other}", []) == "{}"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"schema": "pg_catalog"}, "schema"),
        ({"schema": "x" * 64}, "schema"),
        ({"min_size": 3, "max_size": 2}, "min_size"),
        ({"retries": -1}, "retries"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_options_are_refused_before_connecting(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(StoreConfigError, match=match):
        PostgresStore("postgresql://nobody@127.0.0.1:1/none", **kwargs)  # type: ignore[arg-type]


def test_an_unreachable_server_is_a_store_error_without_the_password() -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    url = f"postgresql://someone:{canary}@127.0.0.1:1/none?connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url, timeout=2.0)
    assert canary not in str(caught.value)
    assert "127.0.0.1:1" in str(caught.value)


# -- the schema: created, versioned, upgraded ----------------------------------------------


def _versions(space: PgSpace) -> list[tuple[int, str]]:
    with space.connect() as conn:
        rows = conn.execute("SELECT version, description FROM bb_schema_version ORDER BY 1")
        return [(int(v), str(d)) for v, d in rows.fetchall()]


def test_racing_openers_of_a_fresh_database_migrate_it_once() -> None:
    server = pg_server()
    schema = f"t_{uuid.uuid4().hex[:16]}"  # does not exist yet: the store creates it
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def opener() -> None:
        barrier.wait()
        try:
            PostgresStore(server, schema=schema).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert [v for v, _ in _versions(PgSpace(server, schema))] == list(
            range(1, SCHEMA_VERSION + 1)
        )
    finally:
        drop_pg_schema(server, schema)


def test_a_new_migration_upgrades_a_stored_board_in_place(
    pg_space: PgSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    with create_model([Level("l")], store=pg_space.url, board_id="kept") as model:
        model.control.write("w", "l", "before the upgrade")
    upgrade = (SCHEMA_VERSION + 1, "a note on records", ("ALTER TABLE bb_records ADD note text",))
    monkeypatch.setattr(schema_module, "MIGRATIONS", (*schema_module.MIGRATIONS, upgrade))
    stores = [PostgresStore(pg_space.url) for _ in range(3)]  # the first applies it, once
    try:
        assert [v for v, _ in _versions(pg_space)] == list(range(1, SCHEMA_VERSION + 2))
        model = create_model([Level("l")], store=stores[1], board_id="kept")
        assert [c.content for c in model.reader.read_level("l")] == ["before the upgrade"]
        assert isinstance(model.control.write("w", "l", "after"), Written)
    finally:
        for store in stores:
            store.close()


def test_a_schema_newer_than_the_code_is_refused(pg_space: PgSpace) -> None:
    PostgresStore(pg_space.url).close()
    with pg_space.connect() as conn:
        conn.execute("INSERT INTO bb_schema_version VALUES (99, 'from the future')")
    with pytest.raises(StoreError, match="schema version 99, newer"):
        PostgresStore(pg_space.url)


# -- names the kernel allows and PostgreSQL text does not ------------------------------


@given(st.text())
def test_stored_names_round_trip(name: str) -> None:
    stored = enc(name)
    assert "\x00" not in stored
    assert dec(stored) == name
    if "\x00" not in name and not name.startswith("\x01"):
        assert stored == name  # ordinary names are stored as they are


def test_nul_in_board_region_writer_and_key(pg_space: PgSpace) -> None:
    board, key = "board\x00one", "\x01key\x00"
    with PostgresStore(pg_space.url) as store:
        store.open_board(board, "{}", [])
        (outcome,) = store.append(board, [_level("v", idempotency_key=key)])
        assert isinstance(outcome, Appended)
        (record,) = store.read_log(board)
        assert record.idempotency_key == key
        assert store.find_key(board, key) is not None
        assert store.head(board) == 1


def test_find_keys_answers_many_keys_in_one_query(pg_space: PgSpace) -> None:
    with PostgresStore(pg_space.url) as store:
        store.open_board("b", "{}", [])
        store.append(
            "b", [_level("one", idempotency_key="k1"), _level("two", idempotency_key="k\x00")]
        )
        found = store.find_keys("b", ["k1", "k\x00", "nope"])
        assert set(found) == {"k1", "k\x00"}
        assert found["k\x00"][0].content == "two"
        assert found["k1"] == store.find_key("b", "k1")
        assert store.find_keys("b", []) == {}


def test_big_contributions_and_long_unique_keys(pg_space: PgSpace) -> None:
    """A 1 MB contribution, and a unique key far longer than a btree entry may be."""
    regions = [Level("big"), Level("u", unique="id")]
    with create_model(regions, store=pg_space.url, board_id="big") as model:
        blob = "x" * 1_000_000
        assert isinstance(model.control.write("w", "big", blob), Written)
        assert model.reader.read_level("big")[0].content == blob
        long_key = {"id": "k" * 20_000}
        assert isinstance(model.control.write("w", "u", long_key), Written)
        assert not isinstance(model.control.write("w", "u", long_key), Written)


# -- errors at the boundary ------------------------------------------------------------


def test_an_unknown_board_and_a_closed_store_are_store_errors(pg_space: PgSpace) -> None:
    store = PostgresStore(pg_space.url)
    with pytest.raises(StoreError, match="no board"):
        store.head("missing")
    with pytest.raises(StoreError, match="no board"):
        store.append("missing", [_level("v")])
    assert not store.in_transaction
    store.close()
    with pytest.raises(StoreError):
        store.head("missing")
    with pytest.raises(StoreError, match="closed"):
        store.wait("missing", 0, 0.01)


# -- wake-ups by LISTEN/NOTIFY, across processes -------------------------------------------


@pytest.fixture(scope="module")
def writer() -> Iterator[Workers]:
    pool = Workers(1)
    yield pool
    pool.close()


def test_wait_wakes_on_a_write_from_another_process(pg_space: PgSpace, writer: Workers) -> None:
    model = create_model([Level("events")], store=pg_space.url, board_id="wake")
    try:
        start = time.time() + 1.0
        writer.send(0, "write_levels", pg_space.url, "wake", "other", 1, start)
        began = time.monotonic()
        assert model.store.wait("wake", 0, 30.0)
        woke_after = time.time() - start
        assert writer.gather([0])[0]["acks"] == [(0, 1)]
        assert -0.05 < woke_after < 2.0, woke_after
        assert time.monotonic() - began > 0.5  # it waited for the write, not returned early
    finally:
        writer.reset_all()
        model.close()


def test_waiting_does_not_poll_the_database(pg_space: PgSpace) -> None:
    with create_model([Level("events")], store=pg_space.url, board_id="quiet") as model:
        store = model.store
        assert isinstance(store, PostgresStore)
        store.wait("quiet", 0, 0.01)  # starts the listener
        before = store._pool.get_stats().get("requests_num", 0)
        assert not store.wait("quiet", 0, 1.0)
        assert store._pool.get_stats().get("requests_num", 0) - before <= 2


def test_wake_ups_survive_the_listener_losing_its_connection(pg_space: PgSpace) -> None:
    channel = channel_name(pg_space.schema)
    with create_model([Level("events"), Premise("p")], premises={"p": 0},
                      store=pg_space.url, board_id="relisten") as model:  # fmt: skip
        store = model.store
        assert not store.wait("relisten", 1, 0.05)
        with psycopg.connect(pg_space.server, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                (f'LISTEN "{channel}"',),
            ).fetchall()
        assert killed == [(True,)]
        threading.Timer(0.5, lambda: model.control.write("w", "events", 1)).start()
        assert store.wait("relisten", 1, 10.0)


def test_check_store_on_a_store_of_its_own_schema(pg_space: PgSpace) -> None:
    check_store(lambda: PostgresStore(pg_space.url), threads=8, writes_per_thread=10)


def test_the_fixture_schema_is_dropped_afterwards() -> None:
    server = pg_server()
    space = PgSpace(server, f"t_{uuid.uuid4().hex[:16]}")
    PostgresStore(space.url).close()
    drop_pg_schema(server, space.schema)
    with psycopg.connect(server) as conn:
        left = conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (space.schema,)
        ).fetchone()
    assert left is None
