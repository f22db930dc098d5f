"""The package's shape: layer folders whose imports run downward only, rewards stands alone, and grpo-lite speaks
from rank 0 only."""

import ast
import logging
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports, at module level or inside functions."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        is_package = path.name == "__init__.py"
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
                    name = ".".join(base + ([node.module] if node.module else []))
                    targets.add(name)
                    targets.update(f"{name}.{alias.name}" for alias in node.names)
                elif node.module:
                    targets.add(node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[module] = {t for t in targets if t.split(".")[0] == package or t.split(".")[0] == "rewards"}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the package's modules (``__init__`` re-exports left out), or None."""
    modules = {m for m in graph if "." in m}
    state: dict[str, int] = {}

    def visit(module, path):
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if target not in modules:
                continue
            if state.get(target) == 1:
                return path[path.index(target):] + [target] if target in path else [module, target]
            if target not in state:
                found = visit(target, path + [target])
                if found:
                    return found
        state[module] = 2
        return None

    for module in sorted(modules):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_no_import_cycles_in_either_package():
    for package in ("grpo_lite", "rewards"):
        assert _cycle(_imports(package)) is None, f"import cycle in {package}: {' -> '.join(_cycle(_imports(package)))}"


def test_the_cycle_finder_finds_a_planted_cycle():
    assert _cycle({"p.a": {"p.b"}, "p.b": {"p.c"}, "p.c": {"p.a"}}) == ["p.a", "p.b", "p.c", "p.a"]


def test_rewards_stand_alone():
    for module, targets in _imports("rewards").items():
        assert not any(t.startswith("grpo_lite") for t in targets), f"{module} imports grpo_lite"


def test_the_logger_speaks_on_rank_zero_only(monkeypatch, capsys):
    from grpo_lite.log import logger

    monkeypatch.setenv("RANK", "1")
    logger.info("from rank one")
    monkeypatch.setenv("RANK", "0")
    logger.info("from rank zero")
    logger.warning("careful")
    err = capsys.readouterr().err
    assert "from rank one" not in err
    assert "grpo-lite: from rank zero" in err and "grpo-lite warning: careful" in err
    assert logging.getLogger("grpo_lite").propagate is False


def _public_parameters() -> dict[str, set[str]]:
    """Each public function of grpo_lite (and each public class's __init__) -> its parameter names, read from
    the source, so nothing heavy is imported."""
    from grpo_lite import _EXPORTS

    found: dict[str, set[str]] = {}
    for name, module in _EXPORTS.items():
        path = ROOT / "grpo_lite" / (module.lstrip(".").replace(".", "/") + ".py")
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                node = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            elif not (isinstance(node, ast.FunctionDef) and node.name == name):
                continue
            if node is not None:
                args = node.args
                found[name] = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    return found


def test_one_name_per_quantity_in_the_public_api():
    """The completion budget, the held-out size and the pass@k samples each have one name (GRPOConfig's where
    GRPOConfig has one), in every function and every command."""
    from grpo_lite.launch.cli import build_parser

    retired = {"max_new_tokens", "max_completion_tokens", "n_heldout", "n", "pass_k", "num_samples"}
    parameters = _public_parameters()
    assert {"plan", "evaluate", "preview", "run_demo", "train", "generate"} <= set(parameters)
    for function, names in parameters.items():
        assert not names & retired, f"{function}() takes {names & retired}"
    assert "max_completion_length" in parameters["plan"] & parameters["generate"] & parameters["evaluate"]
    assert "heldout_n" in parameters["train"] & parameters["evaluate"] & parameters["run_demo"]
    assert "heldout_samples" in parameters["train"] & parameters["evaluate"] & parameters["run_demo"]
    commands = build_parser()._subparsers._group_actions[0].choices
    for command, parser in commands.items():
        flags = [flag for action in parser._actions for flag in action.option_strings]
        assert not [flag for flag in flags if flag.lstrip("-").replace("-", "_") in retired], command


def test_each_constant_is_defined_once():
    """A module-level constant (GB, TIE, ...) lives in one module of either package; others import it."""
    defined: dict[str, list[str]] = {}
    for package in ("grpo_lite", "rewards"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.parse(path.read_text()).body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.isupper():
                        defined.setdefault(target.id, []).append(str(path.relative_to(ROOT)))
    assert {name: where for name, where in defined.items() if len(where) > 1} == {}


# The layers, bottom first: a module may import from its own layer and the layers below it, never above.
LAYERS = ["machine", "data", "run", "model", "environments", "guards", "monitor", "evaluation", "training", "launch"]
# what every layer speaks through: its logger, its two error kinds, the shapes of what users give
TOP_LEVEL = {"__init__", "__main__", "log", "errors", "shapes"}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """``module -> target`` for each import of a higher layer, or of the public API (``grpo_lite`` itself) from
    inside a layer."""
    found = []
    for module, targets in sorted(graph.items()):
        layer = _layer(module)
        if layer is None:
            continue
        for target in sorted(targets):
            if target.split(".")[0] != "grpo_lite":
                continue
            above = _layer(target) is not None and LAYERS.index(_layer(target)) > LAYERS.index(layer)
            if above or target == "grpo_lite":
                found.append(f"{module} -> {target}")
    return found


def test_imports_run_down_the_layers():
    assert _upward_imports(_imports("grpo_lite")) == []


def test_the_layer_check_finds_a_planted_upward_import():
    graph = {"grpo_lite.run.record": {"grpo_lite.model.load", "grpo_lite.machine.device", "grpo_lite.log"},
             "grpo_lite.model.load": {"grpo_lite.run.settings"}, "grpo_lite.data.prepare": {"grpo_lite"}}
    assert _upward_imports(graph) == ["grpo_lite.data.prepare -> grpo_lite", "grpo_lite.run.record -> grpo_lite.model.load"]


def test_every_module_sits_in_a_layer_folder():
    package = ROOT / "grpo_lite"
    assert {p.stem for p in package.glob("*.py")} == TOP_LEVEL
    folders = {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    assert folders == set(LAYERS)
    for layer in LAYERS:
        assert (package / layer / "__init__.py").read_text().startswith('"""'), f"{layer}/__init__.py says what the layer does"


def test_the_architecture_page_names_every_layer_in_order():
    page = (ROOT / "docs" / "architecture.md").read_text()
    positions = [page.find(f"`{layer}/`") for layer in reversed(LAYERS)]
    assert -1 not in positions and positions == sorted(positions), "docs/architecture.md lists the layers top first"


def test_no_module_outside_tests_imports_another_modules_private_names():
    """What benchmarks, scripts and the packages use from a module is its public API."""
    found = []
    for folder in ("grpo_lite", "rewards", "benchmarks", "scripts", "docs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom):
                    private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                    found += [f"{path.relative_to(ROOT)}: {node.module}.{name}" for name in private]
    assert found == []


STACK = {"grpo_lite", "trl", "transformers", "peft", "datasets", "torch", "accelerate", "unsloth"}


def test_a_test_module_marked_stack_free_imports_nothing_of_the_stack():
    """The T4 stack's CI run leaves out modules marked ``stack_free`` (.ci/run): each tests the rewards library and the
    sandbox, which import nothing that differs between the stacks, so each must import none of it itself either."""
    marked = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text())
        if not any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
                   and "stack_free" in ast.unparse(node.value) for node in tree.body):
            continue
        marked.append(path.name)
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        arguments = {arg.arg for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for arg in node.args.args}
        assert not imported & STACK, f"{path.name} is marked stack_free and imports {sorted(imported & STACK)}"
        assert not {name for name in arguments if "model" in name}, f"{path.name} is marked stack_free and takes a model"
    assert "test_sandbox.py" in marked
