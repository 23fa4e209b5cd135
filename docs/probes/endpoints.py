#!/usr/bin/env python3
"""Probes a daemon's local endpoints with hostile clients (docs/reliability.md).

Usage (root for the agent: it loads eBPF programs):
    python3 docs/probes/endpoints.py target/release/cosched-agent
    python3 docs/probes/endpoints.py target/release/cosched-coordinator

Starts the daemon with a throw-away config (its metrics port and control or
admin socket in a temporary directory), sets its open-file limit to 1024
(what systemd gives a unit without LimitNOFILE), runs each probe and prints
one line per result ("control" is the coordinator's admin socket there).
Probes:
  control-memory   200 connections each holding ~1 MiB of an unfinished line:
                   agent RSS before, while held, 3 s after closing all but
                   the newest, 3 s after closing that one too (twice: the
                   second round's buffers come from glibc's heap)
  control-utf8     a line with invalid UTF-8: the reply
  control-unknown  {"op":"status","verbose":true}: the reply
  control-idle     a silent connection: seconds until the agent closes it
  metrics-fds      1,100 idle TCP connections to the metrics port: how many
                   the agent kept, and whether the control socket still answers
  metrics-idle     a silent TCP connection: seconds until closed
  metrics-slow     a client sending one header byte every 0.5 s: seconds
                   until dropped
"""
import json, os, socket, subprocess, sys, tempfile, threading, time

WAIT_CAP = 75.0  # seconds a "never closes" probe waits before saying so


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def control(path, line, timeout=5.0):
    """Sends one raw line, returns the reply line or why there was none."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(line)
        try:
            reply = sock.makefile("rb").readline()
        except (TimeoutError, socket.timeout):
            return "no reply within %.0f s" % timeout
        except ConnectionError as error:
            return f"closed without a reply ({error})"
        return reply.decode(errors="replace").strip() or "closed without a reply"


def seconds_until_closed(sock, trickle=None):
    """Seconds until the peer closes `sock` (or WAIT_CAP: still open)."""
    start = time.monotonic()
    sock.settimeout(0.5)
    sent = 0
    while time.monotonic() - start < WAIT_CAP:
        try:
            if not sock.recv(65536):
                return "%.1f s" % (time.monotonic() - start)
        except (TimeoutError, socket.timeout):
            pass
        except ConnectionError:
            return "%.1f s" % (time.monotonic() - start)
        if trickle:
            try:
                sock.send(trickle[sent % len(trickle):][:1])
                sent += 1
            except OSError:
                return "%.1f s" % (time.monotonic() - start)
    return "still open after %.0f s" % WAIT_CAP


def probe_control_memory(pid, path):
    before = rss_mib(pid)
    held, refused = [], 0
    chunk = b"x" * (1024 * 1024 - 64)
    for _ in range(200):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        try:
            sock.sendall(b'{"op":"jobs","pad":"' + chunk)
            held.append(sock)
        except OSError:
            refused += 1
            sock.close()
    time.sleep(1.0)
    # Connections the agent closed (over the cap) read as EOF.
    open_now = 0
    for sock in held:
        sock.setblocking(False)
        try:
            open_now += 0 if sock.recv(4096) == b"" else 1
        except BlockingIOError:
            open_now += 1
        except OSError:
            pass
    peak = rss_mib(pid)
    # The newest stays open a while: its buffer is the top of the heap.
    for sock in held[:-1]:
        sock.close()
    time.sleep(3.0)
    one_left = rss_mib(pid)
    for sock in held[-1:]:
        sock.close()
    time.sleep(3.0)
    after = rss_mib(pid)
    return (f"RSS {before:.1f} MiB -> {peak:.1f} MiB with 200 connections "
            f"({open_now} held open, {200 - open_now} refused or closed) -> "
            f"{one_left:.1f} MiB 3 s after closing all but the newest -> "
            f"{after:.1f} MiB 3 s after closing it")


def probe_metrics_fds(port, path):
    conns, failed = [], 0
    for _ in range(1100):
        try:
            conns.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            failed += 1
    time.sleep(1.0)
    kept = 0
    for sock in conns:
        sock.setblocking(False)
        try:
            kept += 0 if sock.recv(4096) in (b"",) else 0
        except BlockingIOError:
            kept += 1
        except OSError:
            pass
    answer = control(path, b'{"op":"status"}\n', timeout=5.0)
    for sock in conns:
        sock.close()
    status = "answers" if answer.startswith('{"ok"') else f"does not answer ({answer})"
    return (f"{kept} of 1100 kept open by the daemon ({1100 - kept - failed} closed or 503, "
            f"{failed} connects failed); control socket {status}")


def main():
    agent = sys.argv[1]
    work = tempfile.mkdtemp(prefix="cosched-probe-")
    sock_path = os.path.join(work, "agent.sock")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = os.path.join(work, "daemon.toml")
    with open(config, "w") as f:
        if agent.endswith("coordinator"):
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                wire = s.getsockname()[1]
            f.write(f'nodes = ["n0"]\nlisten = "127.0.0.1:{wire}"\nmetrics_listen = "127.0.0.1:{port}"\n'
                    f'admin_socket = "{sock_path}"\nstate_file = "{work}/state.json"\n'
                    f'secret = "hex:000102030405060708090a0b0c0d0e0f"\nrealtime_priority = 0\n')
        else:
            f.write(f'node = "probe"\ncpus = [0]\nmetrics_listen = "127.0.0.1:{port}"\n'
                    f'control_socket = "{sock_path}"\nstate_dir = "{work}/state"\npin_self = false\n')
    log = open(os.path.join(work, "daemon.log"), "w")
    proc = subprocess.Popen([agent, "--config", config], stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(300):
            if os.path.exists(sock_path):
                break
            time.sleep(0.05)
        time.sleep(0.5)
        subprocess.run(["prlimit", f"--pid={proc.pid}", "--nofile=1024:1024"], check=True)
        results = {}
        # Twice: glibc serves the second round's large buffers from its heap.
        results["control-memory"] = probe_control_memory(proc.pid, sock_path)
        results["control-memory-2"] = probe_control_memory(proc.pid, sock_path)
        results["control-utf8"] = control(sock_path, b'{"op":"status"}\xff\n')
        results["control-unknown"] = control(sock_path, b'{"op":"status","verbose":true}\n')[:80]
        results["metrics-fds"] = probe_metrics_fds(port, sock_path)
        waits = {}

        def wait(name, make, trickle=None):
            waits[name] = seconds_until_closed(make(), trickle)

        threads = [
            threading.Thread(target=wait, args=("control-idle", lambda: _unix(sock_path))),
            threading.Thread(target=wait, args=("metrics-idle",
                             lambda: socket.create_connection(("127.0.0.1", port)))),
            threading.Thread(target=wait, args=("metrics-slow",
                             lambda: socket.create_connection(("127.0.0.1", port)),
                             b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results.update(waits)
        results["rss-end"] = "%.1f MiB" % rss_mib(proc.pid)
        for name, result in results.items():
            print(f"{name:16} {result}")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _unix(path):
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(path)
    return sock


if __name__ == "__main__":
    main()
