"""From chapters to a book: execute and render (``build``, ``pipeline``), version it
(``edition``), export its tables and charts (``exports``), keep the HTML offline (``sphinx_offline``)."""
