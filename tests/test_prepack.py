"""acl26.prepack: oneDNN's prepacked float32 linear for CPU inference, the same computation as F.linear."""

import pytest
import torch

from acl26 import models, prepack, rollout, tokenization

pytestmark = pytest.mark.skipif(prepack.available() is not None, reason=f"no prepacking here: {prepack.available()}")


def tiny(seed=0, vocab=300):
    torch.manual_seed(seed)
    from transformers import AutoModelForCausalLM

    models.quiet_transformers()
    cfg = models.dense_config(vocab, hidden=32, layers=2, heads=4, kv_heads=2, intermediate=64, max_positions=64)
    return AutoModelForCausalLM.from_config(cfg).eval()


class Scaled(torch.nn.Linear):
    """A Linear subclass with its own forward (as quantised layers are): never swapped."""

    def forward(self, x):
        return 2 * super().forward(x)


def test_prepacked_logits_match_f_linear_and_every_forward_is_restored():
    m = tiny()
    ids = torch.randint(0, 300, (3, 17), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref = m(input_ids=ids).logits
        with prepack.prepacked(m) as p:
            assert p.layers == sum(type(x) is torch.nn.Linear for x in m.modules()) and p.reason is None
            assert p.backend.startswith("oneDNN")
            assert any("forward" in vars(x) for x in m.modules())
            got = m(input_ids=ids).logits
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)
    assert not any("forward" in vars(x) for x in m.modules())
    # an error inside the block restores them too
    with pytest.raises(RuntimeError, match="boom"), torch.no_grad(), prepack.prepacked(m):
        raise RuntimeError("boom")
    assert not any("forward" in vars(x) for x in m.modules())


def test_it_packs_nothing_where_it_would_not_be_the_same_computation():
    m = tiny()
    with prepack.prepacked(m) as p:  # gradients on: training keeps F.linear
        assert p.layers == 0 and "gradients" in p.reason
    with torch.no_grad(), prepack.prepacked(m, enabled=False) as p:
        assert p.layers == 0 and "turned off" in p.reason
    with torch.no_grad(), prepack.prepacked(m.to(torch.bfloat16)) as p:
        assert p.layers == 0 and "bfloat16" in p.reason
    assert not any("forward" in vars(x) for x in m.modules())
    seq = torch.nn.Sequential(Scaled(4, 3), torch.nn.Linear(3, 2))
    x = torch.randn(5, 4)
    with torch.no_grad():
        ref = seq(x)
        with prepack.prepacked(seq) as p:
            assert p.layers == 1  # the subclass is left alone
            torch.testing.assert_close(seq(x), ref)
        plain = torch.nn.Sequential(Scaled(4, 3))
        with prepack.prepacked(plain) as p:
            assert p.layers == 0 and "no plain" in p.reason
    # a forward replaced by someone else (accelerate's hooks) is not touched
    lin = torch.nn.Linear(4, 4)
    hooked = lin.forward
    lin.forward = hooked
    with torch.no_grad(), prepack.prepacked(torch.nn.Sequential(lin)) as p:
        assert p.layers == 0
    assert vars(lin)["forward"] is hooked


def test_a_packed_layer_called_with_gradients_on_falls_back_to_f_linear():
    lin = torch.nn.Linear(6, 5)
    x = torch.randn(4, 6)
    with torch.no_grad(), prepack.prepacked(torch.nn.Sequential(lin)):
        with torch.enable_grad():
            y = lin(x.requires_grad_())
            assert y.requires_grad  # F.linear ran: the graph is there
        torch.testing.assert_close(lin(x.detach()), torch.nn.functional.linear(x.detach(), lin.weight, lin.bias),
                                   rtol=1e-5, atol=1e-6)


def test_rollouts_are_the_same_with_and_without_prepacking_and_say_which_ran():
    tok = tokenization.load("smollm2")
    m = tiny(3, vocab=len(tok))
    prompts = ["a b c", "hello there, how"]
    kw = dict(k=2, max_new_tokens=6, temperature=0.8, top_k=20, seed=4, eos_token_id=0, batch_prompts=2)
    on = rollout.rollouts(m, tok, prompts, **kw)
    off = rollout.rollouts(m, tok, prompts, prepack=False, **kw)
    assert on.backend.startswith("oneDNN") and off.backend == "torch (F.linear)"
    assert on.texts == off.texts and on.n_tokens == off.n_tokens
    assert not any("forward" in vars(x) for x in m.modules())
    with pytest.raises(ValueError, match="prepack must be True or False"):
        rollout.rollouts(m, tok, prompts, prepack="yes", **kw)


def test_common_prefix_leaves_every_row_an_id_of_its_own():
    assert rollout.common_prefix([[1, 2, 3], [1, 2, 4, 5]]) == 2
    assert rollout.common_prefix([[1, 2, 3], [1, 2, 3]]) == 2
    assert rollout.common_prefix([[1, 2, 3, 4], [1, 2]]) == 1
    assert rollout.common_prefix([[5], [5]]) == 0
    assert rollout.common_prefix([[1, 2], [3, 2]]) == 0


@pytest.mark.parametrize("prepack_on", [True, False])
def test_a_shared_prefix_prefilled_once_gives_the_rollouts_of_whole_prompts(prepack_on):
    """Prompts of different lengths after a common opening: the prefix runs once as one row, each prompt's
    own ids follow after padding; the positions and the attention are those of each prompt alone."""
    tok = tokenization.load("smollm2")
    m = tiny(5, vocab=len(tok))
    prompts = ["system: solve it. user: 1 + 2", "system: solve it. user: what is 17 + 25 + 3 then",
               "system: solve it. user: 4"]
    greedy = dict(k=1, max_new_tokens=8, temperature=0.0, eos_token_id=0, batch_prompts=3, prepack=prepack_on)
    a = rollout.rollouts(m, tok, prompts, **greedy)
    b = rollout.rollouts(m, tok, prompts, share_prefix=False, **greedy)
    assert a.texts == b.texts and a.n_tokens == b.n_tokens
    alone = [rollout.rollouts(m, tok, [p], share_prefix=False, **greedy).texts[0] for p in prompts]
    assert a.texts == alone  # each prompt as if it were prefilled by itself
    sampled = dict(k=3, max_new_tokens=8, temperature=0.9, top_k=40, seed=2, eos_token_id=0, batch_prompts=3)
    assert rollout.rollouts(m, tok, prompts, **sampled).texts == \
        rollout.rollouts(m, tok, prompts, share_prefix=False, **sampled).texts
    with pytest.raises(ValueError, match="share_prefix must be True or False"):
        rollout.rollouts(m, tok, prompts, share_prefix=1, **greedy)
