"""A model in and out: load it (Unsloth | transformers + bitsandbytes | CPU), generate with it, export it.

- ``load``: ``load_model`` picks the backend that can work here, loads, attaches LoRA, and keeps what it learned
  (``LoadedModel``) for the run to read
- ``lora``: which weights LoRA adapts (every linear layer but the output layer by default, fused ones included, and
  experts kept as parameters) and where it landed
- ``tiny``: tiny offline models of the families users load, for tests, the demo and GPU measurements
- ``inference``: batched generation (vLLM when the model carries an engine)
- ``exporter``: the adapter, a merged 16-bit model, GGUF
"""
