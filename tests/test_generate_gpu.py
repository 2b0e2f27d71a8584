"""The serving path end to end (issue 24's proof): examples/generate.py runs a random 4-layer
transformers Llama (hidden 1024, 16 q / 4 kv heads, vocabulary 32000) through baracuda's ops
with a paged KV cache (packed prefill, then decode over the pages) and its greedy tokens are
compared with transformers' own generate: identical in float32, at least 99% in bf16."""
import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("baracuda")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="torch has no CUDA")]

_PATH = os.path.join(os.path.dirname(__file__), "..", "examples", "generate.py")


def _generate_module():
    spec = importlib.util.spec_from_file_location("baracuda_example_generate", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype,need", [
    (torch.float32, 1.0),
    # H200: 48% in bf16. A random-weight model's bf16 logits hold near-ties that another (equally
    # rounded) reduction order flips, and one flipped greedy token changes every token after it. The
    # criterion is out of reach for any bf16 implementation on this model: on a CPU (torch 2.13,
    # transformers 5.24) transformers' own bf16 greedy tokens match its float32 ones at 37.7%, and
    # teacher-forced (same prefix every step) its bf16 argmax agrees with float32 at 95.4% of positions
    # (median top-1 / top-2 margin 0.12 logit std; 5% of steps under 0.008).
    pytest.param(torch.bfloat16, 0.99, marks=pytest.mark.xfail(reason="greedy divergence compounds in bf16; "
                                                                       "issue 24 keeps this open", strict=False))])
def test_greedy_tokens_match_transformers(dtype, need):
    g = _generate_module()
    model = g.random_llama("cuda", dtype)
    prompts = g.prompts_of(8, model.config.vocab_size)
    engine = g.PagedLlama(model, g.BaracudaOps(model), max_batch=8, max_len=max(map(len, prompts)) + 128)
    got = engine.generate(prompts, 128)
    want = g.reference_tokens(model, prompts, 128)
    frac = g.match_fraction(got, want)
    assert frac >= need, f"{dtype}: {frac:.2%} of greedy tokens match transformers' generate"


def test_teacher_forced_bf16_agreement():
    """The bf16 criterion that survives near-ties: every step fed transformers' own greedy token (the
    same prefix on both sides), the engine's argmax (prefill, then decode over the pages) equals
    transformers' next token at most steps. On a CPU, transformers' bf16 agrees with its float32 at 95.4%
    of such steps on this model (see above); a broken kernel agrees at ~0%. Measured on an H200: 96.68%
    (session 32); the bound leaves a little room for another GPU's rounding."""
    g = _generate_module()
    model = g.random_llama("cuda", torch.bfloat16)
    prompts = g.prompts_of(8, model.config.vocab_size)
    steps = 64
    want = g.reference_tokens(model, prompts, steps)
    engine = g.PagedLlama(model, g.BaracudaOps(model), max_batch=8, max_len=max(map(len, prompts)) + steps)
    same = total = 0
    with torch.no_grad():
        got = engine.ops.argmax(engine.prefill(prompts)).tolist()
        for s in range(steps):
            same += sum(int(a == w[s]) for a, w in zip(got, want))
            total += len(prompts)
            if s + 1 < steps:
                fed = torch.tensor([w[s] for w in want], device="cuda")
                got = engine.ops.argmax(engine.decode(fed)).tolist()
    frac = same / total
    print(f"teacher-forced bf16 argmax agreement: {frac:.2%}")
    assert frac >= 0.95, f"teacher-forced bf16 argmax agrees with transformers at {frac:.2%} of steps"


def test_engine_logic_on_torch_ops():
    """The same engine on torch reference ops (the paged bookkeeping alone), float32, 16 tokens."""
    g = _generate_module()
    model = g.random_llama("cuda", torch.float32, layers=2)
    prompts = g.prompts_of(4, model.config.vocab_size)
    engine = g.PagedLlama(model, g.TorchOps(model), max_batch=4, max_len=max(map(len, prompts)) + 16)
    assert g.match_fraction(engine.generate(prompts, 16), g.reference_tokens(model, prompts, 16)) == 1.0


def test_cuda_graph_decode_matches_eager_decode():
    """The decode step captured once in a CUDA graph and replayed per token gives the eager engine's
    tokens (float32, 32 tokens): every decode op is capturable, lengths and slots advance on the device."""
    g = _generate_module()
    model = g.random_llama("cuda", torch.float32, layers=2)
    prompts = g.prompts_of(8, model.config.vocab_size)
    runs = []
    for graph in (False, True):
        engine = g.PagedLlama(model, g.BaracudaOps(model), max_batch=8, max_len=max(map(len, prompts)) + 32)
        runs.append(engine.generate(prompts, 32, graph=graph))
    assert runs[0] == runs[1]
