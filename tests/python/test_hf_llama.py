"""A randomly initialised small Llama (config built here, nothing downloaded) gives the same
logits and the same greedy generate() tokens with longattn as with SDPA, padded batches
included. Needs torch + transformers (installed by scripts/test-python.sh); runs on CUDA (bf16)
when available, else CPU (fp32)."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import longattn  # noqa: E402
import longattn.hf  # noqa: E402

ON_GPU = torch.cuda.is_available() and longattn.cuda_available()
DEVICE, DTYPE = ("cuda", torch.bfloat16) if ON_GPU else ("cpu", torch.float32)
TOL = 5e-2 if DTYPE == torch.bfloat16 else 1e-3


def small_llama(attn, device=DEVICE, dtype=DTYPE, **cfg_kw):
    cfg = dict(vocab_size=512, hidden_size=256, intermediate_size=512,  # head dim 64
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
               max_position_embeddings=4096, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    cfg.update(cfg_kw)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg)).to(device=device, dtype=dtype).eval()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attn)
    else:  # older transformers read the config at call time
        model.config._attn_implementation = attn
    return model


def ids_of(batch, seq, seed):
    return torch.randint(3, 512, (batch, seq), generator=torch.Generator().manual_seed(seed)).to(DEVICE)


@pytest.mark.parametrize("seq", [37, 300])
def test_llama_logits_match_sdpa(seq):
    name = longattn.hf.register()
    ids = ids_of(2, seq, 1)
    with torch.no_grad():
        ref = small_llama("sdpa")(ids).logits.float()
        got = small_llama(name)(ids).logits.float()
    err = (got - ref).abs().max().item()
    assert err < TOL * max(1.0, ref.abs().max().item()), err


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batch_logits_match_sdpa(side):
    name = longattn.hf.register()
    ids = ids_of(3, 29, 2)
    mask = torch.ones(3, 29, dtype=torch.long, device=DEVICE)
    pad = {0: 0, 1: 11, 2: 1}
    for b, n in pad.items():
        if n:
            mask[b, :n] = 0 if side == "left" else 1
            if side == "right":
                mask[b, -n:] = 0
    with torch.no_grad():
        ref = small_llama("sdpa")(ids, attention_mask=mask).logits.float()
        got = small_llama(name)(ids, attention_mask=mask).logits.float()
    real = mask.bool()  # logits of padding positions mean nothing (SDPA's are arbitrary too)
    err = (got - ref)[real].abs().max().item()
    assert err < TOL * max(1.0, ref[real].abs().max().item()), err


def test_generate_left_padded_batch_matches_sdpa():
    # generate() left-pads prompts of different lengths; prefill sees the padding mask, each
    # decode step a (batch, past + 1) mask with one new query per sequence.
    name = longattn.hf.register()
    prompts = [ids_of(1, n, 10 + n)[0] for n in (13, 5, 9)]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long, device=DEVICE)
    mask = torch.zeros_like(ids)
    for b, p in enumerate(prompts):
        ids[b, width - len(p):] = p
        mask[b, width - len(p):] = 1
    kw = dict(attention_mask=mask, max_new_tokens=12, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        ref = small_llama("sdpa").generate(ids, **kw)
        got = small_llama(name).generate(ids, **kw)
    assert torch.equal(got, ref), (got, ref)


def test_custom_mask_is_refused_not_silently_wrong():
    name = longattn.hf.register()
    model = small_llama(name, "cpu", torch.float32)
    ids = torch.randint(3, 512, (1, 19), generator=torch.Generator().manual_seed(3))
    custom = torch.ones(1, 1, 19, 19, dtype=torch.bool).tril()
    custom[0, 0, 10, 2] = False  # causal with one hole: not causal + padding
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match="^attention_mask: custom masks"):
            model(ids, attention_mask=custom)
        # A 4-D mask that is exactly causal is longattn's own rule: accepted.
        got = model(ids, attention_mask=torch.ones(1, 1, 19, 19, dtype=torch.bool).tril()).logits
        ref = small_llama("sdpa", "cpu", torch.float32)(ids).logits
        assert (got - ref).abs().max().item() < 1e-3
