"""Entry point for ``python -m dflash_tui.shipped.cachebuild`` and for ``python <cachebuild dir>``.

Run as a directory (or as this file), Python gives the code no package, so
relative imports would fail. The bootstrap below imports this directory as a
package under a private name and runs it from there; it also takes the
directory itself off ``sys.path`` so its module names cannot shadow others.
"""

import sys

if __package__:
    from .cli import main
else:
    import importlib.util
    from pathlib import Path

    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    _spec = importlib.util.spec_from_file_location(
        "_dflash_cachebuild", _here / "__init__.py", submodule_search_locations=[str(_here)]
    )
    assert _spec is not None and _spec.loader is not None
    _pkg = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _pkg
    _spec.loader.exec_module(_pkg)
    main = importlib.import_module("_dflash_cachebuild.cli").main

if __name__ == "__main__":
    sys.exit(main())
