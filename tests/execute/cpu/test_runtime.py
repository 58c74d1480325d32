"""The CPU runtime, built-in by built-in and call by call: fixture programs in
tests/fixtures/cuda/cpu/ print `key=value` lines, checked here against values
worked out by hand from the CUDA documentation. Every program runs under both
thread orders and must print the same thing."""

from __future__ import annotations

import math
import statistics
import struct

import pytest

from cpu_helpers import needs_gxx, parse_kv
from cuset.execute.result import Status

pytestmark = needs_gxx


def run_both(program, results_file: str | None = None):
    """Run under forward and random order; both must succeed with equal output
    (stdout, or a results file for long outputs)."""
    def output(r):
        return r.files[results_file].decode() if results_file else r.run.stdout

    fwd = program.run("forward")
    assert fwd.ok, fwd.run.stderr
    rnd = program.run("random:11")
    assert rnd.ok, rnd.run.stderr
    assert parse_kv(output(fwd)) == parse_kv(output(rnd))
    return parse_kv(output(fwd)), fwd


# ------------------------------------------------------------------ launches
def test_launch_syntax_builtins_and_validation(compile_fixture):
    kv, run = run_both(compile_fixture("launch_builtins"))
    # thread (3,1,1) of block (1,2,1): digits of x*10^6 + y*10^5 + z*10^4 + bx*1000 + by*100 + bz*10 + 1
    assert kv["builtins3d_last"] == "3111211"
    assert kv["builtins3d_17"] == "1001001"          # global 17 = block 1, thread (1,0,0)
    assert kv["template"] == "2,9"                   # 0.5*4 + tid
    assert kv["by_value"] == "39,49,59,69" and kv["host_scale"] == "3"
    assert kv["deduced"] == "42,42"
    assert kv["string"] == "not<<<a,"                # the string literal was left alone
    assert kv["macro"] == "5,5"
    assert kv["shared"] == "6231,5226,0"             # tile[3-t/8][7-t%8] + dyn[31-t]*100
    assert kv["counter"] == "32" and kv["count"] == "11"
    assert kv["and"] == "1" and kv["or"] == "1" and kv["or0"] == "0"
    assert kv["same_window"] == "1"                  # every extern __shared__ array starts at the window
    assert kv["launch_kernel"] == "cudaSuccess,12,15"
    assert kv["threads_1025"] == "cudaErrorInvalidConfiguration"
    assert kv["threads_1024"] == "cudaSuccess"
    assert kv["block_z_65"] == "cudaErrorInvalidConfiguration"
    assert kv["grid_y_65536"] == "cudaErrorInvalidConfiguration"
    assert kv["grid_0"] == "cudaErrorInvalidConfiguration"
    assert kv["after_errors"] == "cudaSuccess"
    assert kv["smem_64k"] == "cudaErrorInvalidValue"
    assert kv["set_attr_too_big"] == "cudaErrorInvalidValue"
    assert kv["last_error_after_set_attr"] == "cudaErrorInvalidValue"
    assert kv["set_attr"] == "cudaSuccess" and kv["smem_64k_optin"] == "cudaSuccess"
    assert kv["big_dynamic"] == str(sum(range(16384)) % 1000003)
    assert kv["on_stream"] == "cudaSuccess"
    assert kv["on_destroyed_stream"] == "cudaErrorInvalidResourceHandle"
    # Every refused launch is also reported on stderr for the judge.
    assert run.run.stderr.count("CUSET-CPU: launch_error:") == 6
    assert "kernel 'noop' at kernel.cu:133" in run.run.stderr


def test_checksum_of_3d_launch(compile_fixture):
    kv, _ = run_both(compile_fixture("launch_builtins"))
    values = []
    for bz in range(2):
        for by in range(3):
            for bx in range(2):
                for tz in range(2):
                    for ty in range(2):
                        for tx in range(4):
                            values.append(tx * 1000000 + ty * 100000 + tz * 10000 + bx * 1000 + by * 100
                                          + bz * 10 + 1)
    checksum = 0
    for v in values:
        checksum = checksum * 31 % 1000000007 + v
    assert kv["builtins3d_checksum"] == str(checksum)


# ------------------------------------------------------------------ runtime API
def test_memory_streams_events_and_errors(compile_fixture):
    kv, _ = run_both(compile_fixture("memory_api"))
    ok = {"malloc", "malloc2", "h2d", "d2d", "d2h", "default_kind", "memset", "free", "free_null", "malloc_0",
          "malloc_pitch", "copy2d_in", "copy2d_out", "malloc_host", "malloc_managed", "free_host", "free_managed",
          "to_symbol", "to_symbol_offset", "to_symbol_first", "from_symbol", "symbol_address",
          "copy_into_symbol_address", "stream_create", "stream_flags", "async_copy", "memset_async", "record",
          "stream_sync", "event_sync", "event_query", "stream_query", "wait_event", "elapsed", "event_destroy",
          "stream_destroy", "last_error_reset", "sync", "reset"}
    for key in ok:
        assert kv[key] == "cudaSuccess", key
    assert kv["roundtrip"] == "1"
    invalid = {"swapped_kind", "last_after_swapped", "too_long", "memset_past_end", "double_free", "free_host_ptr",
               "copy_to_freed", "to_symbol_too_big"}
    for key in invalid:
        assert kv[key] == "cudaErrorInvalidValue", key
    assert kv["memset_nan"] == "1"
    assert kv["malloc_0_null"] == "1"
    assert kv["malloc_huge"] == "cudaErrorMemoryAllocation"
    assert kv["pitch"] == "512"
    assert kv["pitched"] == "0,31,92"                 # row[x]*10 + y
    assert kv["copy2d_bad_pitch"] == "cudaErrorInvalidPitchValue"
    assert kv["managed"] == "1000,1063"
    assert kv["attr_device"] == kv["attr_host"] == kv["attr_managed"] == "1"
    assert kv["meminfo"] == "1"
    assert kv["symbols"] == "2.25,9,17" and kv["counter"] == "8"
    assert kv["symbol_via_address"] == "1,4"
    assert kv["elapsed_nonneg"] == "1"
    assert kv["elapsed_no_timing"] == "cudaErrorInvalidResourceHandle"
    assert kv["event_destroy_twice"] == "cudaErrorInvalidResourceHandle"
    assert kv["stream_sync_destroyed"] == "cudaErrorInvalidResourceHandle"
    assert kv["devices"] == "1" and kv["current"] == "0"
    assert kv["set_device_1"] == kv["last_error"] == "cudaErrorInvalidDevice"
    assert kv["prop"] == "32,1024,64,65535,49152,101376,89"
    assert kv["sm_count_matches"] == "1" and kv["optin"] == "101376"
    assert kv["strings"] == "no"  # "no error|out of memory|..." is split on spaces by parse_kv
    assert "strings=no error|out of memory|cudaErrorIllegalAddress" in compile_fixture("memory_api").run().run.stdout


# ------------------------------------------------------------------ math and atomics
def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


def test_math_intrinsics_conversions_and_vector_types(compile_fixture):
    kv, _ = run_both(compile_fixture("math_atomics"))
    f = {int(k[1:]): float(v) for k, v in kv.items() if k.startswith("f") and k[1:].isdigit()}
    expected_f = {0: 2.0, 1: 0.5, 2: math.e, 3: math.log(4), 4: 1.0, 5: -1.0, 6: 0.5, 7: 0.4769362762044699,
                  8: 0.25, 9: 1.0, 10: 0.0, 11: 1.0, 12: 4.0, 13: 17.0, 14: 0.5, 15: 100.0, 16: 1.0,
                  17: _f32(math.pi), 18: -2.0, 19: -2.0, 20: 3.0, 21: 2.0, 22: 13.0, 23: 1024.0,
                  24: statistics.NormalDist().inv_cdf(_f32(0.975)), 27: 16777216.0, 28: 4294967296.0, 29: _f32(math.sqrt(2)),
                  30: 0.42758357615580705, 31: 48.0}
    for k, v in expected_f.items():
        assert f[k] == pytest.approx(v, rel=2e-7, abs=1e-7), k
    # Directed rounding: 1 + 1e-8 rounds down to 1 and up to the next float.
    assert f[25] == 1.0 and _f32(f[26]) == _f32(1.0 + 2.0 ** -23)
    i = {int(k[1:]): int(v) for k, v in kv.items() if k.startswith("i") and k[1:].isdigit()}
    expected_i = {0: 2, 1: 4, 2: -2, 3: -3, 4: 3, 5: 2**31 - 1, 6: -2**31, 7: 0, 8: 8, 9: 31, 10: 32, 11: 5,
                  12: 40, 13: 2, 14: -2, 15: -2, 16: 4, 17: 20, 18: -3, 19: 9, 20: 12, 21: 0x3F800000, 22: 63,
                  23: 1616, 24: 1616, 25: 1204, 26: 404, 27: 404, 28: 301, 29: 16, 30: 654321, 31: 1}
    assert i == expected_i
    u = [int(kv[f"u{k}"]) for k in range(8)]
    assert u == [0x80000000, 0x55114400, 3, 0x10000000, 0xFFFFFFFE, 107, 0x80000000, 3]
    assert int(kv["ll0"]) == 2 and int(kv["ll1"]) == 0x3FF0000000000000
    assert int(kv["ll2"]) == int(_f32(1e12)) and int(kv["ll3"]) == -3
    # Division by zero carries on with all-ones quotients: -1 + 100 * 0xFFFFFFFF + 1e6 * -1
    assert int(kv["ll4"]) == -1 + 100 * 0xFFFFFFFF - 1000000


def test_atomics(compile_fixture):
    kv, run = run_both(compile_fixture("math_atomics"))
    assert "integer division by zero in a kernel" in run.run.stderr
    n = 1000
    xor = 0
    for t in range(n):
        xor ^= t
    assert kv["atomic_int"] == f"{n},{-2 * n},{n - 1},{-(n - 1)},{-2**31},{2**31 - 1},{xor},77"
    assert kv["atomic_unsigned"] == f"{n % 10},2"   # atomicInc wraps at 9; atomicDec cycles 5..0
    assert kv["atomic_float"] == "500,100"
    assert kv["atomic_double"] == "250"
    assert kv["atomic_ull"] == str(n << 33)
    assert kv["atomic_cas"] == str(n) and kv["lock"] == "0" and kv["guarded"] == str(sum(range(n)))


OPERAND_IS_RESULT = r"""
#include <cstdio>
__global__ void k(unsigned* a, unsigned long long* b, unsigned* out, unsigned long long* out64) {
    unsigned t = threadIdx.x;
    unsigned v = t * 2654435761u;
    unsigned long long w = t * 11400714819323198485ull;
    if (t < 3u) {              // the branch is what makes GCC 12.2 reuse the register xadd overwrote
        v += atomicAdd(&a[t], v);
        w += atomicAdd(&b[t], w);
    }
    out[t] = v;
    out64[t] = w;
}
int main() {
    unsigned h[4] = {17u, 2654435744u, 100u, 7u};
    unsigned long long h64[4] = {17ull, 5ull, 1ull << 40, 9ull};
    unsigned *a, *out; unsigned long long *b, *out64;
    cudaMalloc(&a, sizeof h); cudaMalloc(&out, sizeof h); cudaMalloc(&b, sizeof h64); cudaMalloc(&out64, sizeof h64);
    cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice); cudaMemcpy(b, h64, sizeof h64, cudaMemcpyHostToDevice);
    k<<<1, 4>>>(a, b, out, out64);
    unsigned r[4], m[4]; unsigned long long r64[4], m64[4];
    cudaMemcpy(r, out, sizeof r, cudaMemcpyDeviceToHost); cudaMemcpy(m, a, sizeof m, cudaMemcpyDeviceToHost);
    cudaMemcpy(r64, out64, sizeof r64, cudaMemcpyDeviceToHost); cudaMemcpy(m64, b, sizeof m64, cudaMemcpyDeviceToHost);
    printf("v=%u,%u,%u,%u a=%u,%u,%u,%u\n", r[0], r[1], r[2], r[3], m[0], m[1], m[2], m[3]);
    printf("w=%llu,%llu,%llu,%llu b=%llu,%llu,%llu,%llu\n", r64[0], r64[1], r64[2], r64[3],
           m64[0], m64[1], m64[2], m64[3]);
    return 0;
}
"""


def test_an_atomic_whose_operand_is_also_its_result(compile_source):
    """`v += atomicAdd(&a[t], v)`: v becomes v + old, and a[t] old + v (each thread its own
    element, so every order agrees). GCC 12.2 compiled the unsigned forms, in a branch, to
    old + old: 34 instead of 17 for thread 0 (the differential fuzzer's kernel 5559)."""
    kv, _ = run_both(compile_source(OPERAND_IS_RESULT, "operand_is_result"))
    h, h64 = [17, 2654435744, 100, 7], [17, 5, 1 << 40, 9]
    v = [(t * 2654435761) % 2**32 for t in range(4)]
    w = [(t * 11400714819323198485) % 2**64 for t in range(4)]
    want_v = [(v[t] + h[t]) % 2**32 if t < 3 else v[t] for t in range(4)]
    want_w = [(w[t] + h64[t]) % 2**64 if t < 3 else w[t] for t in range(4)]
    assert want_v[:2] == [17, 1013904209]                                   # by hand: 0 + 17; g + (g - 17)
    assert kv["v"] == ",".join(map(str, want_v)) and kv["a"] == ",".join(map(str, want_v[:3] + [7]))
    assert kv["w"] == ",".join(map(str, want_w)) and kv["b"] == ",".join(map(str, want_w[:3] + [9]))


# ------------------------------------------------------------------ warps and groups
def _row(kv, key):
    return [int(x) for x in kv[key].split(",")]


def _shfl_model(values, lane_of):
    return [values[lane_of(t)] for t in range(64)]


def test_warp_primitives(compile_fixture):
    kv, run = run_both(compile_fixture("warp_groups"), "results.txt")
    v = [10 * t for t in range(64)]
    base = lambda t, w: t - t % w  # noqa: E731  (segment start within the block)
    assert _row(kv, "shfl_bcast") == [v[(t // 32) * 32 + 3] for t in range(64)]
    assert _row(kv, "shfl_w8") == _shfl_model(v, lambda t: base(t, 8) + ((t % 32 + 1) % 8))
    assert _row(kv, "shfl_up_w16") == _shfl_model(v, lambda t: t - 2 if t % 16 >= 2 else t)
    assert _row(kv, "shfl_down_w16") == _shfl_model(v, lambda t: t + 4 if t % 16 + 4 < 16 else t)
    assert _row(kv, "shfl_xor") == _shfl_model(v, lambda t: t ^ 1)
    # xor 8 within width 8 leaves the segment: later segments give the own
    # value, earlier ones are read (CUDA's documented behaviour).
    xor8 = lambda t: t if (t % 32) ^ 8 >= base(t % 32, 8) + 8 else (t // 32) * 32 + ((t % 32) ^ 8)  # noqa: E731
    assert _row(kv, "shfl_xor_w8") == _shfl_model(v, xor8)
    assert _row(kv, "shfl_double") == [int(((t + 1 if t % 32 < 31 else t) + 0.5) * 10) for t in range(64)]
    ballot = sum(1 << lane for lane in range(32) if lane % 3 == 0)
    assert _row(kv, "ballot") == [ballot - (1 << 32) if ballot >= 2**31 else ballot] * 64
    assert _row(kv, "any_all") == [1] * 32 + [11] * 32
    signed = lambda m: m - (1 << 32) if m >= 2**31 else m  # noqa: E731  (printed with %d)
    assert _row(kv, "match_any") == [signed(0xF << (4 * ((t % 32) // 4))) for t in range(64)]
    assert _row(kv, "match_all") == [11] * 64
    assert _row(kv, "reduce_add") == [sum(range(32))] * 64
    assert _row(kv, "reduce_min") == [5 - 31] * 64
    assert _row(kv, "reduce_max") == [93] * 64
    assert _row(kv, "reduce_or") == [0xFF] * 64
    assert _row(kv, "activemask_div") == [0xFFFF if t % 32 < 16 else 0xFFFF0000 - (1 << 32) for t in range(64)]
    assert _row(kv, "shfl_div") == [v[(t // 32) * 32 + (0 if t % 32 < 16 else 31)] for t in range(64)]
    assert _row(kv, "activemask_after") == [-1] * 64
    # Lanes that exited before a shuffle read back as NaN, with a note.
    assert kv["exited"] == "8,23,1"
    assert "read lane 24 in __shfl_down_sync" in run.run.stderr


def test_cooperative_groups(compile_fixture):
    kv, _ = run_both(compile_fixture("warp_groups"), "results.txt")
    vals = [r + 1 for r in range(64)]
    tile = lambda r, n: vals[r - r % n:r - r % n + n]  # noqa: E731
    assert _row(kv, "cg_reduce32") == [sum(tile(r, 32)) for r in range(64)]
    assert _row(kv, "cg_max8") == [max(tile(r, 8)) for r in range(64)]
    assert _row(kv, "cg_min8") == [min(tile(r, 8)) for r in range(64)]
    assert _row(kv, "cg_iscan8") == [sum(tile(r, 8)[:r % 8 + 1]) for r in range(64)]
    assert _row(kv, "cg_escan8") == [sum(tile(r, 8)[:r % 8]) for r in range(64)]
    assert _row(kv, "cg_tile8") == [(r % 8) * 100 + (r // 8) * 10 + 8 for r in range(64)]
    assert _row(kv, "cg_shfl_down8") == [vals[r + 1] if r % 8 < 7 else vals[r] for r in range(64)]
    ballot8 = sum(1 << k for k in range(8) if (k + 1) % 2 == 0)  # v = rank + 1 even on odd ranks
    assert _row(kv, "cg_ballot8") == [ballot8] * 64
    assert _row(kv, "cg_any_all8") == [11] * 8 + [1] * 56
    assert _row(kv, "cg_dyn4") == [(r % 4) * 10 + 4 for r in range(64)]
    assert _row(kv, "cg_block") == [64000 + r for r in range(64)]  # size*1000 + block 0 + thread
    members = [[r for r in range(w * 32, w * 32 + 32) if r % 3 == 0] for w in range(2)]
    for w in range(2):
        for k, r in enumerate(members[w]):
            assert _row(kv, "cg_coalesced")[r] == k * 100 + len(members[w])
            assert _row(kv, "cg_coalesced_sum")[r] == sum(vals[m] for m in members[w])
            assert _row(kv, "cg_coalesced_shfl")[r] == vals[members[w][0]]
    grid = _row(kv, "cg_grid")
    assert grid[0] == 128 * 1000 + 64 and grid[63] == 128 * 1000 + 64 + 63  # block 1 of 2, 128 threads


# ------------------------------------------------------------------ textures, half
def test_textures_and_surfaces(compile_fixture):
    kv, _ = run_both(compile_fixture("textures_half"))
    # 1D texels 10,20,30,40; linear weights are quantised to 1/256 like the hardware.
    a = round(0.4 * 256) / 256    # x = 3.9 -> frac(3.4)
    b = round(0.1 * 256) / 256    # normalised 0.9 -> x = 3.6 -> frac(3.1)
    assert kv["clamp_point"] == "10,20,20,10,40,40"
    assert kv["clamp_linear"] == "10,15,22.5,10,40,40"
    border = _f32(40 * (1 - a) + -5 * a)
    assert [float(x) for x in kv["border_linear"].split(",")] == pytest.approx([10, 15, 22.5, -5, border, -5],
                                                                             rel=1e-6)
    assert kv["wrap_point_norm"] == "10,20,10,40,40,30"
    wrap = _f32(40 * (1 - b) + 10 * b)
    assert [float(x) for x in kv["wrap_linear_norm"].split(",")] == pytest.approx([10, 15, 10, 40, wrap, 25],
                                                                                rel=1e-6)
    assert kv["mirror_point_norm"] == "10,20,40,10,40,30"
    assert kv["mirror_linear_norm"] == "10,15,40,10,40,25"
    assert kv["border_point_norm"] == "10,20,-5,-5,40,30"
    assert kv["bilinear"] == "57.5"
    assert float(kv["bilinear_quantised"]) == pytest.approx(10 * 213 / 256, abs=1e-6)
    assert kv["pitch2d_create"] == "cudaSuccess" and kv["pitch2d"] == "120"
    assert kv["fetch_linear"] == "0,8,10,0"
    assert kv["int_linear_filter"] == "cudaErrorInvalidFilterSetting"
    assert kv["uchar4_norm"] == "1,1,0.4,0"
    assert kv["copy3d"] == "cudaSuccess" and kv["trilinear"] == "3.5"
    assert kv["surface"] == "17,5,15,17"   # 2v+1 everywhere, then (0,0) <- 0*1000 + clamped corner


def test_half_and_bfloat16(compile_fixture):
    kv, _ = run_both(compile_fixture("textures_half"))
    assert kv["half0"] == "1000,100,1100,0"
    assert kv["half3"] == "1003.5,401,1405,1"
    assert kv["half_bits"] == "63d0,63d2,63d5,63d7"      # 1000, 1001, 1002.5, 1003.5
    assert kv["bf16"] == "0.333984375,1,3eab"
    assert kv["half_special"] == "7c00,0000,3da8,bc00"   # inf, 0, sqrt(2), max(-1, NaN) = -1


# ------------------------------------------------------------------ volatile and warps
@pytest.mark.parametrize("order", ["forward", "random:11"])
def test_warp_synchronous_volatile_code_is_recognised(compile_fixture, order):
    from cuset.execute.cpu import run_compiled

    program = compile_fixture("volatile_sync")
    run = lambda mode: run_compiled(program.compiled, program.dir, order=order, backend=program.backend,  # noqa: E731
                                    args=[mode], run_name=f"{mode}-{order.replace(':', '-')}")
    fixed, flag, lockstep = run("fixed"), run("flag"), run("lockstep")
    assert fixed.ok and fixed.run.stdout == "fixed=64\n"   # reads and writes split by __syncwarp
    assert flag.ok and flag.run.stdout == "flag=1\n"       # lanes storing the same value: benign
    assert not lockstep.ok and lockstep.classified[0] is Status.WARP_SYNC
    assert "no __syncwarp() in between" in lockstep.classified[1] and "kernel 'reduce'" in lockstep.classified[1]
