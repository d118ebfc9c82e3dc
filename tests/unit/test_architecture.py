"""The layout states the architecture, and these checks keep it so (README, Layout): each layer
imports only the layers below it, no module imports itself round a cycle, no function needs
scrolling, the visualisation and results packages never load Lightning, no hidden channel
(an ATTNEXP_* environment variable) is read below the command line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "attnexp"
# Higher imports lower, never the reverse; packages of one rank do not import each other.
LAYERS = {"config": 0, "compat": 0, "attention": 1, "data": 1, "model": 2, "heads": 2, "maps": 3, "results": 4,
          "notebook": 4, "training": 5, "launch": 6, "api": 7, "cli": 8, "__main__": 9}
MAX_FUNCTION_LINES = 60


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, type_only: bool = True) -> set[str]:
    """attnexp modules imported anywhere in the file: lazy imports too, and those under TYPE_CHECKING
    unless `type_only` is false."""
    tree = ast.parse(path.read_text())
    skip = set() if type_only else {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                                    and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    known = modules()
    return {m for m in found if m in known and m.startswith("attnexp")}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_each_layer_imports_only_layers_below_it():
    wrong = []
    for name, path in modules().items():
        mine = layer(name)
        for dep in imports(path):
            theirs = layer(dep)
            if mine is None or theirs is None or theirs == mine or dep == "attnexp":
                continue
            if LAYERS[theirs] >= LAYERS[mine]:
                wrong.append(f"{name} ({mine}) imports {dep} ({theirs})")
    assert not wrong, "\n".join(wrong)


def test_the_model_reads_no_data_conventions_and_its_readers_ask_by_name():
    """The model layer took IGNORE, EOS and read_tokenizer from data/ (IGNORE is the config layer's
    now, the end token the encoder's, the pretrained tokenizer the notebook's), and heads/ and the
    notebook read the model through its single-letter configs (model.a.causal, model.m.max_len)."""
    wrong = [f"{name} imports {dep}" for name, path in modules().items() if layer(name) == "model"
             for dep in imports(path) if layer(dep) == "data"]
    for pkg in ("heads", "notebook", "maps"):
        for path in (PACKAGE / pkg).rglob("*.py"):
            wrong += [f"{path.name}: {m}" for m in re.findall(r"\bmodel\.[am]\.\w+", path.read_text())]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle():
    graph = {name: {d for d in imports(path) if d != name} for name, path in modules().items()}
    # a package __init__ that re-exports is not a cycle with its own submodules
    graph = {n: {d for d in deps if not (n.startswith(d + ".") or d.startswith(n + "."))} for n, deps in graph.items()}
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for d in graph.get(n, ()):
            if state.get(d) == "open":
                cycles.append(" -> ".join(stack[stack.index(d):] + [d]))
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = "done"

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "\n".join(cycles)


def test_at_most_three_modules_beside_the_subpackages():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= 3, flat


@pytest.mark.parametrize("path", sorted([*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "scripts").rglob("*.py")]),
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_function_needs_scrolling(path):
    """The package and the scripts (the 60-line rule applies there too)."""
    functions = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    long = [f"{n.name}: {n.end_lineno - n.lineno + 1} lines" for n in functions
            if n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, long


@pytest.mark.parametrize("package", ["heads", "maps", "results"])
def test_visualisation_and_results_never_import_lightning(package):
    users = [str(p.relative_to(PACKAGE)) for p in (PACKAGE / package).rglob("*.py")
             if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "lightning" in ast.unparse(n)
                    for n in ast.walk(ast.parse(p.read_text())))]
    assert not users, users


def test_no_attnexp_environment_variable_is_read_below_the_command_line():
    readers = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
               if "ATTNEXP_" in p.read_text() and p.relative_to(PACKAGE).parts[0] not in ("cli", "__main__.py")]
    assert not readers, readers


def test_tests_import_no_helpers_from_conftest():
    tests = Path(__file__).resolve().parents[1]
    users = [str(p.relative_to(tests)) for p in tests.rglob("*.py")
             if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "conftest" in ast.unparse(n)
                    for n in ast.walk(ast.parse(p.read_text())))]
    assert not users, users


def test_no_bare_status_string_outside_the_summary_module():
    """summary.Status is the one owner of the statuses: elsewhere a status is Status.X, never "completed"."""
    import re

    statuses = ("running", "completed", "interrupted", "diverged", "pruned", "failed", "config_error")
    words = "|".join(statuses)
    bare = re.compile(r"""(==|!=|\bin\b|return|\()\s*\(?["'](""" + words + r""")["']""")
    found = []
    for path in [*PACKAGE.rglob("*.py"), *(PACKAGE.parent / "hydra_plugins").rglob("*.py")]:
        if path.name == "summary.py" and path.parent.name == "results":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if bare.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{path.name}:{n}: {line.strip()[:80]}")
    assert not found, found


LIGHTNING_PRIVATE = re.compile(r"\._signal_connector|_batches_that_stepped|batch_progress|epoch_progress|"
                               r"\._experiment\b|_ChildProcessObserver|_step_supports_amp_scaling")


def test_lightning_private_parts_are_read_in_the_adapter_only():
    """attnexp/compat/lightning.py, whose test fails when Lightning changes them; nowhere else."""
    adapter = PACKAGE / "compat" / "lightning.py"
    found = [f"{p.relative_to(PACKAGE)}:{i}" for p in sorted(PACKAGE.rglob("*.py")) if p != adapter
             for i, line in enumerate(p.read_text().splitlines(), 1) if LIGHTNING_PRIVATE.search(line.split("#")[0])]
    assert not found, found


LOGGER_NAMES = re.compile(r"tensorboard|wandb|mlflow|csvlogger", re.I)
# the adapters, the MLflow adapter's store beside them, and Lightning's private parts
LOGGER_HOMES = {"training/loggers.py", "training/mlflow_store.py", "compat/lightning.py"}


def test_everything_logger_specific_lives_in_its_adapter():
    """Issue 51 item 3: a name or a string in code (not a docstring or a comment) that names TensorBoard,
    wandb, MLflow or CSV's logger appears only in training/loggers.py (its MLflow adapter's store in
    training/mlflow_store.py, and compat/lightning.py's private reads). Before, results/summary.py
    built TensorBoard's page address."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if str(path.relative_to(PACKAGE)) in LOGGER_HOMES:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef,
                      ast.FunctionDef, ast.AsyncFunctionDef)) and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            text = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                    else node.name if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else node.value
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    else "")
            if LOGGER_NAMES.search(text):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text[:60]!r}")
    assert not found, found


REPO = PACKAGE.parent
NAMED_PATH = re.compile(r"(?<![\w/.])((?:attnexp|scripts|conf|tests|docs|examples|hydra_plugins)/[\w/.\-]+\.(?:py|yaml|md|ipynb)"
                        r"|(?:attention|data|model|maps|results|notebook|training|launch|cli|config|compat)/\w+\.py)")
EXAMPLE_PATHS = {"attnexp/attention/variants/talking_heads.py", "conf/attention/talking_heads.yaml"}  # docs' worked example


def test_every_path_named_in_code_comments_and_docs_exists():
    """Four comments named modules that had moved (an outside review); a path in a docstring, a
    config comment or a page is checked here, a package-relative one (training/fit.py) under attnexp/."""
    texts = [*PACKAGE.rglob("*.py"), *(REPO / "scripts").rglob("*.py"), *(REPO / "scripts").rglob("*.md"),
             *(REPO / "conf").rglob("*.yaml"), *(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "CONTRIBUTING.md"]
    missing = sorted({f"{t.relative_to(REPO)}: {p}" for t in texts for p in NAMED_PATH.findall(t.read_text())
                      if p not in EXAMPLE_PATHS and not (REPO / p).exists() and not (PACKAGE / p).exists()})
    assert not missing, missing


RUN_FOLDER_NAMES = ("summary.json", "config_resolved.yaml", ".attnexp.lock", "last.ckpt", "viewer.html", "timeline.jsonl",
                    "timeline.png", "evolution_ex", "results.md", "results.csv", "results_groups.csv",
                    "optuna_results.json", "interrupted.ckpt", "on_exception.ckpt", "best-epoch", "step-{", "step-*",
                    "test_reads.jsonl", "predictions.json")
RUN_FOLDERS = ("checkpoints", "maps", "eval")  # a run's folders: spelled where a path is built (`run / "maps"`)
# a package resource that happens to share a run file's name: the viewer's template beside maps/html.py
RESOURCES = {("attnexp.maps.html", "viewer.html")}


def nodes(skip: str):
    """(module, AST node) for every node of attnexp/ and hydra_plugins/ but module `skip`'s."""
    files = {**modules(), **{f"hydra_plugins.{p.stem}": p for p in (PACKAGE.parent / "hydra_plugins").rglob("*.py")}}
    for name, path in files.items():
        if name != skip:
            yield from ((name, node) for node in ast.walk(ast.parse(path.read_text())))


def test_the_run_folder_layout_is_spelled_in_one_module():
    """Issue 51: the run folder's file names were spelled in six modules (the end of a run named a GIF
    maps.animation=false never wrote). Each is declared in attnexp.config.layout; a string that is such
    a name (a path part, not a sentence that mentions one) appears nowhere else in the package or the
    sweeper plugin, and neither does a folder of the run where a path is built. Before (this test's
    second version): interrupted.ckpt spelled by its writer and by resume=auto's reader, the checkpoint
    names in build.py, and "checkpoints" joined onto a run folder in five modules."""
    found = []
    for name, node in nodes(skip="attnexp.config.layout"):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value.strip():
            hit = next((n for n in RUN_FOLDER_NAMES if n in node.value), None)
            if hit and (name, hit) not in RESOURCES:
                found.append(f"{name}:{node.lineno} {node.value!r}")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):  # a folder of the run in a path
            found += [f"{name}:{node.lineno} {side.value!r}" for side in (node.left, node.right)
                      if isinstance(side, ast.Constant) and side.value in RUN_FOLDERS]
    assert not found, "\n".join(found)


def test_validating_a_config_imports_no_lightning():
    """CONTRIBUTING's data-set recipe as written put a config beside its DataModule and imported both from
    data/configs.py, which made every config check import Lightning (issue 51). What the recipe says now:
    configs in data/configs.py, each DataModule imported by its config's datamodule(); checked here for
    every built-in data set, in a fresh process."""
    import subprocess
    import sys

    code = ("import sys\nfrom attnexp.api import compose, load_run\n"
            "for d in ('toy', 'synthetic', 'newsgroups'):\n    load_run(compose(['data=' + d]))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# Reads that are not of a file from outside the process, each with why it need not take the reading rule
OWN_READS = {
    ("attnexp.config.paths", "read_text"): "attnexp's own conf/paths/default.yaml",
    ("attnexp.launch.compose", "read_text"): "an attention option of attnexp's conf/ (or the user's --config-dir)",
    ("attnexp.maps.bertviz_export", "read_text"): "bertviz's installed JavaScript and attnexp's vendored libraries",
    ("attnexp.maps.html", "read_text"): "the viewer's template, a package resource",
    ("attnexp.notebook.loaded", "read_text"): "the page it wrote a line above, in its own temporary folder",
    ("attnexp.results.folder", "read_text"): "/proc/PID/stat, the kernel's",
    ("attnexp.data.toy", "read_text"): "the user's corpus, checked first by check_text_file (a regular UTF-8 file)",
}


def test_files_from_outside_are_read_by_the_one_reading_rule():
    """Issue 52: every file attnexp reads from a run folder, a checkpoint's folder, a study, a tokenizer or
    a timeline goes through attnexp.config.files (a regular file, its size checked first, JSON nesting
    bounded). Any other read_text / read_bytes / json.load in the package is one of OWN_READS, said why."""
    found = []
    for name, node in nodes(skip="attnexp.config.files"):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        attr = node.func.attr
        json_load = attr in ("load", "loads") and isinstance(node.func.value, ast.Name) and node.func.value.id == "json" \
            and node.args and "read" in ast.unparse(node.args[0])
        if (attr in ("read_text", "read_bytes") or json_load) and (name, attr) not in OWN_READS:
            found.append(f"{name}:{node.lineno} {ast.unparse(node)[:80]}")
    assert not found, "\n".join(found)
