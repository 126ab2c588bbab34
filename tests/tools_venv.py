"""What the tests that read Loom's files with PyPI's own tools share (tests/tensorboard/
read_events.py, tests/profiler/read_trace.py): those tools come from the virtual environment
scripts/install-deps.sh makes (.venv-tools/ at the repository root); without it such a test
fails under CI (the environment variable CI is set) and is skipped (exit 77) elsewhere.
"""
import argparse
import importlib
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PYTHON = os.path.join(REPO, ".venv-tools", "bin", "python")
SKIP = 77


def need(module, script):
    """Imports `module`, re-running `script` (the caller's __file__) in the venv if this Python
    lacks it; fails or skips when the venv cannot either."""
    try:
        importlib.import_module(module)
        return
    except ImportError:
        pass
    name = os.path.splitext(os.path.basename(script))[0]
    # Not sys.executable against VENV_PYTHON: a venv's python is a link to the python that made
    # it, so on a plain Debian both resolve to /usr/bin/python3.11; sys.prefix tells them apart.
    if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(REPO, ".venv-tools")) \
            and os.environ.get("LOOM_TOOLS_VENV_REEXEC") != "1":
        os.environ["LOOM_TOOLS_VENV_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(script)] + sys.argv[1:])
    why = (f"{module} is not importable (no working virtual environment at "
           f"{os.path.dirname(os.path.dirname(VENV_PYTHON))}; run scripts/install-deps.sh)")
    if os.environ.get("CI"):
        print(f"{name}: FAILED: {why}", file=sys.stderr)
        sys.exit(1)
    print(f"{name}: skipped: {why}")
    sys.exit(SKIP)


failures = []


def check(ok, what):
    """Records a failed check (the script exits 1 at the end if any failed)."""
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}")


def start(module, script):
    """The command line every such test takes (--driver: the Loom program that writes the files;
    --workdir: a scratch folder, emptied here), once `module` imports (see need)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--driver", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    need(module, script)
    shutil.rmtree(args.workdir, ignore_errors=True)
    return args


def finish(script, what_passed):
    """Exits 1 if a check failed; otherwise says what passed."""
    name = os.path.splitext(os.path.basename(script))[0]
    if failures:
        print(f"{name}: {len(failures)} checks failed")
        sys.exit(1)
    print(f"{name}: {what_passed}")
