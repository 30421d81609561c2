"""Integrations with dask (:mod:`.dask`) and xarray (:mod:`.xarray`), imported only when used."""
