"""Stage 4a: drop exact duplicates (same code after comment/whitespace normalisation)
and near-duplicates (MinHash/LSH over token shingles, datasketch).

Items are visited in order; the first of a group is kept, so the output does
not depend on hash order. Each removal names the kept item it duplicates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cuset.curation.cudatext import code_tokens


@dataclass(frozen=True)
class Removal:
    key: str
    reason: str               # exact_duplicate | near_duplicate | prompt_overlap | code_overlap | prompt_and_code_overlap
    matched: str              # kept key (dedup) or "<eval set>#id=<id> <task name>" (decontamination)
    similarity: float = 1.0   # estimated Jaccard (near) or overlap share (decontamination)
    detail: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def shingles(tokens: list[str], k: int) -> set[str]:
    if len(tokens) <= k:
        return {" ".join(tokens)} if tokens else set()
    return {" ".join(tokens[i:i + k]) for i in range(len(tokens) - k + 1)}


def minhash(shingle_set: set[str], num_perm: int):
    from datasketch import MinHash

    m = MinHash(num_perm=num_perm, seed=1)
    m.update_batch([s.encode("utf-8") for s in sorted(shingle_set)])
    return m


def deduplicate(items: list[tuple[str, str]], *, near_threshold: float, num_perm: int = 128,
                shingle_tokens: int = 5) -> tuple[list[str], list[Removal]]:
    """items: (key, code) in priority order. Returns (kept keys, removals)."""
    from datasketch import MinHashLSH

    # LSH only proposes candidates; the estimated Jaccard below decides. Its band
    # parameters need a threshold under ~0.95, and a lower one loses fewer pairs.
    lsh = MinHashLSH(threshold=min(near_threshold, 0.9) * 0.9, num_perm=num_perm)
    exact: dict[str, str] = {}
    sketches: dict = {}
    kept: list[str] = []
    removed: list[Removal] = []
    for key, code in items:
        tokens = code_tokens(code)
        normal = " ".join(tokens)
        if normal in exact:
            removed.append(Removal(key, "exact_duplicate", exact[normal], 1.0, "same code after removing comments and layout"))
            continue
        m = minhash(shingles(tokens, shingle_tokens), num_perm)
        best_key, best_sim = None, 0.0
        for other in lsh.query(m):
            sim = m.jaccard(sketches[other])
            if sim > best_sim:
                best_key, best_sim = other, sim
        if best_key is not None and best_sim >= near_threshold:
            removed.append(Removal(key, "near_duplicate", best_key, round(best_sim, 4),
                                   f"estimated Jaccard similarity of {shingle_tokens}-token shingles {best_sim:.3f}"))
            continue
        exact[normal] = key
        sketches[key] = m
        lsh.insert(key, m)
        kept.append(key)
    return kept, removed
