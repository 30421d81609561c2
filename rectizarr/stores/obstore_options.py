"""What the obstore backend takes: the URL schemes it serves, and fsspec/s3fs/gcsfs/adlfs-style
``storage_options`` mapped to obstore's configuration (:func:`client_config`); :func:`handles` says whether
:func:`~rectizarr.stores.open_store` uses the backend for a URL by default; :func:`connect` gives the client
(one per bucket or server and options)."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from rectizarr._util import in_forked_child
from rectizarr.errors import StoreError
from rectizarr.stores.remote import SCHEMES, TIMEOUT

RETRIES = 3  # of a request answered 5xx, 429/503 (throttling) or cut off, with backoff
# obstore clients by root URL and options (insertion order: LRU-ish)
_CLIENTS: dict[tuple[str, str, str], Any] = {}
_SHARED_ROOTS = ("s3", "gcs", "http")  # kinds whose URLs are root/prefix: one client per bucket or server
_CLIENTS_LOCK = threading.Lock()


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children (where obstore itself cannot work)
    global _CLIENTS_LOCK
    _CLIENTS_LOCK = threading.Lock()


# fsspec option name -> obstore configuration key, by service (None: accepted, nothing to pass)
_NAMES: dict[str, dict[str, str | None]] = {
    "s3": {
        "key": "aws_access_key_id",
        "secret": "aws_secret_access_key",
        "token": "aws_session_token",
        "profile": "aws_profile",
    },
    "gcs": {"token": "google_service_account", "project": None},
    "azure": {
        "account_name": "azure_storage_account_name",
        "account_key": "azure_storage_account_key",
        "sas_token": "azure_storage_sas_key",
        "connection_string": None,
        "tenant_id": "azure_tenant_id",
        "client_id": "azure_client_id",
        "client_secret": "azure_client_secret",
    },
    "http": {},
}
_IGNORED = frozenset(  # fsspec client details with no meaning here
    "skip_instance_cache use_listings_cache listings_expiry_time asynchronous loop default_fill_cache "
    "config_kwargs requester_pays version_aware".split()
)


def client_config(kind: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, client_options)`` for obstore from fsspec-style ``storage_options``."""
    opts = dict(options)
    client = dict(opts.pop("client_kwargs", None) or {})
    config: dict[str, Any] = {}
    client_options: dict[str, Any] = {}
    timeout = opts.pop("timeout", client.pop("timeout", TIMEOUT))
    if timeout is not None:
        client_options["timeout"] = timedelta(seconds=float(timeout))
        client_options["connect_timeout"] = timedelta(seconds=float(timeout))
    headers = opts.pop("headers", None)
    if headers:
        client_options["default_headers"] = dict(headers)
    endpoint = opts.pop("endpoint_url", None) or client.pop("endpoint_url", None)
    region = opts.pop("region_name", None) or client.pop("region_name", None)
    anon = bool(opts.pop("anon", False))
    names = _NAMES[kind]
    for name, value in opts.items():
        if name in names:
            target = names[name]
            if target is not None and value is not None:
                config[target] = value
        elif name.startswith(("aws_", "google_", "azure_")):
            config[name] = value
        elif name in _IGNORED:
            continue
        else:
            raise StoreError(
                f"storage option {name!r} has no equivalent for {kind} in the obstore backend; "
                "use backend='fsspec', or an obstore configuration key"
            )
    if kind == "s3":
        if endpoint:
            config["aws_endpoint"] = endpoint
            client_options["allow_http"] = endpoint.startswith("http://")
        if region:
            config["aws_region"] = region
        # As botocore does for S3: over TLS the body is not hashed into the signature (TLS already
        # protects it; hashing costs ~0.1 ms of CPU per 128 KiB written); over plain HTTP it is.
        if not any(k in config for k in ("aws_unsigned_payload", "unsigned_payload")):
            config["aws_unsigned_payload"] = not str(endpoint or "https://").lower().startswith("http://")
    elif kind == "gcs" and endpoint:
        client_options["allow_http"] = endpoint.startswith("http://")
    if anon and kind != "http":
        config["skip_signature"] = True
    return {k: v for k, v in config.items() if v is not None}, client_options


def handles(url: str, storage_options: Mapping[str, Any] | None) -> bool:
    """Whether :func:`~rectizarr.stores.open_store` opens ``url`` with obstore by default: obstore is
    installed, the URL is a plain one of its schemes (no ``::`` chain) and the options map onto it."""
    kind = SCHEMES.get(urlsplit(url).scheme.lower())
    if kind is None or "::" in url:
        return False
    try:
        import obstore  # noqa: F401
    except ImportError:
        return False
    try:
        client_config(kind, storage_options or {})
    except StoreError:
        return False
    return True


def split_root(url: str, kind: str) -> tuple[str, str]:
    """``(root, prefix)``: the URL of the bucket (or server) that one client serves, and the path under
    it. Azure URLs (several forms), and URLs with a query, fragment or escapes, keep a client each."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if (
        kind not in _SHARED_ROOTS
        or parts.query
        or parts.fragment
        or "%" in url
        or not parts.netloc
        or "//" in path
    ):
        return url, ""
    return f"{parts.scheme}://{parts.netloc}", path


def connect(url: str, kind: str, root: str, storage_options: Mapping[str, Any]) -> Any:
    """The obstore client for ``root`` (``url``'s bucket or server) and these options, shared by every
    ObjectStore of the process opened there the same way, whatever its prefix: making one costs ~4 ms
    and each of its connections another handshake; it pools connections and is thread-safe."""
    config, client_options = client_config(kind, storage_options)
    if kind == "http":
        client_options["allow_http"] = url.lower().startswith("http://")
    key = (root, repr(sorted(config.items())), repr(sorted(client_options.items())))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = _make_client(url, kind, root, config, client_options)
            while len(_CLIENTS) > 64:
                del _CLIENTS[next(iter(_CLIENTS))]
        return client


def _make_client(
    url: str, kind: str, root: str, config: dict[str, Any], client_options: dict[str, Any]
) -> Any:
    try:
        from_url: Any = importlib.import_module("obstore.store").from_url
    except ImportError as exc:
        raise StoreError(
            "the obstore backend needs the 'obstore' package: pip install 'rectizarr[cloud]'"
        ) from exc
    backoff = {"init_backoff": timedelta(milliseconds=50), "max_backoff": timedelta(seconds=2), "base": 2}
    retry = {"max_retries": RETRIES, "retry_timeout": timedelta(seconds=60), "backoff": backoff}
    try:
        if kind == "http":
            return from_url(root, client_options=client_options, retry_config=retry)
        return from_url(root, config=config, client_options=client_options, retry_config=retry)
    except Exception as exc:
        raise StoreError(f"cannot open {url!r} with the obstore backend: {exc}") from exc
