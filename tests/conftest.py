"""Shared fixtures: stores of every kind (S3 and HTTP via local servers) and hypothesis profiles."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from rectizarr.stores import FsspecStore, LocalStore, MemoryStore, Store, ZipStore
from tests.servers import HttpServer, S3Server

# Hypothesis profiles, the one place example counts are set: "default" (``make test``), "ci" (the same,
# derandomized; loaded when CI is set) and "long" (LONG times the examples: ``scripts/long_runs.py
# properties``). ``HYPOTHESIS_PROFILE=<name>`` or ``pytest --hypothesis-profile=<name>`` picks one. A test
# that needs more or fewer examples than the base scales it with ``tests.strategies.examples(scale)``.
BASE_EXAMPLES = 50
LONG = 20
settings.register_profile("default", deadline=None, max_examples=BASE_EXAMPLES)
settings.register_profile("ci", deadline=None, max_examples=BASE_EXAMPLES, derandomize=True)
settings.register_profile("long", deadline=None, max_examples=LONG * BASE_EXAMPLES, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.stop()


@pytest.fixture
def memory_store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def zip_store(tmp_path: Path) -> Iterator[ZipStore]:
    store = ZipStore(tmp_path / "store.zip", mode="w")
    yield store
    store.close()


@pytest.fixture
def fsspec_memory_store() -> Iterator[FsspecStore]:
    """An FsspecStore on ``memory://`` under a unique root (MemoryFileSystem's tree is process-wide)."""
    store = FsspecStore(f"memory://test-{secrets.token_hex(6)}")
    yield store
    store.delete_prefix("")


@pytest.fixture
def s3_store(s3_server: S3Server) -> FsspecStore:
    fs = s3_server.filesystem()
    return FsspecStore(fs, path=s3_server.new_bucket(fs))


@pytest.fixture
def obstore_store(s3_server: S3Server) -> Store:
    """An ObjectStore (the obstore backend) on a fresh bucket of the moto server, opened as users do: a
    URL and s3fs-style storage options."""
    from rectizarr.stores import open_store

    bucket = s3_server.new_bucket(s3_server.filesystem())
    return open_store(f"s3://{bucket}", backend="obstore", storage_options=s3_server.storage_options())


@pytest.fixture
def http_store_factory(http_server: HttpServer) -> Callable[[str | os.PathLike[str]], FsspecStore]:
    """``factory(directory)`` -> a read-only FsspecStore over HTTP serving ``directory``."""

    def factory(directory: str | os.PathLike[str]) -> FsspecStore:
        return FsspecStore(http_server.serve(directory))

    return factory


WRITABLE_STORES = ("memory", "local", "fsspec_memory", "zip", "s3", "obstore")


@pytest.fixture(params=WRITABLE_STORES)
def any_store(request: pytest.FixtureRequest) -> Store:
    """Every writable store kind in turn (for tests of other modules)."""
    store: Store = request.getfixturevalue(f"{request.param}_store")
    return store
