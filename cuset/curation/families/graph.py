"""Graph kernels: level-synchronous BFS, PageRank power iterations, label propagation, GNN aggregation."""

from __future__ import annotations

from cuset.curation.families.base import (
    Check, Family, Tensor, assemble, cfloat, fill, float_tolerance, fmt_num, name_num, pick, size_grid,
)

# gen.py lines: a random directed graph in CSR (E edges, rows = sources) plus the edge list.
GRAPH_GEN = """
src = rng.integers(0, V, E)
dst = rng.integers(0, V, E)
order = np.argsort(src, kind="stable")  # CSR rows; a stable sort keeps it deterministic
src, dst = src[order], dst[order]
row_ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=V))]).astype(np.int32)
col_idx = dst.astype(np.int32)
"""

# gen.py helper: the neighbour lists of a set of vertices, concatenated (vectorised CSR slicing).
NEIGHBOURS = """
def neighbours(row_ptr, col_idx, vertices):
    starts, ends = row_ptr[vertices], row_ptr[vertices + 1]
    counts = ends - starts
    offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
    return col_idx[np.arange(counts.sum()) + offsets]
"""

GRAPH_SMALL = size_grid(v=(500, 2000, 10000, 50000), degree=(2, 3, 6, 10))
GRAPH_LARGE = size_grid(v=(1 << 20, 1 << 21), degree=(4, 16))


def _csr(v, e):
    return Tensor("row_ptr", "int32", (v + 1,), "V + 1"), Tensor("col_idx", "int32", (e,), "E")


# ---------------------------------------------------------------- BFS (host loop over levels)

def build_bfs(variant, size, seed):
    source, undirected = variant["source"], variant["undirected"]
    v, degree = size["v"], size["degree"]
    if source >= v:
        raise ValueError(f"BFS source {source} is not a vertex of a {v}-vertex graph")
    e = v * degree * (2 if undirected else 1)
    row_ptr, col_idx = _csr(v, e)
    levels = Tensor("levels", "int32", (v,), "V")
    kernels = """
        // Level-synchronous BFS: every vertex on the current level relaxes its neighbours. Several
        // threads may write the same neighbour, but always the same value, so no atomics are needed.
        __global__ void bfs_level(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                  int* __restrict__ levels, int current, int* __restrict__ changed) {
            int v = blockIdx.x * blockDim.x + threadIdx.x;
            if (v < V && levels[v] == current) {
                for (int k = row_ptr[v]; k < row_ptr[v + 1]; ++k) {
                    int u = col_idx[k];
                    if (levels[u] == -1) {
                        levels[u] = current + 1;
                        *changed = 1;
                    }
                }
            }
        }

        __global__ void bfs_init(int* levels, int source) {
            int v = blockIdx.x * blockDim.x + threadIdx.x;
            if (v < V) {
                levels[v] = v == source ? 0 : -1;
            }
        }
    """
    launch = fill(
        """
        const int threads = $BLOCK;
        const int blocks = (V + threads - 1) / threads;
        int* d_changed;
        CUDA_CHECK(cudaMalloc(&d_changed, sizeof(int)));
        bfs_init<<<blocks, threads>>>(d_levels, SOURCE);
        int h_changed = 1;
        for (int level = 0; h_changed; ++level) {
            h_changed = 0;
            CUDA_CHECK(cudaMemcpy(d_changed, &h_changed, sizeof(int), cudaMemcpyHostToDevice));
            bfs_level<<<blocks, threads>>>(d_row_ptr, d_col_idx, d_levels, level, d_changed);
            CUDA_CHECK(cudaMemcpy(&h_changed, d_changed, sizeof(int), cudaMemcpyDeviceToHost));
        }
        CUDA_CHECK(cudaFree(d_changed));
        """,
        BLOCK=pick((128, 256, 512), source, undirected, v, degree),
    )
    kind = "undirected" if undirected else "directed"
    name = "BFS_Levels" if (source, undirected) == (0, False) else (
        f"BFS_Levels_Source_{variant['source']}" + ("_Undirected" if undirected else ""))
    sym = ("src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])\n" if undirected else "")
    return assemble(
        task_name=name,
        detail=(
            f"Breadth-first search on a {kind} graph with {v} vertices and {e} edges in CSR form (row_ptr of {v + 1} "
            f"int32 offsets, col_idx of {e} int32 targets{'; each undirected edge is stored in both directions' if undirected else ''}). "
            f"Write levels[v] = the number of edges on a shortest path from vertex {source} to v, or -1 if v is "
            "unreachable. Process one level per kernel launch and stop when a launch discovers no new vertex."
        ),
        algorithm=f"Breadth-first search levels (hop distances) from vertex {source} on a {kind} graph in CSR form; -1 for unreachable vertices.",
        inputs=(row_ptr, col_idx), outputs=(levels,), checks=(Check("levels"),),
        constants=f"constexpr int V = {v};\nconstexpr int E = {e};\nconstexpr int SOURCE = {source};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"{NEIGHBOURS.strip()}\n\n\nV, SOURCE = {v}, {source}\nE = {v * degree}\n"
            + GRAPH_GEN.strip().replace("order = ", sym + "order = ") + "\n"
            "levels = np.full(V, -1, dtype=np.int32)\nlevels[SOURCE] = 0\nfrontier = np.array([SOURCE])\nlevel = 0\n"
            "while frontier.size:\n"
            "    nbrs = neighbours(row_ptr, col_idx, frontier)\n"
            "    frontier = np.unique(nbrs[levels[nbrs] == -1])\n"
            "    level += 1\n"
            "    levels[frontier] = level\n"
        ),
        seed=seed,
    )


BFS = Family(
    name="bfs", domain="graph", build=build_bfs,
    suite_variant={"source": 0, "undirected": False},
    suite_sizes=({"v": 65536, "degree": 8}, {"v": 1 << 21, "degree": 8}),
    variants=tuple(
        {"source": s, "undirected": u} for s in (0, 1, 7, 42, 99) for u in (False, True) if (s, u) != (0, False)
    ),
    small_sizes=GRAPH_SMALL, large_sizes=GRAPH_LARGE,
)


# ---------------------------------------------------------------- PageRank (pull over in-edges, ping-pong)

def build_pagerank(variant, size, seed):
    damping, iters = variant["damping"], variant["iters"]
    v, degree = size["v"], size["degree"]
    e = v * degree
    row_ptr = Tensor("in_ptr", "int32", (v + 1,), "V + 1")
    col_idx = Tensor("in_src", "int32", (e,), "E")
    out_deg = Tensor("out_degree", "int32", (v,), "V")
    rank = Tensor("rank", "float32", (v,), "V")
    kernels = """
        // Pull formulation: vertex v sums rank[u] / out_degree[u] over its in-neighbours u,
        // so every vertex writes only its own entry and no atomics are needed.
        __global__ void pagerank_step(const int* __restrict__ in_ptr, const int* __restrict__ in_src,
                                      const int* __restrict__ out_degree, const float* __restrict__ rank,
                                      float* __restrict__ next) {
            int v = blockIdx.x * blockDim.x + threadIdx.x;
            if (v < V) {
                float sum = 0.0f;
                for (int k = in_ptr[v]; k < in_ptr[v + 1]; ++k) {
                    int u = in_src[k];
                    sum += rank[u] / out_degree[u];
                }
                next[v] = (1.0f - DAMPING) / V + DAMPING * sum;
            }
        }

        __global__ void fill_uniform(float* rank) {
            int v = blockIdx.x * blockDim.x + threadIdx.x;
            if (v < V) {
                rank[v] = 1.0f / V;
            }
        }
    """
    launch = """
        const int threads = 256;
        const int blocks = (V + threads - 1) / threads;
        float* d_next;
        CUDA_CHECK(cudaMalloc(&d_next, V * sizeof(float)));
        fill_uniform<<<blocks, threads>>>(d_rank);
        for (int it = 0; it < ITERS; ++it) {
            pagerank_step<<<blocks, threads>>>(d_in_ptr, d_in_src, d_out_degree, d_rank, d_next);
            float* tmp = d_rank;  // ping-pong: the new ranks become the input of the next step
            d_rank = d_next;
            d_next = tmp;
        }
        CUDA_CHECK(cudaFree(d_next));
    """
    name = "PageRank" if (damping, iters) == (0.85, 10) else f"PageRank_D{name_num(damping)}_Iters_{iters}"
    return assemble(
        task_name=name,
        detail=(
            f"Run {iters} PageRank power iterations with damping {fmt_num(damping)} on a directed graph with {v} "
            f"vertices and {e} edges, every vertex having at least one out-edge. The graph is given by its in-edges "
            f"in CSR form (in_ptr of {v + 1} offsets, in_src of {e} source vertices) and out_degree per vertex. "
            f"Start from rank = 1/{v} everywhere; each iteration computes rank'[v] = (1 - d) / {v} + d * "
            "sum over in-edges (u -> v) of rank[u] / out_degree[u]. Write the final ranks."
        ),
        algorithm=f"PageRank: {iters} power iterations with damping {fmt_num(damping)} from a uniform start, pulling over in-edges.",
        inputs=(row_ptr, col_idx, out_deg), outputs=(rank,), checks=(Check("rank", float(f"{1e-4 / v:.2g}"), 1e-4),),
        constants=f"constexpr int V = {v};\nconstexpr int E = {e};\nconstexpr int ITERS = {iters};\nconstexpr float DAMPING = {cfloat(damping)};",
        kernels=kernels, launch=launch,
        gen_body=fill(
            """
            V, E, ITERS, D = $V, $E, $ITERS, $D
            # Vertex i % V gets the first V edges, so no vertex is dangling.
            src = np.concatenate([np.arange(V), rng.integers(0, V, E - V)])
            dst = rng.integers(0, V, E)
            order = np.argsort(dst, kind="stable")
            src, dst = src[order], dst[order]
            in_ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=V))]).astype(np.int32)
            in_src = src.astype(np.int32)
            out_degree = np.bincount(src, minlength=V).astype(np.int32)
            rank = np.full(V, 1.0 / V)
            for _ in range(ITERS):
                rank = (1.0 - D) / V + D * np.bincount(dst, weights=rank[src] / out_degree[src], minlength=V)
            """,
            V=v, E=e, ITERS=iters, D=damping,
        ),
        seed=seed,
    )


PAGERANK = Family(
    name="pagerank", domain="graph", build=build_pagerank,
    suite_variant={"damping": 0.85, "iters": 10},
    suite_sizes=({"v": 65536, "degree": 8}, {"v": 1 << 21, "degree": 8}),
    variants=tuple(
        {"damping": d, "iters": it} for d in (0.85, 0.9, 0.75, 0.5) for it in (1, 5, 10, 20) if (d, it) != (0.85, 10)
    ),
    small_sizes=GRAPH_SMALL, large_sizes=GRAPH_LARGE,
)


# ---------------------------------------------------------------- connected components (edge-centric, atomicMin)

def build_components(variant, size, seed):
    rule = variant["label"]
    v, degree = size["v"], size["degree"]
    e = v * degree // 4  # sparse on purpose: many components, some long paths
    src, dst = Tensor("edge_src", "int32", (e,), "E"), Tensor("edge_dst", "int32", (e,), "E")
    labels = Tensor("labels", "int32", (v,), "V")
    better, atomic, np_rule = ("<", "atomicMin", "minimum") if rule == "min" else (">", "atomicMax", "maximum")
    kernels = fill(
        """
        // Each edge pulls the better label across in both directions; repeat until nothing changes.
        __global__ void propagate(const int* __restrict__ edge_src, const int* __restrict__ edge_dst,
                                  int* __restrict__ labels, int* __restrict__ changed) {
            int e = blockIdx.x * blockDim.x + threadIdx.x;
            if (e < E) {
                int a = edge_src[e];
                int b = edge_dst[e];
                int la = labels[a];
                int lb = labels[b];
                if (la $BETTER lb) {
                    $ATOMIC(&labels[b], la);
                    *changed = 1;
                } else if (lb $BETTER la) {
                    $ATOMIC(&labels[a], lb);
                    *changed = 1;
                }
            }
        }

        __global__ void init_labels(int* labels) {
            int v = blockIdx.x * blockDim.x + threadIdx.x;
            if (v < V) {
                labels[v] = v;
            }
        }
        """,
        BETTER=better, ATOMIC=atomic,
    )
    launch = """
        const int threads = 256;
        int* d_changed;
        CUDA_CHECK(cudaMalloc(&d_changed, sizeof(int)));
        init_labels<<<(V + threads - 1) / threads, threads>>>(d_labels);
        int h_changed = 1;
        while (h_changed) {
            h_changed = 0;
            CUDA_CHECK(cudaMemcpy(d_changed, &h_changed, sizeof(int), cudaMemcpyHostToDevice));
            propagate<<<(E + threads - 1) / threads, threads>>>(d_edge_src, d_edge_dst, d_labels, d_changed);
            CUDA_CHECK(cudaMemcpy(&h_changed, d_changed, sizeof(int), cudaMemcpyDeviceToHost));
        }
        CUDA_CHECK(cudaFree(d_changed));
    """
    what = "smallest" if rule == "min" else "largest"
    return assemble(
        task_name="Connected_Components" if rule == "min" else "Connected_Components_Max_Label",
        detail=(
            f"Label the connected components of an undirected graph with {v} vertices and {e} edges given as two int32 "
            f"arrays edge_src and edge_dst: labels[v] must be the {what} vertex id in v's component. Start from "
            f"labels[v] = v and propagate the {what} label across edges with {atomic} until a pass changes nothing."
        ),
        algorithm=f"Connected components of an undirected edge list; each vertex gets the {what} vertex id of its component.",
        inputs=(src, dst), outputs=(labels,), checks=(Check("labels"),),
        constants=f"constexpr int V = {v};\nconstexpr int E = {e};", kernels=kernels, launch=launch,
        gen_body=fill(
            """
            from scipy.sparse import coo_matrix
            from scipy.sparse.csgraph import connected_components

            V, E = $V, $E
            edge_src = rng.integers(0, V, E).astype(np.int32)
            edge_dst = rng.integers(0, V, E).astype(np.int32)
            graph = coo_matrix((np.ones(E), (edge_src, edge_dst)), shape=(V, V))
            _, comp = connected_components(graph, directed=False)
            best = np.full(comp.max() + 1, -1 if "$RULE" == "maximum" else V)
            np.$RULE.at(best, comp, np.arange(V))
            labels = best[comp]
            """,
            V=v, E=e, RULE=np_rule,
        ),
        seed=seed,
    )


COMPONENTS = Family(
    name="connected_components", domain="graph", build=build_components,
    suite_variant={"label": "min"}, suite_sizes=({"v": 65536, "degree": 6}, {"v": 1 << 22, "degree": 6}),
    variants=({"label": "max"},),
    small_sizes=size_grid(v=(100, 500, 2000, 10000, 30000, 50000), degree=(2, 3, 4, 5, 6, 8)),
    large_sizes=GRAPH_LARGE,
)


# ---------------------------------------------------------------- GNN neighbour aggregation

# References that never materialise one feature row per edge (E x F can be gigabytes).
GNN_SUM_REF = """from scipy.sparse import csr_matrix

acc = csr_matrix((np.ones(E), col_idx, row_ptr), shape=(V, V)) @ h.astype(np.float64)
"""
GNN_MAX_REF = """acc = np.full((V, F), -np.inf)
nonempty = np.flatnonzero(np.diff(row_ptr) > 0)
for lo in range(0, nonempty.size, 4096):
    rows = nonempty[lo:lo + 4096]
    first, last = row_ptr[rows[0]], row_ptr[rows[-1] + 1]
    acc[rows] = np.maximum.reduceat(h[col_idx[first:last]].astype(np.float64), row_ptr[rows] - first, axis=0)
"""

AGGS = {
    "mean": ("Mean", "the mean", "acc += h[(size_t)u * F + f];", "0.0f", "count > 0 ? acc / count : 0.0f"),
    "sum": ("Sum", "the sum", "acc += h[(size_t)u * F + f];", "0.0f", "acc"),
    "max": ("Max", "the maximum", "acc = fmaxf(acc, h[(size_t)u * F + f]);", "-FLT_MAX", "count > 0 ? acc : 0.0f"),
}


def build_gnn_aggregate(variant, size, seed):
    agg, self_loop = variant["agg"], variant["self_loop"]
    v, degree, feats = size["v"], size["degree"], size["feats"]
    e = v * degree
    row_ptr, col_idx = _csr(v, e)
    h = Tensor("h", "float32", (v, feats), "V * F")
    out = Tensor("out", "float32", (v, feats), "V * F")
    title, what, step, init, final = AGGS[agg]
    # With a self loop, k = begin - 1 stands for v itself.
    first, neighbour = ("begin - 1", "k < begin ? v : col_idx[k]") if self_loop else ("begin", "col_idx[k]")
    kernels = fill(
        """
        // out[v][f] aggregates h[u][f] over v's neighbours u. threadIdx.x runs along the features
        // (coalesced loads); vertices go on grid.x, which has no 65535 limit.
        __global__ void aggregate(const int* __restrict__ row_ptr, const int* __restrict__ col_idx,
                                  const float* __restrict__ h, float* __restrict__ out) {
            int f = blockIdx.y * blockDim.x + threadIdx.x;
            int v = blockIdx.x * blockDim.y + threadIdx.y;
            if (v >= V || f >= F) {
                return;
            }
            int begin = row_ptr[v];
            int end = row_ptr[v + 1];
            float acc = $INIT;
            int count = 0;
            for (int k = $FIRST; k < end; ++k) {
                int u = $NEIGHBOUR;
                $STEP
                ++count;
            }
            out[(size_t)v * F + f] = $FINAL;
        }
        """,
        INIT=init, FIRST=first, NEIGHBOUR=neighbour, STEP=step, FINAL=final,
    )
    launch = """
        dim3 block(32, 8);
        dim3 grid((V + block.y - 1) / block.y, (F + block.x - 1) / block.x);
        aggregate<<<grid, block>>>(d_row_ptr, d_col_idx, d_h, d_out);
    """
    reduce_np = {"mean": "np.add", "sum": "np.add", "max": "np.maximum"}[agg]
    finish = {"mean": "out = np.where(count[:, None] > 0, acc / np.maximum(count, 1)[:, None], 0.0)",
              "sum": "out = acc", "max": "out = np.where(count[:, None] > 0, acc, 0.0)"}[agg]
    name = f"GNN_{title}_Aggregation" + ("_Self_Loop" if self_loop else "")
    return assemble(
        task_name=name,
        detail=(
            f"Graph neural network message aggregation: a directed graph with {v} vertices and {e} edges in CSR form "
            f"(row_ptr, col_idx list the neighbours of each vertex) and vertex features h of shape ({v}, {feats}). "
            f"out[v][f] = {what} of h[u][f] over the neighbours u of v"
            + (" and v itself" if self_loop else "") + " (0 when there are none). Use a 2-D grid over (vertex, feature)."
        ),
        algorithm=f"GNN neighbour aggregation: out[v] = {what} of the feature vectors of v's neighbours"
                  + (" and v itself." if self_loop else "."),
        inputs=(row_ptr, col_idx, h), outputs=(out,),
        checks=(Check("out") if agg == "max" else Check("out", *float_tolerance(3 * degree, 0.5)),),
        constants=f"constexpr int V = {v};\nconstexpr int E = {e};\nconstexpr int F = {feats};",
        kernels=kernels, launch=launch,
        gen_body=(
            f"V, E, F = {v}, {e}, {feats}\n{GRAPH_GEN.strip()}\n"
            "h = rng.standard_normal((V, F)).astype(np.float32)\n"
            + (GNN_MAX_REF if agg == "max" else GNN_SUM_REF) +
            "count = np.bincount(src, minlength=V)\n"
            + (f"acc = {reduce_np}(acc, h)\ncount = count + 1\n" if self_loop else "")
            + finish
        ),
        seed=seed, includes=("cfloat",),
    )


GNN_AGGREGATE = Family(
    name="gnn_aggregate", domain="graph", build=build_gnn_aggregate,
    suite_variant={"agg": "mean", "self_loop": False},
    suite_sizes=({"v": 8192, "degree": 8, "feats": 32}, {"v": 1 << 18, "degree": 16, "feats": 128}),
    variants=tuple(
        {"agg": a, "self_loop": s} for a in AGGS for s in (False, True) if (a, s) != ("mean", False)
    ),
    small_sizes=size_grid(v=(200, 1000, 4000), degree=(2, 5, 10), feats=(8, 16, 64)),
    large_sizes=size_grid(v=(1 << 19,), degree=(8, 32), feats=(64, 256)),
)


FAMILIES = (BFS, PAGERANK, COMPONENTS, GNN_AGGREGATE)
