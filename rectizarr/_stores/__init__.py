"""Store backends; import them from :mod:`rectizarr.store`."""
