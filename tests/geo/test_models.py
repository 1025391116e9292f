"""Shape, initialisation and equivalence tests of the geometry paper's models [geo, Sec. 3]."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ntpcore.geo.data import ContextDataset
from ntpcore.geo.models.lstm import LSTMConfig, LSTMModel
from ntpcore.geo.models.transformer import Transformer, TransformerConfig
from ntpcore.geo.models.trie import PrefixTrie
from ntpcore.geo.models.ufm import UFM, init_ufm
from ntpcore.geo.synthetic import synthetic_dataset


@pytest.fixture(scope="module")
def synth() -> ContextDataset:
    return synthetic_dataset(seed=0)


def _tokens(ds: ContextDataset) -> torch.Tensor:
    return torch.from_numpy(np.array(ds.contexts, dtype=np.int64))


def test_ufm_shapes_and_logits() -> None:
    model = UFM(7, 5, d=3, generator=torch.Generator().manual_seed(0)).double()
    idx = torch.tensor([0, 3, 6])
    assert model.features(idx).shape == (3, 3)
    assert model(idx).shape == (3, 5)
    L = (model.W @ model.H).detach()  # (V, m) in the paper's orientation
    torch.testing.assert_close(model(torch.arange(7)).detach(), L.t())


def test_ufm_init_is_pytorch_default() -> None:
    W, H = init_ufm(m=50, V=40, d=64, rng=np.random.default_rng(1))
    assert W.shape == (40, 64) and H.shape == (64, 50)
    assert np.abs(W).max() <= 1 / math.sqrt(64) and np.abs(H).max() <= 1 / math.sqrt(50)
    # uniform on [-b, b] has std b / sqrt(3)
    assert abs(W.std() * math.sqrt(3 * 64) - 1) < 0.05
    assert abs(H.std() * math.sqrt(3 * 50) - 1) < 0.05
    W2, _ = init_ufm(m=50, V=40, d=64, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(W, W2)


def test_transformer_paper_sizes() -> None:
    cfg = TransformerConfig(vocab_in=130, vocab_out=104)
    assert cfg.head_dim == 20  # (128 // 6 // 2) * 2: attention width 120
    model = Transformer(cfg, generator=torch.Generator().manual_seed(0))
    n = sum(p.numel() for p in model.parameters())
    per_layer = 128 * 360 + 120 * 128 + 128 * 1024 + 512 * 128 + 2 * 128
    assert n == 4 * per_layer + 130 * 128 + 104 * 128 + 128  # ~1.06 M, as the authors' model
    assert not any("pos" in name for name, _ in model.named_parameters())  # no PE
    x = torch.randint(0, 130, (9, 5), generator=torch.Generator().manual_seed(1))
    assert model.features(x).shape == (9, 128)
    assert model(x).shape == (9, 104)


def test_transformer_init_scales() -> None:
    model = Transformer(
        TransformerConfig(vocab_in=300, vocab_out=200, dim=128),
        generator=torch.Generator().manual_seed(0),
    )
    blk = model.layers[0]
    hid = blk.hidden
    std = {
        "emb": model.tok_embeddings.weight.std().item(),
        "qkv": blk.wqkv.weight.std().item(),
        "w1": blk.w13.weight[:hid].std().item(),
        "w3": blk.w13.weight[hid:].std().item(),
        "wo": blk.wo.weight.std().item(),
        "out": model.output.weight.std().item(),
    }
    small = 0.02 / math.sqrt(8)
    for k, target in [
        ("emb", 0.02),
        ("qkv", 0.02),
        ("w1", 0.02),
        ("out", 0.02),
        ("w3", small),
        ("wo", small),
    ]:
        assert abs(std[k] / target - 1) < 0.05, (k, std[k])


def _reference_features(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """Every block on every position, then the last position (no shortcut)."""
    x = model.tok_embeddings(tokens)
    for layer in model.layers:
        x = layer(x, last_only=False)
    return model.norm(x[:, -1])


@pytest.mark.parametrize("n_layers", [1, 3])
@pytest.mark.parametrize("which", ["synthetic", "random"])
def test_transformer_shortcuts_match_plain_forward(
    synth: ContextDataset, n_layers: int, which: str
) -> None:
    """Last-position-only last block and prefix sharing (the first block once per distinct
    token) compute the same function; one block is first and last at once."""
    tokens = _tokens(synth) if which == "synthetic" else _shared_prefix_tokens(n_layers)
    cfg = TransformerConfig(
        vocab_in=int(tokens.max()) + 3, vocab_out=7, dim=32, n_layers=n_layers, n_heads=4
    )
    model = Transformer(cfg, generator=torch.Generator().manual_seed(0)).double()
    trie = PrefixTrie(tokens)
    ref = _reference_features(model, tokens)
    torch.testing.assert_close(model.features(tokens), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.features(trie), ref, rtol=1e-12, atol=1e-12)
    # and the gradients agree
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2), dtype=ref.dtype)
    g_ref = torch.autograd.grad(
        (_reference_features(model, tokens) * w).sum(), list(model.parameters()), allow_unused=True
    )
    g_trie = torch.autograd.grad(
        (model.features(trie) * w).sum(), list(model.parameters()), allow_unused=True
    )
    for a, b in zip(g_ref, g_trie, strict=True):
        if a is None:
            assert b is None or torch.count_nonzero(b) == 0
        else:
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_prefix_trie_structure() -> None:
    tokens = torch.tensor([[1, 2, 3], [1, 2, 4], [5, 2, 3]])
    trie = PrefixTrie(tokens)
    # two prefixes of length 1, two of length 2, three of length 3
    assert trie.n_nodes == 7
    assert trie.depth.tolist() == [1, 1, 2, 2, 3, 3, 3]
    assert trie.token[trie.leaf].tolist() == [3, 4, 3]
    for j in range(3):
        anc = trie.ancestors[trie.leaf[j]]
        assert trie.token[anc].tolist() == tokens[j].tolist()
    # nodes of depth t are the range levels[t - 1]; parent = the prefix one shorter
    assert trie.levels == ((0, 2), (2, 4), (4, 7))
    for t, (start, stop) in enumerate(trie.levels, start=1):
        assert (trie.depth[start:stop] == t).all()
    assert trie.parent.tolist() == [-1, -1, 0, 1, 2, 2, 3]
    assert trie.tokens.tolist() == [1, 2, 3, 4, 5]  # distinct tokens, and each node's row
    assert trie.tokens[trie.token_row].tolist() == trie.token.tolist()
    for u in range(trie.n_nodes):
        d = int(trie.depth[u])
        if d > 1:
            assert int(trie.parent[u]) == int(trie.ancestors[u, d - 2])


def test_transformer_features_depend_on_prefix_only() -> None:
    """Causal mask without positional encoding: the state at t sees only x_{1:t}."""
    cfg = TransformerConfig(vocab_in=11, vocab_out=6, dim=16, n_layers=2, n_heads=2)
    model = Transformer(cfg, generator=torch.Generator().manual_seed(0)).double()
    a = torch.tensor([[1, 2, 3, 4]])
    b = torch.tensor([[1, 2, 3, 9]])
    x = model.tok_embeddings(torch.cat([a, b]))
    for layer in model.layers:
        x = layer(x)
    torch.testing.assert_close(x[0, :3], x[1, :3])
    assert not torch.allclose(x[0, 3], x[1, 3])


def test_lstm_shapes_bias_and_init(synth: ContextDataset) -> None:
    cfg = LSTMConfig(vocab_in=len(synth.input_vocab), vocab_out=synth.V)
    model = LSTMModel(cfg, generator=torch.Generator().manual_seed(0))
    tokens = _tokens(synth)
    assert model.features(tokens).shape == (synth.m, 128)
    assert model(tokens).shape == (synth.m, synth.V)
    assert model.output_bias is not None and torch.count_nonzero(model.output_bias) == 0
    assert abs(model.output.weight.std().item() / 0.02 - 1) < 0.1
    nobias = LSTMModel(LSTMConfig(vocab_in=5, vocab_out=4, output_bias=False))
    assert nobias.output_bias is None


@pytest.mark.parametrize("kind", ["transformer", "lstm"])
def test_models_seeded_init_is_deterministic(kind: str) -> None:
    def build(seed: int) -> torch.nn.Module:
        gen = torch.Generator().manual_seed(seed)
        if kind == "transformer":
            return Transformer(TransformerConfig(9, 7, dim=16, n_layers=1, n_heads=2), gen)
        return LSTMModel(LSTMConfig(9, 7, dim=16), gen)

    a, b, c = build(3), build(3), build(4)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert any(
        not torch.equal(p, r)
        for p, r in zip(a.parameters(), c.parameters(), strict=True)
        if p.numel() > 16
    )


def _nn_lstm_features(model: LSTMModel, tokens: torch.Tensor) -> torch.Tensor:
    """The reference: ``nn.LSTM`` over every (context, position), last hidden state."""
    out, _ = model.lstm(model.embedding(tokens))
    return model.norm(out[:, -1])


def _shared_prefix_tokens(seed: int, B: int = 40, T: int = 6) -> torch.Tensor:
    """Random contexts with many shared prefixes (2t + 1 tokens possible at position t), some
    of them repeated."""
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([torch.randint(0, 2 * t + 1, (B, 1), generator=gen) for t in range(T)], 1)


@pytest.mark.parametrize("n_layers", [1, 2, 3])
@pytest.mark.parametrize("which", ["synthetic", "random"])
def test_lstm_trie_matches_nn_lstm(synth: ContextDataset, n_layers: int, which: str) -> None:
    """The trie recurrence (each distinct prefix once, nn.LSTM's own parameters) computes
    nn.LSTM's last hidden state, and the same gradients for every parameter."""
    tokens = _tokens(synth) if which == "synthetic" else _shared_prefix_tokens(n_layers)
    vocab = int(tokens.max()) + 3  # some tokens never appear: their embedding gets no gradient
    cfg = LSTMConfig(vocab_in=vocab, vocab_out=7, dim=24, n_layers=n_layers)
    model = LSTMModel(cfg, generator=torch.Generator().manual_seed(5)).double()
    with torch.no_grad():  # nonzero biases, so the bias paths are exercised
        for p in model.lstm.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(6)))
    trie = PrefixTrie(tokens)
    assert trie.n_nodes < tokens.numel()  # prefixes are shared
    ref = _nn_lstm_features(model, tokens)
    torch.testing.assert_close(model.features(trie), ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model.features(tokens), ref, rtol=0, atol=0)
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(2), dtype=ref.dtype)
    params = list(model.parameters())
    g_ref = torch.autograd.grad(
        (_nn_lstm_features(model, tokens) * w).sum(), params, allow_unused=True
    )
    g_trie = torch.autograd.grad((model.features(trie) * w).sum(), params, allow_unused=True)
    for (name, _), a, b in zip(model.named_parameters(), g_ref, g_trie, strict=True):
        if a is None:  # the output layer is not part of the features
            assert b is None, name
        else:
            torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12, msg=name)


def test_lstm_trie_keeps_nn_lstm_parameters() -> None:
    """Same parameters, state dict and seeded initialisation as before the trie path."""
    model = LSTMModel(LSTMConfig(9, 7, dim=16), torch.Generator().manual_seed(3))
    ref = torch.nn.LSTM(16, 16, num_layers=2, batch_first=True)
    lstm_keys = [k[len("lstm.") :] for k in model.state_dict() if k.startswith("lstm.")]
    assert lstm_keys == list(ref.state_dict())
    tokens = torch.tensor([[1, 2, 3], [1, 2, 4]])
    out = model(PrefixTrie(tokens))
    torch.testing.assert_close(out, model(tokens), rtol=1e-5, atol=1e-6)  # float32
