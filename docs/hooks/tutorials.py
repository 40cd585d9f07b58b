# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""MkDocs hook: render the tutorials (jupytext percent-format scripts) as pages.

Each ``docs/tutorials/NAME.py`` becomes the page ``tutorials/NAME.md`` at build time: markdown cells
(``# %% [markdown]``) become text and code cells (``# %%``) become Python code blocks, in order. The script
itself is published next to the page, and so is the notebook ``tutorials/NAME.ipynb`` made from it (the same
cells, no outputs), both linked from the page for download. The notebooks are generated here rather than
committed, so they cannot drift from the scripts. Tutorials are not executed here; the test suite executes each
notebook (``tests/test_tutorials_examples.py``).

The hook also stands in for a page of the navigation that another change has not written yet
(``performance.md``), so that ``mkdocs build --strict`` never fails on a missing page.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

TUTORIALS_DIR = "tutorials"

# Pages of the navigation written by other changes: a stand-in is generated only when the page is missing.
STAND_INS = {
    "performance.md": "# Performance\n\nBenchmark figures will appear here; run `make bench` to measure them yourself.\n",
}

_PERCENT_CELL = re.compile(r"^# %%")


def percent_to_markdown(source: str, *, script_name: str) -> str:
    """Turn a jupytext percent-format script into a markdown page.

    Args:
        source: The script's text.
        script_name: The script's file name, linked for download under the page's title.

    Returns:
        The page's markdown: markdown cells as text, code cells as ``python`` code blocks.

    Raises:
        ValueError: If the script has no ``# %%`` cell marker, or its first cell is not a markdown title.

    Examples:
        >>> page = percent_to_markdown("# %% [markdown]\\n# # Title\\n\\n# %%\\nx = 1\\n", script_name="t.py")
        >>> page.splitlines()[0]
        '# Title'
    """
    import jupytext

    if not any(_PERCENT_CELL.match(line) for line in source.splitlines()):
        raise ValueError(f"{script_name} is not a jupytext percent-format script: it has no '# %%' cell marker.")
    notebook = jupytext.reads(source, fmt="py:percent")
    blocks: list[str] = []
    for index, cell in enumerate(notebook.cells):
        text = cell.source.strip("\n")
        if not text.strip():
            continue
        if index == 0 and cell.cell_type == "code" and all(line.startswith("#") for line in text.splitlines()):
            continue  # the licence header above the first cell marker
        if cell.cell_type == "markdown":
            blocks.append(text)
        elif cell.cell_type == "code":
            blocks.append(f"```python\n{text}\n```")
    if not blocks or not blocks[0].lstrip().startswith("# "):
        raise ValueError(f"{script_name} must open with a markdown cell holding the page title ('# Title').")
    notebook_name = Path(script_name).with_suffix(".ipynb").name
    download = (
        f'!!! tip "Run it yourself"\n'
        f"    [Download as notebook]({notebook_name}) or as the script [`{script_name}`]({script_name}) "
        f"(jupytext percent format), or from a clone run `python docs/tutorials/{script_name}`. "
        "It runs offline, on the CPU."
    )
    title, _, rest = blocks[0].lstrip().partition("\n")
    blocks[0] = "\n\n".join(part for part in (title, download, rest.strip("\n")) if part)
    return "\n\n".join(blocks) + "\n"


def percent_to_notebook(source: str) -> str:
    """Turn a jupytext percent-format script into a Jupyter notebook with the same cells and no outputs.

    Args:
        source: The script's text.

    Returns:
        The notebook as ``.ipynb`` JSON (nbformat 4), with a Python 3 kernel and cell ids numbered in order, so
        the same script always gives the same file.

    Examples:
        >>> import json
        >>> notebook = json.loads(percent_to_notebook("# %% [markdown]\\n# # Title\\n\\n# %%\\nx = 1\\n"))
        >>> [cell["cell_type"] for cell in notebook["cells"]], notebook["metadata"]["kernelspec"]["name"]
        (['markdown', 'code'], 'python3')
    """
    import jupytext

    notebook = jupytext.reads(source, fmt="py:percent")
    notebook.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    for index, cell in enumerate(notebook.cells):
        cell.id = f"cell-{index}"
        cell.metadata = {}
    return jupytext.writes(notebook, fmt="ipynb")


def on_files(files: Files, config) -> Files:
    """Add a generated page and notebook for every tutorial script, and stand-ins for missing pages."""
    for file in list(files):
        uri = file.src_uri
        if uri.startswith(f"{TUTORIALS_DIR}/") and uri.endswith(".py") and uri.count("/") == 1:
            source = Path(file.abs_src_path).read_text(encoding="utf-8")
            page = percent_to_markdown(source, script_name=Path(uri).name)
            stem = uri[: -len(".py")]
            files.append(File.generated(config, stem + ".md", content=page))
            files.append(File.generated(config, stem + ".ipynb", content=percent_to_notebook(source)))
    for uri, content in STAND_INS.items():
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, content=content))
    return files
