"""Run at start-up of a task script (see cuset/evaluate/devicemap/__init__.py): map torch's
CUDA device requests to the CPU when torch finds no CUDA device. Self-contained: the
script's interpreter need not be able to import cuset."""

import sys

MARKER = "[cuset] CUDA device requests mapped to the CPU"


def _patch_torch(torch):
    if torch.cuda.is_available():
        return  # a GPU answers: the script runs as written
    from torch.overrides import TorchFunctionMode

    told = []

    def tell(what):
        if not told:
            told.append(what)
            print(f"{MARKER} (no GPU answers; first: {what})", file=sys.stderr, flush=True)

    def cpu(device, what):
        is_cuda = (isinstance(device, torch.device) and device.type == "cuda") or \
                  (isinstance(device, str) and device.split(":")[0] == "cuda") or \
                  (isinstance(device, int) and not isinstance(device, bool))   # an int device is a CUDA index
        if not is_cuda:
            return device
        tell(what)
        return torch.device("cpu")

    class CudaToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "call")
            if "device" in kwargs:
                kwargs["device"] = cpu(kwargs["device"], f"{name}(device={kwargs['device']!r})")
            if func is torch.Tensor.cuda:
                tell("Tensor.cuda()")
                return args[0]
            if func is torch.Tensor.to:
                args = tuple(cpu(a, f"Tensor.to({a!r})") if isinstance(a, (str, torch.device, int)) else a
                             for a in args)
            return func(*args, **kwargs)

    CudaToCpu().__enter__()   # stays on for the whole script

    def synchronize(device=None):   # nothing runs asynchronously on the CPU
        tell("torch.cuda.synchronize()")

    torch.cuda.synchronize = synchronize
    base = torch.Generator

    class Generator(base):   # torch.Generator(device="cuda") -> a CPU generator
        def __new__(cls, device="cpu"):
            return base.__new__(cls, cpu(device, f"Generator(device={device!r})"))

        def __init__(self, device="cpu"):
            pass

    torch.Generator = Generator


class _TorchHook:
    """A meta-path finder that patches torch right after it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch_torch(module)

        spec.loader.exec_module = exec_module
        return spec


if "torch" in sys.modules:   # preloaded by a fork server
    _patch_torch(sys.modules["torch"])
else:
    sys.meta_path.insert(0, _TorchHook())
