"""Stand-ins for what vLLM puts on a machine, because vLLM cannot be installed here (no GPU, and its wheels pin torch).

- :func:`write_distribution`: an installed package as ``importlib.metadata`` reads it (a ``<name>-<version>.dist-info``
  folder), with the ``Requires-Dist`` lines copied from the real wheels (``VLLM_REQUIRES``, ``TRL_REQUIRES``).
- :func:`write_vllm`: an importable ``vllm`` package with the names TRL and Unsloth import from it (``SamplingParams``
  with vLLM 0.11.2's fields, ``LoRARequest``, ``RequestOutput``), and its dist-info.
- :class:`SharedWeightsEngine`: what Unsloth's ``fast_inference`` hangs on a model as ``model.vllm_engine``.

Each names the upstream file it copies. Put the folder on ``sys.path`` before anything imports TRL or Unsloth: both
decide at import whether vLLM is installed (trl/import_utils.py, unsloth_zoo/vllm_utils.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Requires-Dist lines of the real wheels (each wheel's *.dist-info/METADATA), as far as the engine decision reads them.
VLLM_REQUIRES = {"0.11.2": ["transformers<5,>=4.56.0", "torch==2.9.0"], "0.15.1": ["transformers<5,>=4.56.0", "torch==2.9.1"]}
TRL_REQUIRES = {"0.22.2": ["transformers>=4.55.0", 'vllm>=0.10.0; python_version < "3.13" and extra == "vllm"'],
                "1.15.0": ["transformers>=4.56.2", 'vllm<=0.31.0,>=0.21.0; extra == "vllm"']}


def write_distribution(root: Path, name: str, version: str, requires=()) -> Path:
    """``name`` ``version`` installed under ``root`` as far as ``importlib.metadata`` can tell (no code)."""
    info = root / f"{name}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {line}" for line in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")
    return info


# vllm/sampling_params.py @ 0.11.2: SamplingParams' fields with their defaults. Unsloth keeps only the keywords that
# inspect.signature(SamplingParams) names (unsloth/models/rl_replacements.py, grpo_update_SamplingParams).
SAMPLING_FIELDS = """
    n: int = 1
    best_of: int | None = None
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list | None = None
    stop_token_ids: list | None = None
    ignore_eos: bool = False
    max_tokens: int | None = 16
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    logits_processors: object = None
    include_stop_str_in_output: bool = False
    truncate_prompt_tokens: int | None = None
    output_kind: object = None
    structured_outputs: object = None
    guided_decoding: object = None
    logit_bias: dict | None = None
    allowed_token_ids: list | None = None
    extra_args: dict | None = None
    bad_words: list | None = None
"""

MODULES = {
    "vllm/__init__.py": f'''
        """Stand-in for vLLM {{version}} (vLLM cannot be installed here): the names TRL and Unsloth import."""
        from dataclasses import dataclass

        __version__ = "{{version}}"


        @dataclass
        class SamplingParams:{textwrap.indent(SAMPLING_FIELDS, " " * 8)}

        class LLM:
            """TRL imports the name; Unsloth's engine (model.vllm_engine) is used instead of building one."""

            def __init__(self, *args, **kwargs):
                raise RuntimeError("stand-in vLLM: TRL built its own engine instead of using model.vllm_engine")

        from .outputs import CompletionOutput, RequestOutput  # noqa: E402
    ''',
    # vllm/outputs.py @ 0.11.2: what TRL reads of a generation (prompt_token_ids, outputs[].token_ids, .logprobs)
    "vllm/outputs.py": '''
        from dataclasses import dataclass, field


        @dataclass
        class Logprob:
            logprob: float
            rank: int | None = None
            decoded_token: str | None = None


        @dataclass
        class CompletionOutput:
            index: int
            text: str
            token_ids: list
            cumulative_logprob: float | None
            logprobs: list | None
            finish_reason: str | None = None
            stop_reason: object = None
            lora_request: object = None


        @dataclass
        class RequestOutput:
            request_id: str
            prompt: str | None
            prompt_token_ids: list
            prompt_logprobs: object
            outputs: list = field(default_factory=list)
            finished: bool = True
            lora_request: object = None
    ''',
    "vllm/sampling_params.py": '''
        from . import SamplingParams  # noqa: F401


        class StructuredOutputsParams:
            def __init__(self, **kwargs):
                self.kwargs = kwargs


        class GuidedDecodingParams(StructuredOutputsParams):
            pass
    ''',
    "vllm/lora/__init__.py": "",
    # vllm/lora/request.py @ 0.11.2. Unsloth replaces the class with its own, which carries the adapter's tensors
    # (unsloth_zoo/vllm_lora_request.py; unsloth_zoo/vllm_utils.py, patch_vllm_lora_load_tensors)
    "vllm/lora/request.py": '''
        from dataclasses import dataclass


        @dataclass
        class LoRARequest:
            lora_name: str
            lora_int_id: int
            lora_path: str = ""
            lora_local_path: str | None = None
            long_lora_max_len: int | None = None
            base_model_name: str | None = None
            tensorizer_config_dict: dict | None = None
    ''',
    # What TRL imports for vLLM's server mode at import time (trl/extras/vllm_client.py in 0.22.2,
    # trl/generation/vllm_client.py in 1.15): names only, server mode is not run here.
    "vllm/distributed/__init__.py": "",
    "vllm/distributed/utils.py": "class StatelessProcessGroup:\n    pass\n",
    "vllm/distributed/device_communicators/__init__.py": "",
    "vllm/distributed/device_communicators/pynccl.py": "class PyNcclCommunicator:\n    pass\n",
    "vllm/distributed/weight_transfer/__init__.py": "",
    "vllm/distributed/weight_transfer/nccl_common.py": "def trainer_init(*args, **kwargs):\n    raise NotImplementedError\n",
    "vllm/distributed/weight_transfer/packed_tensor.py": "def packed_nccl_broadcast_producer(*args, **kwargs):\n    raise NotImplementedError\n",
    "vllm/distributed/weight_transfer/nccl_engine.py": "class NCCLTrainerSendWeightsArgs:\n    pass\n\n\nclass NCCLWeightTransferEngine:\n    pass\n",
    "vllm/utils/__init__.py": "",
    "vllm/utils/network_utils.py": "def get_ip():\n    return '127.0.0.1'\n",
}


def write_vllm(root: Path, version: str) -> Path:
    """A stand-in ``vllm`` ``version`` under ``root``: the package and its dist-info. Returns ``root``."""
    for relative, source in MODULES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source).replace("{version}", version).lstrip())
    write_distribution(root, "vllm", version, VLLM_REQUIRES.get(version, ()))
    return root


class SharedWeightsEngine:
    """What Unsloth's ``from_pretrained(fast_inference=True)`` hangs on the model as ``model.vllm_engine``: a vLLM
    ``LLM`` that shares the training model's base weights (``llm.shared_weights = True``, unsloth/models/llama.py) and
    generates with the adapter a ``LoRARequest`` hands it each call (Unsloth's ``load_lora``), or from the base weights
    without one.

    Stand-in (no vLLM here): it samples with the model's own ``generate``, under the request's sampling settings, and
    returns vLLM's ``RequestOutput``s with real token ids and, when asked (``logprobs=0``), the sampler's log-probability
    of each token. It checks that the request's adapter is the model's live one and records every call.
    """

    shared_weights = True
    # SamplingParams settings it honours; any other one set away from vLLM's default is refused, not ignored
    HONOURED = {"n", "temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_tokens", "stop",
                "include_stop_str_in_output", "logprobs", "seed", "skip_special_tokens", "detokenize",
                "structured_outputs", "guided_decoding"}

    def __init__(self, model, tokenizer):
        import types

        # a vision-language model's processor renders a prompt with its images; its tokenizer does the rest
        self.model, self.processor, self.tokenizer = model, tokenizer, getattr(tokenizer, "tokenizer", tokenizer)
        self.calls: list[dict] = []
        # vLLM's LLM.llm_engine.vllm_config.model_config, which Unsloth's trainer reads around generate to wake and sleep
        # the engine (unsloth/models/rl_replacements.py): off, as Unsloth starts vLLM without UNSLOTH_VLLM_STANDBY
        self.llm_engine = types.SimpleNamespace(vllm_config=types.SimpleNamespace(
            model_config=types.SimpleNamespace(enable_sleep_mode=False)))

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None):
        import dataclasses

        import torch
        from vllm import SamplingParams
        from vllm.outputs import CompletionOutput, Logprob, RequestOutput

        params = sampling_params or SamplingParams()
        settings = dataclasses.asdict(params)
        defaults = dataclasses.asdict(SamplingParams())
        unhonoured = {k: v for k, v in settings.items() if k not in self.HONOURED and v != defaults[k]}
        if unhonoured or params.n != 1 or params.structured_outputs or params.guided_decoding:
            raise NotImplementedError(f"stand-in vLLM engine: {unhonoured or 'n > 1 or structured outputs'} not honoured")
        self.calls.append({"prompts": len(prompts), "sampling": {k: settings[k] for k in sorted(self.HONOURED)},
                           "lora": self._request_record(lora_request),
                           "images": [self._images(p) for p in prompts]})
        stop = [params.stop] if isinstance(params.stop, str) else list(params.stop or [])
        options = dict(do_sample=params.temperature > 0, max_new_tokens=params.max_tokens, pad_token_id=self.tokenizer.eos_token_id,
                       output_scores=params.logprobs is not None, return_dict_in_generate=True)
        if params.temperature > 0:
            options.update(temperature=params.temperature, top_p=params.top_p, top_k=max(params.top_k, 0),
                           min_p=params.min_p or None)
        if params.repetition_penalty != 1.0:
            options["repetition_penalty"] = params.repetition_penalty
        if stop:
            options.update(stop_strings=stop, tokenizer=self.tokenizer)
        outputs = []
        training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self._adapter(lora_request):
                for index, prompt in enumerate(prompts):
                    inputs = self._inputs(prompt)
                    ids = inputs["input_ids"][0].tolist()
                    done = self.model.generate(**inputs, **options)
                    tokens = done.sequences[0, len(ids):].tolist()
                    if self.tokenizer.eos_token_id in tokens:  # vLLM stops at EOS and keeps it
                        tokens = tokens[:tokens.index(self.tokenizer.eos_token_id) + 1]
                    logprobs = None
                    if params.logprobs is not None:  # vLLM's processed log-probabilities: after temperature, top-k/p
                        logprobs = [{token: Logprob(torch.log_softmax(scores[0].float(), -1)[token].item(), rank=1)}
                                    for token, scores in zip(tokens, done.scores)]
                    text = self.tokenizer.decode(tokens, skip_special_tokens=params.skip_special_tokens)
                    outputs.append(RequestOutput(str(index), None, list(ids), None, [
                        CompletionOutput(0, text, tokens, None, logprobs, "stop" if len(tokens) < params.max_tokens else "length",
                                         lora_request=lora_request)], lora_request=lora_request))
        finally:
            self.model.train(training)
        return outputs

    @staticmethod
    def _images(prompt) -> list:
        """A prompt's images as vLLM takes them (vllm/inputs/data.py, TextPrompt's ``multi_modal_data``: one image, or
        a list)."""
        image = prompt.get("multi_modal_data", {}).get("image") if isinstance(prompt, dict) else None
        return [] if image is None else list(image) if isinstance(image, list) else [image]

    def _inputs(self, prompt) -> dict:
        """The model's inputs for one vLLM prompt: token ids (``prompt_token_ids``), or a text, rendered with its images
        through the processor as vLLM's multimodal input processor does."""
        import torch

        if isinstance(prompt, dict) and "prompt_token_ids" in prompt:
            ids = torch.tensor([prompt["prompt_token_ids"]])
            return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        text = prompt["prompt"] if isinstance(prompt, dict) else prompt
        images = self._images(prompt)
        if images:
            return dict(self.processor(text=[text], images=[images], return_tensors="pt", add_special_tokens=False))
        ids = torch.tensor([self.tokenizer(text, add_special_tokens=False).input_ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def _request_record(self, lora_request) -> dict | None:
        """What a call's LoRA request held: its id, and whether its tensors are the model's live adapter."""
        if lora_request is None:
            return None
        live = {name.replace(".default", ""): param for name, param in self.model.named_parameters() if ".lora_" in name}
        tensors = lora_request.lora_tensors or {}
        return {"name": lora_request.lora_name, "id": lora_request.lora_int_id, "tensors": len(tensors),
                "live_adapter": set(tensors) == set(live) and all(tensors[k].equal(live[k]) for k in tensors),
                "lora_B_norm": sum(float(t.float().norm()) for k, t in tensors.items() if ".lora_B." in k)}

    def _adapter(self, lora_request):
        """The adapter the request hands the engine; without a request the shared base weights alone, as vLLM does."""
        import contextlib

        return contextlib.nullcontext() if lora_request is not None else self.model.disable_adapter()
