"""A worker started before its database (a GPU machine booting before the database's host) waits, saying
why, and consumes nothing until the database answers: it used to start at once and fail every training
message it took."""

import signal
import socket
import threading

import pytest
from django.db import connection

from tests.helpers import WorkerProcess, free_port, wait_for

pytestmark = pytest.mark.slow


class DelayedDatabase:
    """A port that refuses connections until open(), then forwards each to the test's Postgres."""

    def __init__(self):
        self.port = free_port()
        self.listener = None

    def url(self) -> str:
        """The test database's URL, as tests.helpers.subprocess_env writes it, through this port."""
        db = connection.settings_dict
        auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
        return f"postgres://{auth}@127.0.0.1:{self.port}/{db['NAME']}"

    def open(self):
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:  # closed
                return
            server = self._connect_to_postgres()
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _connect_to_postgres() -> socket.socket:
        db = connection.settings_dict
        host, port = db["HOST"] or "127.0.0.1", int(db["PORT"] or 5432)
        if host.startswith("/"):  # a unix socket's directory
            server = socket.socket(socket.AF_UNIX)
            server.connect(f"{host}/.s.PGSQL.{port}")
            return server
        return socket.create_connection((host, port))

    @staticmethod
    def _pipe(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def close(self):
        if self.listener:
            self.listener.close()


@pytest.fixture
def delayed_database():
    database = DelayedDatabase()
    yield database
    database.close()


def test_a_worker_waits_for_its_database_saying_why_then_starts(transactional_db, tmp_path, delayed_database):
    worker = WorkerProcess("default", "early", tmp_path / "early.log", DATABASE_URL=delayed_database.url())
    try:
        wait_for(lambda: "waiting for the database" in worker.output(), timeout=60, message="the reason")
        assert "Connection refused" in worker.output() or "connection failed" in worker.output()
        assert "ready." not in worker.output()
        delayed_database.open()
        worker.wait_ready(timeout=60)
        assert worker.output().count("waiting for the database") == 1  # said once, not every two seconds
    finally:
        worker.stop()


def test_a_worker_waiting_for_its_database_stops_when_told(transactional_db, tmp_path, delayed_database):
    worker = WorkerProcess("default", "early", tmp_path / "early.log", DATABASE_URL=delayed_database.url())
    try:
        wait_for(lambda: "waiting for the database" in worker.output(), timeout=60, message="the reason")
        worker.process.send_signal(signal.SIGTERM)
        worker.process.wait(timeout=15)
    finally:
        worker.stop()
