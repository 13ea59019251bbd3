"""The `__main__.py` of an uploaded bundle (`python ~/.cache/dflash-tui/<program>/<sha256> ...`).

The console uploads one program with what it shares (`common/`) as a bundle laid out
like this folder: `__init__.py`, `__main__.py` (this file), `common/` and the
program's folder. Run as a directory, Python gives the code no package, so
relative imports would fail: this bootstrap imports the bundle as a package under
a private name, takes the bundle itself off `sys.path` (so its folder names cannot
shadow other modules) and runs the one program in it. Both programs share this one
bootstrap; in this installed package it is only a file to copy, and does nothing
when imported.
"""

import sys


def _run_bundle() -> int:
    import importlib
    import importlib.util
    from pathlib import Path

    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    programs = [d.name for d in here.iterdir() if (d / "cli.py").is_file() and d.name != "common"]
    if len(programs) != 1:
        sys.stderr.write(f"error: {here} holds {len(programs)} programs, expected one\n")
        return 1
    spec = importlib.util.spec_from_file_location(
        "_dflash_shipped", here / "__init__.py", submodule_search_locations=[str(here)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"_dflash_shipped.{programs[0]}.cli").main()


if __name__ == "__main__":
    sys.exit(_run_bundle())
