"""torch.compile(backend="fff") under DistributedDataParallel: two processes
(torch.distributed, gloo, on this machine) each train a step of a small
BERT on their own batch; the averaged gradients must be those of the same
DDP run without fff. Then an UltraFastBERT-style encoder (tree
feedforwards): its DDP gradients must be a single process's gradients of
the two batches together. Last, a small LLaMA sharded by FSDP2
(fully_shard): its gradients must be those of the same sharded run
without fff."""

import os
import socket
import tempfile

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir.fx", reason="torch-mlir is not installed")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 2


def _model():
    config = transformers.BertConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, hidden_dropout_prob=0.0,
                                     attention_probs_dropout_prob=0.0, attn_implementation="eager")
    torch.manual_seed(0)  # the same weights in every process
    return transformers.BertForMaskedLM(config)


def _step(model, rank, compiled):
    """One training step on rank `rank`'s batch; the DDP-averaged gradients."""
    import fff.torch  # noqa: F401  (registers the backend in this process)

    ddp = torch.nn.parallel.DistributedDataParallel(model)
    run = torch.compile(ddp, backend="fff", options={"fallback": "eager"}) if compiled else ddp
    ids = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(100 + rank))
    run(input_ids=ids, labels=ids).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _tree_encoder():
    import fff.torch

    torch.manual_seed(0)
    return fff.torch.use_tree_feedforwards(_model(), depth=4)


def _tree_batch(rank=None):
    """Eight sequences, every token labelled (so that the mean loss of each
    half, averaged, is the mean loss of the whole); rank r gets half r."""
    ids = torch.randint(1, 128, (8, 16), generator=torch.Generator().manual_seed(7))
    return ids if rank is None else ids[4 * rank:4 * (rank + 1)]


def _tree_step(rank):
    import fff.torch  # noqa: F401

    model = _tree_encoder()
    ddp = torch.compile(torch.nn.parallel.DistributedDataParallel(model), backend="fff")
    ids = _tree_batch(rank)
    ddp(input_ids=ids, labels=ids).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def _llama():
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config)


def _sharded_step(rank, compiled):
    """One training step of FSDP2's sharded LLaMA on rank `rank`'s batch;
    the gradients, gathered whole."""
    import fff.torch  # noqa: F401
    from torch.distributed.fsdp import fully_shard

    model = _llama()
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    run = torch.compile(model, backend="fff") if compiled else model
    ids = torch.randint(0, 128, (4, 16), generator=torch.Generator().manual_seed(100 + rank))
    run(input_ids=ids, labels=ids).loss.backward()
    return {name: p.grad.full_tensor() for name, p in model.named_parameters() if p.grad is not None}


def _worker(rank, port, out_dir, kind):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    # gloo picks its interface from the hostname unless told: loopback, so
    # that a machine whose hostname does not resolve runs the test too.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    try:
        from fff.torch._training import BACKWARD_CALLS

        if kind == "bert":
            grads = {"fff": _step(_model(), rank, compiled=True), "eager": _step(_model(), rank, compiled=False)}
        elif kind == "fsdp":
            grads = {"fff": _sharded_step(rank, compiled=True), "eager": _sharded_step(rank, compiled=False)}
        else:
            grads = {"fff": _tree_step(rank)}
        grads["fff backward calls"] = dict(BACKWARD_CALLS)
        torch.save(grads, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _run_ranks(kind):
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(_worker, args=(_free_port(), out_dir, kind), nprocs=WORLD, join=True,
                           start_method="spawn")
        return [torch.load(os.path.join(out_dir, f"rank{rank}.pt")) for rank in range(WORLD)]


def _error(actual, expected):
    """Relative to the gradient, or to 1e-3 per element where it is
    rounding noise (a key bias's gradient is 0 in exact arithmetic)."""
    scale = max(expected.double().norm().item(), 1e-3 * expected.numel() ** 0.5)
    return (actual.double() - expected.double()).norm().item() / scale


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ddp_gradients_with_fff_equal_those_without():
    results = _run_ranks("bert")
    for rank, grads in enumerate(results):
        # The model's six LayerNorms (embeddings, two per layer, the MLM head's)
        # ran their backward on fff.
        assert grads["fff backward calls"] == {"layer_norm_grad": 6}, grads["fff backward calls"]
        assert grads["fff"].keys() == grads["eager"].keys()
        for name, expected in grads["eager"].items():
            error = _error(grads["fff"][name], expected)
            assert error < 1e-5, f"rank {rank}, {name}: {error:.2e}"
    # DDP averaged the gradients: both ranks hold the same.
    for name, grad in results[0]["fff"].items():
        assert torch.equal(grad, results[1]["fff"][name]), name


def test_ddp_gradients_of_a_tree_encoder_are_those_of_the_whole_batch():
    results = _run_ranks("tree")
    import fff.torch  # noqa: F401

    model = _tree_encoder()
    ids = _tree_batch()
    model(input_ids=ids, labels=ids).loss.backward()
    expected = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    for rank, grads in enumerate(results):
        assert grads["fff backward calls"].get("tree_ffn_grad") == 2, grads["fff backward calls"]
        assert grads["fff"].keys() == expected.keys()
        for name, grad in expected.items():
            error = _error(grads["fff"][name], grad)
            assert error < 1e-5, f"rank {rank}, {name}: {error:.2e}"


def test_fsdp2_gradients_with_fff_equal_those_without():
    pytest.importorskip("torch.distributed.fsdp", reason="this torch has no FSDP2")
    for rank, grads in enumerate(_run_ranks("fsdp")):
        # The model's five RMSNorms (two per layer, the final one) ran their
        # backward on fff.
        assert grads["fff backward calls"] == {"rms_norm_grad": 5}, grads["fff backward calls"]
        assert grads["fff"].keys() == grads["eager"].keys()
        for name, expected in grads["eager"].items():
            error = _error(grads["fff"][name], expected)
            assert error < 1e-5, f"rank {rank}, {name}: {error:.2e}"
