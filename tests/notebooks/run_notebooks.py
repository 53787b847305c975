#!/usr/bin/env python3
"""Executes every notebook of notebooks/ headless (nbclient) on the bundled results in
notebooks/data, so the notebooks cannot rot. Exit 1 if any cell fails.

Usage: run_notebooks.py [NOTEBOOK_DIR] [--figures DIR]   (--figures: also save the PNGs there)
"""
import os
import sys
import time

import nbformat
from nbclient import NotebookClient


def main() -> int:
    args = sys.argv[1:]
    figures = ""
    if "--figures" in args:
        i = args.index("--figures")
        figures = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", "..", "notebooks"))
    books = sorted(f for f in os.listdir(root) if f.endswith(".ipynb"))
    if not books:
        print(f"run_notebooks: no notebooks in {root}")
        return 1
    os.environ["COMPCOLL_NOTEBOOK_DATA"] = os.path.join(root, "data")
    os.environ["COMPCOLL_NOTEBOOK_FIGURES"] = figures
    failed = 0
    for name in books:
        nb = nbformat.read(os.path.join(root, name), as_version=4)
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": root}}).execute()
            print(f"OK     {name} ({time.time() - t0:.1f} s)")
        except Exception as e:  # nbclient raises CellExecutionError with the traceback
            failed += 1
            print(f"FAILED {name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            print(str(e)[-3000:])
    print(f"{len(books) - failed}/{len(books)} notebooks ran")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
