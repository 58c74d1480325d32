"""A fake OpenAI-compatible chat-completions server on 127.0.0.1 (a real HTTP server in a thread)."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer:
    """Canned chat completions. `script` lists status codes for the first requests
    (then 200s); `always` forces one status for every request. `content`: the answer, a
    fixed text or a function of the request body (default: a CUDA program returning the
    request's seed)."""

    def __init__(self, script=(), always=None, delay=0.05, reasoning=None, content=None,
                 reasoning_key="reasoning_content"):
        self.script, self.always, self.delay = list(script), always, delay
        self.reasoning, self.content = reasoning, content  # a reasoning model's trace / the answer
        self.reasoning_key = reasoning_key  # vLLM/DeepSeek: reasoning_content; some servers: reasoning
        self.requests, self.in_flight, self.max_in_flight = [], 0, 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests.append((self.path, body, self.headers.get("Authorization")))
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    status = server.always or (server.script.pop(0) if server.script else 200)
                time.sleep(server.delay)
                with server.lock:
                    server.in_flight -= 1
                if status != 200:
                    payload = json.dumps({"error": {"message": f"canned {status}"}}).encode()
                    self.send_response(status)
                    if status == 429:
                        self.send_header("Retry-After", "0")
                else:
                    content = server.content(body) if callable(server.content) else server.content
                    content = content or (f"Here:\n```cuda\n__global__ void k() {{}}\nint main() {{ return "
                                          f"{body['seed']}; }}\n```\n")
                    message = {"role": "assistant", "content": content}
                    usage = {"completion_tokens": 17}
                    if server.reasoning is not None:
                        message[server.reasoning_key] = server.reasoning
                        usage = {"completion_tokens": 40, "completion_tokens_details": {"reasoning_tokens": 23}}
                    payload = json.dumps({"choices": [{"message": message, "finish_reason": "stop"}],
                                          "usage": usage}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
