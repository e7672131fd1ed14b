"""A papermill engine that reports each cell as it starts (``on_cell_start()``) and finishes (``on_cell(done,
total)``): the progress a long live chapter shows between its start and its end, and which chapters a second
Ctrl-C may interrupt. Otherwise papermill's own nbclient engine, unchanged."""

from __future__ import annotations

from collections.abc import Callable

from papermill.engines import NBClientEngine, papermill_engines

ENGINE = "verifylab-cells"
CellProgress = Callable[[int, int], None]


class CellProgressEngine(NBClientEngine):
    @classmethod
    def execute_managed_notebook(
        cls,
        nb_man,
        kernel_name,
        on_cell: CellProgress | None = None,
        on_cell_start: Callable[[], None] | None = None,
        **kwargs,
    ):
        if on_cell_start is not None:
            start = nb_man.cell_start

            def cell_start(cell, cell_index=None, **more):
                start(cell, cell_index=cell_index, **more)
                on_cell_start()

            nb_man.cell_start = cell_start
        if on_cell is not None:
            total = len(nb_man.nb.cells)
            finish = nb_man.cell_complete

            def cell_complete(cell, cell_index=None, **more):
                finish(cell, cell_index=cell_index, **more)
                on_cell((cell_index or 0) + 1, total)

            nb_man.cell_complete = cell_complete
        return super().execute_managed_notebook(nb_man, kernel_name, **kwargs)


papermill_engines.register(ENGINE, CellProgressEngine)
