"""Models as people download them: Hugging Face transformers with their default attention (SDPA) and padding
masks, exported as training steps and held to PyTorch eager over AdamW steps with clipping, on batches and
sequence lengths other than the example's. (Tiny random configurations, dropout off so that the steps can be
compared draw for draw; the export's own check covers dropout with its twin.)"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import transformers
from torch import nn

from lossops.training import AdamW, TrainingSession, export_training_step, load_into_torch

pytestmark = pytest.mark.slow  # a minute or more per export on 2 cores
logging.getLogger("torch").setLevel(logging.ERROR)
transformers.logging.set_verbosity_error()
VOCAB = 512
AXES = {0: "batch", 1: "seq"}


class Logits(nn.Module):
    """The model as its users call it, keyword arguments in, logits out."""

    def __init__(self, model: nn.Module, *keywords: str):
        super().__init__()
        self.model, self.keywords = model, keywords

    def forward(self, *args):
        return self.model(**dict(zip(self.keywords, args, strict=True))).logits


def _padded(batch: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and an attention mask whose rows after the first end early (right padding)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    for row in range(1, batch):
        mask[row, max(1, length - 2 * row):] = 0
    return ids, mask


LR = 1e-3
# Adam divides each gradient by its running RMS, so float32 rounding in a gradient near zero can move a parameter
# by up to LR in a step: the state is held to a tenth of that per step, the losses to 1e-5 relative.
STATE_TOLERANCE = 0.1 * LR * 3


def _train_both(module: nn.Module, loss_fn, batches: list[tuple[tuple, tuple]], spec) -> tuple[float, float, object]:
    """Export on the first batch, then step lossops and PyTorch side by side over every batch (AdamW, gradients
    clipped to norm 1): the largest relative loss difference, the largest state difference, and the session."""
    optimizer = AdamW(lr=LR, weight_decay=0.01)
    reference = copy.deepcopy(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = export_training_step(module, loss_fn, batches[0], optimizer, max_grad_norm=1.0, dynamic_shapes=spec)
    assert step.check is not None and max(step.check.errors.values()) < 1e-5
    session, torch_optimizer = TrainingSession(step), optimizer.torch(reference.parameters())
    worst = 0.0
    for margs, largs in batches:
        torch_optimizer.zero_grad()
        loss = loss_fn(reference(*margs), *largs)
        loss.backward()
        nn.utils.clip_grad_norm_(reference.parameters(), 1.0)
        torch_optimizer.step()
        got = session.step([a.numpy() for a in margs + largs])
        worst = max(worst, abs(got - loss.item()) / abs(loss.item()))
    ours = session.state_dict()
    assert set(ours) == set(reference.state_dict())  # non-persistent buffers left out, as PyTorch leaves them
    state = max(float(np.abs(ours[k] - v.numpy()).max()) for k, v in reference.state_dict().items())
    return worst, state, session


def test_gpt2_with_padding_and_ignored_labels_trains_as_pytorch(tmp_path, monkeypatch):
    """GPT-2's default (SDPA) attention with a padding mask, labels -100 on the padding, the shifted cross
    entropy in `loss_fn`; (batch, seq) symbolic; the tied embedding stays one parameter; a checkpoint loads back
    into PyTorch. The step reaches the exporter as lossops' ExportedProgram, decomposed as the exporter decomposes,
    without a second capture or decomposition."""
    def no_trace(*args, **kwargs):
        raise AssertionError("torch.export.export or ExportedProgram.run_decompositions was called")

    monkeypatch.setattr(torch.export, "export", no_trace)
    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", no_trace)
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    module = Logits(transformers.GPT2LMHeadModel(config), "input_ids", "attention_mask")

    def shifted(logits, labels):
        return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)

    batches = []
    for k, (b, t) in enumerate(((3, 8), (2, 11), (4, 5))):
        ids, mask = _padded(b, t, k)
        batches.append(((ids, mask), (ids.masked_fill(mask == 0, -100),)))
    worst, state, session = _train_both(module, shifted, batches, ((AXES, AXES), (AXES,)))
    assert worst < 1e-5 and state < STATE_TOLERANCE, (worst, state)
    assert "model.lm_head.weight" not in session.definition.parameters  # tied to the token embedding
    session.save(str(tmp_path / "gpt2.safetensors"))
    again = Logits(transformers.GPT2LMHeadModel(config), "input_ids", "attention_mask")
    load_into_torch(str(tmp_path / "gpt2.safetensors"), again)
    for name, value in again.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), session.state_dict()[name])


def test_bert_classifier_with_padding_and_token_types_trains_as_pytorch(tmp_path):
    """BERT for sequence classification with a padding mask and token_type_ids: its non-persistent buffers
    (position_ids, token_type_ids) are state the step reads, not checkpoint entries."""
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=64, num_labels=3,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    module = Logits(transformers.BertForSequenceClassification(config), "input_ids", "attention_mask",
                    "token_type_ids")
    unsaved = {n for n, _ in module.named_buffers()} - set(module.state_dict())
    assert unsaved, "this BERT registers no non-persistent buffer: the test would not hold the step to them"
    batches = []
    for k, (b, t) in enumerate(((3, 8), (2, 11), (4, 6))):
        ids, mask = _padded(b, t, k)
        types = (torch.arange(t) >= t // 2).long().expand(b, t).contiguous()
        batches.append(((ids, mask, types), (torch.randint(0, 3, (b,), generator=torch.Generator().manual_seed(k)),)))
    worst, state, session = _train_both(module, F.cross_entropy, batches, ((AXES, AXES, AXES), ({0: "batch"},)))
    assert worst < 1e-5 and state < STATE_TOLERANCE, (worst, state)
    assert unsaved <= set(session.definition.buffers) and set(session.definition.not_saved) == unsaved
    path = str(tmp_path / "bert.safetensors")
    session.save(path)
    session.load(path)  # entries match although the non-persistent buffers are not among them
    load_into_torch(path, module)


def _classifier(model: nn.Module, labels: int, *keywords: str):
    return Logits(model, *keywords), F.cross_entropy, lambda b: (torch.randint(0, labels, (b,)),)


def _own_loss(model: nn.Module):
    """The model computing its own `.loss` from `labels` (-100 on the padding), as its users train it."""

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, ids, mask, labels):
            return self.model(input_ids=ids, attention_mask=mask, labels=labels).loss

    return Loss(), lambda loss: loss, None


def _off(dropout: bool, *names: str) -> dict:
    """The config's dropout probabilities set to 0 unless `dropout` (its defaults kept)."""
    return {} if dropout else dict.fromkeys(names, 0.0)


BERT_DROPOUT = ("hidden_dropout_prob", "attention_probs_dropout_prob")
# name -> builder(dropout) -> (module, loss_fn, targets(batch) or None where the model computes its own loss)
MODELS = {
    "DistilBERT classifier": lambda dropout: _classifier(transformers.DistilBertForSequenceClassification(
        transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                      max_position_embeddings=64, num_labels=3,
                                      **_off(dropout, "dropout", "attention_dropout", "seq_classif_dropout"))),
        3, "input_ids", "attention_mask"),
    "RoBERTa masked LM": lambda dropout: _own_loss(transformers.RobertaForMaskedLM(transformers.RobertaConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=70, **_off(dropout, *BERT_DROPOUT)))),
    "Llama (RMSNorm, rotary, grouped-query attention)": lambda dropout: _own_loss(transformers.LlamaForCausalLM(
        transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                 **_off(dropout, "attention_dropout")))),
    "T5 (encoder-decoder)": lambda dropout: _own_loss(transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2,
        decoder_start_token_id=0, pad_token_id=0, **_off(dropout, "dropout_rate")))),
    "ViT classifier": lambda dropout: _classifier(transformers.ViTForImageClassification(transformers.ViTConfig(
        image_size=16, patch_size=4, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, num_labels=5, **_off(dropout, *BERT_DROPOUT))), 5, "pixel_values"),
}


def _batch(name: str, targets, batch: int, length: int, seed: int) -> tuple[tuple, tuple]:
    """(module args, loss args) for one of MODELS: padded token ids (images for ViT), their labels."""
    if name.startswith("ViT"):
        images = torch.randn(batch, 3, 16, 16, generator=torch.Generator().manual_seed(seed))
        return (images,), targets(batch)
    ids, mask = _padded(batch, length, seed)
    if targets is not None:
        return (ids, mask), targets(batch)
    labels = ids.masked_fill(mask == 0, -100)
    if name.startswith("T5"):
        labels = labels[:, :max(2, length - 3)].contiguous()  # T5 views its labels flat; decoder length its own
    return (ids, mask, labels), ()


def _axes(name: str, targets) -> tuple:
    """The (batch, seq) axes of MODELS[name]'s arguments, named as export_training_step takes them."""
    if name.startswith("ViT"):
        return ({0: "batch"},), ({0: "batch"},)
    if targets is not None:
        return (AXES, AXES), ({0: "batch"},)
    return (AXES, AXES, {0: "batch", 1: "labels_seq" if name.startswith("T5") else "seq"}), ()


@pytest.mark.parametrize("name", MODELS)
def test_a_downloaded_architecture_trains_as_pytorch(name):
    """Each architecture as its users call it (a padding mask, -100 labels and the model's own loss where it
    computes one), dropout off so that the steps compare draw for draw: exported with (batch, seq) symbolic,
    then three AdamW steps with clipping on batches and lengths other than the example's follow PyTorch eager."""
    torch.manual_seed(0)
    module, loss_fn, targets = MODELS[name](False)
    torch.manual_seed(1)
    batches = [_batch(name, targets, b, t, k) for k, (b, t) in enumerate(((3, 8), (2, 11), (4, 5)))]
    worst, state, _ = _train_both(module, loss_fn, batches, _axes(name, targets))
    assert worst < 1e-5 and state < STATE_TOLERANCE, (worst, state)


@pytest.mark.parametrize("name", ["DistilBERT classifier", "RoBERTa masked LM"])
def test_a_downloaded_architecture_exports_with_its_defaults(name, monkeypatch):
    """Default configuration, dropout included (the check compares the step with its dropout kept off, made
    from the exported graph: the module is traced once): the export's check holds every gradient to PyTorch
    float64 on the example batch and on a smaller one."""
    from lossops.training import export as export_module

    traces = []
    trace = export_module._trace
    monkeypatch.setattr(export_module, "_trace", lambda *args: traces.append(args) or trace(*args))
    torch.manual_seed(0)
    module, loss_fn, targets = MODELS[name](True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = export_training_step(module, loss_fn, _batch(name, targets, 3, 8, 0), AdamW(lr=LR),
                                    max_grad_norm=1.0)
    assert step.check is not None and step.check.twin and len(step.check.batches) == 2, step.check
    assert len(traces) == 1
    assert max(step.check.errors.values()) < 1e-5, step.check.errors


def test_gpt2_small_at_real_size_is_a_training_bench_workload():
    """`lossops bench --training --transformers`: GPT-2 small's real configuration (124M parameters) exports, passes
    the export-time check and trains as PyTorch eager, on a short context for the test's time (the bench's own is 128
    tokens; dropout off, so that the losses compare draw for draw)."""
    from lossops.training import bench

    rows = bench.bench(steps=2, blocks=1, compile_torch=False,
                       problems=[bench.gpt2_small(batch=2, context=16, dropout=False)])
    (row,) = rows
    assert row["workload"].startswith("GPT-2 small (124M parameters)") and row["export s"] > 0
    assert set(row["ms"]) == {"PyTorch eager", "onnxruntime decomposition", "onnxruntime kernels"}
    assert max(row["loss drift vs eager"].values()) < 1e-5, row
    assert "| GPT-2 small" in bench.table(rows, 1)
