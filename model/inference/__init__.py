"""The long-context inference path, in numpy: the mixed windowed/global model (``mixed_lm``), its
per-layer cache and ``generate()`` (``generate``), and passkey retrieval (``long_context``)."""
