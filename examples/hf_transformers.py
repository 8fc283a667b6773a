"""Use longattn as the attention of a HuggingFace transformers model.

    pip install .  torch transformers
    python examples/hf_transformers.py

Builds a small randomly initialised Llama (no download), runs it with SDPA and with
longattn, and prints the largest logit difference. On a Hopper GPU with a CUDA build the
CUDA backend runs in bf16; elsewhere the CPU backend runs in float32.
"""

import torch
import transformers

import longattn
import longattn.hf


def main():
    name = longattn.hf.register()  # attn_implementation="longattn"
    on_gpu = torch.cuda.is_available() and longattn.cuda_available()
    device, dtype = ("cuda", torch.bfloat16) if on_gpu else ("cpu", torch.float32)
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024,
                                   num_hidden_layers=4, num_attention_heads=16,
                                   num_key_value_heads=4)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 512), device=device)
    with torch.no_grad():
        model.set_attn_implementation("sdpa") if hasattr(model, "set_attn_implementation") \
            else setattr(model.config, "_attn_implementation", "sdpa")
        ref = model(ids).logits.float()
        model.set_attn_implementation(name) if hasattr(model, "set_attn_implementation") \
            else setattr(model.config, "_attn_implementation", name)
        out = model(ids).logits.float()
    print(f"device {device} {dtype}: max |logits(longattn) - logits(sdpa)| = "
          f"{(out - ref).abs().max().item():.3e} (logits up to {ref.abs().max().item():.2f})")


if __name__ == "__main__":
    main()
