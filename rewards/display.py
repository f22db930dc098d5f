"""Reports that print as text in a terminal and as HTML in a notebook, from one rich renderable."""

from __future__ import annotations

import io


class RichReport:
    """Gives a class with ``__rich__`` a plain-text ``str()`` and a notebook ``_repr_html_``."""

    text_width = 120

    def _console(self, **options):
        from rich.console import Console

        return Console(width=self.text_width, file=io.StringIO(), **options)

    def __str__(self) -> str:
        console = self._console(color_system=None)
        console.print(self)
        return console.file.getvalue()

    def _repr_html_(self) -> str:
        console = self._console(record=True)
        console.print(self)
        return console.export_html(inline_styles=True, code_format="<pre style='font-size:12px'>{code}</pre>")
