"""Where the `dqgate` executable is: the one this package installed.

The wheel carries the binary in its scripts directory (maturin's `bin`
bindings, as ruff does), so it lands next to the interpreter's other
console scripts: in a virtualenv's `bin/`, in a `--user` install's scheme,
or under a `--target`/`--prefix` directory.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

__all__ = ["find_dqgate_bin"]

_EXE = "dqgate" + (sysconfig.get_config_var("EXE") or "")


def find_dqgate_bin() -> str:
    """Return the path of the `dqgate` executable that this package uses.

    `DQGATE_BIN` overrides the search (for a binary built with cargo in a
    checkout). Otherwise: the scripts directory of this interpreter's
    scheme, then of the user scheme, then the package's own prefix (for
    `pip install --target`), then `PATH`.

    Raises:
        FileNotFoundError: when no `dqgate` executable is found.
    """
    override = os.environ.get("DQGATE_BIN")
    if override:
        return override
    candidates = [
        sysconfig.get_path("scripts"),
        sysconfig.get_path("scripts", _user_scheme()),
        # pip install --target DIR puts the package in DIR and scripts in DIR/bin.
        os.path.join(os.path.dirname(os.path.dirname(__file__)), "bin"),
    ]
    for directory in candidates:
        path = os.path.join(directory, _EXE)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(_EXE)
    if found:
        return found
    raise FileNotFoundError(
        f"no `{_EXE}` executable next to {sys.executable} or on PATH; "
        "reinstall the dqgate wheel, or set DQGATE_BIN"
    )


def _user_scheme() -> str:
    if sys.platform == "win32":
        return "nt_user"
    if sys.platform == "darwin" and getattr(sys, "_framework", None):
        return "osx_framework_user"
    return "posix_user"
