"""The package's shape: imports flow one way, rewards stands alone, and grpo-lite speaks from rank 0 only."""

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
    """The completion budget, the held-out size and the pass@k samples each have one name (GRPOConfig's
    where GRPOConfig has one): the old names live on only as deprecated aliases."""
    from grpo_lite.cli import build_parser
    from grpo_lite.renamed import OLD_NAMES

    parameters = _public_parameters()
    assert {"plan", "evaluate", "preview", "run_demo", "train", "generate"} <= set(parameters)
    for function, names in parameters.items():
        assert not names & set(OLD_NAMES), f"{function}() still takes {names & set(OLD_NAMES)}; use {OLD_NAMES}"
    assert "max_completion_length" in parameters["plan"] & parameters["generate"] & parameters["evaluate"]
    assert "heldout_n" in parameters["train"] & parameters["evaluate"] & parameters["run_demo"]
    assert "heldout_samples" in parameters["train"] & parameters["evaluate"] & parameters["run_demo"]
    commands = build_parser()._subparsers._group_actions[0].choices
    for command, parser in commands.items():
        for action in parser._actions:
            documented = [flag for flag in action.option_strings if action.help != "==SUPPRESS=="]
            old = [flag for flag in documented if flag.lstrip("-").replace("-", "_") in OLD_NAMES]
            assert not old, f"grpo-lite {command} documents the old flag {old}"


def test_old_names_still_work_with_a_warning():
    import pytest

    from grpo_lite.cli import build_parser
    from grpo_lite.planner import plan

    with pytest.warns(DeprecationWarning, match="max_completion_tokens is renamed max_completion_length") as caught:
        old = plan("Qwen2.5-1.5B", gpu="T4", max_completion_tokens=1024)
    assert caught[0].filename == __file__, "the warning points at the caller's line, so Python shows it there"
    assert old.total_gb == plan("Qwen2.5-1.5B", gpu="T4", max_completion_length=1024).total_gb
    with pytest.raises(TypeError, match="not both"):
        plan("Qwen2.5-1.5B", max_completion_tokens=1024, max_completion_length=512)
    with pytest.warns(DeprecationWarning, match="--pass-k is renamed --heldout-samples"):
        args = build_parser().parse_args(["demo", "--pass-k", "2", "--n-heldout", "4"])
    assert (args.heldout_samples, args.heldout_n) == (2, 4)


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


def test_the_ownership_table_names_modules_that_exist():
    docs = (ROOT / "docs" / "architecture.md").read_text()
    named = [line.split("`")[1] for line in docs.splitlines() if line.startswith("| `") and line.split("`")[1].endswith(".py")]
    assert len(named) > 10
    assert [path for path in named if not (ROOT / path).exists()] == []


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


def test_algo_is_a_reference_only_tests_import():
    """docs/architecture.md: training runs TRL's loss; algo.py is a readable copy that only tests import."""
    importers = [module for package in ("grpo_lite", "rewards") for module, targets in _imports(package).items()
                 if "grpo_lite.algo" in targets and module != "grpo_lite.algo"]
    assert importers == []
    assert "only the tests import" in (ROOT / "grpo_lite" / "algo.py").read_text().split('"""')[1].replace("\n", " ")
