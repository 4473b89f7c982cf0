"""The schedule space of a kernel: levels from the tunable passes, the heuristic first, and
leaves that replay to the kernel they were scored as."""

from __future__ import annotations

from deplodock.driver import render
from deplodock.passes.pipelines import lower
from deplodock.tune.evaluate import Score
from deplodock.tune.kernels import kernel_hash, loop_kernels, standalone
from deplodock.tune.space import KernelSpace, lower_candidate, schedule_of


def space_of(module):
    (kernel,) = loop_kernels(module)
    return KernelSpace(kernel, lambda candidate: Score(1.0))


def default_cuda(module) -> str:
    (kernel,) = loop_kernels(module)
    return render(lower(standalone(kernel), "cuda", start="loop"), "cuda")


def test_first_rollout_is_the_heuristic_schedule(rmsnorm_loop):
    space = space_of(rmsnorm_loop)
    _, leaf = space.rollout(space.root())
    cuda = render(lower(lower_candidate(leaf), "cuda", start="kernel"), "cuda")
    assert cuda == default_cuda(rmsnorm_loop)


def test_levels_offer_legal_choices_heuristic_first(silu_mul_loop):
    space = space_of(silu_mul_loop)
    root = space.root()
    options = space.choices(root)
    assert len(options) > 1
    _, default = space.rollout(root)
    first = options[0]
    assert all(default.knobs[name] == value for name, value in first.items())


def test_every_choice_is_recorded_in_the_leaf(silu_mul_loop):
    space = space_of(silu_mul_loop)
    root = space.root()
    choice = space.choices(root)[-1]
    _, leaf = space.rollout(space.child(root, choice))
    assert all(leaf.knobs[name] == value for name, value in choice.items())


def test_a_leaf_written_on_the_loop_kernel_replays_identically(silu_mul_loop):
    space = space_of(silu_mul_loop)
    root = space.root()
    _, leaf = space.rollout(space.child(root, space.choices(root)[-1]))
    scored = render(lower(lower_candidate(leaf), "cuda", start="kernel"), "cuda")
    (kernel,) = loop_kernels(silu_mul_loop.clone())
    leaf.knobs.write_on(kernel)
    replayed = render(lower(standalone(kernel), "cuda", start="loop"), "cuda")
    assert replayed == scored
    assert replayed != default_cuda(silu_mul_loop)


def test_structural_hash_ignores_names(rmsnorm_loop):
    (kernel,) = loop_kernels(rmsnorm_loop)
    renamed = kernel.clone()
    renamed.sym_name = type(renamed.sym_name)("another_name")
    assert kernel_hash(renamed) == kernel_hash(kernel)
    module = standalone(kernel)
    module.verify()
    assert (
        schedule_of(lower(module.clone(), "tile", start="loop"))
        == space_of(rmsnorm_loop).rollout(space_of(rmsnorm_loop).root())[1].knobs
    )


def test_structural_hash_tells_shapes_apart(rmsnorm_loop, silu_mul_loop, linear_loop):
    hashes = {
        kernel_hash(k) for m in (rmsnorm_loop, silu_mul_loop, linear_loop) for k in loop_kernels(m)
    }
    assert len(hashes) == 3


def test_a_child_decides_only_when_asked_and_rolls_out_the_same_either_way(linear_loop):
    """Deciding a node (running on to its next decision, trying each legal choice) is most
    of what a search's walk costs, so a child does it only when asked its choices; a
    roll-out from a child never asked reaches the same leaf."""
    space = space_of(linear_loop)
    root = space.root()
    choice = space.choices(root)[-1]
    lazy, decided = space.child(root, choice), space.child(root, choice)
    assert lazy.legal is None and lazy.next_pass == root.next_pass + 1
    assert space.choices(decided) and decided.next_pass > lazy.next_pass
    (lazy_key, lazy_leaf), (key, leaf) = space.rollout(lazy), space.rollout(decided)
    assert lazy_key == key and str(lazy_leaf.module) == str(leaf.module)
    assert lazy.legal is None  # a roll-out does not decide
