"""What the obstore backend takes: the URL schemes it serves, and fsspec/s3fs/gcsfs/adlfs-style
``storage_options`` mapped to obstore's configuration (:func:`client_config`); :func:`handles` says whether
:func:`~rectizarr.stores.open_store` uses the backend for a URL by default."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from rectizarr.errors import StoreError
from rectizarr.stores.remote import SCHEMES, TIMEOUT

__all__ = ["SCHEMES", "TIMEOUT", "client_config", "handles"]


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
    all_names: dict[str, dict[str, str | None]] = {
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
    names = all_names[kind]  # fsspec name -> obstore name (None: accepted, nothing to pass)
    for name, value in opts.items():
        if name in names:
            target = names[name]
            if target is not None and value is not None:
                config[target] = value
        elif name.startswith(("aws_", "google_", "azure_")):
            config[name] = value
        elif name in (
            "skip_instance_cache",
            "use_listings_cache",
            "listings_expiry_time",
            "asynchronous",
            "loop",
            "default_fill_cache",
            "config_kwargs",
            "requester_pays",
            "version_aware",
        ):
            continue  # fsspec client details with no meaning here
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
        config["google_service_account"] = config.get("google_service_account")  # keep explicit credentials
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
