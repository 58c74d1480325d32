"""`DemoConfig`: the miniature CuSeT experiment, sized for a 2-core CPU."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cuset.config import option


# Short programs sharing one host skeleton: enough for a ~1M-parameter model trained for
# minutes on 2 cores to learn to write complete, compiling programs (measured: with all
# 60 families at the same budget nearly every sample was a compile error or had no code).
DEMO_FAMILIES = "vector_binary,saxpy,relu,sigmoid,smooth_activation,polynomial,bias_act,where"

# The base model stands in for an instruct code model that never saw the fine-tuning data
# (as the paper's base models never saw the curated SFT set): it pretrains on raw programs
# of every *other* family and on chat-formatted prompt/program pairs of these families, so
# it knows CUDA, the host skeleton and the reply format, not the demo's tasks. Without the
# pairs it never emits the opening fence, and CuSeT's confidence mask (p > tau) then never
# trains that token (measured: every CuSeT sample was no_code).
INSTRUCT_FAMILIES = "column_reduce,rgb_to_gray,resize,range_histogram,permute_3d,block_sum,max_pool2d,outer_product"

# The study's and the default demo's instruction families: sixteen, so that the base practises
# copying sizes and constants from prompts.
STUDY_INSTRUCT_FAMILIES = (INSTRUCT_FAMILIES + ",dot_product,row_reduce,softmax,rmsnorm,gemv,avg_pool2d,"
                           "transpose,heat_1d")


@dataclass
class DemoConfig:
    out: str = option("", help="Run directory (default runs/demo-<timestamp>). Re-running with the same out resumes.")
    seed: int = option(0, help="Seed for data, initialisation, training order and sampling.")
    n_train: int = option(1000, help="Synthesised training tasks (prompt + reference program).")
    n_eval: int = option(20, help="Held-out evaluation tasks (parameters never seen in training).")
    families: str = option(DEMO_FAMILIES, help="Comma-separated task families to draw from, or 'all'. The default "
                           "is the elementwise domain: short programs a tiny model can learn in minutes.")
    n_pretrain: int = option(1200, help="Raw programs in the base model's pretraining corpus, drawn from every family "
                             "not in `families` (the base model never sees the fine-tuning families' programs).")
    n_instruct: int = option(2000, help="Chat-formatted prompt/program pairs from instruct_families in the base model's "
                             "pretraining corpus (0: raw programs only).")
    instruct_families: str = option(STUDY_INSTRUCT_FAMILIES, help="Families of the base model's instruction pairs; must be "
                                    "disjoint from families.")
    holdout: str = option("params", help="What the evaluation set holds out: params (same families, unseen "
                          "constants and sizes) or families (unseen families).", choices=("params", "families"))
    layout: str = option("kernels_first", help="Where the programs' shared host helpers (CUDA_CHECK, read/write_binary) "
                         "stand: helpers_first (as synthesised: ~40 shared lines before the task's code) or kernels_first "
                         "(moved before main(): the task-specific constants and kernels come first; programs whose "
                         "helpers are used before main() keep their layout).", choices=("helpers_first", "kernels_first"))
    replaceable: bool = option(False, help="Replaceable tokens in the fine-tuning targets: each training program "
                               "gets function names, comment lines and an indentation unit drawn per sample "
                               "(cuset.curation.variation; deterministic per seed, behaviour unchanged), tokens its "
                               "prompt does not determine, as the confidence mask's premise assumes. Evaluation "
                               "references stay as synthesised.")
    vocab_size: int = option(2048, help="Byte-level BPE vocabulary (at most: BPE stops when it runs out of merges), "
                            "trained on the programs and prompts of the pretraining corpus.")
    hidden: int = option(128, help="Hidden size of the base model (a Qwen2 architecture).")
    layers: int = option(4, help="Transformer layers of the base model.")
    pretrain_steps: int = option(1400, help="Causal-LM steps (4096 tokens each) on the other families' programs and "
                                "the instruction pairs that make the vanilla base model.")
    pretrain_lr: float = option(3e-3, help="Peak learning rate of pretraining.")
    pretrained: str = option("", help="A pretrained base model directory to start from instead of pretraining one "
                             "(models/vanilla of a demo run without warm-up, or models/pretrained of one with it); "
                             "its tokenizer comes with it. Lets several base strengths share one pretraining.")
    warmup_steps: int = option(1600, help="Base strength: optimizer steps of supervised training (the loss on the "
                               "reply) of the pretrained base on prompt/program pairs of the fine-tuning families at "
                               "(family, variant, size) points that neither the fine-tuning nor the evaluation set "
                               "holds (checked before training); 0: the base never sees those families. Made once "
                               "per recipe (cuset.demo.warm_build): the default's warmed base is shipped, any other "
                               "is built on first use (about 0.8 s per step on one core) and cached. 1600 with "
                               "n_warmup=700 are the settings of the first base that passed the competence gate "
                               "(docs/competence.md); --study and --regime set their own.")
    n_warmup: int = option(700, help="Tasks in the warm-up set (warmup_steps > 0), drawn from every size of the "
                           "fine-tuning families minus the fine-tuning and evaluation points.")
    warmup_lr: float = option(1e-3, help="Peak learning rate of the warm-up.")
    seq_len: int = option(1024, help="Tokens per pretraining row (4096 tokens per step: 4096 // seq_len rows).")
    finetune: str = option("lora", help="lora (the paper's setting: r=8, alpha 16) or full. `--study` fine-tunes "
                           "in full at 3e-3, the setting its SFT arm was tuned on; under it CuSeT's NLL climbed "
                           "and never recovered (docs/demo-2026-12-06-warm), under LoRA at the paper's 1e-4 it "
                           "trained stably (docs/regime-2026-12-06-gate/pilot-lora-k1600).", choices=("lora", "full"))
    methods: str = option("sft,cuset", help="Comma-separated objectives fine-tuned from the base model under the same "
                          "budget (sft, dft, eaft, asft, profit, cuset); each is compared with the first (paired over tasks, with run-to-run variance). "
                          "`name:paper` / `name:broad` sets what that run's CUDA mask covers (the span-breadth ablation, "
                          "e.g. cuset:paper; see cuda_spans); `cuset:noconf`, `cuset:nocuda`, `cuset:noregion` turn off "
                          "CuSeT's confidence mask, CUDA mask or sample weight (the paper's Table 5; combinable, e.g. "
                          "cuset:paper:noconf); `cuset:wnorm` divides the sample weight by its mean over each "
                          "optimizer step (loss.weight_norm); `name:repl` trains that arm on the fine-tuning set with "
                          "replaceable tokens (see replaceable). `methods=2x2` is the arm set {SFT, CuSeT (paper spans)} "
                          "x replaceable tokens {off, on} plus ProFit, DFT and CuSeT with broad spans.")
    cuda_spans: str = option("broad", help="What the CUDA mask covers for methods named without `:spans`: broad "
                             "(kernel and __device__ bodies, device variables, launch configurations with their "
                             "backward slice, CUDA calls) or paper (__global__ bodies, <<<...>>> and the declarations "
                             "it uses directly).", choices=("broad", "paper"))
    seeds: int = option(1, help="Fine-tuning runs per method, with seeds seed, seed+1, ... (training order, "
                        "initialisation of adapters, sampling); the base model is built once.")
    finetune_steps: int = option(500, help="Optimizer steps of each fine-tune (SFT and CuSeT get the same budget). "
                                 "500, the study's budget: at 300 no fine-tuned model of the demo passed a function "
                                 "test (measured, docs/demo-2026-12-06).")
    finetune_lr: float = option(1e-4, help="Peak learning rate of fine-tuning (the paper's 1e-4 by default).")
    batch_size: int = option(4, help="Examples per fine-tuning step.")
    micro_batch: int = option(1, help="Examples per forward pass, 0 for the whole batch (otherwise batch_size / "
                              "micro_batch gradient-accumulation passes; the loss is normalised over the whole step "
                              "either way). 1 pads nothing: on 2 CPU cores 500 SFT steps of 4 took 262 s as passes of 1 "
                              "against 323 s as padded batches of 4 (measured), because the padding mask takes "
                              "attention off its fast causal path.")
    window: int = option(256, help="CuSeT sliding-window length l (the paper's 256; study responses average about "
                         "690 tokens, so most hold several windows).")
    tau: float = option(0.1, help="CuSeT confidence threshold.")
    lam: float = option(1.0, help="CuSeT CUDA-mask weight lambda.")
    samples: int = option(3, help="Samples per evaluation task (Pass@1 and Pass@3).")
    temperature: float = option(0.5, help="Sampling temperature.")
    max_new_tokens: int = option(960, help="Generated tokens per sample at most (1.2x the longest reference "
                                 "program of the study, 784 tokens).")
    gate_compile: float = option(0.65, help="`--regime`: the competence gate's compile@1 (a fraction): a base "
                                 "counts as at the paper's competence when, before fine-tuning, it compiles at least "
                                 "this share and passes at least gate_function of the evaluation tasks (the paper's "
                                 "bases: 69-80% and 35-42%, its Table 2).")
    gate_function: float = option(0.25, help="`--regime`: the competence gate's function@1 (a fraction), see "
                                  "gate_compile.")
    finetune_reason: str = option("", help="Why the fine-tuning deviates from the paper's (LoRA r=8, alpha 16, learning "
                                  "rate 1e-4), in words; `--regime` writes it in the map and refuses to run a deviating "
                                  "setting without one.")
    regime_levels: str = option("0,12,40", help="`--regime`: base strengths, as comma-separated warmup_steps "
                                "values (0: the weak base); each level is a demo run under <out>/base-k<steps>, "
                                "all sharing the first level's pretraining. 0,12,40 give the study base NLL 1.49 "
                                "(weak), 0.58 (mid) and 0.14 (strong, the paper's premise), measured "
                                "(docs/regime-2026-11-26); `--calibrate` measures another config's.")
    confidence_window: int = option(64, help="Window of the confidence analysis (the paper's Figure 2 uses 64; "
                                    "CuSeT's own window is `window`).")
    progress: bool = option(True, help="Progress bars.")

    def family_list(self) -> list[str] | None:
        """The families to synthesise from (None: all of them)."""
        return _names(self.families)

    def instruct_family_list(self) -> list[str]:
        return _names(self.instruct_families) or []

    def pretrain_family_list(self) -> list[str]:
        """Every family the fine-tuning and evaluation tasks are not drawn from."""
        from cuset.curation.families import all_families

        target = set(self.family_list() or [f.name for f in all_families()])
        return [f.name for f in all_families() if f.name not in target]

    def regime_level_list(self) -> list[int]:
        """The warmup_steps of each `--regime` base, as written."""
        return [int(x) for x in _names(self.regime_levels) or []]

    def method_list(self) -> list[str]:
        """The method specs as written (`cuset`, `cuset:paper`, ...), a named arm set (ARM_SETS) expanded."""
        return _names(ARM_SETS.get(self.methods.strip(), self.methods)) or []

    def paper_finetune_deviations(self) -> list[str]:
        """How this config's fine-tuning differs from the paper's (LoRA r=8, alpha 16 at 1e-4); [] when it does not
        (the demo's LoRA adapters take TrainConfig's defaults, r=8 and alpha 16)."""
        out = []
        if self.finetune != PAPER_FINETUNE["finetune"]:
            out.append(f"{self.finetune} fine-tuning instead of LoRA r=8, alpha 16")
        if self.finetune_lr != PAPER_FINETUNE["finetune_lr"]:
            out.append(f"learning rate {self.finetune_lr:g} instead of {PAPER_FINETUNE['finetune_lr']:g}")
        return out

    @property
    def forward_batch(self) -> int:
        """Examples per forward pass (micro_batch, or the whole step's batch)."""
        return self.micro_batch or self.batch_size

    def method_spec(self, spec: str) -> MethodSpec:
        """A method spec as written, its span mode defaulting to cuda_spans."""
        method = parse_method_spec(spec)
        return replace(method, spans=method.spans or self.cuda_spans)

    def __post_init__(self):
        if self.n_instruct < 0:
            raise ValueError("n_instruct must be >= 0")
        if not 1 <= self.seq_len <= 4096:
            raise ValueError(f"seq_len must be between 1 and 4096, got {self.seq_len}")
        for name in ("n_train", "n_eval", "pretrain_steps", "finetune_steps", "samples", "max_new_tokens", "seeds",
                     "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        try:
            levels = self.regime_level_list()
        except ValueError:
            raise ValueError(f"regime_levels must be comma-separated integers (warmup_steps per base), got "
                             f"{self.regime_levels!r}") from None
        if not levels or min(levels) < 0 or len(set(levels)) != len(levels):
            raise ValueError(f"regime_levels must name distinct warmup_steps values >= 0, e.g. 0,200,800; got "
                             f"{self.regime_levels!r}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0 (0: no warm-up), got {self.warmup_steps}")
        if self.warmup_steps and self.n_warmup < 1:
            raise ValueError(f"n_warmup must be >= 1 when warmup_steps > 0 (got {self.n_warmup}); "
                             "or set warmup_steps=0")
        if self.micro_batch < 0 or self.batch_size % self.forward_batch:
            raise ValueError(f"micro_batch ({self.micro_batch}) must divide batch_size ({self.batch_size}), "
                             "or be 0 for the whole batch")
        if self.n_pretrain < 0:
            raise ValueError("n_pretrain must be >= 0")
        if self.n_pretrain and not self.pretrain_family_list():
            raise ValueError("n_pretrain draws from the families not in `families`, and families names them all: "
                             "name fewer families or set n_pretrain=0")
        if self.n_pretrain == 0 and self.n_instruct == 0:
            raise ValueError("n_pretrain and n_instruct are both 0: the base model needs a pretraining corpus")
        from cuset.spans import SPAN_MODES

        if self.cuda_spans not in SPAN_MODES:
            raise ValueError(f"cuda_spans must be {' or '.join(SPAN_MODES)}, got {self.cuda_spans!r}")
        for name in ("gate_compile", "gate_function"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} is a fraction of the evaluation tasks, between 0 and 1; got "
                                 f"{getattr(self, name)}")
        methods = self.method_list()
        if not methods:
            raise ValueError("methods is empty: name the objectives to fine-tune with, e.g. methods=sft,cuset")
        for spec in methods:
            parse_method_spec(spec)
        if len(set(methods)) != len(methods):
            raise ValueError(f"methods names an objective twice: {self.methods}")
        if self.replaceable and any(parse_method_spec(m).replaceable for m in methods):
            raise ValueError("replaceable=true varies every arm's training programs and a `:repl` arm varies its own: "
                             "name one of them (methods=2x2 runs both conditions side by side)")
        if len({self.method_spec(m) for m in methods}) != len(methods):
            raise ValueError(f"methods names one arm twice (cuda_spans={self.cuda_spans} is the span mode of arms "
                             f"named without one): {', '.join(methods)}")
        from cuset.curation.families import get_family

        for field, names in (("families", self.family_list() or ()), ("instruct_families", self.instruct_family_list())):
            for name in names:
                try:
                    get_family(name)
                except KeyError as err:
                    raise ValueError(f"{field}: {err.args[0]}") from None
        if self.n_instruct:
            from cuset.curation.synth import select_families

            if not self.instruct_family_list():
                raise ValueError("instruct_families is empty: name some families or set n_instruct=0")
            demo = {f.name for f in select_families(self.family_list())}
            shared = sorted(demo & set(self.instruct_family_list()))
            if shared:
                raise ValueError(f"instruct_families must be disjoint from families; both name {', '.join(shared)}")


# CuSeT's switches, as method-spec parts: the paper's Table 5 ablations each turn one LossConfig
# switch off (all three off is SFT; only the confidence mask left is ProFit); `wnorm` is the
# control that keeps the sample weight's re-weighting and removes its falling overall scale.
LOSS_SWITCHES = {"noconf": ("conf_mask", False), "nocuda": ("cuda_mask", False), "noregion": ("region_weight", False),
                 "wnorm": ("weight_norm", True)}
SWITCH_LABELS = {"noconf": "no confidence mask", "nocuda": "no CUDA mask", "noregion": "no sample weight",
                 "wnorm": "sample weight at mean 1 per step"}


# An arm part of any objective: train on the replaceable variant of the fine-tuning set
# (cuset.curation.variation: function names, comment lines and indentation drawn per program).
REPLACEABLE_PART = "repl"


@dataclass(frozen=True)
class MethodSpec:
    """One fine-tuning arm: `cuset:paper:noconf` -> loss cuset, paper spans, conf_mask off;
    `sft:repl` -> SFT on the fine-tuning set with replaceable tokens."""
    loss: str
    spans: str = ""                  # "": the config's cuda_spans
    switches: tuple[str, ...] = ()   # keys of LOSS_SWITCHES
    replaceable: bool = False        # trains on data/train-replaceable.jsonl

    def loss_switches(self) -> dict[str, bool]:
        """The LossConfig switches this arm sets."""
        return dict(LOSS_SWITCHES[a] for a in self.switches)

    def qualifiers(self) -> list[str]:
        """What sets this arm apart from its plain loss, for a table row."""
        return (([f"{self.spans} spans"] if self.spans else []) + [SWITCH_LABELS[a] for a in self.switches]
                + (["replaceable tokens"] if self.replaceable else []))


def parse_method_spec(spec: str) -> MethodSpec:
    """`cuset` -> MethodSpec(cuset); `cuset:paper:noconf` -> paper spans, confidence mask off.
    Raises ValueError naming the spec and the parts it may hold."""
    from cuset.losses.config import LOSS_NAMES, unknown_loss_message
    from cuset.spans import SPAN_MODES

    loss, *parts = spec.split(":")
    if loss not in LOSS_NAMES:
        raise ValueError(f"methods: {unknown_loss_message(loss)}")
    spans = [p for p in parts if p in SPAN_MODES]
    switches = tuple(p for p in parts if p in LOSS_SWITCHES)
    unknown = [p for p in parts if p not in SPAN_MODES and p not in LOSS_SWITCHES and p != REPLACEABLE_PART]
    allowed = (f"the CUDA span mode ({' or '.join(SPAN_MODES)}, e.g. {loss}:paper), a CuSeT switch "
               f"({', '.join(LOSS_SWITCHES)}, e.g. cuset:noconf) or {REPLACEABLE_PART} (replaceable tokens in the "
               f"training programs, e.g. {loss}:{REPLACEABLE_PART})")
    if parts.count(REPLACEABLE_PART) > 1:
        raise ValueError(f"methods: {spec!r} names a part twice; the parts after ':' are {allowed}")
    if unknown:
        raise ValueError(f"methods: {spec!r}: {unknown[0]!r} is not a part a method spec may hold; "
                         f"the parts after ':' are {allowed}")
    if len(spans) > 1 or len(set(switches)) != len(switches):
        raise ValueError(f"methods: {spec!r} names a part twice; the parts after ':' are {allowed}")
    if switches and loss != "cuset":
        are = "is a switch" if len(switches) == 1 else "are switches"
        raise ValueError(f"methods: {spec!r}: {', '.join(switches)} {are} of CuSeT's objective; "
                         f"{loss} has none (use cuset:{':'.join(switches)})")
    if "wnorm" in switches and "noregion" in switches:
        raise ValueError(f"methods: {spec!r}: wnorm renormalises the sample weight that noregion turns off; "
                         "name one of them")
    return MethodSpec(loss, spans[0] if spans else "", switches, REPLACEABLE_PART in parts)


def _names(spec: str) -> list[str] | None:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    return None if names in ([], ["all"]) else names


# Presets, applied under the YAML file and key=value overrides, so those still win.
# `--fast`, used by tests: same pipeline, a fraction of the work.
# Samples stop at 256 tokens: a model this small and this briefly trained compiles nothing at any
# length (none of the 27 samples per run at 1100 tokens did), and generation was a third of the run.
# --fast keeps whole batches per pass (micro_batch=0), as before micro-batches of 1 became the default.
FAST = {"warmup_steps": 0, "finetune": "full", "finetune_lr": 3e-3, "n_train": 60, "n_eval": 3, "n_pretrain": 60, "n_instruct": 40, "pretrain_steps": 40, "finetune_steps": 20,
        "hidden": 96, "layers": 2, "vocab_size": 1024, "max_new_tokens": 256, "micro_batch": 0}
# `--study`: enough tasks and seeds for a paired comparison, and a base and budget under which
# SFT passes a fair share of the tasks. The base practises copying sizes and constants from
# prompts on 2000 instruction pairs from 16 families; layout=kernels_first puts each task's
# own constants and kernels first. Measured on its 64 evaluation tasks with this base (SFT,
# 500 steps, seed 0): 1000 training tasks instead of 600 lifted function Pass@1 from 9.9 to
# 10.4, a learning rate of 3e-3 instead of 1e-3 to 16.1 (6e-3: 14.1); what SFT gets wrong is
# almost always a variant's constant it did not bind from the prompt. Micro-batches of 1 pad
# nothing and make each step ~20% shorter (same step batch and loss normalisation). DFT is the
# third method because it trains as fast as SFT; ASFT's reference forward pass would put the
# study over an hour (`methods=sft,cuset,asft` still runs it). Samples stop at 960 tokens,
# 1.2x the longest reference program (784): what runs longer is a model that lost its way.
STUDY = {"warmup_steps": 0, "n_train": 1000, "n_eval": 64, "seeds": 2, "methods": "sft,cuset,dft", "finetune_steps": 500,
         "finetune": "full", "finetune_lr": 3e-3, "micro_batch": 1, "max_new_tokens": 960, "pretrain_steps": 1400, "n_instruct": 2000,
         "instruct_families": STUDY_INSTRUCT_FAMILIES, "layout": "kernels_first"}
# `--regime`: the base-strength map of issue 39. The study's settings, one seed of the four arms that
# separate CuSeT's parts (sft; cuset; the CUDA mask alone; cuset with w_n at mean 1 per step) at
# every base strength in regime_levels (warmup_steps of SFT on the fine-tuning families at points
# the fine-tuning and evaluation sets do not hold). `seeds=4 regime_levels=<k>` is the powered run
# at one level.
REGIME_METHODS = "sft,cuset,cuset:noconf:noregion,cuset:wnorm"
# Named arm sets (`methods=<name>`). 2x2 (issue 60): {SFT, CuSeT} x replaceable tokens {off, on}, CuSeT with the
# paper's CUDA spans; ProFit and DFT, the paper's positive controls; CuSeT with the broad spans.
ARM_SETS = {"2x2": "sft,sft:repl,cuset:paper,cuset:paper:repl,profit,dft,cuset:broad"}
# The paper's fine-tuning (section 5.1, configs/train/*): LoRA r=8, alpha 16 (TrainConfig's LoRA defaults) at 1e-4.
PAPER_FINETUNE = {"finetune": "lora", "finetune_lr": 1e-4}
# The map fine-tunes as the paper does by default; a run that deviates says why (finetune_reason).
REGIME = {**STUDY, "methods": REGIME_METHODS, "seeds": 1, "n_warmup": 600, **PAPER_FINETUNE}
# `--regime --fast`: the same machinery at a size CI runs in a minute or two: two bases, four arms,
# a few steps each. Its numbers say nothing about the methods.
REGIME_FAST = {**FAST, "methods": REGIME_METHODS, "regime_levels": "0,4", "n_warmup": 12, "n_train": 16, "n_eval": 2,
               "n_pretrain": 24, "n_instruct": 12, "pretrain_steps": 8, "finetune_steps": 4, "hidden": 32,
               "layers": 1, "vocab_size": 512, "samples": 1, "max_new_tokens": 48, "seq_len": 256,
               "batch_size": 2, "finetune": "full", "finetune_lr": 1e-3,
               "finetune_reason": "CI size: 4 steps of LoRA at 1e-4 would leave every arm at its base"}
