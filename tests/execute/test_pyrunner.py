import subprocess
import time

import pytest

from cuset.execute.pyrunner import PyForkServer, run_script


@pytest.fixture(scope="module")
def server():
    s = PyForkServer(("numpy",))
    yield s
    s.close()


def script(tmp_path, text, name="s.py"):
    (tmp_path / name).write_text(text)
    return name


@pytest.mark.parametrize("use_server", [True, False])
def test_output_exit_code_env_and_cwd(tmp_path, server, use_server):
    name = script(tmp_path, "import os, sys\nprint('T', os.environ['CUSET_CASE'], os.getcwd())\n"
                            "print('warn', file=sys.stderr)\nopen('made.txt', 'w').write('x')\n")
    r = run_script("compare", name, cwd=tmp_path, timeout=30, extra_env={"CUSET_CASE": "4"},
                   server=server if use_server else None)
    assert r.returncode == 0 and r.stdout == f"T 4 {tmp_path}\n" and r.stderr == "warn\n"
    assert (tmp_path / "made.txt").exists()


def test_exit_codes_and_errors(tmp_path, server):
    assert run_script("x", script(tmp_path, "import sys\nsys.exit(3)\n"), cwd=tmp_path, timeout=30,
                      extra_env={}, server=server).returncode == 3
    r = run_script("x", script(tmp_path, "import sys\nsys.exit('no data')\n"), cwd=tmp_path, timeout=30,
                   extra_env={}, server=server)
    assert r.returncode == 1 and "no data" in r.stderr
    r = run_script("x", script(tmp_path, "raise ValueError('bad shape')\n"), cwd=tmp_path, timeout=30,
                   extra_env={}, server=server)
    assert r.returncode == 1 and "ValueError: bad shape" in r.stderr


def test_environment_is_clean(tmp_path, server, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "x")
    r = run_script("x", script(tmp_path, "import os\nprint(os.environ.get('SECRET_TOKEN'), os.environ['OMP_NUM_THREADS'])\n"),
                   cwd=tmp_path, timeout=30, extra_env={}, server=server)
    assert r.stdout == "None 1\n"


def test_each_script_starts_from_pristine_modules(tmp_path, server):
    set_it = script(tmp_path, "import numpy\nnumpy.cuset_marker = 1\nprint('set')\n", "a.py")
    read_it = script(tmp_path, "import numpy\nprint(hasattr(numpy, 'cuset_marker'))\n", "b.py")
    assert run_script("a", set_it, cwd=tmp_path, timeout=30, extra_env={}, server=server).stdout == "set\n"
    assert run_script("b", read_it, cwd=tmp_path, timeout=30, extra_env={}, server=server).stdout == "False\n"


@pytest.mark.timeout(120)  # a run that waited for its child (sleep 1000) would hang here, not pass
def test_timeout_kills_the_script_and_its_children(tmp_path, server):
    name = script(tmp_path, "import subprocess, time\n"
                            "subprocess.Popen(['sleep', '1000'])\n"
                            "while True: time.sleep(0.1)\n")
    r = run_script("gen", name, cwd=tmp_path, timeout=1.0, extra_env={}, server=server)
    assert r.timed_out, r
    time.sleep(0.3)
    assert "sleep 1000" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    # The server is still usable.
    assert run_script("x", script(tmp_path, "print(1)\n", "c.py"), cwd=tmp_path, timeout=30, extra_env={},
                      server=server).stdout == "1\n"


def test_parallel_requests(tmp_path, server):
    from concurrent.futures import ThreadPoolExecutor

    name = script(tmp_path, "import os, time\ntime.sleep(0.3)\nprint(os.environ['CUSET_CASE'])\n")
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda i: run_script("x", name, cwd=tmp_path, timeout=30,
                                                  extra_env={"CUSET_CASE": str(i)}, server=server).stdout, range(8)))
    assert outs == [f"{i}\n" for i in range(8)]


def test_dead_server_falls_back_to_a_fresh_interpreter(tmp_path):
    s = PyForkServer(())
    s.close()
    r = run_script("x", script(tmp_path, "print('ok')\n"), cwd=tmp_path, timeout=30, extra_env={}, server=s)
    assert r.returncode == 0 and r.stdout == "ok\n"


@pytest.mark.parametrize("use_server", [True, False])
def test_memory_limit_caps_the_scripts_address_space(tmp_path, server, use_server):
    # 3 GiB in one allocation against a 2 GiB cap: MemoryError in the script, exit 1;
    # 1 MiB under the same cap is fine, and the next script runs without the cap.
    grab = script(tmp_path, "b = bytearray(3 << 30)\nprint('got', len(b))\n", "grab.py")
    small = script(tmp_path, "b = bytearray(1 << 20)\nprint('got', len(b))\n", "small.py")
    chosen = server if use_server else None
    r = run_script("grab", grab, cwd=tmp_path, timeout=60, extra_env={}, server=chosen, memory_bytes=2 << 30)
    assert r.returncode == 1 and "MemoryError" in r.stderr and "got" not in r.stdout
    r = run_script("small", small, cwd=tmp_path, timeout=60, extra_env={}, server=chosen, memory_bytes=2 << 30)
    assert r.returncode == 0 and r.stdout == "got 1048576\n"
    if use_server:  # the cap was the forked script's own, not the server's
        free = script(tmp_path, "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)\n", "free.py")
        r = run_script("free", free, cwd=tmp_path, timeout=60, extra_env={}, server=server)
        assert r.returncode == 0 and r.stdout == "True\n"
