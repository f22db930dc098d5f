"""A model in and out: load it (Unsloth | transformers + bitsandbytes | CPU), generate with it, export it.

- ``load``: ``load_model`` picks the backend that can work here, loads, attaches LoRA, and keeps what it learned
  (``LoadedModel``) for the run to read
- ``lora``: which weights LoRA adapts (every linear layer of the language model but the output layer by default, fused
  ones, dense and shared MLPs and every expert included, routers and gates left as loaded) and where it landed
- ``fit``: what the installed TRL and transformers cannot train, judged by a model's config and classes before it loads,
  and the adapters that make it train (or the refusal naming the releases that can)
- ``tiny``: tiny offline models of the families users load, for tests, the demo and GPU measurements
- ``inference``: batched generation (vLLM when the model carries an engine)
- ``exporter``: the adapter, a merged 16-bit model, GGUF
"""
