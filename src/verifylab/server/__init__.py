"""Talking to a live SGLang: start and stop a variant (``launch``), capture a profile through
``/start_profile`` (``profile``), and run a coroutine from sync or notebook code (``aio``)."""
