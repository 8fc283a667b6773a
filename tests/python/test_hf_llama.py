"""A randomly initialised small Llama gives the same logits with longattn as with SDPA.
Needs torch + transformers (device CI); runs on CUDA (bf16) when available, else CPU (fp32)."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import longattn  # noqa: E402
import longattn.hf  # noqa: E402


def small_llama(attn, device, dtype):
    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=512,  # head dim 64
                                   num_hidden_layers=2, num_attention_heads=8,
                                   num_key_value_heads=2, max_position_embeddings=4096)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attn)
    else:  # older transformers read the config at call time
        model.config._attn_implementation = attn
    return model


@pytest.mark.parametrize("seq", [37, 300])
def test_llama_logits_match_sdpa(seq):
    name = longattn.hf.register()
    on_gpu = torch.cuda.is_available() and longattn.cuda_available()
    device, dtype = ("cuda", torch.bfloat16) if on_gpu else ("cpu", torch.float32)
    ids = torch.randint(0, 512, (2, seq), generator=torch.Generator().manual_seed(1)).to(device)
    with torch.no_grad():
        ref = small_llama("sdpa", device, dtype)(ids).logits.float()
        got = small_llama(name, device, dtype)(ids).logits.float()
    tol = 5e-2 if dtype == torch.bfloat16 else 1e-3
    err = (got - ref).abs().max().item()
    assert err < tol * max(1.0, ref.abs().max().item()), err


def test_padded_batch_is_refused_not_silently_wrong():
    name = longattn.hf.register()
    model = small_llama(name, "cpu", torch.float32)
    ids = torch.randint(0, 512, (2, 19), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 19, dtype=torch.long)
    with torch.no_grad():
        # An all-ones padding mask is plain causal attention: accepted, same as SDPA.
        got = model(ids, attention_mask=mask).logits
        ref = small_llama("sdpa", "cpu", torch.float32)(ids, attention_mask=mask).logits
        assert (got - ref).abs().max().item() < 1e-3
        mask[1, :4] = 0  # left padding
        with pytest.raises(NotImplementedError, match="attention_mask"):
            model(ids, attention_mask=mask)
