"""The shared training loop: cached by config, deterministic, resumable after a kill (issue #3)."""

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from acl26 import models, training

V = 300


def tiny_dense():
    return models.dense_config(V, hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, max_positions=64)


def tiny_moe(top_k=3):
    return models.moe_config(V, hidden=32, layers=2, heads=4, kv_heads=2, experts=8, top_k=top_k,
                             expert_intermediate=16, max_positions=64)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def blocks():
    g = torch.Generator().manual_seed(1)
    # a learnable toy language: token t is followed by (t * 7 + 3) % V most of the time
    rows = []
    for _ in range(240):
        seq = [int(torch.randint(0, V, (1,), generator=g))]
        for _ in range(32):
            nxt = (seq[-1] * 7 + 3) % V if torch.rand(1, generator=g) < 0.9 else int(torch.randint(0, V, (1,), generator=g))
            seq.append(nxt)
        rows.append(seq)
    data = torch.tensor(rows)
    return data[:200], data[200:]


TC = training.TrainConfig(steps=40, batch_size=8, lr=3e-3, eval_every=10, eval_blocks=8, checkpoint_every=5)


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_lr_schedule_warms_up_then_decays():
    cfg = training.TrainConfig(steps=100, warmup_frac=0.1, min_lr_frac=0.1)
    lrs = [training.lr_at(s, cfg) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert lrs[-1] == pytest.approx(0.1, abs=1e-3)


def test_cache_key_changes_with_every_input():
    base = training.config_key(tiny_dense(), TC, "data-a")
    assert base == training.config_key(tiny_dense(), TC, "data-a")
    other_model = models.dense_config(V, hidden=48, layers=2, heads=4, kv_heads=2, intermediate=64, max_positions=64)
    assert training.config_key(other_model, TC, "data-a") != base
    assert training.config_key(tiny_dense(), training.TrainConfig(**{**TC.__dict__, "lr": 1e-4}), "data-a") != base
    assert training.config_key(tiny_dense(), training.TrainConfig(**{**TC.__dict__, "seed": 1}), "data-a") != base
    assert training.config_key(tiny_dense(), TC, "data-b") != base
    # bookkeeping that cannot change the weights does not change the key
    assert training.config_key(tiny_dense(), training.TrainConfig(**{**TC.__dict__, "eval_every": 7,
                                                                      "checkpoint_every": 3}), "data-a") == base


def test_learns_is_deterministic_and_cached(cache, blocks):
    tr, va = blocks
    a = training.train(tiny_dense(), TC, tr, va, name="d", data_fingerprint="f", progress=False)
    assert not a.from_cache and a.val_ppl < 0.5 * V  # learned something
    b = training.train(tiny_dense(), TC, tr, va, name="d2", data_fingerprint="f", progress=False, use_cache=False)
    assert same_weights(a.model, b.model), "same config and seed must give the same weights"
    c = training.train(tiny_dense(), TC, tr, va, name="d", data_fingerprint="f", progress=False)
    assert c.from_cache and same_weights(a.model, c.model) and c.log["final"] == a.log["final"]


def test_moe_training_is_bit_reproducible(cache):
    """An MoE large enough that torch parallelises the expert dispatch's backward (index_put_ with
    accumulate, run with racing float adds on several threads unless deterministic algorithms are
    on) must still train to the same weights twice."""
    if torch.get_num_threads() < 2:
        pytest.skip("needs 2 threads: with one, the racing adds cannot race")
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, V, (64, 65), generator=g)
    cfg = models.moe_config(V, hidden=128, layers=2, heads=4, kv_heads=2, experts=8, top_k=3,
                            expert_intermediate=32, max_positions=65)
    tc = training.TrainConfig(steps=4, batch_size=32, lr=3e-3, eval_every=4, eval_blocks=4, checkpoint_every=4)
    runs = [training.train(cfg, tc, data[:48], data[48:], name=f"det{i}", data_fingerprint="f", progress=False,
                           use_cache=False) for i in range(2)]
    assert same_weights(runs[0].model, runs[1].model), "same config and seed must give the same MoE weights"
    assert not torch.are_deterministic_algorithms_enabled(), "train() must restore the caller's setting"


def test_interrupted_run_resumes_to_the_same_weights(cache, blocks):
    tr, va = blocks
    full = training.train(tiny_moe(), TC, tr, va, name="m-full", data_fingerprint="f", progress=False, use_cache=False)
    part = training.train(tiny_moe(), TC, tr, va, name="m", data_fingerprint="f", progress=False, stop_after=17)
    assert part.log["stopped_at"] == 17
    rest = training.train(tiny_moe(), TC, tr, va, name="m", data_fingerprint="f", progress=False)
    assert rest.resumed_from == 17 and not rest.from_cache
    assert same_weights(full.model, rest.model)
    assert rest.log["history"]["train_loss"] == full.log["history"]["train_loss"]


def _training_script(tmp_path, *, name, steps, sleep, eval_every, checkpoint_every, show):
    """A script that trains the tiny dense LM (each step slowed by ``sleep`` s) and prints ``show``: a label
    and an expression of the result ``res``."""
    label, expr = show.split()
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time, torch
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_training import tiny_dense, V
        from acl26 import training
        g = torch.Generator().manual_seed(1)
        tr = torch.randint(0, V, (200, 33), generator=g); va = torch.randint(0, V, (20, 33), generator=g)
        slow = lambda step, loss: time.sleep({sleep})
        cfg = training.TrainConfig(steps={steps}, batch_size=8, eval_every={eval_every}, eval_blocks=8,
                                   checkpoint_every={checkpoint_every})
        res = training.train(tiny_dense(), cfg, tr, va, name={name!r}, data_fingerprint="f", progress=False, on_step=slow)
        print({label!r}, {expr}, flush=True)
    """))
    return script


def test_killed_process_resumes_rather_than_restarting(cache, tmp_path):
    """SIGKILL a training process after its first checkpoints; the rerun picks up from the last one."""
    script = _training_script(tmp_path, name="k", steps=200, sleep=0.05, eval_every=50, checkpoint_every=10,
                              show="RESUMED_FROM res.resumed_from")
    env = {**os.environ, "ACL26_CACHE": str(cache)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    partial = list((cache / "models").glob("k-*.partial")) if (cache / "models").exists() else []
    deadline = time.time() + 120
    while time.time() < deadline and not (partial and (partial[0] / "last.pt").is_file()):
        time.sleep(0.2)
        partial = list((cache / "models").glob("k-*.partial")) if (cache / "models").exists() else []
    time.sleep(1.0)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert partial and (partial[0] / "last.pt").is_file(), "no checkpoint was written before the kill"
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    resumed = int(out.stdout.split("RESUMED_FROM")[1].split()[0])
    assert resumed >= 10, "the rerun restarted from scratch"
    assert not partial[0].exists(), "checkpoints of a finished run are cleaned up"


def test_two_processes_needing_the_same_model_train_it_once(cache, tmp_path):
    """As two points of a sweep on one cache: the first trains, the second waits for it, then loads it."""
    script = _training_script(tmp_path, name="shared", steps=60, sleep=0.06, eval_every=30, checkpoint_every=30,
                              show="FROM_CACHE res.from_cache")
    env = {**os.environ, "ACL26_CACHE": str(cache)}
    procs = [subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    cached = sorted(o.split("FROM_CACHE")[1].split()[0] for o, _ in outs)
    assert cached == ["False", "True"], outs
    waited = [e for o, e in outs if "FROM_CACHE True" in o][0]
    assert "waiting: another process holds" in waited and "training 'shared'" in waited
    assert len(list((cache / "models").glob("shared-*"))) == 1  # one model folder, no partial left


@pytest.mark.parametrize("family", ["dense", "moe"])
def test_each_family_loads_from_a_local_path(cache, tmp_path, family):
    cfg = tiny_dense() if family == "dense" else tiny_moe()
    torch.manual_seed(0)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(cfg).eval()
    model.save_pretrained(tmp_path / family)
    loaded, tok = models.load_local(tmp_path / family)
    x = torch.randint(0, V, (2, 16))
    with torch.no_grad():
        assert torch.equal(model(x).logits, loaded(x).logits)
    assert tok is None
    with pytest.raises(FileNotFoundError, match="config.json"):
        models.load_local(tmp_path / "nothing")


def test_moe_top_k_can_be_lowered_and_counts_active_parameters(cache):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(tiny_moe(top_k=3))
    counts = models.count_params(model)
    assert counts["active"] == counts["total"] - 2 * (8 - 3) * 3 * 32 * 16
    models.set_top_k(model, 1)
    assert all(layer.mlp.gate.top_k == 1 for layer in model.model.layers)
    models.set_top_k(model, [2, 4])
    assert [layer.mlp.gate.top_k for layer in model.model.layers] == [2, 4]
    with pytest.raises(ValueError, match="k must be between"):
        models.set_top_k(model, 9)
    with pytest.raises(ValueError, match="one k per MoE layer"):
        models.set_top_k(model, [1, 2, 3])


def test_bad_train_config_names_the_field():
    with pytest.raises(ValueError, match="TrainConfig.lr"):
        training.TrainConfig(steps=10, lr=-1)
    with pytest.raises(ValueError, match="TrainConfig.steps"):
        training.TrainConfig(steps=0)


def test_supervised_fine_tuning_takes_the_loss_on_labelled_positions_only(cache, blocks):
    train_x, val_x = blocks
    labels = train_x.clone()
    labels[:, : train_x.shape[1] // 2] = training.IGNORE  # a "prompt" half
    labels[:, -4:] = training.IGNORE  # right padding
    val_y = val_x.clone()
    val_y[:, :10] = training.IGNORE
    m = training._build(tiny_dense(), 0)
    full = training.evaluate_loss(m, val_x)
    masked = training.evaluate_loss(m, val_x, labels=val_y)
    # the masked loss is the mean over the labelled next-token positions, computed by hand
    import torch.nn.functional as F

    with torch.no_grad():
        logits = m(input_ids=val_x).logits[:, :-1]
    tgt = val_y[:, 1:]
    ref = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=training.IGNORE)
    assert masked == pytest.approx(float(ref), rel=1e-5)
    ref_full = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), val_x[:, 1:].reshape(-1))
    assert full == pytest.approx(float(ref_full), rel=1e-5)
    assert abs(masked - full) > 1e-6  # the mask changes which positions count
    x, y = training.trim_to_labels(train_x[:2], labels[:2])
    assert x.shape[1] == train_x.shape[1] - 4 and y.shape == x.shape
    cfg = training.TrainConfig(steps=3, batch_size=4, eval_every=3, checkpoint_every=10)
    r = training.train(tiny_dense(), cfg, train_x, val_x, name="sft", data_fingerprint="t", train_labels=labels,
                       val_labels=val_y, progress=False)
    assert r.log["final"]["val_loss"] == pytest.approx(training.evaluate_loss(r.model, val_x, labels=val_y), rel=1e-6)
    with pytest.raises(ValueError, match="train_labels must have the shape"):
        training.train(tiny_dense(), cfg, train_x, val_x, name="sft", data_fingerprint="t",
                       train_labels=labels[:, :5], progress=False)


def test_a_labelled_loss_runs_the_head_at_the_labelled_columns_only_with_transformers_value(blocks):
    """Where some columns carry no label, ``_forward`` asks the forward for the labelled columns'
    logits (``logits_to_keep``) and takes transformers' causal-LM loss itself: the same value and the
    same gradients, to float32 rounding."""
    x, _ = blocks
    x = x[:6]
    y = x.clone()
    y[:, :12] = training.IGNORE
    y[:3, 12:20] = training.IGNORE  # rows labelled from different columns
    y[:, -3:] = training.IGNORE
    m = training._build(tiny_dense(), 0)
    ref = m(input_ids=x, labels=y)
    got = training._forward(m, x, y, None)
    cols = training.labelled_columns(y)
    assert cols.tolist() == list(range(11, x.shape[1] - 4))  # logits at c predict labels[:, c + 1]
    assert got.logits.shape == (6, len(cols), V)
    assert float(got.loss.detach()) == pytest.approx(float(ref.loss.detach()), rel=1e-6)
    grads = []
    for out in (lambda: m(input_ids=x, labels=y), lambda: training._forward(m, x, y, None)):
        m.zero_grad()
        out().loss.backward()
        grads.append([p.grad.clone() for p in m.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    # every column labelled (plain language modelling) or none: transformers' own path, logits of every column
    assert training._forward(m, x, x, None).logits.shape[1] == x.shape[1]
    everything = x.clone()
    assert training._forward(m, x, everything, None).logits.shape[1] == x.shape[1]


def test_supervised_fine_tuning_is_keyed_apart_and_scores_its_last_step_once(cache, blocks, monkeypatch):
    """The labelled-column loss changes the weights to rounding, so its runs are keyed apart; and where the
    last step was scored on every validation block, the final validation loss is that score, not a second pass."""
    train_x, val_x = blocks
    labels = train_x.clone()
    labels[:, :10] = training.IGNORE
    val_y = val_x.clone()
    val_y[:, :10] = training.IGNORE
    calls = []
    real = training.evaluate_loss
    monkeypatch.setattr(training, "evaluate_loss", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfg = training.TrainConfig(steps=4, batch_size=4, eval_every=2, eval_blocks=len(val_x), checkpoint_every=10)
    r = training.train(tiny_dense(), cfg, train_x, val_x, name="sft", data_fingerprint="t", train_labels=labels,
                       val_labels=val_y, progress=False)
    assert len(calls) == 2  # steps 2 and 4; the final loss is step 4's
    assert r.log["final"]["val_loss"] == r.log["history"]["val_loss"][-1]
    assert r.log["final"]["val_loss"] == pytest.approx(real(r.model, val_x, labels=val_y), rel=1e-6)
    calls.clear()
    part = dataclasses.replace(cfg, eval_blocks=len(val_x) - 1)  # the last score saw fewer blocks: scored again
    r2 = training.train(tiny_dense(), part, train_x, val_x, name="sft", data_fingerprint="t", train_labels=labels,
                        val_labels=val_y, progress=False, use_cache=False)
    assert len(calls) == 3 and r2.log["key"] == r.log["key"]  # what is scored does not change the weights
    plain = training.train(tiny_dense(), cfg, train_x, val_x, name="lm", data_fingerprint="t", progress=False)
    assert plain.log["key"] != r.log["key"]


def test_only_the_parameters_init_leaves_trainable_are_trained(cache, blocks):
    """Training some blocks with the rest frozen (as QAT of a block subset does): the frozen tensors come
    out bit for bit as they went in, and the log counts what was trained."""
    train_x, val_x = blocks
    start = training._build(tiny_dense(), 0)
    frozen0 = {n: p.detach().clone() for n, p in start.named_parameters() if ".layers.1." not in n}

    def init():
        m = training._build(tiny_dense(), 0)
        for n, p in m.named_parameters():
            p.requires_grad_(".layers.1." in n)
        return m

    cfg = training.TrainConfig(steps=6, batch_size=4, lr=3e-3, eval_every=3, checkpoint_every=10)
    r = training.train(tiny_dense(), cfg, train_x, val_x, name="part", data_fingerprint="t", init=init, progress=False,
                       key_extra={"trained": "layers.1"})
    got = dict(r.model.named_parameters())
    assert all(torch.equal(got[n], t) for n, t in frozen0.items())
    moved = [n for n, p in got.items() if ".layers.1." in n and not torch.equal(p, dict(start.named_parameters())[n])]
    assert moved and 0 < r.log["trained_params"] < r.log["params"]

    def none():
        m = training._build(tiny_dense(), 0)
        for p in m.parameters():
            p.requires_grad_(False)
        return m

    with pytest.raises(ValueError, match="no trainable parameters"):
        training.train(tiny_dense(), cfg, train_x, val_x, name="none", data_fingerprint="t", init=none, progress=False,
                       key_extra={"trained": "nothing"})


def _layer1_only():
    m = training._build(tiny_dense(), 0)
    for n, p in m.named_parameters():
        p.requires_grad_(".layers.1." in n)
    return m


def test_save_trainable_keeps_only_the_trained_blocks_and_loads_them_back(cache, blocks):
    """save='trainable': the result folder and the checkpoints hold the trained parameters only; the cached
    model (init() with them put back) and a run resumed from a trainable-only checkpoint equal the
    uninterrupted run, bit for bit; val_per_block logs each block's NLL, whose mean is the val loss."""
    from safetensors.torch import load_file

    tr, va = blocks
    cfg = training.TrainConfig(steps=8, batch_size=4, lr=3e-3, eval_every=4, checkpoint_every=3)
    kw = dict(name="sub", data_fingerprint="t", init=_layer1_only, progress=False, save="trainable", val_per_block=True)
    full = training.train(tiny_dense(), cfg, tr, va, use_cache=False, **(kw | {"name": "sub-full"}))
    part = training.train(tiny_dense(), cfg, tr, va, stop_after=5, **kw)
    ckpt = torch.load(part.folder / "last.pt", weights_only=False)
    assert set(ckpt["model"]) == {n for n, p in _layer1_only().named_parameters() if p.requires_grad}
    rest = training.train(tiny_dense(), cfg, tr, va, **kw)
    assert rest.resumed_from == 5 and same_weights(full.model, rest.model)
    saved = load_file(str(rest.folder / training.TRAINABLE_FILE))
    assert saved and all(".layers.1." in n for n in saved) and not (rest.folder / "model.safetensors").exists()
    again = training.train(tiny_dense(), cfg, tr, va, **kw)
    assert again.from_cache and same_weights(again.model, full.model)
    losses = again.log["final"]["val_block_losses"]
    assert len(losses) == len(va) and sum(losses) / len(losses) == pytest.approx(again.log["final"]["val_loss"], rel=1e-6)
    assert losses == pytest.approx(training.block_losses(again.model, va), rel=1e-6)


def test_save_trainable_refuses_bad_arguments_and_a_mismatched_entry(cache, blocks):
    tr, va = blocks
    cfg = training.TrainConfig(steps=2, batch_size=4, eval_every=2, checkpoint_every=2)
    with pytest.raises(ValueError, match="save must be"):
        training.train(tiny_dense(), cfg, tr, va, name="x", data_fingerprint="t", save="weights", progress=False)
    with pytest.raises(ValueError, match="needs init"):
        training.train(tiny_dense(), cfg, tr, va, name="x", data_fingerprint="t", save="trainable", progress=False)
    with pytest.raises(ValueError, match="val_per_block"):
        training.train(tiny_dense(), cfg, tr, va, name="x", data_fingerprint="t", val_per_block=True,
                       val_labels=va.clone(), progress=False)
    r = training.train(tiny_dense(), cfg, tr, va, name="y", data_fingerprint="t", init=_layer1_only,
                       save="trainable", progress=False)

    def layer0_only():
        m = training._build(tiny_dense(), 0)
        for n, p in m.named_parameters():
            p.requires_grad_(".layers.0." in n)
        return m

    from acl26.errors import CacheError

    # the same folder read with an init() that trains other parameters: reported, not silently mixed
    with pytest.raises(CacheError, match=r"do not match the model's trainable ones"):
        training.train(tiny_dense(), cfg, tr, va, name="y", data_fingerprint="t", init=layer0_only,
                       save="trainable", progress=False)
    assert r.folder.is_dir()  # reported, and left for the user to remove


def _deep_only(seed=0, layers=3):
    def init():
        m = training._build(models.dense_config(V, hidden=32, layers=layers, heads=4, kv_heads=2, intermediate=64,
                                                max_positions=64), seed)
        for n, p in m.named_parameters():
            p.requires_grad_(f".layers.{layers - 1}." in n)
        return m
    return init


@pytest.mark.parametrize("bf16", [False, True])
def test_a_frozen_prefix_gives_the_same_run_bit_for_bit_and_is_shared(cache, blocks, bf16):
    """FrozenPrefix keeps the outputs of the frozen first layers: the weights, the losses and the log equal the
    run without it, bit for bit (with bf16 autocast where this CPU has it, and in fp32), a second run on
    the same batches finds them kept, and a run from other weights recomputes them instead of reusing them."""
    tr, va = blocks
    cfg = training.TrainConfig(steps=6, batch_size=2, lr=3e-3, eval_every=2, eval_blocks=8, checkpoint_every=10,
                               bf16=bf16)
    kw = dict(data_fingerprint="t", progress=False, save="trainable", val_per_block=True, use_cache=False)
    prefix = training.FrozenPrefix(2)
    for seed in (0, 0, 1):
        plain = training.train(tiny_dense(), cfg, tr, va, name="plain", init=_deep_only(seed), **kw)
        kept = training.train(tiny_dense(), cfg, tr, va, name="kept", init=_deep_only(seed), prefix=prefix, **kw)
        assert same_weights(plain.model, kept.model)
        assert {k: v for k, v in plain.log.items() if k not in ("seconds", "name")} == \
            {k: v for k, v in kept.log.items() if k not in ("seconds", "name")}
    # the second seed-0 run met every batch kept (6 steps, 3 evaluations of one batch, the final blocks in one)
    assert prefix.hits >= 10 and prefix.misses > 0
    assert training.block_losses(kept.model, va, prefix=prefix) == training.block_losses(kept.model, va)


class _Gain(torch.nn.Module):
    """A frozen layer with a plain setting a loop may change between steps (as a quantizer's residual weight)."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.gain = inner, 1.0

    def forward(self, x):
        return self.inner(x) * self.gain


@torch.no_grad()
def test_a_frozen_prefix_never_serves_a_stale_output(blocks):
    """The kept output follows the prefix's settings and weights: a setting changed between calls (read at
    every call) and weights changed before bind (checked there) give the uncached model's logits."""
    _, va = blocks
    model = _deep_only(0)()
    mlp = model.model.layers[0].mlp
    mlp.down_proj = _Gain(mlp.down_proj)
    model.eval()
    prefix = training.FrozenPrefix(2)
    prefix.bind(model)
    x = va[:2]
    for gain in (1.0, 0.5, 1.0):
        mlp.down_proj.gain = gain
        assert torch.equal(prefix(model, x).logits, model(input_ids=x).logits)
    assert prefix.misses == 2 and prefix.hits == 1
    model.model.layers[1].mlp.up_proj.weight.mul_(2)
    prefix.bind(model)
    assert torch.equal(prefix(model, x).logits, model(input_ids=x).logits) and prefix.misses == 3
    model.model.rotary_emb.inv_freq.mul_(0.5)  # a buffer outside state_dict
    prefix.bind(model)
    assert torch.equal(prefix(model, x).logits, model(input_ids=x).logits) and prefix.misses == 4


def test_a_frozen_prefix_refuses_what_it_cannot_keep(cache, blocks):
    tr, va = blocks
    cfg = training.TrainConfig(steps=2, batch_size=2, eval_every=2, checkpoint_every=2)
    def middle():  # 3 layers, layer 1 trains: inside a 2-layer prefix
        m = _deep_only(0)()
        for n, p in m.named_parameters():
            p.requires_grad_(".layers.1." in n)
        return m

    with pytest.raises(ValueError, match=r"layers.1.self_attn.q_proj.weight is trainable"):
        training.train(tiny_dense(), cfg, tr, va, name="p", data_fingerprint="t", init=middle,
                       prefix=training.FrozenPrefix(2), progress=False)
    assert not (cache / "models").exists() or not any((cache / "models").rglob("last.pt"))
    with pytest.raises(ValueError, match="below the model's 3 decoder layers"):
        training.FrozenPrefix(3).bind(_deep_only(0)())
    with pytest.raises(ValueError, match="is trainable"):
        training.FrozenPrefix(1).bind(training._build(tiny_dense(), 0))  # the embeddings train
    with pytest.raises(ValueError, match="LLaMA-family"):
        training.FrozenPrefix(1).bind(torch.nn.Linear(2, 2))
    drop = _deep_only(0)()
    drop.model.layers[1].self_attn.attention_dropout = 0.1
    with pytest.raises(ValueError, match=r"layers.1.self_attn has dropout 0.1"):
        training.FrozenPrefix(2).bind(drop)
    training.FrozenPrefix(1).bind(drop)  # below the dropout: kept
    with pytest.raises(ValueError, match="layers"):
        training.FrozenPrefix(0)


class _Runs:
    """A pickle that runs a command when loaded (what ``torch.load(weights_only=False)`` would do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_that_names_code_is_a_damaged_cache_entry_and_runs_nothing(cache, blocks, tmp_path):
    tr, va = blocks
    training.train(tiny_moe(), TC, tr, va, name="m", data_fingerprint="f", progress=False, stop_after=5)
    (ckpt,) = (cache / "models").rglob("last.pt")
    marker = tmp_path / "pwned"
    torch.save({"key": "x", "payload": _Runs(marker)}, ckpt)
    from acl26 import io

    io._record(ckpt, io._signature(ckpt.stat()))  # its ledger entry forged too: only the load itself can refuse
    from acl26.errors import CacheError

    with pytest.raises(CacheError, match="last.pt"):
        training.train(tiny_moe(), TC, tr, va, name="m", data_fingerprint="f", progress=False)
    assert not marker.exists()
