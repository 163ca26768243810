"""One training loop for every model the book trains (shared by every chapter that trains one).

:func:`train` trains a ``transformers`` causal LM from its config on packed token blocks: AdamW,
linear warm-up then cosine decay, gradient clipping, periodic validation, checkpoints, a progress
bar and a loss curve. Everything is keyed by a hash of the whole configuration (model config,
training config, data fingerprint, seed, loop version):

* a finished run is saved atomically under ``$ACL26_CACHE/models/<name>-<key>/`` and loads in
  seconds the next time;
* an interrupted run leaves checkpoints in ``<name>-<key>.partial/`` and the next call with the
  same configuration resumes from the last one, restoring model, optimiser, schedule and random
  state, so the resumed run ends with the same weights as an uninterrupted one;
* the same configuration and seed give the same weights (on the same machine and thread count):
  training runs with torch's deterministic algorithms (see :func:`deterministic`);
* a cached model or checkpoint that does not load (truncated weights, a garbled log) raises
  :class:`acl26.errors.CacheError`, one line naming the folder and the command that removes it;
  it is reported, not retrained behind the user's back (the next run retrains it once removed);
* one process at a time trains (or loads) a given configuration (a lock beside its folder,
  :func:`acl26.io.file_lock`): two runs that need the same model, such as the points of a sweep
  (:mod:`acl26.sweep`), never train it twice; the second waits, then loads what the first saved.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from acl26 import checks, evaluation, io, models, paths
from acl26.errors import cache_entry_error

log = logging.getLogger(__name__)

#: bump when the loop changes in a way that changes the weights it produces
#: (2: deterministic algorithms, which changed how the MoE's expert gradients are summed)
LOOP_VERSION = 2


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch_size: int = 16
    lr: float = 1e-3
    warmup_frac: float = 0.05
    min_lr_frac: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0
    seed: int = 0
    eval_every: int = 50
    eval_blocks: int = 64
    checkpoint_every: int = 50
    #: bf16 autocast for the forward pass (fp32 master weights and optimizer) where the CPU computes
    #: bf16 natively (:func:`bf16_native`), else fp32 (emulated bf16 was measured 6x slower per matmul
    #: and about 19x slower per training step on an AVX2-only CPU); about 1.5x faster on
    #: CPUs with AVX-512 BF16. Validation always runs in fp32.
    bf16: bool = False

    def __post_init__(self):
        """Every field through :mod:`acl26.checks` (counts are integers, rates finite numbers, bool
        refused); a numpy scalar is stored as the Python number (the cache key is JSON)."""
        ints = {"steps": 1, "batch_size": 1, "seed": 0, "eval_every": 1, "eval_blocks": 1, "checkpoint_every": 1}
        floats = {"lr": dict(lo=0.0, lo_open=True), "warmup_frac": dict(lo=0.0, hi=1.0, hi_open=True),
                  "min_lr_frac": dict(lo=0.0, hi=1.0), "weight_decay": dict(lo=0.0),
                  "grad_clip": dict(lo=0.0, lo_open=True)}
        for name, lo in ints.items():
            v = getattr(self, name)
            got = checks.seed(f"TrainConfig.{name}", v) if name == "seed" else checks.integer(f"TrainConfig.{name}", v, lo)
            if not isinstance(v, int):
                object.__setattr__(self, name, got)
        for name, bounds in floats.items():
            v = getattr(self, name)
            got = checks.number(f"TrainConfig.{name}", v, **bounds)
            if not isinstance(v, (int, float)):
                object.__setattr__(self, name, got)
        try:
            b1, b2 = self.betas
        except (TypeError, ValueError):
            raise ValueError(f"TrainConfig.betas must be two numbers in [0, 1), got {self.betas!r}") from None
        betas = tuple(checks.number(f"TrainConfig.betas[{i}]", b, 0.0, 1.0, hi_open=True) for i, b in enumerate((b1, b2)))
        if not all(isinstance(b, float) for b in self.betas):
            object.__setattr__(self, "betas", betas)


@dataclass
class TrainResult:
    model: Any
    folder: Path
    log: dict
    from_cache: bool
    resumed_from: int = 0

    @property
    def val_ppl(self) -> float:
        return self.log["final"]["val_ppl"]


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning-rate multiplier: linear warm-up, then cosine decay to ``min_lr_frac``."""
    warm = max(1, int(round(cfg.warmup_frac * cfg.steps)))
    if step < warm:
        return (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    return cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def bf16_native() -> bool:
    """Whether this CPU computes bf16 matmuls natively (oneDNN's bf16 support: AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def bf16_native_on(device) -> bool:
    """Whether ``device`` (a ``torch.device`` or its name) computes bf16 matmuls natively: a CPU with
    AVX512-BF16 or AMX (:func:`bf16_native`), or a CUDA device that supports bf16."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return bf16_native()
    if dev.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    return False


def bf16_runs(requested: bool, device="cpu") -> bool:
    """Whether bf16 autocast really runs: asked for, and native on ``device`` (:func:`bf16_native_on`)."""
    return bool(requested) and bf16_native_on(device)


def precision_tag(requested: bool, device="cpu") -> bool | str:
    """What a cache key records of a bf16 request: ``False`` (fp32 asked for), ``True`` (bf16 autocast
    runs), or a note that bf16 was asked for but ``device`` has no native bf16 (so fp32 runs)."""
    if not requested:
        return False
    return True if bf16_native_on(device) else "requested, but not native on this device: fp32"


def autocast_bf16(train_config: TrainConfig) -> bool:
    """The precision a run really uses: bf16 autocast when asked for and native here, else fp32."""
    return bf16_runs(train_config.bf16)


def config_key(model_config, train_config: TrainConfig, data_fingerprint: str) -> str:
    """sha256 over everything that determines the trained weights (including the precision the run
    really uses, see :func:`autocast_bf16`)."""
    mc = model_config.to_dict() if hasattr(model_config, "to_dict") else dict(model_config)
    for volatile in ("transformers_version", "_name_or_path", "dtype", "torch_dtype"):
        mc.pop(volatile, None)
    train = dataclasses.asdict(train_config)
    for bookkeeping in ("eval_every", "eval_blocks", "checkpoint_every"):  # they do not change the weights
        train.pop(bookkeeping)
    if train["bf16"] and not autocast_bf16(train_config):
        train["bf16"] = "requested, but not native on this CPU: fp32"
    payload = {"model": mc, "train": train, "data": data_fingerprint,
               "loop": LOOP_VERSION, "torch": torch.__version__.split("+")[0]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _folders(name: str, key: str) -> tuple[Path, Path]:
    root = paths.cache_dir() / "models"
    return root / f"{name}-{key[:12]}", root / f"{name}-{key[:12]}.partial"


@contextlib.contextmanager
def deterministic():
    """Run the block with ``torch.use_deterministic_algorithms(True)``, then restore the caller's setting.

    On CPU this matters for MoE models: the backward of the expert dispatch (``hidden[token_idx]``)
    is an ``index_put_`` with accumulation, which torch otherwise runs on several threads with
    racing float additions, so two runs of the same configuration differ in the last bits and
    drift apart over training. An op without a deterministic implementation raises instead of
    running nondeterministically.
    """
    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(enabled, warn_only=warn_only)


def _build(model_config, seed: int):
    from transformers import AutoModelForCausalLM

    models.quiet_transformers()
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(model_config)


def trim_to_labels(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cut the columns after the last labelled position of any row (right padding of masked rows)."""
    used = (y != IGNORE).any(dim=0).nonzero()
    end = int(used.max()) + 1 if len(used) else 1
    return x[:, :end], y[:, :end]


#: the label of a position the loss ignores (transformers' convention)
IGNORE = -100


class _Stop(Exception):
    """Raised by :class:`FrozenPrefix`'s hook once the prefix's last layer has run."""


class FrozenPrefix:
    """The output of a causal LM's first ``layers`` decoder layers, kept per input, for runs that train
    only deeper layers (QAT of a block subset): a frozen prefix gives the same output for the same
    input at every step, so each distinct batch passes through it once, and the runs that start from
    the same weights (a chapter's variants, which see the same batches) share it.

    ``prefix(model, input_ids, labels=None)`` is ``model(input_ids=input_ids, labels=labels)`` with the
    prefix's output looked up (or computed once and kept): the first time, the model itself runs up to
    layer ``layers - 1`` (under the caller's autocast, which the key covers with the model's train/eval
    mode, the batch's shape and its ids); then the model runs with the embedding's
    output replaced by the kept tensor and its layer list cut to the layers after the prefix. The
    same operations on the same shapes, so the result equals the uncached call's bit for bit
    (``tests/test_training.py``).

    :meth:`bind` checks a model before use: a LLaMA-family model (``model.model.layers`` and
    ``embed_tokens``) with more than ``layers`` layers, whose embeddings and first ``layers`` layers
    have nothing trainable and no dropout (its output would be random in training); the kept outputs are
    dropped when the prefix's weights (its parameters and
    buffers, the rotary embedding's, the attention implementation) differ from those they were computed
    with, and its modules' plain settings are part of every key. At most
    ``max_bytes`` of outputs are kept; past that a batch is computed without keeping it.
    """

    def __init__(self, layers: int, max_bytes: int = 2 << 30):
        self.layers = checks.integer("layers", layers, 1)
        self.max_bytes = checks.integer("max_bytes", max_bytes, 0)
        self._memo: dict = {}
        self._bytes = 0
        self._digest: str | None = None
        self.hits = self.misses = 0

    def _parts(self, model):
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        embed = getattr(inner, "embed_tokens", None)
        if layers is None or embed is None:
            raise ValueError(f"FrozenPrefix needs a LLaMA-family causal LM (model.model.layers and embed_tokens), "
                             f"got {type(model).__name__}")
        if self.layers >= len(layers):
            raise ValueError(f"FrozenPrefix: layers must be below the model's {len(layers)} decoder layers, "
                             f"got {self.layers}")
        return inner, layers, embed

    def _modules(self, model) -> list[tuple[str, torch.nn.Module]]:
        """The modules the prefix's output depends on: the embeddings, its layers and the rotary embedding."""
        inner, layers, embed = self._parts(model)
        rotary = getattr(inner, "rotary_emb", None)
        return ([("embed", embed)] + [(f"layers.{i}", layers[i]) for i in range(self.layers)]
                + ([("rotary", rotary)] if rotary is not None else []))

    def _settings(self, model) -> tuple:
        """The prefix modules' plain settings (a quantizer's mode or residual weight, say), read at every
        call and part of the key: a setting a training loop changes between steps is never served stale."""
        return tuple((f"{name}.{sub}", k, v) for name, mod in self._modules(model) for sub, m in mod.named_modules()
                     for k, v in vars(m).items()
                     if not k.startswith("_") and k != "training" and isinstance(v, (bool, int, float, str)))

    def bind(self, model) -> None:
        """Check ``model`` (see the class docstring) and drop the kept outputs if its prefix differs."""
        modules = self._modules(model)  # a model that is not LLaMA-family is refused first
        h = hashlib.sha256(str(getattr(model.config, "_attn_implementation", "")).encode())
        for prefix, mod in modules:
            for n, p in mod.named_parameters():
                if p.requires_grad:
                    raise ValueError(f"FrozenPrefix: {prefix}.{n} is trainable; the prefix (the embeddings and "
                                     f"layers 0..{self.layers - 1}) must be frozen")
            for n, m in mod.named_modules():
                rate = m.p if isinstance(m, torch.nn.modules.dropout._DropoutNd) else getattr(m, "attention_dropout", 0.0)
                if isinstance(rate, (int, float)) and rate > 0:
                    raise ValueError(f"FrozenPrefix: {prefix}.{n} has dropout {rate}; a prefix with dropout gives "
                                     "a random output in training, which cannot be kept")
            # parameters and every buffer, persistent or not (the rotary embedding's inv_freq is not)
            for n, t in list(mod.named_parameters()) + list(mod.named_buffers()):
                t = t.detach().reshape(-1).contiguous().cpu()
                h.update(f"{prefix}.{n}|{t.dtype}|{t.numel()}|".encode())
                h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        digest = h.hexdigest()
        if digest != self._digest:
            self._memo.clear()
            self._bytes = 0
            self._digest = digest

    def _key(self, model, input_ids: torch.Tensor):
        auto = torch.is_autocast_enabled("cpu")
        return (bool(model.training), auto, str(torch.get_autocast_dtype("cpu")) if auto else "", self._settings(model),
                tuple(input_ids.shape), str(input_ids.dtype), input_ids.detach().cpu().contiguous().numpy().tobytes())

    def _compute(self, model, layers, input_ids: torch.Tensor) -> torch.Tensor:
        got = []

        def stop(module, args, output):
            got.append(output[0] if isinstance(output, tuple) else output)
            raise _Stop

        handle = layers[self.layers - 1].register_forward_hook(stop)
        try:
            model(input_ids=input_ids)
        except _Stop:
            pass
        finally:
            handle.remove()
        if not got:
            raise RuntimeError(f"FrozenPrefix: the model's forward never reached layer {self.layers - 1}")
        return got[0].detach()

    def __call__(self, model, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        inner, layers, embed = self._parts(model)
        key = self._key(model, input_ids)
        h = self._memo.get(key)
        if h is None:
            self.misses += 1
            h = self._compute(model, layers, input_ids)
            size = h.numel() * h.element_size()
            if self._bytes + size <= self.max_bytes:
                self._memo[key] = h
                self._bytes += size
        else:
            self.hits += 1
        handle = embed.register_forward_hook(lambda module, args, output: h.clone())
        inner.layers = torch.nn.ModuleList(list(layers)[self.layers:])
        try:
            return model(input_ids=input_ids, labels=labels)
        finally:
            inner.layers = layers
            handle.remove()


def labelled_columns(labels: torch.Tensor) -> torch.Tensor:
    """The columns ``c`` whose logits some row's loss reads: ``labels[:, c + 1]`` is labelled in some row."""
    return (labels[:, 1:] != IGNORE).any(dim=0).nonzero().squeeze(-1)


def _forward(model, input_ids: torch.Tensor, labels: torch.Tensor | None, prefix: FrozenPrefix | None):
    """``model(input_ids=..., labels=...)``, through ``prefix`` where one is given.

    Where only some columns carry a label (supervised fine-tuning: the prompts and the padding are
    :data:`IGNORE`) and the forward takes ``logits_to_keep``, the head runs at the columns some row's
    loss reads and the loss is taken here: transformers' causal-LM loss (labels shifted by one, cross
    entropy in float32 over the labelled positions, their mean), on the logits it would read. The
    returned object then has ``loss`` and those columns' ``logits``.
    """
    if prefix is not None:
        return prefix(model, input_ids, labels=labels)
    if labels is not None and labels is not input_ids and evaluation.keeps_logits(model):
        cols = labelled_columns(labels)
        if 0 < len(cols) < labels.shape[1] - 1:
            import torch.nn.functional as F

            logits = model(input_ids=input_ids, logits_to_keep=cols).logits
            target = labels[:, 1:][:, cols]
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1),
                                   ignore_index=IGNORE)
            return SimpleNamespace(loss=loss, logits=logits)
    return model(input_ids=input_ids, labels=labels)


@torch.no_grad()
def evaluate_loss(model, blocks: torch.Tensor, batch_size: int = 16, labels: torch.Tensor | None = None,
                  prefix: FrozenPrefix | None = None) -> float:
    """Mean next-token cross-entropy (nats) over ``blocks`` (rows of token ids); with ``labels``
    (same shape, :data:`IGNORE` where no loss is taken) over the labelled positions only. ``prefix``
    (a :class:`FrozenPrefix` bound to ``model``) keeps the frozen layers' outputs: the same value."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(blocks), batch_size):
        x = blocks[i:i + batch_size]
        y = x if labels is None else labels[i:i + batch_size]
        if labels is not None:
            x, y = trim_to_labels(x, y)
        n = int((y[:, 1:] != IGNORE).sum())
        if n == 0:
            continue
        out = _forward(model, x, y, prefix)
        total += float(out.loss) * n
        count += n
    model.train(was_training)
    return total / max(1, count)


@torch.no_grad()
def block_losses(model, blocks: torch.Tensor, batch_size: int = 16, prefix: FrozenPrefix | None = None) -> list[float]:
    """Mean next-token cross-entropy (nats) of each block: the units of a paired bootstrap
    (:func:`acl26.stats.paired_bootstrap`) between two models scored on the same blocks. ``prefix`` as in
    :func:`evaluate_loss`."""
    import torch.nn.functional as F

    was_training = model.training
    model.eval()
    out = []
    for i in range(0, len(blocks), batch_size):
        x = blocks[i:i + batch_size]
        logits = _forward(model, x, None, prefix).logits[:, :-1].float()
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="none")
        out += nll.reshape(x.shape[0], -1).mean(dim=1).tolist()
    model.train(was_training)
    return out


class Monitor:
    """Hooks into a training run (e.g. QAT schedules and statistics); its state is checkpointed.

    ``before_step(step, model)`` runs before each forward pass, ``on_grads(step, model)`` after the
    backward pass (gradients present, before clipping); ``state_dict``/``load_state_dict`` carry
    its state through checkpoints, and ``summary()`` is stored in the run's log.
    """

    def before_step(self, step: int, model) -> None:  # pragma: no cover - interface
        pass

    def on_grads(self, step: int, model) -> None:  # pragma: no cover - interface
        pass

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def summary(self) -> dict:
        return {}


@deterministic()
def train(model_config, train_config: TrainConfig, train_blocks: torch.Tensor, val_blocks: torch.Tensor, *,
          name: str, data_fingerprint: str, progress: bool = True, use_cache: bool = True,
          stop_after: int | None = None, on_step: Callable[[int, float], None] | None = None,
          init: Callable[[], Any] | None = None, key_extra: dict | None = None,
          monitor: Monitor | None = None, prepare: Callable[[Any], Any] | None = None,
          train_labels: torch.Tensor | None = None, val_labels: torch.Tensor | None = None,
          save: str = "model", val_per_block: bool = False, prefix: FrozenPrefix | None = None) -> TrainResult:
    """Train (or load, or resume) a causal LM; see the module docstring.

    ``train_blocks`` and ``val_blocks`` are ``LongTensor`` rows of token ids (``[n, block]``).
    ``stop_after`` stops after that many steps in this call (for tests of resuming); the
    checkpoint it leaves is resumed by the next call. ``init()`` builds the starting model
    instead of a fresh one from ``model_config`` (fine-tuning, QAT); ``key_extra`` adds what
    else determines the result (e.g. the starting model's key and the QAT variant) to the cache
    key. ``prepare(model)`` is applied to a model loaded from the cache (e.g. to wrap its layers
    again). ``monitor`` receives the hooks described in :class:`Monitor`.
    ``train_labels`` / ``val_labels`` (same shapes as the blocks; :data:`IGNORE` where no loss is
    taken, e.g. prompts and right padding) turn the loop into supervised fine-tuning: the loss is
    taken on the labelled positions only, and each batch is cut after its last labelled column.
    The caller's ``data_fingerprint`` must cover the labels.
    ``save="trainable"`` (with ``init``) keeps only the parameters that were trained, in the result
    folder and in the checkpoints: a fine-tune of a few blocks of a pretrained model stores those
    blocks, not the whole model again; loading calls ``init()`` and puts them back.
    ``val_per_block`` also logs each validation block's mean NLL (``final["val_block_losses"]``, the
    units of a paired bootstrap; needs no ``val_labels``).
    ``prefix`` (a :class:`FrozenPrefix`) keeps the outputs of the frozen first layers of the model
    ``init()`` builds, for its training steps and evaluations: the same weights, losses and log bit
    for bit, so it is not part of the cache key; a prefix with anything trainable is refused.
    """
    if save not in ("model", "trainable"):
        raise ValueError(f"save must be 'model' or 'trainable', got {save!r}")
    if save == "trainable" and init is None:
        raise ValueError("save='trainable' needs init(): the model its trained parameters are put back into")
    if val_per_block and val_labels is not None:
        raise ValueError("val_per_block scores whole blocks; it cannot be combined with val_labels")
    if train_blocks.ndim != 2 or val_blocks.ndim != 2:
        raise ValueError("train_blocks and val_blocks must be 2-D tensors of token ids")
    for what, lab, ref in (("train_labels", train_labels, train_blocks), ("val_labels", val_labels, val_blocks)):
        if lab is not None and lab.shape != ref.shape:
            raise ValueError(f"{what} must have the shape of its blocks {tuple(ref.shape)}, got {tuple(lab.shape)}")
    if len(train_blocks) < train_config.batch_size:
        raise ValueError(f"train_blocks has {len(train_blocks)} rows, fewer than batch_size {train_config.batch_size}")
    fingerprint = data_fingerprint + (json.dumps(key_extra, sort_keys=True) if key_extra else "")
    if train_labels is not None and prefix is None:
        # the head runs at the labelled columns only (_forward): the same loss, summed in another order,
        # so weights equal to rounding, not bit for bit, and a model trained before is not read back as this one
        fingerprint += "|sft loss: head at labelled columns"
    key = config_key(model_config, train_config, fingerprint)
    final, partial = _folders(name, key)
    # one process at a time per model: two runs that need the same model (points of a sweep, anywhere on a
    # shared cache) never train it twice; the second waits, then loads what the first saved
    with io.file_lock(final.parent / f".{final.name}.lock", what=f"training {name!r}"):
        if use_cache and (final / "train_log.json").is_file():
            from transformers import AutoModelForCausalLM

            models.quiet_transformers()
            try:
                if (final / TRAINABLE_FILE).is_file():
                    model = _load_trainable(init(), final / TRAINABLE_FILE)
                else:
                    model = AutoModelForCausalLM.from_pretrained(final)
                train_log = io.read_json(final / "train_log.json")
            except Exception as exc:  # noqa: BLE001 - json, safetensors and transformers each raise their own
                raise cache_entry_error(final, exc, what=f"trained model {name!r}") from exc
            if prepare is not None:
                model = prepare(model)
            return TrainResult(model, final, train_log, from_cache=True)

        # a folder or file in the way that acl26 did not write is refused now, not after the training
        io.check_target(final, kind="folder")
        io.check_target(partial / "last.pt")
        torch.manual_seed(train_config.seed)
        model = init() if init is not None else _build(model_config, train_config.seed)
        model.train()
        # only what init() left trainable is optimised (e.g. QAT of some blocks, the rest frozen: requires_grad False)
        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        if not trainable:
            raise ValueError(f"{name}: the model to train has no trainable parameters (every requires_grad is False)")
        decay = [p for n, p in trainable if p.ndim >= 2 and "norm" not in n]
        no_decay = [p for n, p in trainable if not (p.ndim >= 2 and "norm" not in n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": train_config.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=train_config.lr, betas=train_config.betas)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, train_config))
        gen = torch.Generator().manual_seed(train_config.seed)
        history = {"step": [], "train_loss": [], "lr": [], "eval_step": [], "val_loss": []}
        start, elapsed = 0, 0.0
        ckpt = partial / "last.pt"
        resumed_from = 0
        if use_cache and ckpt.is_file():
            try:
                state = torch.load(ckpt, weights_only=True)  # tensors and plain data only: nothing a file names is run
            except Exception as exc:  # noqa: BLE001 - a truncated or garbled checkpoint
                raise cache_entry_error(partial, exc, file=ckpt, what=f"training checkpoint of {name!r}") from exc
            if state.get("key") == key:
                _put_state(model, state["model"], trainable_only=save == "trainable")
                opt.load_state_dict(state["opt"])
                sched.load_state_dict(state["sched"])
                gen.set_state(state["gen"])
                torch.set_rng_state(state["torch_rng"])
                history, start, elapsed = state["history"], state["step"], state["elapsed"]
                if monitor is not None:
                    monitor.load_state_dict(state.get("monitor", {}))
                resumed_from = start
                log.info("%s: resuming from step %d", name, start)
        if prefix is not None:
            prefix.bind(model)  # after a resume: the weights the steps run with
        eval_x = val_blocks[: train_config.eval_blocks]
        eval_y = None if val_labels is None else val_labels[: train_config.eval_blocks]
        use_bf16 = autocast_bf16(train_config)
        if train_config.bf16 and not use_bf16:
            log.warning("%s: bf16 autocast asked for, but this CPU has no native bf16: training in fp32", name)

        from tqdm import tqdm

        bar = tqdm(range(start, train_config.steps), desc=f"train {name}", initial=start, total=train_config.steps,
                   disable=not progress, unit="step")
        t0 = time.perf_counter()
        done_here = 0
        for step in bar:
            idx = torch.randint(0, len(train_blocks), (train_config.batch_size,), generator=gen)
            x = train_blocks[idx]
            y = x
            if train_labels is not None:
                x, y = trim_to_labels(x, train_labels[idx])
            if monitor is not None:
                monitor.before_step(step, model)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_bf16):
                out = _forward(model, x, y, prefix)
            loss = out.loss.float()
            loss.backward()
            if monitor is not None:
                monitor.on_grads(step, model)
            torch.nn.utils.clip_grad_norm_(model.parameters(), train_config.grad_clip)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            history["step"].append(step + 1)
            history["train_loss"].append(loss.item())
            history["lr"].append(opt.param_groups[0]["lr"])
            if on_step is not None:
                on_step(step + 1, history["train_loss"][-1])
            if (step + 1) % train_config.eval_every == 0 or step + 1 == train_config.steps:
                history["eval_step"].append(step + 1)
                history["val_loss"].append(evaluate_loss(model, eval_x, labels=eval_y, prefix=prefix))
                bar.set_postfix(loss=f"{history['train_loss'][-1]:.3f}", val=f"{history['val_loss'][-1]:.3f}")
            done_here += 1
            last = step + 1 == train_config.steps
            stopping = stop_after is not None and done_here >= stop_after
            if (step + 1) % train_config.checkpoint_every == 0 or stopping:
                if not last:
                    _checkpoint(ckpt, key, model, opt, sched, gen, history, step + 1,
                                elapsed + time.perf_counter() - t0, monitor, trainable_only=save == "trainable")
            if stopping and not last:
                bar.close()
                return TrainResult(model, partial, {"history": history, "stopped_at": step + 1}, from_cache=False,
                                   resumed_from=resumed_from)
        bar.close()
        elapsed += time.perf_counter() - t0

        per_block = block_losses(model, val_blocks, prefix=prefix) if val_per_block else None
        if per_block:
            val_loss = float(sum(per_block) / len(per_block))
        elif (history["eval_step"] and history["eval_step"][-1] == train_config.steps
              and train_config.eval_blocks >= len(val_blocks)):
            val_loss = history["val_loss"][-1]  # the last step was scored on every validation block already
        else:
            val_loss = evaluate_loss(model, val_blocks, labels=val_labels, prefix=prefix)
        n_params = sum(p.numel() for p in model.parameters())
        n_trained = sum(p.numel() for p in model.parameters() if p.requires_grad)
        train_log = {
            "name": name, "key": key, "history": history, "seconds": round(elapsed, 1),
            "tokens_seen": train_config.steps * train_config.batch_size * train_blocks.shape[1],
            "train_config": dataclasses.asdict(train_config), "params": n_params, "trained_params": n_trained,
            "resumed_from": resumed_from,
            "precision": "bf16 autocast" if use_bf16 else "fp32",
            "final": {"val_loss": val_loss, "val_ppl": math.exp(val_loss), "val_blocks": len(val_blocks),
                      "val_tokens": int(val_blocks.numel())} | ({"val_block_losses": per_block} if per_block else {}),
            "extra": key_extra or {}, "monitor": monitor.summary() if monitor is not None else {},
        }
        with io.atomic_dir(final) as tmp:
            if save == "trainable":
                from safetensors.torch import save_file

                save_file(_model_state(model, trainable_only=True), str(tmp / TRAINABLE_FILE))
            else:
                model.save_pretrained(tmp)
            io.write_json(tmp / "train_log.json", train_log)
        io.discard(partial)  # the checkpoint this run wrote; nothing else that may lie there
        return TrainResult(model, final, train_log, from_cache=False, resumed_from=resumed_from)


#: the file of a ``save="trainable"`` result: the trained parameters only (safetensors)
TRAINABLE_FILE = "trainable.safetensors"


def _model_state(model, *, trainable_only: bool) -> dict:
    """The model's state dict, or only its trainable parameters (detached, contiguous)."""
    if not trainable_only:
        return model.state_dict()
    return {n: p.detach().contiguous() for n, p in model.named_parameters() if p.requires_grad}


def _put_state(model, state: dict, *, trainable_only: bool) -> None:
    """Load ``state`` (:func:`_model_state`) into ``model``; a partial state must name exactly the
    model's trainable parameters (a ValueError names the difference)."""
    if not trainable_only:
        model.load_state_dict(state)
        return
    want = {n for n, p in model.named_parameters() if p.requires_grad}
    if set(state) != want:
        diff = sorted(set(state) ^ want)
        raise ValueError(f"the saved trained parameters do not match the model's trainable ones: {diff[:3]}"
                         + (f" and {len(diff) - 3} more" if len(diff) > 3 else ""))
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, t in state.items():
            if params[n].shape != t.shape:
                raise ValueError(f"{n}: saved shape {tuple(t.shape)}, the model's {tuple(params[n].shape)}")
            params[n].copy_(t)


def _load_trainable(model, path: Path):
    """``model`` (from ``init()``) with the trained parameters of ``path`` put back."""
    from safetensors.torch import load_file

    _put_state(model, load_file(str(path)), trainable_only=True)
    return model


def _checkpoint(path: Path, key: str, model, opt, sched, gen, history, step: int, elapsed: float,
                monitor: Monitor | None = None, *, trainable_only: bool = False) -> None:
    state = {"key": key, "model": _model_state(model, trainable_only=trainable_only), "opt": opt.state_dict(), "sched": sched.state_dict(),
             "gen": gen.get_state(), "torch_rng": torch.get_rng_state(), "history": history, "step": step,
             "elapsed": elapsed, "monitor": monitor.state_dict() if monitor is not None else {}}
    with io.atomic_path(path) as tmp:
        torch.save(state, tmp)
