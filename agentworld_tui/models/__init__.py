"""Models: which to offer, getting them onto the disk, and whether they fit the machine.

Nothing here knows the UI; the app and the command line call the same functions.

- ``catalog``: ``load_catalog()`` -> Catalog (``entries``, ``default``, ``problems``,
  ``get(name)``); ``resolve(catalog, "NAME" | "OWNER/REPO:QUANT")`` -> CatalogEntry.
- ``cache``: ``local_path(entry)`` -> Path | None (first part of a split model),
  ``find_local(entry)``, ``remove(entry)``, ``hub_cache_dir()``. No network.
- ``download``: ``pull(entry, progress, cancel)`` -> Path, blocking (run it in a worker
  thread; ``progress`` gets PullProgress per chunk, ``cancel`` is a threading.Event);
  ``plan_download(entry)`` + ``check_disk_room(plan)`` to show the size before asking.
  Failures are DownloadError subclasses with one-line messages.
- ``fit``: ``estimate_fit(path, n_ctx)`` from the GGUF header, ``estimate_entry_fit(entry,
  n_ctx)`` before download -> FitVerdict; ``recommend(catalog, machine, gpu_offload=...)``.
- ``hardware``: ``machine_memory()`` (RAM, NVIDIA GPUs), ``llama_build()``.
- ``quant``: which repository files hold a quantization tag.
- ``listing``: the Hub's file names, digests, sizes and commit, checked before they name a
  file; ``cache.check_inside`` keeps every write and deletion inside the cache.
- ``commands``: ``agentworld models ...`` and ``agentworld doctor``.

Importing this package is cheap; each module imports huggingface-hub, gguf or llama.cpp
only inside the functions that need them.
"""
