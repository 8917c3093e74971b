"""Per-layer page groups over one pool (model/serving/page_groups.py).

Expected values come from elsewhere: block ids worked out by hand on tiny pools; a from-scratch
shadow model (every token's K and V in a plain list, the pages a group holds recomputed from the
positions and the window, page sharing followed by identities a fork copies and a write into a
shared page replaces) under hypothesis-chosen operation sequences; and the mixed model's own
``MixedKVCache`` and the full K/V it was fed, on the real model.
"""

from __future__ import annotations

import numpy as np
import paged_lm as PL
import paged_tests as PT
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from inference.generate import MixedKVCache
from inference.mixed_lm import make_mixed_model
from serving.page_groups import PageGroups, UnknownLayer, append_takes_page, group_layers

MIXED = (3, None, 3, None)


def token(value: float, n_layers: int = 4, kv_heads: int = 1, head_dim: int = 1) -> np.ndarray:
    """One token's K and V for every layer: layer l's key is value + l / 10, its value the negative."""
    kv = np.empty((n_layers, 2, kv_heads, head_dim))
    for layer in range(n_layers):
        kv[layer, 0] = value + layer / 10
        kv[layer, 1] = -(value + layer / 10)
    return kv


def grown(windows, n_pages: int, page: int, lengths: dict) -> PageGroups:
    """Page groups with requests rid -> number of tokens (token i of any request has value i)."""
    pg = PageGroups(windows, n_pages, page)
    for rid, n in lengths.items():
        pg.new(rid)
        for i in range(n):
            pg.append(rid, token(i, len(windows)))
    return pg


def snapshot(pg: PageGroups) -> dict:
    return {"pool": PT.snapshot(pg.pool), "lengths": dict(pg.lengths)}


def assert_fails_unchanged(pg: PageGroups, operation, error):
    before = snapshot(pg)
    with pytest.raises(error) as info:
        operation()
    assert isinstance(info.value, PL.PagedError) and str(info.value)
    after = snapshot(pg)
    assert before["lengths"] == after["lengths"] and PT.same_state(before["pool"], after["pool"]), \
        f"a failed operation ({error.__name__}) changed the pool"


# ---- the groups ----------------------------------------------------------------------------------


def test_the_mixed_pattern_is_two_groups_of_two_layers():
    groups = group_layers((128, None, 128, None))
    assert [(g.name, g.window, g.layers) for g in groups] == [("windowed", 128, (0, 2)), ("global", None, (1, 3))]


def test_kinds_of_unequal_size_split_into_groups_of_the_common_divisor():
    groups = group_layers((None, 2, None, None))
    assert [(g.name, g.layers) for g in groups] == [("global #0", (0,)), ("global #1", (2,)), ("global #2", (3,)),
                                                    ("windowed", (1,))]
    groups = group_layers((5, 2, None, 5, 2, None))
    assert [(g.name, g.window, g.layers) for g in groups] == [
        ("windowed W=5", 5, (0, 3)), ("windowed W=2", 2, (1, 4)), ("global", None, (2, 5))]


@pytest.mark.parametrize("windows", [(), (0, None), (None, -1), (1.5,), (True, None), ("8",)])
def test_bad_layer_windows_are_refused(windows):
    with pytest.raises(ValueError):
        group_layers(windows)


def test_keep_from_is_the_first_row_the_next_token_sees():
    windowed, global_ = group_layers((4, None))
    # with n rows cached the next token is at position n and sees positions n - 3 .. n
    assert [windowed.keep_from(n) for n in range(8)] == [0, 0, 0, 0, 1, 2, 3, 4]
    assert [global_.keep_from(n) for n in range(8)] == [0] * 8


# ---- exact block ids on a tiny pool --------------------------------------------------------------


def test_block_ids_of_a_windowed_and_a_global_group_sharing_one_pool():
    """W = 3, pages of 2 rows. The groups take pages alternately from page 0 up; the windowed group
    gives back page 0 once row 3 is in (the next token, at position 4, sees rows 2 and 3 and
    itself), and takes page 0 again for row 4."""
    pg = grown((3, None), 8, 2, {"A": 4})
    assert pg.pool.table == {("A", "windowed"): [2], ("A", "global"): [1, 3]}
    assert pg.pool.free == [7, 6, 5, 4, 0]
    pg.append("A", token(4, 2))
    assert pg.pool.table == {("A", "windowed"): [2, 0], ("A", "global"): [1, 3, 4]}
    pg.append("A", token(5, 2))
    pg.append("A", token(6, 2))
    assert pg.pool.table == {("A", "windowed"): [0, 2], ("A", "global"): [1, 3, 4, 5]}
    assert pg.pool.free == [7, 6]
    assert pg.attended("A", 0) == (5, 7) and pg.attended("A", 1) == (0, 7)
    assert pg.gather("A", 0)[0].ravel().tolist() == [5.0, 6.0]
    assert pg.gather("A", 1)[1].ravel().tolist() == [-(i + 0.1) for i in range(7)]
    assert (pg.rows_held("A", 0), pg.rows_held("A", 1)) == (3, 7)


def test_a_fork_shares_every_groups_pages_and_a_write_copies_only_shared_tails():
    pg = grown((3, None), 10, 2, {"A": 5})
    assert pg.pool.table == {("A", "windowed"): [2, 0], ("A", "global"): [1, 3, 4]}
    pg.fork("A", "B")
    assert pg.used() == 5 and all(pg.pool.ref[p] == 2 for p in range(5))
    pg.append("B", token(50, 2))  # row 5 goes into the half-full shared tails 0 and 4: both copied
    assert pg.pool.table[("B", "windowed")] == [5] and pg.pool.table[("B", "global")] == [1, 3, 6]
    assert pg.pool.ref[1] == pg.pool.ref[3] == 2, "full shared pages stay shared"
    assert pg.pool.ref[2] == 1, "B's window let go of its share of page 2; A still holds it"
    assert pg.gather("A", 1)[0].ravel().tolist() == [0.1, 1.1, 2.1, 3.1, 4.1]
    assert pg.gather("B", 1)[0].ravel().tolist() == [0.1, 1.1, 2.1, 3.1, 4.1, 50.1]
    assert pg.gather("A", 0)[0].ravel().tolist() == [3.0, 4.0]
    assert pg.gather("B", 0)[0].ravel().tolist() == [4.0, 50.0]
    pg.append("B", token(51, 2))  # row 6 starts a fresh page in each group: nothing is copied
    assert pg.pool.table[("B", "windowed")] == [5, 7] and pg.pool.table[("B", "global")] == [1, 3, 6, 8]
    pg.release("A")
    assert sorted(pg.pool.free) == [0, 2, 4, 9] and pg.pool.ref[1] == pg.pool.ref[3] == 1


def test_pages_needed_is_the_smallest_pool_a_request_runs_in():
    """W = 3 and pages of 2 rows: between an append and its trim the windowed group holds the 3 rows
    the window spans, on at most 2 pages; the global group 30 rows on 15 pages. A pool of those 17
    pages runs the 30 rows; a pool of 16 runs out."""
    def runs(n_pages: int) -> bool:
        pg = PageGroups(MIXED, n_pages, 2)
        pg.new("A")
        try:
            for i in range(30):
                pg.append("A", token(i))
        except PL.OutOfPages:
            return False
        return True

    assert PageGroups(MIXED, 1, 2).pages_needed(30) == 2 + 15
    assert runs(17) and not runs(16)


# ---- every misuse is a named error that changes nothing ------------------------------------------


def full_pool() -> PageGroups:
    """A full pool of 6 pages of 2 rows: A (3 rows) holds windowed [0, 2] and global [1, 3]; B is a
    fork of A; C (2 rows, its pages full) holds windowed [4] and global [5]."""
    pg = grown(MIXED, 6, 2, {"A": 3, "C": 2})
    pg.fork("A", "B")
    assert not pg.pool.free
    return pg


@pytest.mark.parametrize("name, operation, error", [
    ("append to an unknown request", lambda pg: pg.append("Z", token(0)), PL.UnknownRequest),
    ("fork from an unknown request", lambda pg: pg.fork("Z", "Y"), PL.UnknownRequest),
    ("fork onto a live request", lambda pg: pg.fork("A", "C"), PL.RequestExists),
    ("new on a live request", lambda pg: pg.new("B"), PL.RequestExists),
    ("release an unknown request", lambda pg: pg.release("Z"), PL.UnknownRequest),
    ("append needing new pages, pool full", lambda pg: pg.append("C", token(9)), PL.OutOfPages),
    ("append into shared tails, no page for the copies", lambda pg: pg.append("B", token(9)), PL.OutOfPages),
    ("a token of the wrong shape", lambda pg: pg.append("A", np.zeros((3, 2, 1, 1))), PL.BadRow),
    ("a token holding NaN in its last layer",
     lambda pg: pg.append("A", np.where(np.arange(4)[:, None, None, None] == 3, np.nan, token(0))), PL.BadRow),
    ("a token of strings", lambda pg: pg.append("A", np.full((4, 2, 1, 1), "x")), PL.BadRow),
    ("read an unknown layer", lambda pg: pg.gather("A", 4), UnknownLayer),
    ("read a layer named by a bool", lambda pg: pg.gather("A", True), UnknownLayer),
    ("read a layer named by a float", lambda pg: pg.attended("A", 1.0), UnknownLayer),
    ("read an unknown request", lambda pg: pg.gather("Z", 0), PL.UnknownRequest),
])
def test_misuse_raises_a_named_error_and_changes_nothing(name, operation, error):
    pg = full_pool()
    assert_fails_unchanged(pg, lambda: operation(pg), error)


def test_out_of_pages_when_one_group_has_its_page_and_the_other_not():
    """One page free, two groups starting a page: the windowed group alone would fit, but the append
    is refused as a whole, before either group takes anything."""
    pg = grown(MIXED, 4, 2, {"A": 4})
    assert len(pg.pool.free) == 1
    assert_fails_unchanged(pg, lambda: pg.append("A", token(4)), PL.OutOfPages)
    with pytest.raises(PL.OutOfPages, match=r"request 'A': token 4 needs 2 free pages \(groups windowed, global\)"):
        pg.append("A", token(4))


@pytest.mark.parametrize("kwargs", [dict(n_pages=0), dict(page=0), dict(n_pages=1 << 22, page=2),
                                    dict(dtype=np.int32), dict(kv_heads=0)])
def test_pool_settings_are_checked_when_it_is_made(kwargs):
    settings_ = dict(n_pages=4, page=2) | kwargs
    with pytest.raises(ValueError):
        PageGroups(MIXED, **settings_)


# ---- the shadow model under random operations ----------------------------------------------------


class Shadow:
    """What the page groups must hold, recomputed without a page table: every token of every
    request, and per (request, group) the logical pages it holds as identities (a fork copies
    them; a new page or a write into a page another table also holds makes a new one)."""

    def __init__(self, pg: PageGroups, n_pages: int, page: int) -> None:
        self.groups = [(g.name, g.window) for g in pg.groups]
        self.n_pages, self.page = n_pages, page
        self.tokens: dict[int, list[np.ndarray]] = {}
        self.pages: dict[tuple, dict[int, int]] = {}  # (rid, group) -> logical page -> identity
        self.identities = 0

    def keep_from(self, W, length: int) -> int:
        """The next token is at position `length` and sees positions p with length - p < W."""
        return 0 if W is None else max(0, length - W + 1)

    def distinct(self) -> set[int]:
        return {i for held in self.pages.values() for i in held.values()}

    def takes(self, rid) -> list[bool]:
        """Per group, whether the next append of rid needs a page of the pool."""
        n = len(self.tokens[rid])
        out = []
        for name, _W in self.groups:
            if n % self.page == 0:
                out.append(True)
                continue
            tail = self.pages[(rid, name)][n // self.page]
            out.append(sum(tail in held.values() for held in self.pages.values()) > 1)
        return out

    def fits(self, rid) -> bool:
        return sum(self.takes(rid)) <= self.n_pages - len(self.distinct())

    def append(self, rid, kv) -> None:
        n = len(self.tokens[rid])
        for (name, W), take in zip(self.groups, self.takes(rid)):
            held = self.pages[(rid, name)]
            if take:
                held[n // self.page] = self.identities
                self.identities += 1
            first = self.keep_from(W, n + 1) // self.page
            for k in [k for k in held if k < first]:
                del held[k]
        self.tokens[rid].append(kv)

    def new(self, rid) -> None:
        self.tokens[rid] = []
        for name, _W in self.groups:
            self.pages[(rid, name)] = {}

    def fork(self, src, dst) -> None:
        self.tokens[dst] = list(self.tokens[src])
        for name, _W in self.groups:
            self.pages[(dst, name)] = dict(self.pages[(src, name)])

    def release(self, rid) -> None:
        del self.tokens[rid]
        for name, _W in self.groups:
            del self.pages[(rid, name)]


def shadow_problems(pg: PageGroups, shadow: Shadow) -> list[str]:
    problems = PT.pool_invariants(pg.pool, "page groups")
    if set(pg.lengths) != set(shadow.tokens):
        return problems + [f"live requests {sorted(pg.lengths)} differ from the shadow's {sorted(shadow.tokens)}"]
    if pg.used() != len(shadow.distinct()):
        problems.append(f"{pg.used()} pages in use, the shadow holds {len(shadow.distinct())} distinct pages")
    physical_of: dict[int, int] = {}
    identity_of: dict[int, int] = {}
    for rid, tokens in shadow.tokens.items():
        n = len(tokens)
        for group in pg.groups:
            keep = shadow.keep_from(group.window, n)
            held = shadow.pages[(rid, group.name)]
            expected = range(keep // pg.page, -(-n // pg.page))
            table = pg.pool.table[(rid, group.name)]
            if sorted(held) != list(expected) or len(table) != len(expected):
                problems.append(f"{rid} {group.name}: holds {len(table)} pages, the window needs pages "
                                f"{list(expected)} (shadow {sorted(held)})")
                continue
            for k, physical in zip(expected, table):  # one identity, one physical page, both ways
                if physical_of.setdefault(held[k], physical) != physical or \
                        identity_of.setdefault(physical, held[k]) != held[k]:
                    problems.append(f"{rid} {group.name}: page {k} is shared where the shadow's is not, or not "
                                    "where it is")
            for layer in group.layers:
                got_k, got_v = pg.gather(rid, layer)
                want = np.array(tokens).reshape(n, *pg.row_shape)[keep:n, layer]
                if not (np.array_equal(got_k, want[:, 0]) and np.array_equal(got_v, want[:, 1])):
                    problems.append(f"{rid} layer {layer}: gathered rows differ from the tokens {keep}..{n - 1}")
                if pg.rows_held(rid, layer) != n - keep // pg.page * pg.page:
                    problems.append(f"{rid} layer {layer}: {pg.rows_held(rid, layer)} rows held")
    return problems


PATTERNS = [MIXED, (1, None), (None, 2, None, None), (5, 2, None), (None,), (2,), (4, 4)]


class PageGroupsMachine(RuleBasedStateMachine):
    @initialize(windows=st.sampled_from(PATTERNS), page=st.integers(1, 3), n_pages=st.integers(2, 16))
    def start(self, windows, page, n_pages):
        self.pg = PageGroups(windows, n_pages, page, kv_heads=1, head_dim=2)
        self.shadow = Shadow(self.pg, n_pages, page)
        self.next_id = 0
        self.value = 0

    def live(self, data):
        return data.draw(st.sampled_from(sorted(self.shadow.tokens)))

    def kv(self) -> np.ndarray:
        self.value += 1
        return self.value + np.arange(np.prod(self.pg.row_shape)).reshape(self.pg.row_shape) / 100

    @precondition(lambda self: len(self.shadow.tokens) < 4)
    @rule()
    def new(self):
        self.pg.new(self.next_id)
        self.shadow.new(self.next_id)
        self.next_id += 1

    def append_one(self, rid) -> bool:
        """Append a token to rid, or see it refused exactly when the shadow says the pool is short."""
        keys = [(rid, g.name) for g in self.pg.groups]
        takes = [append_takes_page(self.pg.pool, key) for key in keys]
        assert takes == self.shadow.takes(rid), "append_takes_page disagrees with the shadow"
        kv = self.kv()
        if not self.shadow.fits(rid):
            assert_fails_unchanged(self.pg, lambda: self.pg.append(rid, kv), PL.OutOfPages)
            return False
        self.pg.append(rid, kv)
        self.shadow.append(rid, kv)
        return True

    @precondition(lambda self: self.shadow.tokens)
    @rule(data=st.data(), repeat=st.integers(1, 5))
    def append(self, data, repeat):
        rid = self.live(data)
        for _ in range(repeat):
            if not self.append_one(rid):
                return

    @precondition(lambda self: 0 < len(self.shadow.tokens) < 4)
    @rule(data=st.data(), writer=st.sampled_from(["source", "fork"]))
    def fork_then_append(self, data, writer):
        """A fork and at once a write by one side: copy-on-write of every group's shared tail."""
        src = self.live(data)
        self.pg.fork(src, self.next_id)
        self.shadow.fork(src, self.next_id)
        self.next_id += 1
        self.append_one(src if writer == "source" else self.next_id - 1)

    @precondition(lambda self: 0 < len(self.shadow.tokens) < 4)
    @rule(data=st.data())
    def fork(self, data):
        src = self.live(data)
        self.pg.fork(src, self.next_id)
        self.shadow.fork(src, self.next_id)
        self.next_id += 1

    @precondition(lambda self: self.shadow.tokens)
    @rule(data=st.data())
    def release(self, data):
        rid = self.live(data)
        self.pg.release(rid)
        self.shadow.release(rid)

    @rule(data=st.data())
    def misuse(self, data):
        rid = data.draw(st.sampled_from(sorted(self.shadow.tokens) + [999]))
        operation, error = data.draw(st.sampled_from([
            (lambda: self.pg.release(999), PL.UnknownRequest),
            (lambda: self.pg.fork(999, rid), PL.UnknownRequest),
            (lambda: self.pg.append(rid, np.zeros((self.pg.n_layers + 1, 2, 1, 2))), PL.PagedError),
            (lambda: self.pg.gather(rid, self.pg.n_layers), PL.PagedError),
        ]))
        assert_fails_unchanged(self.pg, operation, error)

    @invariant()
    def matches_the_shadow(self):
        problems = shadow_problems(self.pg, self.shadow)
        assert not problems, problems


TestPageGroupsStateful = PageGroupsMachine.TestCase
TestPageGroupsStateful.settings = settings(max_examples=40, stateful_step_count=25, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])


# ---- against MixedKVCache on the mixed model -----------------------------------------------------


class RecordingCache(MixedKVCache):
    """A MixedKVCache that also keeps every chunk it was given: the full K and V of every layer."""

    def __init__(self):
        super().__init__()
        self.chunks: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def append(self, layer_idx, k_rot, v, is_windowed, window):
        super().append(layer_idx, k_rot, v, is_windowed, window)
        self.chunks.setdefault(layer_idx, []).append((np.array(k_rot), np.array(v)))

    def full(self, layer: int) -> tuple[np.ndarray, np.ndarray]:
        """(K, V) of every token appended to `layer`, (batch, kv_heads, T, head_dim)."""
        ks, vs = zip(*self.chunks[layer])
        return np.concatenate(ks, axis=2), np.concatenate(vs, axis=2)


def token_rows(cache: RecordingCache, n_layers: int, b: int, t: int) -> np.ndarray:
    """Token t of batch row b as page groups take it: (layers, key and value, kv_heads, head_dim)."""
    return np.stack([np.stack([cache.full(layer)[0][b, :, t], cache.full(layer)[1][b, :, t]])
                     for layer in range(n_layers)])


def check_against_cache(pg: PageGroups, rid, cache: RecordingCache, b: int, model) -> None:
    """Every layer's gathered rows equal the last rows MixedKVCache returns for that layer and the
    rows of the full K/V the window allows."""
    for layer, weights in enumerate(model.layers):
        k, v = pg.gather(rid, layer)
        ck, cv = cache.get(layer, weights.windowed)
        full_k, full_v = cache.full(layer)
        n = full_k.shape[2]
        lo = max(0, n - model.window + 1) if weights.windowed else 0
        assert len(k) == n - lo
        assert ck.shape[2] == (min(n, model.window) if weights.windowed else n)
        for got, kept, whole in ((k, ck, full_k), (v, cv, full_v)):
            kept_rows = kept[b, :, kept.shape[2] - len(got):].transpose(1, 0, 2)
            assert np.array_equal(got, kept_rows), f"layer {layer}: rows differ from MixedKVCache's"
            assert np.array_equal(got, whole[b, :, lo:n].transpose(1, 0, 2)), f"layer {layer}: rows differ"


def windows_of(model) -> list:
    return [model.window if layer.windowed else None for layer in model.layers]


@pytest.fixture(scope="module")
def small_mixed():
    return make_mixed_model(seed=3, kind="random", window=8)


def test_gathered_rows_equal_mixed_kv_cache_at_every_step(small_mixed):
    """Two requests (a batch of two for MixedKVCache), a chunked prefill and greedy decode steps:
    after every pass, every layer's rows equal the cache's."""
    model = small_mixed
    ids = np.random.default_rng(0).integers(0, model.vocab_size, size=(2, 21))
    cache = RecordingCache()
    pg = PageGroups(windows_of(model), 64, 3, kv_heads=model.n_kv_heads, head_dim=model.head_dim)
    for rid in (0, 1):
        pg.new(rid)
    passes = [(ids[:, :13], np.arange(13)), (ids[:, 13:], np.arange(13, 21))]  # a chunked prefill
    fed = 0
    for step in range(8):
        chunk, positions = passes[step]
        logits = model.forward(chunk, positions, cache=cache, sink_memo={}, last_only=True)
        passes.append((np.argmax(logits, axis=-1)[:, None], np.array([positions[-1] + 1])))  # greedy decode
        total = cache.full(0)[0].shape[2]
        for t in range(fed, total):
            for rid in (0, 1):
                pg.append(rid, token_rows(cache, model.n_layers, rid, t))
        fed = total
        for rid in (0, 1):
            check_against_cache(pg, rid, cache, rid, model)
    assert fed == 27
    # pages of 3 rows: the windowed group needs rows 20..26 (pages 6..8), the global group all 27 rows
    assert [pg.pages_held(0, g) for g in pg.groups] == [3, 9]


def test_a_forked_prefix_continues_as_two_requests_equal_to_their_own_caches(small_mixed):
    """A shared prompt prefilled once and forked: each continuation equals a MixedKVCache that
    prefilled the prompt and its own continuation; the prompt's full pages stay shared."""
    model = small_mixed
    rng = np.random.default_rng(1)
    prompt = rng.integers(0, model.vocab_size, size=(1, 11))
    tails = {"A": rng.integers(0, model.vocab_size, size=(1, 6)), "B": rng.integers(0, model.vocab_size, size=(1, 9))}
    caches = {}
    for rid, tail in tails.items():
        cache = caches[rid] = RecordingCache()
        model.forward(prompt, np.arange(11), cache=cache, sink_memo={})
        model.forward(tail, np.arange(11, 11 + tail.shape[1]), cache=cache, sink_memo={})
    pg = PageGroups(windows_of(model), 32, 4, kv_heads=model.n_kv_heads, head_dim=model.head_dim)
    pg.new("prompt")
    for t in range(11):
        pg.append("prompt", token_rows(caches["A"], model.n_layers, 0, t))
    for rid, tail in tails.items():
        pg.fork("prompt", rid)
        for t in range(11, 11 + tail.shape[1]):
            pg.append(rid, token_rows(caches[rid], model.n_layers, 0, t))
    pg.release("prompt")
    for rid in tails:
        check_against_cache(pg, rid, caches[rid], 0, model)
    a, b = (pg.pool.table[(rid, "global")] for rid in tails)
    assert a[:2] == b[:2] and a[2] != b[2], "the prompt's two full pages are shared, its half-full tail copied"
