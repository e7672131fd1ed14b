"""What the book reads: measured runs (``runs``), reported figures (``reference``), the host
description (``env``), and ``Evidence``, which loads them once for every chapter."""
