"""An UltraFastBERT-style encoder trains on fff's tree layers as it does on
its authors' masked dense layer: the converters both ways, then a BERT
encoder (transformers config, random weights) whose feedforwards are
TreeFFNs, trained with AdamW and SGD on a masked-token task, step by step
against the same model with UltraFastBERT's layer in eager torch."""

import copy

import pytest
import torch

import fff.torch
from test_torch_layers import UltraFastBERTLayer

transformers = pytest.importorskip("transformers", reason="transformers is not installed")


def relative_error(actual, expected):
    return ((actual.double() - expected.double()).norm() / expected.double().norm().clamp_min(1e-30)).item()


def test_to_ultrafastbert_gives_the_same_layer_back():
    torch.manual_seed(0)
    tree = fff.torch.TreeFFN(24, 24, depth=4, trees=2, output_bias=False)
    x = torch.randn(5, 3, 24)
    theirs = tree.to_ultrafastbert(UltraFastBERTLayer)
    ours = tree.to_ultrafastbert()
    assert isinstance(theirs, UltraFastBERTLayer) and isinstance(ours, fff.torch.MaskedTreeFFN)
    with torch.no_grad():
        for other in (theirs, ours):
            assert relative_error(other(x), tree(x)) < 2e-6
        back = fff.torch.TreeFFN.from_ultrafastbert(ours)
        assert torch.equal(back(x), tree(x))


def test_to_ultrafastbert_refuses_what_the_authors_layer_cannot_hold():
    with pytest.raises(ValueError, match="no output bias, and this TreeFFN's b_out is not zero"):
        with torch.no_grad():
            tree = fff.torch.TreeFFN(8, 8, depth=2)
            tree.b_out.fill_(1.0)
        tree.to_ultrafastbert()
    with pytest.raises(ValueError, match="maps 8 to 6 wide rows"):
        fff.torch.TreeFFN(8, 6, depth=2, output_bias=False).to_ultrafastbert(UltraFastBERTLayer)
    with pytest.raises(ValueError, match="no BERT-style layer"):
        fff.torch.use_tree_feedforwards(torch.nn.Linear(4, 4), depth=3)


def encoder(seed, depth=4, trees=1):
    """A 2-layer BERT for masked tokens, its feedforwards TreeFFNs; dropout
    off, so that two runs see the same arithmetic."""
    config = transformers.BertConfig(vocab_size=61, hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=96, max_position_embeddings=32, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0)
    torch.manual_seed(seed)
    return fff.torch.use_tree_feedforwards(transformers.BertForMaskedLM(config), depth=depth, trees=trees)


def batches(count, generator, batch=8, length=16, vocab=61, mask_token=0):
    """Masked-token batches of a learnable task: each sequence repeats a
    random 4-token motif, 15% of positions are hidden (the first always),
    and the labels are the hidden tokens."""
    for _ in range(count):
        tokens = torch.randint(1, vocab, (batch, 4), generator=generator).repeat(1, length // 4)
        hidden = torch.rand(batch, length, generator=generator) < 0.15
        hidden[:, 0] = True
        yield tokens.masked_fill(hidden, mask_token), tokens.masked_fill(~hidden, -100)


def train(model, steps, optimizer, seed=3, step=None):
    step = model if step is None else step
    losses = []
    for inputs, labels in batches(steps, torch.Generator().manual_seed(seed)):
        optimizer.zero_grad()
        loss = step(input_ids=inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def test_the_encoder_trains_as_with_the_authors_masked_layer():
    ours = encoder(seed=1)
    theirs, replaced = fff.torch.convert_tree_layers(copy.deepcopy(ours), to="ultrafastbert")
    assert replaced == 2 and sum(isinstance(m, fff.torch.TreeFFN) for m in ours.modules()) == 2
    ours_losses = train(ours, 50, torch.optim.AdamW(ours.parameters(), lr=3e-3))
    theirs_losses = train(theirs, 50, torch.optim.AdamW(theirs.parameters(), lr=3e-3))
    error = ((ours_losses - theirs_losses).abs() / theirs_losses.abs()).max().item()
    assert error < 1e-4, (error, ours_losses, theirs_losses)
    assert theirs_losses[-5:].mean() < theirs_losses[:5].mean()  # it learns


def test_sgd_parameters_agree_and_fff_runs_are_bitwise_identical():
    runs = []
    for _ in range(2):
        model = encoder(seed=2, depth=3, trees=2)
        runs.append((model, train(model, 20, torch.optim.SGD(model.parameters(), lr=0.1))))
    theirs, _ = fff.torch.convert_tree_layers(encoder(seed=2, depth=3, trees=2), to="ultrafastbert")
    train(theirs, 20, torch.optim.SGD(theirs.parameters(), lr=0.1))
    (first, first_losses), (second, second_losses) = runs
    assert torch.equal(first_losses, second_losses)
    for a, b in zip(first.parameters(), second.parameters()):
        assert torch.equal(a, b)
    fff.torch.convert_tree_layers(first, to="ultrafastbert")
    theirs_parameters = dict(theirs.named_parameters())
    for name, p in first.named_parameters():
        # Within 1e-5 relative; attention's key bias, whose gradient is 0 up
        # to rounding, stays within rounding of its start (0) instead.
        expected = theirs_parameters[name]
        assert (p - expected).norm() <= 1e-5 * expected.norm() + 1e-7 * p.numel() ** 0.5, name


def test_the_encoder_trains_under_the_fff_backend():
    eager, compiled = encoder(seed=4), encoder(seed=4)
    step = torch.compile(compiled, backend="fff")
    eager_losses = train(eager, 4, torch.optim.AdamW(eager.parameters(), lr=1e-3))
    compiled_losses = train(compiled, 4, torch.optim.AdamW(compiled.parameters(), lr=1e-3), step=step)
    assert ((eager_losses - compiled_losses).abs() / eager_losses).max() < 1e-4


def test_explain_counts_the_tree_layers_and_their_backward():
    model = encoder(seed=5)
    inputs, labels = next(batches(1, torch.Generator().manual_seed(0)))
    report = fff.torch.explain(lambda ids: model(input_ids=ids).logits, inputs, backward=True, print_report=False)
    assert report.taken["tree_ffn"] == 2 and report.backward_taken["tree_ffn_grad"] == 2
    assert report.backward_calls["tree_ffn_grad"] == 2
    assert not [name for name, _ in report.left if name == "tree_ffn"]
    leaf = fff.torch.LeafTreeFFN(16, 4, 16, depth=2)
    report = fff.torch.explain(lambda x: leaf(x).relu(), torch.randn(5, 16), backward=True, print_report=False)
    assert report.taken["leaf_tree_ffn"] == 1 and report.backward_calls["leaf_tree_ffn_grad"] == 1
