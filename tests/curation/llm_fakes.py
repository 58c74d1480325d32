"""A real HTTP server on 127.0.0.1 speaking the OpenAI chat-completions API, returning
canned task replies chosen by the first kernel name in the program it is sent.

The reply's bench_cu echoes the program from the request, as an LLM that keeps the
kernels would; everything else (prompts, I/O, gen.py) is canned per kernel.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _gen(body: str) -> str:
    return ("import os\nimport numpy as np\n"
            "case = int(os.environ.get('CUSET_CASE', '0'))\n"
            "rng = np.random.default_rng(1000 + case)\n"
            "os.makedirs('data', exist_ok=True)\n" + body)


def _spec(name, shape, dtype="float32"):
    return {"name": name, "dtype": dtype, "shape": shape}


def _task(name, family, l1, l2, ins, outs, depth, gen):
    return {"task_name": name, "family": family, "level1_prompt": l1, "level2_prompt": l2,
            "level3_prompt": f"Compute {name.replace('_', ' ').lower()}.", "inputs": ins, "outputs": outs,
            "reduction_depth": depth, "gen_py": gen}


VECTOR_ADD = _task(
    "Vector_Add", "elementwise", "Add two float32 vectors a and b of 4096 elements into c: c[i] = a[i] + b[i].",
    "Elementwise sum.", [_spec("a", "(4096,)"), _spec("b", "(4096,)")], [_spec("c", "(4096,)")], 1,
    _gen("a = rng.standard_normal(4096).astype(np.float32)\nb = rng.standard_normal(4096).astype(np.float32)\n"
         "a.tofile('data/a.bin')\nb.tofile('data/b.bin')\n(a + b).astype(np.float32).tofile('data/c_ref.bin')\n"))

CANNED: dict[str, dict | str] = {
    "vector_add": VECTOR_ADD,
    "row_sum": _task(
        "Row_Sum", "reduction", "Sum each row of the 64 x 1024 float32 matrix m into sums (64 values).",
        "Per-row sum with a shared-memory tree reduction.", [_spec("m", "(64, 1024)")], [_spec("sums", "(64,)")], 1024,
        _gen("m = rng.random((64, 1024), dtype=np.float32)\nm.tofile('data/m.bin')\n"
             "m.astype(np.float64).sum(axis=1).astype(np.float32).tofile('data/sums_ref.bin')\n")),
    "scale_twice": _task(
        "Scale_Twice", "elementwise", "Multiply each of 1024 float32 values x by 2 into y.", "Scale by two.",
        [_spec("x", "(1024,)")], [_spec("y", "(1024,)")], 1,
        _gen("x = rng.standard_normal(1024).astype(np.float32)\nx.tofile('data/x.bin')\n(2 * x).tofile('data/y_ref.bin')\n")),
    "negate_values": _task(
        "Negate_Values", "elementwise", "Negate each of 1024 float32 values x into y.", "Elementwise negation.",
        [_spec("x", "(1024,)")], [_spec("y", "(1024,)")], 1,
        _gen("x = rng.standard_normal(1024).astype(np.float32)\nx.tofile('data/x.bin')\n(-x).tofile('data/y_ref.bin')\n")),
    "square_values": _task(
        "Square_Values", "elementwise", "Square each of 2048 float32 values x into y: y[i] = x[i] * x[i].",
        "Elementwise square.", [_spec("x", "(2048,)")], [_spec("y", "(2048,)")], 1,
        _gen("x = rng.uniform(0.5, 3.0, 2048).astype(np.float32)\nx.tofile('data/x.bin')\n(x * x).tofile('data/y_ref.bin')\n")),
    "leaky_relu_kernel": _task(
        "Leaky_ReLU_Activation", "activation",
        "Apply the Leaky ReLU activation to a float32 vector input of 8192 elements: output[i] = input[i] if "
        "input[i] > 0, otherwise 0.01 * input[i]. Write the result to output, a float32 vector of 8192 elements.",
        "Elementwise Leaky ReLU with negative slope 0.01.", [_spec("input", "(8192,)")], [_spec("output", "(8192,)")], 1,
        _gen("x = rng.standard_normal(8192).astype(np.float32)\nx.tofile('data/input.bin')\n"
             "np.where(x > 0, x, np.float32(0.01) * x).astype(np.float32).tofile('data/output_ref.bin')\n")),
    "cube_kernel": _task(
        "Cube", "elementwise", "Cube each of 2048 float32 values x into y.", "Elementwise cube.",
        [_spec("x", "(2048,)")], [_spec("y", "(2048,)")], 1,
        _gen("x = rng.uniform(-2, 2, 2048).astype(np.float32)\nx.tofile('data/x.bin')\n(x * x * x).tofile('data/y_ref.bin')\n")),
    # not JSON at all
    "clamp_unit": 'Sure! Here is the task: {"task_name": "Clamp_Unit", "family": "elementwise", "inputs": [',
    # JSON without gen_py
    "add_one": json.dumps({k: v for k, v in VECTOR_ADD.items() if k != "gen_py"} | {"task_name": "Add_One"}),
}

PROGRAM = re.compile(r"```cuda\n(.*?)\n```", re.S)
KERNEL = re.compile(r"__global__\s+void\s+(\w+)")


class FakeLLMServer:
    """Use as a context manager. `failures`: (status, retry_after) answered, in order,
    to the first requests before any canned reply."""

    def __init__(self, replies: dict | None = None, failures=()):
        self.replies = CANNED if replies is None else replies
        self.failures = list(failures)
        self.requests = 0
        self.kernels_asked: list[str] = []
        self.auth_headers: list[str | None] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def answer(self, body: dict) -> tuple[int, dict, dict]:
        with self._lock:
            self.requests += 1
            if self.failures:
                status, retry_after = self.failures.pop(0)
                return status, {"error": {"message": "scripted failure"}}, ({"Retry-After": retry_after} if retry_after else {})
        user = body["messages"][-1]["content"]
        found = PROGRAM.search(user)
        program = found.group(1) if found else ""
        kernel = (KERNEL.findall(program) or ["?"])[0]
        with self._lock:
            self.kernels_asked.append(kernel)
        canned = self.replies.get(kernel, "I cannot turn this program into a task.")
        content = canned if isinstance(canned, str) else json.dumps({**canned, "bench_cu": program + "\n"})
        reply = {"id": f"chatcmpl-{self.requests}", "object": "chat.completion", "model": body.get("model", ""),
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(content) // 4,
                           "total_tokens": (len(user) + len(content)) // 4}}
        return 200, reply, {}

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                fake.auth_headers.append(self.headers.get("Authorization"))
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                self._send(*fake.answer(body))

            def _send(self, status, payload, headers):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep test output clean
                pass

        return Handler


class FakeReasoningServer(FakeLLMServer):
    """A reasoning model on loopback: `script[(task_name, seed)]` = (trace, content, how) where how is
    "field" (trace in message.reasoning_content), "inline" (<think> block in content) or "none".
    Records the seeds it was asked for."""

    TASK = re.compile(r"## Task Name\n(\w+)")

    def __init__(self, script: dict, name_of=None):
        super().__init__(replies={})
        self.script = script
        self.name_of = name_of or (lambda prompt: self.TASK.search(prompt).group(1))  # the task a prompt asks for
        self.asked: list[tuple[str, int]] = []

    def answer(self, body: dict) -> tuple[int, dict, dict]:
        name = self.name_of(body["messages"][-1]["content"])
        seed = int(body.get("seed", -1))
        with self._lock:
            self.requests += 1
            self.asked.append((name, seed))
        trace, content, how = self.script[(name, seed)]
        message = {"role": "assistant", "content": content}
        if how == "field":
            message["reasoning_content"] = trace
        elif how == "inline":
            message["content"] = f"<think>\n{trace}\n</think>\n\n{content}"
        finish = "length" if content == "" or (how == "inline" and trace is None) else "stop"
        reply = {"id": f"chatcmpl-{self.requests}", "object": "chat.completion", "model": body.get("model", ""),
                 "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150}}
        return 200, reply, {}
