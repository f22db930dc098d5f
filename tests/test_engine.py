"""Which engine generates, vLLM or transformers, by card x vLLM x TRL x transformers x Unsloth (grpo_lite/machine/engine.py).

No GPU and no vLLM here: the card is stood in through torch.cuda (a T4 is 7.5, an L4 8.9, Kaggle's P100 6.0), and the
installed versions through their metadata (tests/vllm_stand_in.py writes dist-info folders on the path, with the
Requires-Dist lines of the real wheels). The module's docstring names the upstream source of every rule.
"""

import pytest
import torch
from vllm_stand_in import TRL_REQUIRES, VLLM_REQUIRES, write_distribution

from grpo_lite import check_runtime
from grpo_lite.machine.engine import Stack, decide, declared, specifier
from grpo_lite.model import load as models

T4, L4, P100 = (7, 5), (8, 9), (6, 0)
# The two ends of the supported range: what Unsloth's notebooks install, and the lock.
NOTEBOOK = {"trl": "0.22.2", "transformers": "4.56.2"}
LATEST = {"trl": "1.15.0", "transformers": "5.17.0"}


def stack(vllm, ends, **changes):
    """What ``decide`` reads of an installed stack: the versions, and the specifiers the real wheels declare."""
    return Stack(vllm=vllm, trl=ends["trl"], transformers=ends["transformers"],
                 vllm_needs_transformers=specifier(VLLM_REQUIRES.get(vllm, ()), "transformers"),
                 trl_accepts_vllm=specifier(TRL_REQUIRES[ends["trl"]], "vllm", extra="vllm"), **{"unsloth": True, **changes})


@pytest.mark.parametrize("card, vllm, ends, engine, said", [
    # Unsloth's notebooks: vLLM 0.11.2 on a T4 and 0.15.1 elsewhere, both with TRL 0.22.2 and transformers 4.56.2
    (T4, "0.11.2", NOTEBOOK, "vLLM", "vLLM 0.11.2 with TRL 0.22.2 on compute capability 7.5, as Unsloth's notebooks run a T4"),
    (L4, "0.15.1", NOTEBOOK, "vLLM", "vLLM 0.15.1 with TRL 0.22.2 on compute capability 8.9"),
    (T4, "0.11.0", NOTEBOOK, "vLLM", "vLLM 0.11.0"),
    (T4, "0.12.0", NOTEBOOK, "transformers", "Unsloth's notebooks run vLLM 0.11.x on cards below compute capability 8.0 (this "
                                             "one: 7.5; a T4 is 7.5), not 0.12.0; on a T4 vLLM generates with the stack"),
    (T4, "0.15.1", NOTEBOOK, "transformers", "run vLLM 0.11.x on cards below compute capability 8.0 (this one: 7.5; a T4 is 7.5), not 0.15.1"),
    (T4, "0.10.2", NOTEBOOK, "transformers", "not 0.10.2"),
    (P100, "0.11.2", NOTEBOOK, "transformers", "compute capability 6.0: vLLM needs 7.0 or higher"),
    # The lock: TRL 1.15 takes vLLM 0.21-0.31 (which need a card of 8.0 or more: the T4's vLLM is 0.11)
    (L4, "0.30.0", LATEST, "vLLM", "vLLM 0.30.0 with TRL 1.15.0 on compute capability 8.9"),
    (L4, "0.24.0+cu129", LATEST, "vLLM", "vLLM 0.24.0+cu129"),  # a local build tag, compared as TRL compares it
    (L4, "0.15.1", LATEST, "transformers",
     "vLLM 0.15.1 requires transformers<5,>=4.56.0 and 5.17.0 is installed; TRL 1.15.0 accepts vLLM <=0.31.0,>=0.21.0 (its "
     "vllm extra), not 0.15.1; install a vLLM that TRL 1.15.0 accepts (<=0.31.0,>=0.21.0) (requirements/vllm.txt)"),
    (L4, "0.33.0", LATEST, "transformers", "TRL 1.15.0 accepts vLLM <=0.31.0,>=0.21.0 (its vllm extra), not 0.33.0"),
    (T4, "0.11.2", LATEST, "transformers", "vLLM 0.11.2 requires transformers<5,>=4.56.0 and 5.17.0 is installed; TRL 1.15.0"),
    (T4, "0.30.0", LATEST, "transformers", "a T4 is 7.5), not 0.30.0"),
    # TRL 1.15 with the notebooks' transformers: its range still holds
    (L4, "0.15.1", {"trl": "1.15.0", "transformers": "4.56.2"}, "transformers", "accepts vLLM <=0.31.0,>=0.21.0"),
    (None, "0.11.2", NOTEBOOK, "transformers", "no CUDA GPU"),
])
def test_the_engine_by_card_vllm_trl_and_transformers(card, vllm, ends, engine, said):
    decided = decide(card, stack(vllm, ends))
    assert decided.name == engine and said in decided.reason, decided


def test_vllm_missing_unsloth_missing_or_disabled_mean_transformers_with_the_fix():
    assert "vLLM is not installed; on a T4 vLLM generates with the stack Unsloth's notebooks install there: vLLM 0.11.2, " \
           "transformers 4.56.2, TRL 0.22.2 (requirements/t4.txt)" == decide(T4, stack(None, NOTEBOOK)).reason
    assert "(requirements/vllm.txt)" in decide(L4, stack(None, LATEST)).reason
    assert "Unsloth is not installed" in decide(L4, stack("0.30.0", LATEST, unsloth=False)).reason
    disabled = decide(L4, stack("0.30.0", LATEST, unsloth_disabled_vllm="a broken vLLM binary extension"))
    assert not disabled.vllm and "Unsloth disabled vLLM when it was imported: a broken vLLM binary extension" in disabled.reason


def test_only_a_vllm_unsloths_notebooks_do_not_run_on_the_card_is_untested():
    # fast_inference=True still starts vLLM there (its kernels include the T4's, sm_75); a version a library refuses, not
    assert decide(T4, stack("0.15.1", NOTEBOOK)).untested
    assert decide(T4, stack("0.30.0", LATEST)).untested  # TRL 1.15 takes 0.30; only the card speaks against it
    assert not decide(T4, stack("0.11.2", LATEST)).untested  # TRL 1.15 and vLLM 0.11.2's transformers<5 refuse it
    assert not decide(L4, stack("0.33.0", LATEST)).untested and not decide(P100, stack("0.11.2", NOTEBOOK)).untested


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """Stand in a card (through torch.cuda, as a real one answers) and installed packages (their dist-info on the path)."""
    def stand_in(card, name, memory_gb, **versions):
        props = type("Props", (), {"name": name, "total_memory": int(memory_gb * 2**30), "major": card[0], "minor": card[1]})
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: card)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: props())
        root = tmp_path / "site"
        for package, version in versions.items():
            requires = {"vllm": VLLM_REQUIRES, "trl": TRL_REQUIRES}.get(package, {}).get(version, ())
            write_distribution(root, package, version, requires)
        (root / "unsloth").mkdir(parents=True, exist_ok=True)  # found, never imported: check_runtime only looks
        (root / "unsloth" / "__init__.py").write_text("raise ImportError('a stand-in: nothing imports Unsloth here')\n")
        monkeypatch.syspath_prepend(str(root))

    return stand_in


@pytest.mark.parametrize("card, gpu, gb, vllm, ends, on, said", [
    (T4, "Tesla T4", 14.74, "0.11.2", NOTEBOOK, True, "Generation: vLLM generates (vLLM 0.11.2 with TRL 0.22.2 on compute "
                                                      "capability 7.5, as Unsloth's notebooks run a T4)"),
    (T4, "Tesla T4", 14.74, "0.12.0", NOTEBOOK, False, "Generation: transformers generates (Unsloth's notebooks run vLLM 0.11.x "
                                                       "on cards below compute capability 8.0 (this one: 7.5; a T4 is 7.5), not 0.12.0"),
    (L4, "NVIDIA L4", 22.16, "0.15.1", NOTEBOOK, True, "Generation: vLLM generates (vLLM 0.15.1 with TRL 0.22.2"),
    (T4, "Tesla T4", 14.74, "0.11.2", LATEST, False, "TRL 1.15.0 accepts vLLM <=0.31.0,>=0.21.0 (its vllm extra), not 0.11.2"),
    (L4, "NVIDIA L4", 22.16, "0.15.1", LATEST, False, "TRL 1.15.0 accepts vLLM <=0.31.0,>=0.21.0 (its vllm extra), not 0.15.1"),
    (L4, "NVIDIA L4", 22.16, "0.30.0", LATEST, True, "Generation: vLLM generates (vLLM 0.30.0 with TRL 1.15.0"),
])
def test_check_runtime_says_which_engine_generates_and_why(machine, capsys, card, gpu, gb, vllm, ends, on, said):
    machine(card, gpu, gb, vllm=vllm, **ends)
    report = check_runtime()
    assert report.engine.vllm is on and said in capsys.readouterr().out
    # load_model decides the same way: the Unsloth backend with vLLM's fast_inference, or transformers generating
    backend = models.choose_backend("unsloth", fast_inference="auto")
    assert backend.fast_inference is on and report.engine.reason in backend.reason


def test_the_installed_metadata_is_what_the_decision_reads(machine):
    machine(T4, "Tesla T4", 14.74, vllm="0.11.2", trl="0.22.2", transformers="4.56.2")
    assert declared("vllm", "transformers") == "<5,>=4.56.0"
    assert declared("trl", "vllm", extra="vllm") == ">=0.10.0"  # python_version < "3.13" in the marker: this Python
    assert declared("trl", "transformers") == ">=4.55.0" and declared("trl", "vllm") == ""  # vLLM only in the extra


def test_fast_inference_true_goes_ahead_with_a_vllm_unsloths_notebooks_do_not_run_on_the_card(machine, capsys):
    machine(T4, "Tesla T4", 14.74, vllm="0.15.1", **NOTEBOOK)
    backend = models.choose_backend("unsloth", fast_inference=True)
    assert backend.fast_inference and "fast_inference on as asked: vLLM generates" in backend.reason
    assert "Unsloth's notebooks run vLLM 0.11.x on cards below compute capability 8.0" in capsys.readouterr().err
    assert not models.choose_backend("unsloth").fast_inference  # "auto" stays with transformers


def test_fast_inference_true_is_refused_where_the_installed_trl_refuses_the_vllm(machine):
    machine(T4, "Tesla T4", 14.74, vllm="0.11.2", **LATEST)
    with pytest.raises(models.BackendError, match=r"fast_inference=True needs vLLM: vLLM 0.11.2 requires transformers<5"):
        models.choose_backend("unsloth", fast_inference=True)
