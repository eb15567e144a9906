"""The SDKs' `types` packages (and anthropic's `resources`) load lazily (config/lazyinit.py, issue
21) and still bind exactly what the eager packages bind: every name of every such package, compared
between a fresh interpreter that imports the SDK the ordinary way and one that imports it as
tapebot does. Behaviour only, never timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agent.providers.sdkload import LAZY_PACKAGES
from config.lazyinit import reexports
from tests.perf.probe import ROOT, probe

# Walks every package under `<sdk>.<top>` (`types`, `resources`) and describes each public name it binds (modules left
# out: the eager packages also bind every submodule they imported along the way). `annotations` is
# the `from __future__ import annotations` feature, which an eager `__init__` leaks as a name.
_PROBE = """
import importlib, json, pathlib, sys, types
sdk, top, lazy = sys.argv[1], sys.argv[2], sys.argv[3] == "lazy"
if lazy:
    from agent.providers.sdkload import import_sdk
    import_sdk(sdk)
else:
    importlib.import_module(sdk)
loaded = sum(1 for m in list(sys.modules) if m.startswith(f"{sdk}.{top}"))
root = pathlib.Path(importlib.import_module(sdk).__file__).parent
packages = sorted(
    ".".join((sdk, *p.parent.relative_to(root).parts)) for p in (root / top).rglob("__init__.py")
)
def describe(value):
    if isinstance(value, (type, types.FunctionType)):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)
bound = {}
for name in packages:
    package = importlib.import_module(name)
    for attr in dir(package):
        value = getattr(package, attr)
        if attr.startswith("_") or attr == "annotations" or isinstance(value, types.ModuleType):
            continue
        bound[f"{name}:{attr}"] = describe(value)
star = {}
exec(f"from {sdk}.{top} import *", star)
print(json.dumps({
    "loaded": loaded,
    "packages": len(packages),
    "bound": bound,
    "star": sorted(
        k for k, v in star.items()
        if not k.startswith("_") and k != "annotations" and not isinstance(v, types.ModuleType)
    ),
    "lazy": type(sys.modules[f"{sdk}.{top}"]).__name__,
}))
"""


@pytest.mark.parametrize(
    ("sdk", "top"), [("openai", "types"), ("anthropic", "types"), ("anthropic", "resources")]
)
def test_lazy_packages_bind_every_name_the_eager_packages_bind(sdk, top):
    assert top in LAZY_PACKAGES[sdk]
    eager, lazy = probe(_PROBE, sdk, top, "eager"), probe(_PROBE, sdk, top, "lazy")
    assert eager["lazy"] != "LazyPackage" and lazy["lazy"] == "LazyPackage"
    assert lazy["loaded"] < eager["loaded"]  # what the laziness is for
    assert eager["packages"] == lazy["packages"] > 1
    assert len(eager["bound"]) > 100
    missing = sorted(set(eager["bound"]) - set(lazy["bound"]))
    extra = sorted(set(lazy["bound"]) - set(eager["bound"]))
    assert not missing and not extra, (missing[:10], extra[:10])
    differ = [k for k in eager["bound"] if eager["bound"][k] != lazy["bound"][k]]
    assert not differ, [(k, eager["bound"][k], lazy["bound"][k]) for k in differ[:5]]
    assert eager["star"] == lazy["star"]  # `from <sdk>.<top> import *`


def test_only_a_pure_reexporting_init_is_made_lazy():
    pure = b'"""doc"""\nfrom __future__ import annotations\nfrom .a import A as A\nfrom .b.c import C as D\n'
    found = reexports(pure)
    assert found is not None
    assert found.where == {"A": "a", "D": "b.c"} and found.renamed == {"D": "C"}
    assert found.submodules == {"a", "b"}
    for impure in (
        b"from .a import A\nX = 1\n",  # an assignment
        b"from .a import *\n",  # a star import
        b"from . import a\n",  # a submodule by name
        b"from .a import A\nif True:\n    from .b import B\n",
        b"import os\nfrom .a import A\n",
        b"from .a import a\n",  # a name that is also a submodule's
        b"from .a import A\n__all__ = ['A', 'B']\n",  # `__all__` names what is not bound
        b"from .a import A\n__all__ = [name for name in ('A',)]\n",  # not a list of literals
        b"from .a import A\n__all__ = ['A']\n__all__ += ['a']\n",
    ):
        assert reexports(impure) is None, impure
    listed = reexports(b"from .a import A\nfrom .b import B\n__all__ = ['B', 'a']\n")
    assert listed is not None and listed.all == ("B", "a")  # what `from pkg import *` binds


def test_a_lazy_package_behaves_like_the_eager_one(tmp_path):
    pkg = tmp_path / "lzpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .one import One as One\nfrom .sub.two import Two as Deux\n")
    (pkg / "one.py").write_text("class One: pass\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "two.py").write_text("import lzpkg_log\nlzpkg_log.append('two')\nclass Two: pass\n")
    (tmp_path / "lzpkg_log.py").write_text("")
    code = """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        import lzpkg_log
        seen = []
        lzpkg_log.append = seen.append
        from config.lazyinit import install_lazy_reexports
        install_lazy_reexports("lzpkg")
        import lzpkg
        before = list(seen)
        from lzpkg import Deux
        out = {
            "before": before, "after": list(seen), "deux": Deux.__qualname__,
            "one": lzpkg.One.__module__, "sub": lzpkg.sub.__name__, "dir": "Deux" in dir(lzpkg),
            "all": lzpkg.__all__,
        }
        try:
            lzpkg.Nope
        except AttributeError as exc:
            out["nope"] = str(exc)
        print(json.dumps(out))
    """
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] == []  # importing the package ran none of its submodules
    assert seen["after"] == ["two"]  # reading a name imported its submodule, once
    assert seen["deux"] == "Two" and seen["one"] == "lzpkg.one" and seen["sub"] == "lzpkg.sub"
    assert seen["dir"] is True and seen["all"] == ["One", "Deux", "one", "sub"]
    assert seen["nope"] == "module 'lzpkg' has no attribute 'Nope'"
